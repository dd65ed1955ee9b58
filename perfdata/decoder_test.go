package perfdata

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// typed returns the decoded view of rec for its type (nil for a type
// without one).
func typed(rec *Record) any {
	switch rec.Type {
	case RecordSample:
		return rec.Sample()
	case RecordMmap, RecordMmap2:
		return rec.Mmap()
	case RecordComm:
		return rec.Comm()
	case RecordFork, RecordExit:
		return rec.Task()
	case RecordLost, RecordLostSamples:
		return rec.Lost()
	case RecordThrottle, RecordUnthrottle:
		return rec.Throttle()
	case RecordSwitch, RecordSwitchCPUWide:
		return rec.Switch()
	case RecordKsymbol:
		return rec.Ksymbol()
	case RecordAux:
		return rec.Aux()
	case RecordCgroup:
		return rec.Cgroup()
	}
	return nil
}

// sameRecord fails unless got, decoded by a Decoder, equals want, as the
// Reader returned it.
func sameRecord(t *testing.T, where string, got, want *Record) {
	t.Helper()
	if got.Type != want.Type || got.Misc != want.Misc || got.Attr != want.Attr || got.ID != want.ID ||
		!bytes.Equal(got.Raw, want.Raw) || got.Offset != 0 || got.DecompOffset != -1 {
		t.Fatalf("%s: decoded %s misc %#x event %p identity %+v offsets %d/%d\nthe reader's %s misc %#x event %p identity %+v",
			where, got.Type, got.Misc, got.Attr, got.ID, got.Offset, got.DecompOffset, want.Type, want.Misc, want.Attr, want.ID)
	}
	if g, w := typed(got), typed(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: decoded %+v\nthe reader's %+v", where, g, w)
	}
}

// TestDecoderAgreesWithReader decodes every kernel record of perf's
// recordings (one event and several, sample_id_all, switch records, every
// sample field, pipe and compressed) with a Decoder of the recording's
// events, from a copy of its bytes, as a live reader would: the same
// record as the Reader's, matched to the same event.
func TestDecoderAgreesWithReader(t *testing.T) {
	for _, rc := range recordings {
		t.Run(rc.name, func(t *testing.T) {
			path := record(t, rc)
			r, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			var d *Decoder
			var got Record
			n, samples := 0, 0
			events := map[*Attr]bool{}
			readAll(t, r, func(rec *Record) {
				if rec.Type >= RecordUserTypeStart {
					return
				}
				if d == nil {
					// A pipe's HEADER_ATTR records all come before the
					// kernel's records.
					d = NewDecoder(r.Header().ByteOrder, r.Header().Attrs)
				}
				raw := bytes.Clone(rec.Raw)
				if err := d.Decode(&got, raw); err != nil {
					t.Fatalf("record at %#x: %v", rec.Offset, err)
				}
				sameRecord(t, rec.Type.String(), &got, rec)
				if got.Sample() != nil {
					samples++
					events[got.Attr] = true
				}
				n++
			})
			// Only the leader of a sample-read group samples.
			if samples == 0 || rc.name == "two-events" && len(events) != 2 {
				t.Fatalf("%d samples of %d of the %d events", samples, len(events), len(r.Header().Attrs))
			}
			t.Logf("%d records, %d samples of %d events", n, samples, len(events))
		})
	}
}

// synthRecords splits the synthetic data into records.
func synthRecords(o binary.ByteOrder) [][]byte {
	d := synthDataOpt(o, false)
	var recs [][]byte
	for len(d) > 0 {
		n := int(o.Uint16(d[6:]))
		recs = append(recs, d[:n:n])
		d = d[n:]
	}
	return recs
}

// synthDecoder is a Decoder of the synthetic events, read back from the
// bytes of a recording as Reader reads them.
func synthDecoder(t testing.TB, o binary.ByteOrder) (*Decoder, []*Attr) {
	r, err := NewBytes(fileOf(o, synthAttrs(), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	attrs := r.Header().Attrs
	return NewDecoder(o, attrs), attrs
}

// TestDecoderSynthetic decodes records of every type and every sample
// field, in both byte orders, as the Reader does.
func TestDecoderSynthetic(t *testing.T) {
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		d, _ := synthDecoder(t, o)
		r, err := NewBytes(fileOf(o, synthAttrs(), synthDataOpt(o, false), nil))
		if err != nil {
			t.Fatal(err)
		}
		var got Record
		recs := synthRecords(o)
		i := 0
		readAll(t, r, func(rec *Record) {
			if err := d.Decode(&got, recs[i]); err != nil {
				t.Fatalf("%v: record %d: %v", o, i, err)
			}
			// The reader's events are its own, equal to the decoder's.
			want := *rec
			if want.Attr != nil {
				want.Attr = d.attrs[want.Attr.Index]
			}
			sameRecord(t, rec.Type.String(), &got, &want)
			i++
		})
		if i != len(recs) {
			t.Fatalf("%v: the reader read %d records, %d written", o, i, len(recs))
		}
	}
}

// TestDecodeDoesNotAllocate: decoding a record into a Record allocates
// nothing, and Raw and the views are the bytes given, not a copy.
func TestDecodeDoesNotAllocate(t *testing.T) {
	o := binary.NativeEndian
	d, _ := synthDecoder(t, o)
	var rec Record
	for _, raw := range synthRecords(o) {
		if n := testing.AllocsPerRun(100, func() {
			if err := d.Decode(&rec, raw); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per decode", rec.Type, n)
		}
		if &rec.Raw[0] != &raw[0] {
			t.Errorf("%s: Raw is a copy", rec.Type)
		}
		if s := rec.Sample(); s != nil && len(s.StackUser) > 0 && cap(s.StackUser) > cap(raw) {
			t.Errorf("user stack is not a view of the record")
		}
	}
}

// TestDecodeErrors: a record that does not fit its header, type or event
// is an *Error naming the offset in the record, never a panic.
func TestDecodeErrors(t *testing.T) {
	o := binary.LittleEndian
	d, attrs := synthDecoder(t, o)
	var rec Record
	for _, tc := range []struct {
		raw  []byte
		kind ErrKind
	}{
		{nil, ErrTruncated},
		{make([]byte, 7), ErrTruncated},
		{record1(o, RecordComm, 0, make([]byte, 8))[:12], ErrBadRecord}, // size field 16, 12 bytes
	} {
		if err := d.Decode(&rec, tc.raw); KindOf(err) != tc.kind {
			t.Errorf("%d bytes: %v, want kind %v", len(tc.raw), err, tc.kind)
		}
	}
	if err := new(Decoder).Decode(&rec, synthRecords(o)[0]); err == nil {
		t.Error("the zero Decoder decoded")
	}
	// Every cut of every record, its size field fixed up, fails inside
	// the record (or decodes, for a cut at the end of a name's padding).
	for _, raw := range synthRecords(o) {
		for n := recordHeaderSize; n < len(raw); n += 8 {
			cut := bytes.Clone(raw[:n])
			o.PutUint16(cut[6:], uint16(n))
			err := d.Decode(&rec, cut)
			var e *Error
			if err == nil {
				continue
			}
			if !errors.As(err, &e) || e.Off < 0 || e.Off > int64(n) || e.DecompOff != -1 {
				t.Fatalf("%s cut to %d bytes: %v", rec.Type, n, err)
			}
		}
	}
	// A sample that names no event decodes without its fields.
	smp := record1(o, RecordSample, 0, (&enc{o: o}).u64(12345).u64(0).b)
	if err := d.Decode(&rec, smp); err != nil || rec.Attr != nil || rec.Sample() != nil {
		t.Errorf("sample of an unknown event: %v, event %p", err, rec.Attr)
	}
	// Events that disagree on the sample ID's position.
	bad := *attrs[1]
	bad.SampleType = SampleIP | SampleID | SampleTime
	bad.derive()
	d2 := NewDecoder(o, []*Attr{attrs[0], &bad})
	if err := d2.Decode(&rec, smp); KindOf(err) != ErrBadAttr {
		t.Errorf("events disagreeing on the ID: %v, want kind %v", err, ErrBadAttr)
	}
}

// TestParseAttr reads the attributes of perf's pipe recordings from their
// HEADER_ATTR records as the Reader does, and synthetic ones in both byte
// orders; a bad size is an error.
func TestParseAttr(t *testing.T) {
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		for _, want := range synthAttrs() {
			got, err := ParseAttr(encodeAttr(o, want), o)
			if err != nil {
				t.Fatal(err)
			}
			want.Size = AttrSizeVer7
			want.IDs = nil
			want.derive()
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%v: %+v\nwant %+v", o, got, want)
			}
		}
	}
	// A byte order that is not one of encoding/binary's two values, such
	// as binary.NativeEndian, which a live reader passes: the bit-fields
	// are read by what the order is, not by which value it is.
	a := synthAttrs()[0]
	got, err := ParseAttr(encodeAttr(binary.BigEndian, a), otherOrder{binary.BigEndian})
	if err != nil || got.Flags != a.Flags {
		t.Errorf("big-endian attribute read with another ByteOrder value: flags %v, want %v (%v)", got.Flags, a.Flags, err)
	}
	for _, rc := range recordings {
		if !rc.pipe {
			continue
		}
		r, err := Open(record(t, rc))
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		readAll(t, r, func(rec *Record) {
			if rec.Type != RecordHeaderAttr {
				return
			}
			got, err := ParseAttr(rec.Body(), r.Header().ByteOrder)
			if err != nil {
				t.Fatal(err)
			}
			want := *r.Header().Attrs[i]
			want.IDs, want.Name, want.Index = nil, "", 0
			if !reflect.DeepEqual(got, &want) {
				t.Errorf("%s: attribute %d: %+v\nwant %+v", rc.name, i, got, want)
			}
			i++
		})
		r.Close()
		if i == 0 {
			t.Errorf("%s: no HEADER_ATTR", rc.name)
		}
	}
	b := encodeAttr(binary.LittleEndian, synthAttrs()[0])
	for _, tc := range []struct {
		b    []byte
		kind ErrKind
	}{
		{b[:AttrSizeVer0-1], ErrTruncated},
		{binary.LittleEndian.AppendUint32([]byte{0, 0, 0, 0}, 12), ErrBadAttr},
		{b[:AttrSizeVer1], ErrTruncated}, // size 128 in 72 bytes
	} {
		if tc.kind == ErrBadAttr {
			tc.b = append(tc.b, b[8:]...)
		}
		if _, err := ParseAttr(tc.b, binary.LittleEndian); KindOf(err) != tc.kind {
			t.Errorf("%d bytes: %v, want kind %v", len(tc.b), err, tc.kind)
		}
	}
}

// otherOrder is a byte order equal to its ByteOrder in all but identity.
type otherOrder struct{ binary.ByteOrder }

// FuzzDecode decodes arbitrary bytes as a record of the synthetic events
// (sample_id_all, identifier, every sample field): an *Error or a
// record, never a panic.
func FuzzDecode(f *testing.F) {
	for _, raw := range synthRecords(binary.LittleEndian) {
		f.Add(raw)
	}
	r, err := NewBytes(fileOf(binary.LittleEndian, synthAttrs(), nil, nil))
	if err != nil {
		f.Fatal(err)
	}
	d := NewDecoder(binary.LittleEndian, r.Header().Attrs)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var rec Record
		if err := d.Decode(&rec, raw); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%v is not an *Error", err)
			}
			return
		}
		typed(&rec)
		if s := rec.Sample(); s != nil {
			for i := 0; i < s.Callchain.Len(); i++ {
				s.Callchain.At(i)
			}
			for i := 0; i < s.Read.Len() && i < 1000; i++ {
				s.Read.Counter(i)
			}
			s.RegsUser.Get(PerfRegX86SP)
		}
	})
}

// BenchmarkDecode decodes one record over and over: a profiler's sample
// (user registers and an 8 KiB stack copy, as perf record --call-graph
// dwarf makes), the synthetic sample with every field, and an MMAP2.
//
//	go test ./perfdata -run '^$' -bench Decode
func BenchmarkDecode(b *testing.B) {
	o := binary.NativeEndian
	prof := &Attr{Type: TypeSoftware, SamplePeriod: 1000000, SampleRegsUser: 0xff0fff, SampleStackUser: 8192,
		SampleType: SampleIP | SampleTID | SampleTime | SampleCPU | SamplePeriod | SampleRegsUser | SampleStackUser}
	pr, err := NewBytes(fileOf(o, []*Attr{prof}, nil, nil))
	if err != nil {
		b.Fatal(err)
	}
	e := &enc{o: o}
	e.u64(0x401000).u32(1).u32(2).u64(3).u32(0).u32(0).u64(1000000).u64(RegsABI64)
	for range 20 {
		e.u64(0x7ffc0000)
	}
	e.u64(8192).raw(make([]byte, 8192)).u64(8192)
	sd, _ := synthDecoder(b, o)
	recs := synthRecords(o)
	for _, tc := range []struct {
		name string
		d    *Decoder
		raw  []byte
	}{
		{"profiler-sample", NewDecoder(o, pr.Header().Attrs), record1(o, RecordSample, MiscUser, e.b)},
		{"every-field-sample", sd, synthSample(o, 1)},
		{"mmap2", sd, recs[2]},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var rec Record
			b.ReportAllocs()
			for b.Loop() {
				if err := tc.d.Decode(&rec, tc.raw); err != nil {
					b.Fatal(err)
				}
			}
			if rec.Type == RecordSample && rec.Sample() == nil {
				b.Fatal("not decoded")
			}
		})
	}
}
