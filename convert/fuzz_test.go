package convert

import (
	"debug/elf"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/cfi"
	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/sframe"
)

// FuzzConvert feeds arbitrary .eh_frame bytes to the converter, seeded
// with the CFI of corpus files. Conversion must not panic; whatever it
// produces must encode, parse, validate and agree with the same CFI.
func FuzzConvert(f *testing.F) {
	if d, ok := corpus.Find(); ok {
		for _, name := range []string{"x86_64/v3/edge-x86_64.o", "x86_64/v3/drap-O2.elf", "x86_64/v3/basic-pic.so",
			"aarch64/v3/edge-aarch64.o", "aarch64/v3/basic-pacb.elf", "s390x/v3/edge-s390x.o", "s390x/v3/drap-O2.elf"} {
			ef, err := elf.Open(filepath.Join(d, name))
			if err != nil {
				continue
			}
			abi, _ := ABIFor(ef)
			if s := ef.Section(".eh_frame"); s != nil {
				if data, err := cfi.SectionData(ef, s); err == nil {
					f.Add(data, s.Addr, byte(abi), byte(3))
					f.Add(data, s.Addr, byte(abi), byte(2))
				}
			}
			ef.Close()
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, addr uint64, abiB, vB byte) {
		abi := sframe.ABI(abiB%4 + 1)
		v := sframe.Version(vB%2 + 2)
		var order binary.ByteOrder = binary.LittleEndian
		if abi.BigEndian() {
			order = binary.BigEndian
		}
		tab, err := cfi.New(data, cfi.Options{Addr: addr, ByteOrder: order, AddrSize: 8, Arch: archOf(abi)})
		if err != nil {
			return
		}
		r, err := FromTable(tab, abi, Options{Version: v})
		if err != nil {
			t.Fatal(err)
		}
		r.dedupe()
		out, err := r.Encode(0x10000)
		if err != nil {
			// Overlapping FDEs may still make an index the encoder
			// refuses; anything else is a converter bug.
			if len(r.Funcs) > 0 {
				t.Logf("encode: %v", err)
			}
			return
		}
		s, err := sframe.Parse(out, 0x10000)
		if err != nil {
			t.Fatalf("generated section does not parse: %v", err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("generated section does not validate: %v", err)
		}
		tab2, _ := cfi.New(data, cfi.Options{Addr: addr, ByteOrder: order, AddrSize: 8, Arch: archOf(abi)})
		if _, err := Verify(tab2, s, VerifyOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}
