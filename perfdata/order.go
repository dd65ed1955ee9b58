package perfdata

import (
	"math"
	"math/bits"
	"slices"
	"unsafe"
)

// queue holds timed records until perf's ordering releases them.
//
// It follows perf's ordered-events queue: records sorted by time (equal
// times in arrival order); at FINISHED_ROUND, the records up to the
// newest time seen at the previous FINISHED_ROUND are released; at the
// end, all. Records that are views of the mapped input are kept as such;
// others are copied into an arena, compacted when released records leave.
type queue struct {
	ents      []qent
	ready     int    // ents[:ready] are sorted and due
	nsorted   int    // ents[:nsorted] are sorted (the rest came since)
	merge     []qent // scratch of sort
	next      int    // next index of ents[:ready] to deliver
	arena     []byte
	spare     []byte
	bytes     int64
	maxTS     uint64 // perf's max_timestamp
	lastTS    uint64 // time of the most recently queued record
	nextFlush uint64 // perf's next_flush
	seq       uint64
	flushed   uint64 // the newest time released before the end (perf's last_flush)
	unordered uint64 // records queued older than flushed
	pinned    int    // chunks holding queued records
	final     bool   // the input has ended: release everything
	endErr    error  // then return this: io.EOF, or the error that ended the input
}

type qent struct {
	ts, seq   uint64
	src       int    // the file of a directory it came from (Reader.src)
	raw       []byte // view of the input in memory, or nil
	ch        *chunk // the chunk raw lies in, if any
	a0, a1    int    // else the bytes are arena[a0:a1]
	off, doff int64
}

// qentSize is what a queued record costs besides its bytes.
const qentSize = int64(unsafe.Sizeof(qent{}))

// maxPinned bounds the chunks that queued records keep (32 MiB): records
// in others are copied into the arena.
const maxPinned = 32 << 20 / chunkMem

// timeOf returns the timestamp perf orders a kernel record by, or 0 when
// it has none (such records are delivered at once).
func (r *Reader) timeOf(raw []byte) uint64 {
	t := RecordType(r.o.Uint32(raw))
	a, msg := r.dec.attrOf(raw, t)
	if a == nil || msg != "" || a.SampleType&SampleTime == 0 {
		return 0
	}
	body := raw[recordHeaderSize:]
	var at int
	if t == RecordSample {
		at = 8 * bits.OnesCount64(uint64(a.SampleType&(SampleIdentifier|SampleIP|SampleTID)))
	} else {
		if !a.SampleIDAll() || len(body) < a.trailerSize {
			return 0
		}
		at = len(body) - a.trailerSize + 8*bits.OnesCount64(uint64(a.SampleType&SampleTID))
	}
	if at+8 > len(body) {
		return 0
	}
	return r.o.Uint64(body[at:])
}

func (r *Reader) nextOrdered() (*Record, error) {
	q := &r.q
	for {
		if q.next < q.ready {
			e := &q.ents[q.next]
			q.next++
			r.src = e.src
			raw := e.raw
			if raw == nil {
				raw = q.arena[e.a0:e.a1]
			}
			if err := r.setRecord(raw, e.off, e.doff); err != nil {
				return nil, err
			}
			return &r.rec, nil
		}
		if q.ready > 0 {
			q.compact()
		}
		if q.final {
			if len(q.ents) == 0 {
				return nil, q.endErr
			}
			q.flush(math.MaxUint64)
			continue
		}
		raw, off, doff, err := r.nextRaw()
		if err != nil {
			// Deliver what is queued, then the error (or io.EOF).
			q.final, q.endErr = true, err
			continue
		}
		t := RecordType(r.o.Uint32(raw))
		var ts uint64
		if t < RecordUserTypeStart {
			ts = r.timeOf(raw)
		}
		if ts == 0 || ts == math.MaxUint64 {
			if err := r.setRecord(raw, off, doff); err != nil {
				return nil, err
			}
			if t == RecordFinishedRound {
				q.flushRound()
			}
			return &r.rec, nil
		}
		// A directory's data.N files are read into one buffer, turn by
		// turn: their records are copied.
		stable := r.in == nil && doff < 0 && r.src == 0
		var ch *chunk
		if r.file != nil && stable {
			ch = r.cur
			// Records scattered over many chunks would keep each whole:
			// past a bound, they are copied.
			if ch.refs == 0 && q.pinned >= maxPinned {
				stable, ch = false, nil
			}
		}
		q.push(raw, off, doff, ts, stable, ch)
		q.ents[len(q.ents)-1].src = r.src
		if d := r.dir; d != nil {
			// A directory's files are read by time once the queue is
			// half full, and released as far as every file has come.
			d.queued(ts)
			if q.bytes > r.lim.MaxQueued/2 {
				d.balance(r.lim.MaxQueued)
				if d.balanced && d.passed > q.flushed {
					q.flush(d.passed)
				}
			}
		}
		if q.bytes > r.lim.MaxQueued {
			q.flushHalf()
		}
	}
}

// push queues a record. A stable record (a view of input that does not
// change while queued: bytes in memory, or a chunk, held until the record
// leaves) is kept as it is; others are copied.
func (q *queue) push(raw []byte, off, doff int64, ts uint64, stable bool, ch *chunk) {
	e := qent{ts: ts, seq: q.seq, off: off, doff: doff}
	q.seq++
	if ts < q.flushed {
		q.unordered++
	}
	if stable {
		e.raw, e.ch = raw, ch
		if ch != nil {
			if ch.refs == 0 {
				q.pinned++
			}
			ch.refs++
		}
	} else {
		e.a0 = len(q.arena)
		q.arena = append(q.arena, raw...)
		e.a1 = len(q.arena)
	}
	if len(q.ents) == 0 || ts >= q.maxTS {
		q.maxTS = ts
	}
	q.lastTS = ts
	q.ents = append(q.ents, e)
	q.bytes += int64(len(raw)) + qentSize
}

// flush marks the records with time <= limit as due, in time order.
func (q *queue) flush(limit uint64) {
	if limit == 0 || len(q.ents) == 0 {
		return
	}
	q.sort()
	q.ready, _ = slices.BinarySearchFunc(q.ents, limit, func(e qent, l uint64) int {
		if e.ts <= l {
			return -1
		}
		return 1
	})
	q.next = 0
	if !q.final {
		q.flushed = max(q.flushed, limit)
	}
}

// sort orders the queue by time, records of equal times in arrival
// order. The records left after a flush are sorted: only those that came
// since are sorted, then merged with them, so that a flush costs O(k log
// k) for k new records and a pass over the queue, not a sort of it all.
func (q *queue) sort() {
	n := q.nsorted
	if n >= len(q.ents) {
		return
	}
	tail := q.ents[n:]
	slices.SortFunc(tail, cmpQent)
	if n > 0 && cmpQent(q.ents[n-1], tail[0]) > 0 {
		// The sorted records from the first one after tail[0] move
		// to the scratch, and merge back with tail in place: the write
		// position never passes the read position in tail.
		i0, _ := slices.BinarySearchFunc(q.ents[:n], tail[0], cmpQent)
		head := append(q.merge[:0], q.ents[i0:n]...)
		i, j, k := 0, n, i0
		for i < len(head) && j < len(q.ents) {
			if cmpQent(q.ents[j], head[i]) < 0 {
				q.ents[k] = q.ents[j]
				j++
			} else {
				q.ents[k] = head[i]
				i++
			}
			k++
		}
		copy(q.ents[k:], head[i:])
		clear(head) // no chunk or arena is kept alive by the scratch
		q.merge = head[:0]
	}
	q.nsorted = len(q.ents)
}

// cmpQent orders queued records by time, then arrival.
func cmpQent(a, b qent) int {
	switch {
	case a.ts < b.ts:
		return -1
	case a.ts > b.ts:
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// flushRound is perf's round flush: release up to the limit set at the
// previous round, then set the limit to the newest time queued.
func (q *queue) flushRound() {
	if len(q.ents) == 0 {
		return
	}
	q.flush(q.nextFlush)
	q.nextFlush = q.maxTS
}

// flushHalf releases the older half of the queued records, when the
// queue is full. perf releases the older half of the time span between
// the oldest record and the newest arrival, which frees little when
// times arrive scattered, and a full queue then sorts again at nearly
// every record; half of the records makes each flush free half of the
// queue, so that sorting costs O(log n) a record.
func (q *queue) flushHalf() {
	q.sort()
	q.nextFlush = q.ents[len(q.ents)/2].ts
	q.flush(q.nextFlush)
}

// compact drops the delivered records and moves the rest's bytes to the
// front of a fresh arena.
func (q *queue) compact() {
	for i := range q.ents[:q.ready] {
		if ch := q.ents[i].ch; ch != nil {
			if ch.refs--; ch.refs == 0 {
				q.pinned--
			}
		}
	}
	rest := q.ents[q.ready:]
	q.spare = q.spare[:0]
	q.bytes = 0
	for i := range rest {
		e := &rest[i]
		if e.raw == nil {
			a0 := len(q.spare)
			q.spare = append(q.spare, q.arena[e.a0:e.a1]...)
			e.a0, e.a1 = a0, len(q.spare)
			q.bytes += int64(e.a1-e.a0) + qentSize
		} else {
			q.bytes += int64(len(e.raw)) + qentSize
		}
	}
	q.arena, q.spare = q.spare, q.arena
	n := copy(q.ents, rest)
	q.ents = q.ents[:n]
	q.nsorted = max(0, min(q.nsorted-q.ready, n)) // the rest of a flush is sorted
	q.ready, q.next = 0, 0
}
