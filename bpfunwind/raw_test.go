package bpfunwind

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/sframekit/sframekit/perfdata"
)

// TestDecode reads a stack record laid out as bpf/walk.c's struct out
// writes it, whole, cut short and followed by unused bytes (StackKey too).
func TestDecode(t *testing.T) {
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint64(b, 1001)           // period
	b = le.AppendUint32(b, 2)              // user frames
	b = le.AppendUint16(b, 1)              // kernel frames
	b = append(b, byte(StopEnd), 1)        // stop, event
	b = le.AppendUint64(b, 123456789)      // time
	b = le.AppendUint32(b, 42)             // pid
	b = le.AppendUint32(b, 43)             // tid
	b = le.AppendUint32(b, 1)              // cpu
	b = le.AppendUint32(b, 1)              // the frame a signal interrupted
	b = le.AppendUint64(b, 0xffffffff8100) // kernel
	b = le.AppendUint64(b, 0x401000)       // user, innermost
	b = le.AppendUint64(b, 0x402000)
	chain, h, ok := Decode(b, nil)
	want := []uint64{perfdata.ContextKernel, 0xffffffff8100, perfdata.ContextUser, 0x401000, 0x402000}
	if !ok || !slices.Equal(chain, want) || h != (Header{Period: 1001, Event: 1, Time: 123456789, Pid: 42, Tid: 43, CPU: 1, Stop: StopEnd, SigFrame: 1}) {
		t.Errorf("Decode: %x %+v %v, want %x", chain, h, ok, want)
	}
	if chain, _, ok := Decode(b[:len(b)-8], chain); ok || !slices.Equal(chain, want[:4]) {
		t.Errorf("Decode of a cut record: %x %v, want %x and not ok", chain, ok, want[:4])
	}
	if _, _, ok := Decode(b[:outHeader-1], nil); ok {
		t.Error("Decode of a short header: ok")
	}
	// A record reserved for 64 frames (struct rec) holds bytes of older
	// records after its frames: the same stack, the same record.
	long := append(slices.Clone(b), 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4)
	if chain, _, ok := Decode(long, nil); !ok || !slices.Equal(chain, want) {
		t.Errorf("Decode of a longer record: %x %v, want %x", chain, ok, want)
	}
	if k, kl := StackKey(nil, b), StackKey(nil, long); string(k) != string(kl) {
		t.Errorf("StackKey of a longer record %x, want %x", kl, k)
	}
	// The key still tells frames apart.
	other := slices.Clone(b)
	other[len(other)-1] ^= 1
	if string(StackKey(nil, b)) == string(StackKey(nil, other)) {
		t.Error("StackKey: the same key for different frames")
	}
}
