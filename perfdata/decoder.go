package perfdata

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/sframekit/sframekit/internal/byteorder"
)

// Decoder decodes records in the kernel's layout, those of a perf.data
// recording or of a live perf_event ring buffer, one at a time into a
// caller's Record, and finds each record's event among its attributes by
// sample ID as perf does: the only event; the first one for a record
// without sample ID (a non-sample record of events without
// sample_id_all) or with ID 0 (synthesized by perf); else the event
// whose IDs hold the record's ID, or none. Reader decodes every record
// through one; a live reader makes its own (NewDecoder) with its events'
// attributes.
//
// Decoding neither allocates (except to report an error) nor copies: the
// Record's slices and views point into the raw bytes given. Make a
// Decoder with NewDecoder; the zero value decodes nothing.
type Decoder struct {
	o     binary.ByteOrder
	e     byteorder.Order // what o is
	attrs []*Attr
	byID  map[uint64]*Attr
	// Positions of the sample ID, the same in every event (see Attr.idPos
	// and isPos), or posErr saying why they are not.
	idPos, isPos int
	posErr       string
}

// NewDecoder returns a decoder of records in byte order o (the machine's
// own, binary.NativeEndian, for a ring buffer) of the events attrs, whose
// IDs must be set (ParseAttr leaves them to the caller). The attributes
// must not be modified afterwards. A Decoder made by NewDecoder is never
// modified: it may decode in several goroutines at once, each into its
// own Record.
//
// When there are several events and they do not agree on where a record
// holds its sample ID, records cannot be matched to their event and
// Decode fails for those that need it, with an error of kind ErrBadAttr.
func NewDecoder(o binary.ByteOrder, attrs []*Attr) *Decoder {
	d := &Decoder{o: o, e: byteorder.Of(o), byID: make(map[uint64]*Attr)}
	d.setAttrs(slices.Clone(attrs))
	return d
}

// setAttrs sets the events (a Reader's grow as HEADER_ATTR records come)
// and rebuilds the ID index, checking, as perf does, that the events
// agree on where a record's ID is.
func (d *Decoder) setAttrs(attrs []*Attr) {
	d.attrs = attrs
	for _, a := range attrs {
		for _, id := range a.IDs {
			d.byID[id] = a
		}
	}
	d.posErr = ""
	if len(attrs) < 2 {
		return
	}
	d.idPos, d.isPos = attrs[0].idPos, attrs[0].isPos
	if d.idPos < 0 || d.isPos < 0 {
		d.posErr = "several events without sample IDs: records cannot be matched to events"
		return
	}
	for _, a := range attrs[1:] {
		if a.idPos != d.idPos || a.isPos != d.isPos {
			d.posErr = fmt.Sprintf("events %d and 0 disagree on the position of the sample ID", a.Index)
			return
		}
	}
}

// attrOf finds the event of a kernel record of type t (see Decoder), or
// says why it cannot.
func (d *Decoder) attrOf(raw []byte, t RecordType) (*Attr, string) {
	attrs := d.attrs
	switch {
	case len(attrs) == 0:
		return nil, ""
	case len(attrs) == 1:
		return attrs[0], ""
	case t != RecordSample && !attrs[0].SampleIDAll():
		return attrs[0], ""
	case d.posErr != "":
		return nil, d.posErr
	}
	n := (len(raw) - recordHeaderSize) / 8
	var at int
	if t == RecordSample {
		if d.idPos >= n {
			return nil, ""
		}
		at = d.idPos
	} else {
		if d.isPos > n {
			return nil, ""
		}
		at = n - d.isPos
	}
	id := d.o.Uint64(raw[recordHeaderSize+8*at:])
	if id == 0 {
		return attrs[0], ""
	}
	return d.byID[id], ""
}

// Decode decodes raw, one whole record with its header, into rec, as
// Reader.Next does: rec.Raw is raw and every slice of the decoded record
// points into it, valid as long as raw is. rec.Offset is set to 0 and
// rec.DecompOffset to -1 (the record is not from a recording's input).
// A SAMPLE whose event is not found decodes with Attr nil and Sample nil,
// as a Reader returns it.
//
// raw is untrusted: a record shorter than its header, whose size field is
// not len(raw), or whose body does not fit its type and event fails with
// an *Error whose Off is the offset within raw; rec then holds nothing
// to use.
func (d *Decoder) Decode(rec *Record, raw []byte) error {
	if d.o == nil {
		return errorf(ErrBadAttr, 0, "a Decoder not made by NewDecoder")
	}
	if len(raw) < recordHeaderSize {
		return errorf(ErrTruncated, 0, "record of %d bytes, shorter than its header", len(raw))
	}
	if size := int(d.o.Uint16(raw[6:])); size != len(raw) {
		return errorf(ErrBadRecord, 0, "record size %d, given %d bytes", size, len(raw))
	}
	kind, at, msg := d.decode(rec, raw)
	rec.Offset, rec.DecompOffset = 0, -1
	if at >= 0 {
		return errorf(kind, int64(at), "%s: %s", rec.Type, msg)
	}
	return nil
}

// decode fills rec from raw, a record whose size field the caller has
// checked: header, event, typed body. It returns the kind, offset in raw
// and message of a failure, or an offset of -1.
func (d *Decoder) decode(rec *Record, raw []byte) (ErrKind, int, string) {
	rec.o, rec.e = d.o, d.e
	rec.Type = RecordType(d.o.Uint32(raw))
	rec.Misc = Misc(d.o.Uint16(raw[4:]))
	rec.Raw = raw
	rec.Attr = nil
	rec.PayloadSize = 0
	if rec.Type < RecordUserTypeStart {
		a, msg := d.attrOf(raw, rec.Type)
		if msg != "" {
			rec.ID = Identity{}
			rec.decoded = false
			return ErrBadAttr, 0, msg
		}
		rec.Attr = a
	} else if n, has, _ := payloadSize(raw, d.o); has {
		rec.PayloadSize = n
	}
	if at, msg := rec.decodeBody(); at >= 0 {
		return ErrBadRecord, at, msg
	}
	return 0, -1, ""
}
