package perfevent

import (
	"encoding/binary"
	"errors"

	"github.com/sframekit/sframekit/perfdata"
)

// headerSize is the size of struct perf_event_header.
const headerSize = 8

// ne is the byte order of ring buffers: the machine's own.
var ne = binary.NativeEndian

// Record is one record of a ring buffer, as Session.Run hands it out:
// its bytes in the kernel's layout, which perf.data files share, decoded
// on demand by package perfdata (Decode) into the same types as a
// recording's records, so that one path serves both.
//
// Raw is a view into the mapped ring, not a copy: it is valid only until
// the callback that received it returns, after which the kernel may
// overwrite it. Only a record that wraps around the end of the ring is
// copied, into a scratch buffer of the ring (Wrapped). A copy of a Record
// whose Raw is a copy of its bytes decodes as the original did.
type Record struct {
	// Type and Misc are the fields of the record's header.
	Type perfdata.RecordType
	Misc perfdata.Misc
	// Raw is the whole record, its 8-byte header included, in this
	// machine's byte order.
	Raw []byte
	// CPU is the CPU whose ring held the record.
	CPU int
	// Wrapped says Raw is a copy, the record having wrapped around the end
	// of the ring.
	Wrapped bool

	dec *perfdata.Decoder // of the session's events
	rec perfdata.Record
}

// Body returns the record's bytes after its header.
func (r *Record) Body() []byte { return r.Raw[headerSize:] }

// Decode decodes the record with package perfdata, as a perf.data
// recording's records are, without allocating or copying: into a
// perfdata.Record held by r, whose views (a sample's registers and stack
// copy, a mapping's file name) are views of Raw and valid as long as it
// is. The decoded record's Attr is the event's *perfdata.Attr (that of
// Session.Attrs()[Attr.Index]), found by sample ID as perf does: a SAMPLE
// by its identifier when the session has several events, other records by
// their sample_id trailer (SampleIDAll) or else as the first event's,
// which has the side records. A record that does not fit its type or
// event is a *perfdata.Error naming the offset in Raw.
func (r *Record) Decode() (*perfdata.Record, error) {
	if r.dec == nil {
		return nil, errors.New("Decode of a record not from a session")
	}
	if err := r.dec.Decode(&r.rec, r.Raw); err != nil {
		return nil, err
	}
	return &r.rec, nil
}
