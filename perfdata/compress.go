package perfdata

import (
	"io"
	"runtime"

	"github.com/klauspost/compress/zstd"
)

// perf record -z writes one zstd stream, flushed (not ended) at the end of
// every COMPRESSED record, so the data of a record continues the stream of
// the one before and may end inside a perf record that the next one
// completes. The decoder therefore lives as long as the Reader, fed one
// COMPRESSED record at a time.
//
// zstd's decoder pulls its input through an io.Reader and cannot stop
// between records, so it runs in a goroutine of its own: its input blocks
// until the next COMPRESSED record arrives, and a request for input that
// the current record cannot satisfy tells the Reader that everything the
// record decompresses to has been delivered (the decoder, synchronous with
// concurrency 1, asks for a new block only once it has returned the output
// of the last one). The goroutine ends when the Reader is closed or
// garbage-collected.

// zstdMaxWindow bounds the decoder's history window: perf's levels use at
// most 8 MB; a stream that asks for more is rejected, not honoured.
const zstdMaxWindow = 64 << 20

type zmsg struct {
	n       int   // bytes of output in zstream.out
	starved bool  // the decoder wants input beyond the current record
	err     error // decoder error (the stream is unusable after it)
}

type zstream struct {
	in    chan []byte // next record's compressed bytes; closed to stop
	req   chan struct{}
	reply chan zmsg
	out   []byte // the goroutine's output buffer, read by the Reader between req and reply
	inbuf []byte // copy of the current record's compressed bytes
	busy  bool   // a request is outstanding (the decoder waits for input)
	// active: the record last fed may decompress to more than pull has
	// handed out.
	active bool
	dead   error
}

// zsource is the decoder's input: the current record's bytes, then a
// blocking wait for the next record.
type zsource struct {
	cur   []byte
	in    chan []byte
	reply chan zmsg
}

func (s *zsource) Read(p []byte) (int, error) {
	for len(s.cur) == 0 {
		s.reply <- zmsg{starved: true}
		b, ok := <-s.in
		if !ok {
			return 0, io.EOF
		}
		s.cur = b
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}

func newZstream() *zstream {
	z := &zstream{
		in:    make(chan []byte),
		req:   make(chan struct{}),
		reply: make(chan zmsg, 1),
		out:   make([]byte, 256<<10),
	}
	src := &zsource{in: z.in, reply: z.reply}
	go zrun(src, z.req, z.reply, z.out)
	return z
}

func zrun(src *zsource, req chan struct{}, reply chan zmsg, out []byte) {
	// The first record arrives before any request.
	b, ok := <-src.in
	if !ok {
		return
	}
	src.cur = b
	dec, err := zstd.NewReader(src,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(zstdMaxWindow),
		zstd.WithDecoderLowmem(true))
	if err != nil {
		<-req
		reply <- zmsg{err: err}
		return
	}
	defer dec.Close()
	for range req {
		n, err := dec.Read(out)
		if n == 0 && err == nil {
			err = io.ErrNoProgress
		}
		reply <- zmsg{n: n, err: err}
		if err != nil {
			// Drain requests until the Reader closes.
			for range req {
				reply <- zmsg{err: err}
			}
			return
		}
	}
}

// feed gives the decoder the compressed bytes of one record; pull then
// hands out what they decompress to, a piece at a time. The decoder has
// consumed the bytes of the record before (pull said so), and keeps a
// reference to comp's copy until pull says it has consumed this one.
func (z *zstream) feed(comp []byte) error {
	if z.dead != nil {
		return z.dead
	}
	if len(comp) == 0 {
		return nil
	}
	// Copy: the record's bytes may be a view that the Reader reuses.
	z.inbuf = append(z.inbuf[:0], comp...)
	z.in <- z.inbuf
	z.active = true
	return nil
}

// pull appends to dst the next piece (at most len(z.out) bytes, 256 KiB)
// of what the record last fed decompresses to, and returns the bytes
// appended: none when the record's data has all been handed out (then
// active is false and the next record may be fed).
func (z *zstream) pull(dst []byte) ([]byte, int, error) {
	if z.dead != nil {
		return dst, 0, z.dead
	}
	if !z.active {
		return dst, 0, nil
	}
	if !z.busy {
		z.req <- struct{}{}
		z.busy = true
	}
	m := <-z.reply
	if m.starved {
		// The request stays outstanding: the decoder waits for input.
		z.active = false
		return dst, 0, nil
	}
	z.busy = false
	dst = append(dst, z.out[:m.n]...)
	if m.err != nil {
		z.dead, z.active = m.err, false
		return dst, m.n, m.err
	}
	return dst, m.n, nil
}

// close stops the decoder goroutine.
func (z *zstream) close() {
	if z == nil || z.in == nil {
		return
	}
	close(z.in)
	close(z.req)
	z.in = nil
}

// attachZstream stops z's goroutine when owner (a Reader) is collected
// without Close.
func attachZstream(owner *Reader, z *zstream) {
	runtime.AddCleanup(owner, func(z *zstream) { z.close() }, z)
}
