package bpfunwind

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/sframekit/sframekit/perfdata"
)

// TestDecode reads a stack record laid out as bpf/walk.c's struct out
// writes it, whole and cut short.
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
	b = le.AppendUint32(b, 0)              // padding
	b = le.AppendUint64(b, 0xffffffff8100) // kernel
	b = le.AppendUint64(b, 0x401000)       // user, innermost
	b = le.AppendUint64(b, 0x402000)
	chain, h, ok := Decode(b, nil)
	want := []uint64{perfdata.ContextKernel, 0xffffffff8100, perfdata.ContextUser, 0x401000, 0x402000}
	if !ok || !slices.Equal(chain, want) || h != (Header{Period: 1001, Event: 1, Time: 123456789, Pid: 42, Tid: 43, CPU: 1, Stop: StopEnd}) {
		t.Errorf("Decode: %x %+v %v, want %x", chain, h, ok, want)
	}
	if chain, _, ok := Decode(b[:len(b)-8], chain); ok || !slices.Equal(chain, want[:4]) {
		t.Errorf("Decode of a cut record: %x %v, want %x and not ok", chain, ok, want[:4])
	}
	if _, _, ok := Decode(b[:outHeader-1], nil); ok {
		t.Error("Decode of a short header: ok")
	}
}
