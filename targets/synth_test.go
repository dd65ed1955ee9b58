package targets

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sframekit/sframekit/arch"
)

const (
	synthPID      = 1234
	synthStack    = 0x7000_0000_0000
	synthStackLen = 0x1000
	synthExe      = "/nonexistent/synth-exe"
)

func synthNote(bo binary.ByteOrder, name string, typ uint32, desc []byte) []byte {
	var b bytes.Buffer
	nm := append([]byte(name), 0)
	binary.Write(&b, bo, uint32(len(nm)))
	binary.Write(&b, bo, uint32(len(desc)))
	binary.Write(&b, bo, typ)
	b.Write(nm)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.Write(desc)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

// synthRegs returns the user register words of thread k of a synthetic
// core: register i holds 0x1000*(k+1)+i except sp and pc.
func synthRegs(m elf.Machine, k int) []uint64 {
	base := uint64(0x1000 * (k + 1))
	if m == elf.EM_AARCH64 {
		u := make([]uint64, arm64NumUser)
		for i := range u {
			u[i] = base + uint64(i)
		}
		u[31] = synthStack + 0x100 + uint64(k)*0x100 // sp
		u[32] = 0x400100 + uint64(k)                 // pc
		return u
	}
	u := make([]uint64, amd64NumUser)
	for i := range u {
		u[i] = base + uint64(i)
	}
	u[19] = synthStack + 0x100 + uint64(k)*0x100 // rsp
	u[16] = 0x400100 + uint64(k)                 // rip
	return u
}

// synthNotes builds a note segment: NT_PRPSINFO, two NT_PRSTATUS, NT_AUXV
// and NT_FILE.
func synthNotes(m elf.Machine, bo binary.ByteOrder, nfile []byte) []byte {
	var out []byte
	ps := make([]byte, prpsinfoSize)
	bo.PutUint32(ps[prpsinfoPid:], synthPID)
	copy(ps[prpsinfoFname:], "synth")
	copy(ps[prpsinfoArgs:], "synth -x ")
	out = append(out, synthNote(bo, "CORE", ntPRPSINFO, ps)...)
	for k := 0; k < 2; k++ {
		u := synthRegs(m, k)
		st := make([]byte, prstatusReg+8*len(u)+8)
		bo.PutUint16(st[prstatusCursig:], 11)
		bo.PutUint32(st[prstatusPid:], uint32(synthPID+k))
		for i, v := range u {
			bo.PutUint64(st[prstatusReg+8*i:], v)
		}
		out = append(out, synthNote(bo, "CORE", ntPRSTATUS, st)...)
	}
	aux := make([]byte, 32)
	bo.PutUint64(aux, atENTRY)
	bo.PutUint64(aux[8:], 0x400100)
	out = append(out, synthNote(bo, "CORE", ntAUXV, aux)...)
	if nfile == nil {
		nfile = make([]byte, 16+24)
		bo.PutUint64(nfile, 1)
		bo.PutUint64(nfile[8:], 4096)
		bo.PutUint64(nfile[16:], 0x400000)
		bo.PutUint64(nfile[24:], 0x401000)
		nfile = append(nfile, synthExe+"\x00"...)
	}
	out = append(out, synthNote(bo, "CORE", ntFILE, nfile)...)
	return out
}

// synthCore builds a little-endian ELF64 core: a PT_NOTE and one PT_LOAD
// holding a stack whose word at offset i*8 is i.
func synthCore(m elf.Machine) []byte { return synthCoreFiles(m, nil) }

// synthCoreFiles is synthCore with nfile as the NT_FILE note's contents
// (nil: one mapping of synthExe).
func synthCoreFiles(m elf.Machine, nfile []byte) []byte {
	bo := binary.LittleEndian
	notes := synthNotes(m, bo, nfile)
	const phoff, nph = 64, 2
	noteOff := uint64(phoff + 56*nph)
	loadOff := (noteOff + uint64(len(notes)) + 0xfff) &^ 0xfff
	b := make([]byte, loadOff+synthStackLen)
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	b[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	b[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	bo.PutUint16(b[16:], uint16(elf.ET_CORE))
	bo.PutUint16(b[18:], uint16(m))
	bo.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	bo.PutUint64(b[32:], phoff)
	bo.PutUint16(b[52:], 64)
	bo.PutUint16(b[54:], 56)
	bo.PutUint16(b[56:], nph)
	ph := b[phoff:]
	bo.PutUint32(ph, uint32(elf.PT_NOTE))
	bo.PutUint64(ph[8:], noteOff)
	bo.PutUint64(ph[32:], uint64(len(notes)))
	ph = b[phoff+56:]
	bo.PutUint32(ph, uint32(elf.PT_LOAD))
	bo.PutUint32(ph[4:], uint32(elf.PF_R|elf.PF_W))
	bo.PutUint64(ph[8:], loadOff)
	bo.PutUint64(ph[16:], synthStack)
	bo.PutUint64(ph[32:], synthStackLen)
	bo.PutUint64(ph[40:], synthStackLen)
	copy(b[noteOff:], notes)
	for i := uint64(0); i < synthStackLen/8; i++ {
		bo.PutUint64(b[loadOff+8*i:], i)
	}
	return b
}

// TestSyntheticCore checks the decoding of both register layouts, names,
// signals, NT_FILE and memory on hand-built cores (the AArch64 layout
// cannot be checked against a real core on this machine).
func TestSyntheticCore(t *testing.T) {
	for _, m := range []elf.Machine{elf.EM_AARCH64, elf.EM_X86_64} {
		t.Run(m.String(), func(t *testing.T) {
			c, err := openCore(bytes.NewReader(synthCore(m)), "synth", "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Arch() != arch.FromELF(m) || c.PID() != synthPID || c.Exe() != synthExe || c.Args() != "synth -x" {
				t.Errorf("arch %v pid %d exe %q args %q", c.Arch(), c.PID(), c.Exe(), c.Args())
			}
			ths := c.Threads()
			if len(ths) != 2 {
				t.Fatalf("%d threads", len(ths))
			}
			for k, th := range ths {
				if th.TID != synthPID+k || th.Signal != 11 {
					t.Errorf("thread %d: tid %d sig %d", k, th.TID, th.Signal)
				}
				if (k == 0) != (th.Name == "synth") {
					t.Errorf("thread %d name %q", k, th.Name)
				}
				u := synthRegs(m, k)
				r := &th.Regs
				if r.PC() != 0x400100+uint64(k) || r.SP() != synthStack+0x100+uint64(k)*0x100 {
					t.Errorf("thread %d: pc %#x sp %#x", k, r.PC(), r.SP())
				}
				if m == elf.EM_AARCH64 {
					for i := 0; i <= 30; i++ {
						if v, ok := r.Get(arch.Reg(i)); !ok || v != u[i] {
							t.Errorf("x%d = %#x %v, want %#x", i, v, ok, u[i])
						}
					}
					if ra, ok := r.RA(); !ok || ra != u[30] {
						t.Errorf("RA = %#x", ra)
					}
					if r.FP() != u[29] || r.Flags != u[33] {
						t.Errorf("fp %#x pstate %#x", r.FP(), r.Flags)
					}
				} else {
					// DWARF order vs user_regs_struct order.
					order := []int{10, 12, 11, 5, 13, 14, 4, 19, 9, 8, 7, 6, 3, 2, 1, 0, 16}
					for n, ui := range order {
						if v, ok := r.Get(arch.Reg(n)); !ok || v != u[ui] {
							t.Errorf("%s = %#x %v, want %#x", r.Arch.RegName(arch.Reg(n)), v, ok, u[ui])
						}
					}
					if _, ok := r.RA(); ok {
						t.Error("x86-64 has an RA register")
					}
				}
				// The stack word at sp is its index in the segment.
				v, err := ReadUint64(c.Memory(), r.SP())
				if want := (r.SP() - synthStack) / 8; err != nil || v != want {
					t.Errorf("stack word at %#x = %d, %v; want %d", r.SP(), v, err, want)
				}
			}
			// The executable is listed though its file is missing; its
			// memory cannot be read.
			mods := c.Modules()
			if len(mods) != 1 || mods[0].Path != synthExe || mods[0].HasBias || mods[0].File != "" {
				t.Fatalf("modules %+v", mods)
			}
			if len(c.Warnings()) == 0 {
				t.Error("no warning about the missing executable")
			}
			if _, err := ReadUint64(c.Memory(), 0x400100); !errors.Is(err, arch.ErrUnmapped) {
				t.Errorf("reading missing file text: %v", err)
			}
			// Reads crossing the end of the stack segment fail, partially.
			b := make([]byte, 16)
			n, err := c.Memory().ReadAt(b, synthStack+synthStackLen-8)
			if n != 8 || !errors.Is(err, arch.ErrUnmapped) {
				t.Errorf("straddling read: %d, %v", n, err)
			}
		})
	}
}

func TestNoteParserRejects(t *testing.T) {
	bo := binary.LittleEndian
	huge := make([]byte, 16)
	bo.PutUint64(huge, 1<<60) // count
	bo.PutUint64(huge[8:], 4096)
	short := make([]byte, 100)
	for name, data := range map[string][]byte{
		"file count":    synthNote(bo, "CORE", ntFILE, huge),
		"prstatus size": synthNote(bo, "CORE", ntPRSTATUS, short),
		"desc size":     append(synthNote(bo, "CORE", ntAUXV, nil)[:4], 0xff, 0xff, 0xff, 0x7f, 6, 0, 0, 0, 'C', 'O', 'R', 'E', 0, 0, 0, 0),
	} {
		var n coreNotes
		if err := n.parse(data, arch.AMD64, bo); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestComputeBias covers the RELRO layout where two segments share a file
// page that is mapped twice: the bias must come from the first segment.
func TestComputeBias(t *testing.T) {
	segs := []loadSeg{
		{off: 0, vaddr: 0, filesz: 0x628},
		{off: 0x1000, vaddr: 0x1000, filesz: 0x2f5},
		{off: 0x2000, vaddr: 0x2000, filesz: 0x1d0},
		{off: 0x2de8, vaddr: 0x3de8, filesz: 0x260},
	}
	const base = 0x5555_0000_0000
	maps := []arch.Mapping{
		{Start: base, End: base + 0x1000, Offset: 0},
		{Start: base + 0x1000, End: base + 0x2000, Offset: 0x1000},
		{Start: base + 0x2000, End: base + 0x3000, Offset: 0x2000},
		{Start: base + 0x3000, End: base + 0x4000, Offset: 0x2000},
		{Start: base + 0x4000, End: base + 0x5000, Offset: 0x3000},
	}
	if b, ok := computeBias(segs, maps, 4096); !ok || b != base {
		t.Errorf("bias %#x %v, want %#x", b, ok, base)
	}
	// Non-PIE: vaddrs at 0x400000 and mapped there.
	for i := range segs {
		segs[i].vaddr += 0x400000
	}
	for i := range maps {
		maps[i].Start -= base - 0x400000
		maps[i].End -= base - 0x400000
	}
	if b, ok := computeBias(segs, maps[1:], 4096); !ok || b != 0 {
		t.Errorf("non-PIE bias %#x %v (first page unmapped)", b, ok)
	}
}

// manyFilesNote returns an NT_FILE note listing n one-page mappings of
// missing libraries, all of one path (a module each: every mapping is of
// file offset 0) or each of its own.
func manyFilesNote(n int, distinct bool) []byte {
	bo := binary.LittleEndian
	d := make([]byte, 16+24*n, 16+24*n+20*n)
	bo.PutUint64(d, uint64(n))
	bo.PutUint64(d[8:], 4096)
	for i := 0; i < n; i++ {
		e := d[16+24*i:]
		start := uint64(0x10000000) + uint64(i)*0x2000
		bo.PutUint64(e, start)
		bo.PutUint64(e[8:], start+0x1000)
		if distinct {
			d = fmt.Appendf(d, "/nonexistent/%d.so\x00", i)
		} else {
			d = append(d, "/nonexistent/x.so\x00"...)
		}
	}
	return d
}

// TestOpenCoreManyMappings: a core whose NT_FILE lists a million
// mappings (each a module of its own) opens using the first
// maxFileEntries, with a warning, within a memory bound far below what
// a module per mapping cost before (2 GB for this core), and with a
// bounded list of warnings.
func TestOpenCoreManyMappings(t *testing.T) {
	const n = 1_000_000
	for _, distinct := range []bool{false, true} {
		core := synthCoreFiles(elf.EM_X86_64, manyFilesNote(n, distinct))
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		c, err := openCore(bytes.NewReader(core), "synth", "")
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("distinct paths %v: %d modules, %d MB allocated", distinct, len(c.Modules()), alloc>>20)
		if alloc > 400<<20 {
			t.Errorf("distinct paths %v: %d MB allocated opening the core", distinct, alloc>>20)
		}
		if len(c.Modules()) != maxFileEntries {
			t.Errorf("distinct paths %v: %d modules, want %d", distinct, len(c.Modules()), maxFileEntries)
		}
		ws := c.Warnings()
		if len(ws) > maxWarnings+1 || len(ws) == 0 || !strings.Contains(ws[0].Error(), fmt.Sprintf("NT_FILE lists %d mappings; only the first %d are used", n, maxFileEntries)) {
			t.Errorf("distinct paths %v: %d warnings, first %v", distinct, len(ws), ws[0])
		}
	}
}
