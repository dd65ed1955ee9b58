package perfevent

import (
	"bytes"
	"errors"
	"math/bits"
	"reflect"
	"testing"
)

// enc builds record bodies word by word, in this machine's byte order.
type enc struct{ b []byte }

func (e *enc) u64(v uint64) *enc { e.b = ne.AppendUint64(e.b, v); return e }
func (e *enc) u32s(x, y uint32) *enc {
	e.b = ne.AppendUint32(e.b, x)
	e.b = ne.AppendUint32(e.b, y)
	return e
}
func (e *enc) bytes(p []byte) *enc { e.b = append(e.b, p...); return e }

// rec wraps a body into a record of type typ.
func rec(typ RecordType, misc Misc, body []byte, a *Attr) *Record {
	raw := make([]byte, headerSize, headerSize+len(body))
	ne.PutUint32(raw, uint32(typ))
	ne.PutUint16(raw[4:], uint16(misc))
	ne.PutUint16(raw[6:], uint16(headerSize+len(body)))
	raw = append(raw, body...)
	return &Record{Type: typ, Misc: misc, Raw: raw, Attr: a}
}

// testAttr is the attribute of a profiler's event: every field this
// package decodes.
func testAttr(extra Options) *Attr {
	o := extra
	o.PIDs = []int{1}
	o.RegsUser = RegsAMD64
	o.StackUser = 64
	o.Callchain = true
	return o.buildAttrs()[0]
}

// sampleBody encodes a sample of attribute a with the fields of want.
func sampleBody(a *Attr, want *Sample) []byte {
	e := &enc{}
	t := a.SampleType
	if t&SampleIdentifier != 0 {
		e.u64(want.Identifier)
	}
	e.u64(want.IP).u32s(want.Pid, want.Tid).u64(want.Time).u32s(want.CPU, want.Res).u64(want.Period)
	if t&SampleCallchain != 0 {
		e.u64(uint64(want.Callchain.Len())).bytes(want.Callchain)
	}
	if t&SampleRegsUser != 0 {
		e.u64(want.RegsUser.ABI).bytes(want.RegsUser.Words)
	}
	if t&SampleStackUser != 0 {
		e.u64(want.StackUserSize).bytes(want.StackUser)
		e.bytes(make([]byte, int(want.StackUserSize)-len(want.StackUser)))
		e.u64(uint64(len(want.StackUser)))
	}
	return e.b
}

func words(v ...uint64) Words {
	var b []byte
	for _, x := range v {
		b = ne.AppendUint64(b, x)
	}
	return b
}

func testSample(a *Attr) *Sample {
	regs := make([]uint64, bits.OnesCount64(a.SampleRegsUser))
	for i := range regs {
		regs[i] = 0x1000 + uint64(i)
	}
	return &Sample{
		Type: a.SampleType, IP: 0x401234, Pid: 100, Tid: 101, Time: 123456789, CPU: 1, Period: 10101,
		Callchain:     words(ContextKernel, 0xffffffff81000000, 0xffffffff81000100),
		RegsUser:      Regs{ABI: RegsABI64, Mask: a.SampleRegsUser, Words: words(regs...)},
		StackUser:     bytes.Repeat([]byte{0xab}, 40),
		StackUserSize: 64,
	}
}

func TestDecodeSample(t *testing.T) {
	a := testAttr(Options{})
	want := testSample(a)
	r := rec(RecordSample, MiscUser, sampleBody(a, want), a)
	var got Sample
	if err := r.DecodeSample(&got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Fatalf("decoded %+v\nwant %+v", got, *want)
	}
	// Registers by perf number: SP (7) is the 8th of the mask's, R8 (16)
	// the 10th, after IP (8); FLAGS (9) is not in the mask.
	if v, ok := got.RegsUser.Get(7); !ok || v != 0x1007 {
		t.Errorf("SP %#x %v", v, ok)
	}
	if v, ok := got.RegsUser.Get(16); !ok || v != 0x1009 {
		t.Errorf("R8 %#x %v", v, ok)
	}
	if _, ok := got.RegsUser.Get(9); ok {
		t.Errorf("FLAGS found, not in the mask")
	}
	// A kernel thread's sample has no user registers and no stack.
	e := &enc{}
	e.u64(0xffffffff81000000).u32s(0, 5).u64(1).u32s(0, 0).u64(1).u64(0).u64(RegsABINone).u64(0)
	if err := rec(RecordSample, MiscKernel, e.b, a).DecodeSample(&got); err != nil || got.RegsUser.Len() != 0 || got.StackUser != nil || got.StackUserSize != 0 {
		t.Errorf("kernel thread sample: %+v, %v", got, err)
	}
	// Several events: the identifier comes first.
	a2 := (&Options{PIDs: []int{1}, Events: []Event{CPUClock, ContextSwitches}, RegsUser: RegsAMD64, StackUser: 64, Callchain: true}).buildAttrs()[1]
	want2 := testSample(a2)
	want2.Identifier = 77
	if err := rec(RecordSample, MiscUser, sampleBody(a2, want2), a2).DecodeSample(&got); err != nil || !reflect.DeepEqual(&got, want2) {
		t.Errorf("with identifier: %+v, %v", got, err)
	}
}

func TestDecodeSampleTruncated(t *testing.T) {
	a := testAttr(Options{})
	body := sampleBody(a, testSample(a))
	var s Sample
	for n := range len(body) {
		if err := rec(RecordSample, 0, body[:n], a).DecodeSample(&s); !errors.Is(err, ErrShort) {
			t.Fatalf("body cut to %d of %d bytes: %v, want ErrShort", n, len(body), err)
		}
	}
	// dyn_size larger than the stack copy.
	bad := bytes.Clone(body)
	ne.PutUint64(bad[len(bad)-8:], 65)
	if err := rec(RecordSample, 0, bad, a).DecodeSample(&s); err == nil {
		t.Error("dyn_size past the stack: no error")
	}
	if err := rec(RecordSample, 0, body, nil).DecodeSample(&s); err == nil {
		t.Error("sample without attribute: no error")
	}
	if err := rec(RecordMmap2, 0, body, a).DecodeSample(&s); err == nil {
		t.Error("DecodeSample of MMAP2: no error")
	}
}

func TestDecodeOtherRecords(t *testing.T) {
	// With sample_id_all, TID, TIME and CPU trail every record.
	a := testAttr(Options{SampleIDAll: true})
	trailer := (&enc{}).u32s(7, 8).u64(999).u32s(1, 0).b
	name := []byte("/usr/lib/libc.so.6\x00\x00\x00\x00\x00\x00")
	var m Mmap
	body := (&enc{}).u32s(7, 8).u64(0x7f0000).u64(0x2000).u64(0x1000).u32s(254, 1).u64(42).u64(3).u32s(5, 2).bytes(name).bytes(trailer).b
	r := rec(RecordMmap2, MiscUser, body, a)
	if err := r.DecodeMmap(&m); err != nil {
		t.Fatal(err)
	}
	wantM := Mmap{Pid: 7, Tid: 8, Addr: 0x7f0000, Len: 0x2000, Pgoff: 0x1000, Maj: 254, Min: 1, Ino: 42, InoGen: 3,
		Prot: 5, Flags: 2, Filename: []byte("/usr/lib/libc.so.6"), IsMmap2: true, Executable: true}
	if !reflect.DeepEqual(m, wantM) {
		t.Errorf("MMAP2 %+v\nwant %+v", m, wantM)
	}
	if id, err := r.ID(); err != nil || id != (Identity{Present: SampleTID | SampleTime | SampleCPU, Pid: 7, Tid: 8, Time: 999, CPU: 1}) {
		t.Errorf("identity %+v, %v", id, err)
	}
	// The build-ID form.
	bid := (&enc{}).bytes([]byte{4, 0, 0, 0, 1, 2, 3, 4}).bytes(make([]byte, 16)).b
	body = (&enc{}).u32s(7, 8).u64(0x7f0000).u64(0x2000).u64(0).bytes(bid).u32s(5, 2).bytes(name).bytes(trailer).b
	if err := rec(RecordMmap2, MiscUser|MiscMmapBuildID, body, a).DecodeMmap(&m); err != nil || !m.HasBuildID || !bytes.Equal(m.BuildID, []byte{1, 2, 3, 4}) {
		t.Errorf("MMAP2 with build ID: %+v, %v", m, err)
	}

	var c Comm
	body = (&enc{}).u32s(7, 7).bytes([]byte("spinprog\x00\x00\x00\x00\x00\x00\x00\x00")).bytes(trailer).b
	if err := rec(RecordComm, MiscCommExec, body, a).DecodeComm(&c); err != nil || string(c.Comm) != "spinprog" || !c.Exec || c.Pid != 7 {
		t.Errorf("COMM %+v, %v", c, err)
	}
	var task Task
	body = (&enc{}).u32s(7, 1).u32s(9, 7).u64(555).bytes(trailer).b
	if err := rec(RecordFork, 0, body, a).DecodeTask(&task); err != nil || task != (Task{Pid: 7, Ppid: 1, Tid: 9, Ptid: 7, Time: 555}) {
		t.Errorf("FORK %+v, %v", task, err)
	}
	var l Lost
	body = (&enc{}).u64(31).u64(12).bytes(trailer).b
	if err := rec(RecordLost, 0, body, a).DecodeLost(&l); err != nil || l != (Lost{ID: 31, Lost: 12}) {
		t.Errorf("LOST %+v, %v", l, err)
	}
	var sw Switch
	if err := rec(RecordSwitch, MiscSwitchOut|MiscSwitchOutPreempt, trailer, a).DecodeSwitch(&sw); err != nil || sw != (Switch{Out: true, Preempt: true}) {
		t.Errorf("SWITCH %+v, %v", sw, err)
	}
	body = (&enc{}).u32s(3, 4).bytes(trailer).b
	if err := rec(RecordSwitchCPUWide, 0, body, a).DecodeSwitch(&sw); err != nil || sw != (Switch{NextPrevPid: 3, NextPrevTid: 4}) {
		t.Errorf("SWITCH_CPU_WIDE %+v, %v", sw, err)
	}
	// Records shorter than their fields and trailer.
	for _, typ := range []RecordType{RecordMmap, RecordMmap2, RecordComm, RecordFork, RecordExit, RecordLost, RecordLostSamples, RecordSwitchCPUWide} {
		for n := range len(trailer) + 8 {
			r := rec(typ, 0, make([]byte, n), a)
			if decodeAny(r) == nil {
				t.Errorf("%s of %d bytes: no error", typ, n)
			}
		}
	}
}

// decodeAny decodes r with the decoder of its type.
func decodeAny(r *Record) error {
	switch r.Type {
	case RecordSample:
		var s Sample
		return r.DecodeSample(&s)
	case RecordMmap, RecordMmap2:
		var m Mmap
		return r.DecodeMmap(&m)
	case RecordComm:
		var c Comm
		return r.DecodeComm(&c)
	case RecordFork, RecordExit:
		var t Task
		return r.DecodeTask(&t)
	case RecordLost, RecordLostSamples:
		var l Lost
		return r.DecodeLost(&l)
	case RecordSwitch, RecordSwitchCPUWide:
		var s Switch
		return r.DecodeSwitch(&s)
	}
	_, err := r.ID()
	return err
}

// FuzzDecode feeds arbitrary record bodies to every decoder, with and
// without sample_id_all and the identifier: errors, never panics.
func FuzzDecode(f *testing.F) {
	a := testAttr(Options{})
	f.Add(uint8(RecordSample), uint16(0), uint8(0), sampleBody(a, testSample(a)))
	f.Add(uint8(RecordMmap2), uint16(MiscMmapBuildID), uint8(1), make([]byte, 100))
	f.Add(uint8(RecordComm), uint16(0), uint8(2), []byte("1234\x00"))
	attrs := []*Attr{
		a,
		testAttr(Options{SampleIDAll: true}),
		(&Options{PIDs: []int{1}, Events: []Event{CPUClock, TaskClock}, SampleIDAll: true, RegsUser: RegsARM64, StackUser: 8, UserCallchain: true}).buildAttrs()[1],
	}
	f.Fuzz(func(t *testing.T, typ uint8, misc uint16, which uint8, body []byte) {
		if len(body) > maxRecordSize-headerSize {
			return
		}
		r := rec(RecordType(typ%24), Misc(misc), body, attrs[int(which)%len(attrs)])
		decodeAny(r)
	})
}
