package perfdata

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/sframekit/sframekit/internal/byteorder"
)

// maxAttrs bounds the events of a recording (perf records a handful; a
// file claiming more is rejected).
const maxAttrs = 1 << 16

// Limits bound the work and memory that a recording can cost. The zero
// value of a field means its default.
type Limits struct {
	// MaxDecompressedRecord bounds what one COMPRESSED record may
	// decompress to. perf record compresses one read of a ring buffer at
	// a time into a run of records, so a record's data is at most the
	// ring's size (Compression.MmapLen); and a record holds less than
	// 64 KiB of compressed bytes, which MaxDecompressRatio lets expand to
	// at most 64 KiB times the ratio. Default: the ring's size plus
	// 64 KiB, or 64 MiB when the recording does not say, and never more
	// than that expansion (64 MiB with the default ratio): a larger
	// MmapLen in the header is not believed. Memory does not grow with
	// this limit: records are decompressed and handed out 256 KiB at a
	// time.
	MaxDecompressedRecord int64
	// MaxDecompressRatio bounds the total decompressed size to this many
	// times the compressed bytes read so far, plus 16 MiB, checked at
	// every 256 KiB of output, so that a small file cannot cost minutes
	// of decompression and of work on the records it holds. Default: 1024
	// (perf record -z's recordings compress about 10 to 1 with frame
	// pointers, 35 to 1 with stack copies, and 520 to 1 for a tight
	// loop's identical stack copies).
	MaxDecompressRatio int64
	// MaxQueued bounds the memory of the time-ordering queue: the bytes
	// of the records it holds, plus the 80 bytes of each one's entry.
	// When it is full, the records of the older half of the queued time
	// span are delivered at once, as perf does when its queue is full;
	// records that then arrive older than one already delivered go out of
	// order, and are counted (Unordered). A directory's files are read
	// by time once the queue is half full, so that this takes files
	// filled at uneven rates in its stride. The arena the records are
	// copied into may take up to about twice this. Default: 64 MiB.
	MaxQueued int64
}

// zstdPiece bounds one record's compressed bytes: what a record's 16-bit
// size leaves after its header.
const zstdPiece = 64 << 10

func (l Limits) withDefaults(h *Header) Limits {
	if l.MaxDecompressRatio <= 0 {
		l.MaxDecompressRatio = 1024
	}
	if l.MaxDecompressedRecord <= 0 {
		l.MaxDecompressedRecord = 64 << 20
		if m := h.Compression.MmapLen; m != 0 {
			l.MaxDecompressedRecord = int64(m) + 64<<10
		}
		l.MaxDecompressedRecord = min(l.MaxDecompressedRecord, zstdPiece*l.MaxDecompressRatio)
	}
	if l.MaxQueued <= 0 {
		l.MaxQueued = 64 << 20
	}
	return l
}

// Reader reads the records of a perf.data recording, one at a time,
// without allocating per record: the Record that Next returns, and every
// slice in it, is valid until the next call to Next.
//
// By default records come in file order. SetTimeOrder(true) delivers them
// as perf report and perf script do: records with a timestamp are queued
// and released, sorted by time, at each FINISHED_ROUND for the timestamps
// of the round before (perf record guarantees no reordering across two
// rounds), and all at the end; records without a timestamp and perf's own
// records pass immediately.
//
// COMPRESSED records (perf record -z) are not returned: the records they
// hold are, decompressed. HEADER_ATTR, HEADER_FEATURE, HEADER_BUILD_ID and
// EVENT_UPDATE records are returned and also update Header.
//
// A Reader is not safe for concurrent use. Call Close when done.
type Reader struct {
	hdr *Header
	o   binary.ByteOrder
	lim Limits

	// Input in memory (a mapped file or caller's bytes): records are
	// views of mem from pos up to end.
	mem      []byte
	pos, end int64
	release  func() error
	// A regular file's records are read with pread into chunks rather
	// than through the mapping, which serves the header and features:
	// touching a mapped page costs microseconds (a page fault, a TLB miss)
	// where copying it costs a fraction, and a mapping read from end to
	// end stays resident. A chunk is reused once no queued record lies in
	// it. While the records of one chunk are decoded, the next ones are
	// read on another goroutine (ahead; see load).
	file     *os.File
	modTime  time.Time // file's
	cur      *chunk
	ahead    []*chunk  // being read, or read, in file order
	nextRead int64     // the file offset the read after ahead's starts at
	cs       *chunkSet // the chunks, and the goroutines reading into them

	// Streamed input: records are read into sbuf.
	in    *bufio.Reader
	inOff int64
	sbuf  []byte
	close io.Closer

	// Compressed data, of the input being read (each file of a
	// directory has its own; see dirInput); compIn and compOut count all
	// of them, for MaxDecompressRatio.
	decompState
	compIn  int64
	compOut int64

	// The files of records of a perf.data directory, nil for one file.
	dir *dirInput
	src int // the file of dir the record being set came from (0: the header file's)

	dec Decoder // of the events in hdr.Attrs

	ordered bool
	started bool
	q       queue

	rec Record
	err error
}

// decompState is the decompression of one input's COMPRESSED records:
// d[dpos:] are decompressed bytes not yet returned; dBase is the
// decompressed-stream offset of d[0] and dOff the offset of the
// COMPRESSED record that last fed d; recOut is what that record has
// decompressed to so far.
type decompState struct {
	z      *zstream
	d      []byte
	dpos   int
	dBase  int64
	dOff   int64
	recOut int64
}

// Open opens a perf.data file. A regular file's header and features are
// mapped, its records read in chunks of about 2 MiB; a directory (perf
// record --threads) is read as perf reads it, its files' records merged
// (see dirInput); anything else (a FIFO, /dev/stdin) is streamed and must
// be in the pipe format.
func Open(name string) (*Reader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		return openDir(f, name)
	}
	if !st.Mode().IsRegular() {
		r, err := NewReader(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		r.close = f
		return r, nil
	}
	r, err := newFile(f, st)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.close = f
	return r, nil
}

// newFile reads the regular file f, described by st: its header and
// features through a mapping, its records with pread (see Reader.file).
// The caller closes f after the Reader.
func newFile(f *os.File, st os.FileInfo) (*Reader, error) {
	b, release, _, err := mapFile(f, st.Size())
	if err != nil {
		return nil, err
	}
	r, err := NewBytes(b)
	if err != nil {
		release()
		return nil, err
	}
	r.release, r.file, r.modTime = release, f, st.ModTime()
	r.cs = &chunkSet{}
	// A Reader dropped without Close still ends the goroutines and
	// releases the chunks.
	runtime.AddCleanup(r, (*chunkSet).release, r.cs)
	return r, nil
}

// A chunk's memory (chunkMem bytes, one huge page where the system
// gives them: see newChunkMem) holds chunkHead bytes of room, then up to
// chunkSize bytes read from the file at once. The room takes the start
// of a record that the previous chunk cut (a record is less than 64 KiB)
// when the chunk was read ahead, before that start was known.
const (
	chunkMem  = 2 << 20
	chunkHead = 64 << 10
	chunkSize = chunkMem - chunkHead
)

// readAhead is the number of chunks read ahead of the current one, and
// readers the number of goroutines reading them. The copy costs about
// as much processor time as everything else sframe report does with a
// recording's samples. With one chunk read ahead, the reading and the
// decoding took turns waiting for each other (the decoding a fifth of
// its time). Three chunks ahead took more processor time than two, the
// unwinding's loads from the stack copies missing the cache more often
// (their chunk had been written longer before). Two goroutines reading
// with ordinary system calls were faster than one, but in half of the
// runs the runtime's hand-offs of processors around the reads took
// over; one goroutine reading with raw system calls (readChunk) is as
// fast as their good runs, every time (sframe report on a 310 MB
// recording, 25 interleaved runs: 79.6 ms ± 4.5 against 86.9 ± 13.8
// with two, 89.0 ± 5.5 with two reading raw).
const (
	readAhead = 2
	readers   = 1
)

// chunk is a part of a file's data section, read into memory.
type chunk struct {
	mem     []byte        // chunkMem bytes
	buf     []byte        // the bytes held: a window of mem
	off     int64         // file offset of buf[0]
	refs    int           // records of the time-order queue in buf
	err     error         // of the read ahead
	read    chan struct{} // the read ahead is done
	pending bool          // asked to be read ahead, and not yet waited for
	free    func()        // releases mem
}

// has reports whether c holds the n bytes at file offset off.
func (c *chunk) has(off, n int64) bool {
	return c != nil && off >= c.off && off+n <= c.off+int64(len(c.buf))
}

// load makes current a chunk that holds the data section from off: the
// first one read ahead, when it does (with the start of the record the
// current one cut copied in front), else one read now into a chunk that
// holds no queued record. Then it has the chunks after it read ahead, up
// to readAhead of them, so that the copy (a quarter of the time of a
// recording's samples) takes another processor while this one's records
// are decoded.
func (r *Reader) load(off int64) error {
	c := r.takeAhead(off)
	if c == nil {
		r.dropAhead()
		c = r.freeChunk()
		n := min(int64(chunkSize), r.end-off)
		c.buf, c.off = c.mem[chunkHead:chunkHead+n], off
		if m, err := r.file.ReadAt(c.buf, off); int64(m) < n {
			c.buf = c.buf[:m]
			return &Error{Off: off, DecompOff: -1, Kind: ErrIO, Msg: fmt.Sprintf("reading %d bytes of records", n), Err: err}
		}
		r.nextRead = c.off + int64(len(c.buf))
	}
	r.cur = c
	for len(r.ahead) < readAhead && r.nextRead < r.end {
		a := r.freeChunk()
		n := min(int64(chunkSize), r.end-r.nextRead)
		a.buf, a.off = a.mem[chunkHead:chunkHead+n], r.nextRead
		if r.cs.rd == nil {
			r.cs.rd = &reading{req: make(chan *chunk, readAhead)}
			for range readers {
				go r.cs.rd.run(r.file)
			}
		}
		r.ahead = append(r.ahead, a)
		r.nextRead += n
		a.pending = true
		r.cs.rd.req <- a
	}
	return nil
}

// freeChunk returns a chunk that holds no queued record and is neither
// current nor read ahead, allocating one if need be.
func (r *Reader) freeChunk() *chunk {
	for _, k := range r.cs.chunks {
		if k.refs == 0 && k != r.cur && !slices.Contains(r.ahead, k) {
			return k
		}
	}
	c := &chunk{read: make(chan struct{}, 1)}
	c.mem, c.free = newChunkMem()
	r.cs.chunks = append(r.cs.chunks, c)
	return c
}

// takeAhead waits for the first chunk read ahead, if any, and returns it
// if it can hold the data from off: it starts at most chunkHead bytes
// after off, and the current chunk holds the bytes in between, which are
// copied in front of it. Otherwise the chunk is left free, and nil
// returned.
func (r *Reader) takeAhead(off int64) *chunk {
	if len(r.ahead) == 0 {
		return nil
	}
	a := r.ahead[0]
	<-a.read
	a.pending = false
	r.ahead = slices.Delete(r.ahead, 0, 1)
	gap := a.off - off
	if a.err != nil || gap < 0 || gap > chunkHead || gap > 0 && !r.cur.has(off, gap) {
		return nil
	}
	at := off - r.cur.off
	copy(a.mem[chunkHead-gap:chunkHead], r.cur.buf[at:at+gap])
	a.buf = a.mem[chunkHead-gap : chunkHead+len(a.buf)]
	a.off = off
	return a
}

// dropAhead waits for the chunks still being read ahead, and leaves them
// free: the data is read from elsewhere.
func (r *Reader) dropAhead() {
	for _, a := range r.ahead {
		<-a.read
		a.pending = false
	}
	r.ahead = r.ahead[:0]
}

// chunkSet is a Reader's chunks and the goroutines that read ahead into
// them: what Close releases, or a cleanup when the Reader is dropped
// without Close.
type chunkSet struct {
	chunks []*chunk
	rd     *reading // once started
}

// release stops the reading goroutines once they have read what they
// were given, then unmaps the chunks: no record may refer to them.
func (cs *chunkSet) release() {
	if cs.rd != nil {
		cs.rd.stop()
		cs.rd = nil
	}
	for _, c := range cs.chunks {
		if c.pending {
			<-c.read
			c.pending = false
		}
		c.free()
	}
	cs.chunks = nil
}

// reading is the goroutines that read chunks ahead.
type reading struct {
	req  chan *chunk
	once sync.Once
}

// run reads the chunks of req (c.buf at c.off of f), each in full or
// with c.err set, and signals each one's read when done, until req is
// closed.
func (rd *reading) run(f *os.File) {
	for c := range rd.req {
		m, err := readChunk(f, c.buf, c.off)
		c.err = nil
		if m < len(c.buf) {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			c.err = err
		}
		c.buf = c.buf[:m]
		c.read <- struct{}{}
	}
}

// stop ends the goroutines once they have read what they were given.
func (rd *reading) stop() { rd.once.Do(func() { close(rd.req) }) }

// NewBytes reads a recording held in b, in either format, without copying
// it. b must not change while the Reader is in use.
func NewBytes(b []byte) (*Reader, error) {
	h, err := parseFileHeader(b)
	if err != nil {
		return nil, err
	}
	r := &Reader{hdr: h, o: h.ByteOrder, mem: b}
	if h.Pipe {
		r.pos, r.end = pipeHeaderSize, int64(len(b))
	} else {
		r.pos, r.end = h.DataOffset, h.DataOffset+h.DataSize
	}
	r.init()
	return r, nil
}

// NewReader reads a pipe-format recording (perf record -o -) from rd as
// it arrives. A file-mode recording needs random access: an *os.File of a
// regular file is mapped as Open does, anything else is refused with an
// error of kind ErrNeedSeek.
func NewReader(rd io.Reader) (*Reader, error) {
	if f, ok := rd.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			if off, err := f.Seek(0, io.SeekCurrent); err == nil && off == 0 {
				return newFile(f, st)
			}
		}
	}
	br := bufio.NewReaderSize(rd, 64<<10)
	var hb [pipeHeaderSize]byte
	if n, err := io.ReadFull(br, hb[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, errorf(ErrTruncated, 0, "%d bytes, too short for a perf.data header", n)
		}
		return nil, &Error{Off: 0, DecompOff: -1, Kind: ErrIO, Err: err}
	}
	h, err := parseFileHeader(hb[:])
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Kind == ErrTruncated {
			return nil, errorf(ErrNeedSeek, 0, "file-mode perf.data needs random access (use Open or NewBytes)")
		}
		return nil, err
	}
	r := &Reader{hdr: h, o: h.ByteOrder, in: br, inOff: pipeHeaderSize, sbuf: make([]byte, 1<<16)}
	r.init()
	return r, nil
}

func (r *Reader) init() {
	r.dec = Decoder{o: r.o, e: byteorder.Of(r.o), byID: make(map[uint64]*Attr)}
	r.dec.setAttrs(r.hdr.Attrs)
}

// Header returns what the recording says about itself. In pipe mode it
// fills in as records are read; it must not be modified.
func (r *Reader) Header() *Header { return r.hdr }

// AttrByID returns the event of sample ID id (an instance's, as records
// and counter values carry it), or nil when no event has it.
func (r *Reader) AttrByID(id uint64) *Attr { return r.dec.byID[id] }

// ModTime returns the modification time of the regular file read, zero
// for a stream or bytes: perf record writes the header last, so it is
// when the recording ended.
func (r *Reader) ModTime() time.Time { return r.modTime }

// SetTimeOrder selects perf's time order (true) or file order (false,
// the default). It must be called before the first Next.
func (r *Reader) SetTimeOrder(on bool) {
	if !r.started {
		r.ordered = on
	}
}

// SetLimits replaces the limits (see Limits for the defaults). It must be
// called before the first Next.
func (r *Reader) SetLimits(l Limits) {
	if !r.started {
		r.lim = l
	}
}

// Unordered returns the number of records that arrived, in time order,
// older than records already delivered: after the queue was full
// (Limits.MaxQueued), or in a recording whose rounds do not keep perf's
// promise. perf report warns of them as "out of order events".
func (r *Reader) Unordered() uint64 { return r.q.unordered }

// Close releases the mapping or closes the file Open opened, and stops
// the decompressor. The last record Next returned is no longer valid.
func (r *Reader) Close() error {
	r.z.close()
	r.z = nil
	if r.dir != nil {
		for i := range r.dir.files {
			r.dir.files[i].dz.z.close()
		}
	}
	if r.cs != nil {
		r.dropAhead()
		r.cs.release() // the goroutines are done with the file
		r.cur = nil
		r.q = queue{} // no record may refer to the chunks now
	}
	var err error
	if r.release != nil {
		err = r.release()
		r.release = nil
		r.mem = nil
	}
	if r.close != nil {
		if e := r.close.Close(); err == nil {
			err = e
		}
		r.close = nil
	}
	if r.err == nil {
		r.err = errors.New("reader closed")
	}
	return err
}

// Next returns the next record, or io.EOF after the last. Any other error
// is an *Error naming the offset; it is final: later calls return it
// again. The records before it were read normally.
func (r *Reader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	if !r.started {
		r.started = true
		r.lim = r.lim.withDefaults(r.hdr)
	}
	var rec *Record
	var err error
	if r.ordered {
		rec, err = r.nextOrdered()
	} else {
		rec, err = r.nextInFileOrder()
	}
	if err != nil {
		var e *Error
		if err != r.hdr.FeatureErr && errors.As(err, &e) {
			note := ""
			if e.File != "" {
				note = r.dirLossNote(e.File, e.Off)
			} else {
				note = r.lossNote(e.Off)
			}
			if note != "" {
				e.Msg += ": " + note
			}
		}
		r.err = err
		return nil, err
	}
	return rec, nil
}

// lossNote says, for the message of an error that ends the reading of a
// file's data section at offset off, what is not read: the records from
// off to the end of the data section the header states (which a cut
// file lacks in part), or, when the header states none because perf
// record did not finish, the records it had not yet written. "" for a
// pipe-mode stream, whose length is unknown.
func (r *Reader) lossNote(off int64) string {
	h := r.hdr
	switch {
	case r.in != nil || h.Pipe:
		return ""
	case h.Truncated && h.statedDataSize == 0:
		return "perf record did not finish (the header's data size is 0): the records it had not written are missing"
	case off >= h.DataOffset+h.statedDataSize:
		return ""
	}
	return fmt.Sprintf("the records in the last %d of the data section's %d bytes are lost", h.DataOffset+h.statedDataSize-off, h.statedDataSize)
}

func (r *Reader) nextInFileOrder() (*Record, error) {
	raw, off, doff, err := r.nextRaw()
	if err != nil {
		return nil, err
	}
	if err := r.setRecord(raw, off, doff); err != nil {
		return nil, err
	}
	return &r.rec, nil
}

// nextRaw returns the bytes of the next record, from decompressed data or
// the input, with its offsets (doff -1 outside compressed data). It
// decompresses COMPRESSED records on the way.
func (r *Reader) nextRaw() (raw []byte, off, doff int64, err error) {
	raw, off, doff, err = r.nextRaw1()
	if r.dir != nil {
		if err != nil {
			return nil, 0, 0, r.inFile(err, r.dir.cur)
		}
		r.src = r.dir.cur
	}
	return raw, off, doff, err
}

// nextRaw1 is nextRaw, the file of a directory left out of errors.
func (r *Reader) nextRaw1() (raw []byte, off, doff int64, err error) {
	for {
		if rest := r.d[r.dpos:]; len(rest) >= recordHeaderSize {
			size := int(r.o.Uint16(rest[6:]))
			doff := r.dBase + int64(r.dpos)
			if size < recordHeaderSize {
				return nil, 0, 0, &Error{Off: r.dOff, DecompOff: doff, Kind: ErrBadRecord, Msg: fmt.Sprintf("record size %d", size)}
			}
			if size <= len(rest) {
				if _, has, _ := payloadSize(rest, r.o); has {
					return nil, 0, 0, &Error{Off: r.dOff, DecompOff: doff, Kind: ErrBadRecord,
						Msg: fmt.Sprintf("%s record (with data after it) inside compressed data", RecordType(r.o.Uint32(rest)))}
				}
				r.dpos += size
				return rest[:size], r.dOff, doff, nil
			}
		}
		if r.z != nil && r.z.active {
			if err := r.pull(); err != nil {
				return nil, 0, 0, err
			}
			continue
		}
		var off int64
		if r.dir != nil {
			raw, off, err = r.readDirInput()
		} else {
			raw, off, err = r.readInput()
		}
		if err == io.EOF && r.dpos < len(r.d) {
			return nil, 0, 0, &Error{Off: r.dOff, DecompOff: r.dBase + int64(r.dpos), Kind: ErrTruncated,
				Msg: fmt.Sprintf("compressed data ends inside a record (%d bytes left over)", len(r.d)-r.dpos)}
		}
		if err != nil {
			return nil, 0, 0, err
		}
		t := RecordType(r.o.Uint32(raw))
		if t == RecordCompressed || t == RecordCompressed2 {
			if err := r.decompress(raw, off); err != nil {
				return nil, 0, 0, err
			}
			continue
		}
		if err := r.skipPayload(raw, off); err != nil {
			return nil, 0, 0, err
		}
		return raw, off, -1, nil
	}
}

// readInput returns the next record of the input itself.
func (r *Reader) readInput() ([]byte, int64, error) {
	if r.in == nil {
		off := r.pos
		if off >= r.end {
			if r.hdr.Truncated {
				return nil, off, errorf(ErrTruncated, off, "the file ends after %d bytes of records", off-r.hdr.DataOffset)
			}
			if r.hdr.FeatureErr != nil {
				return nil, off, r.hdr.FeatureErr
			}
			return nil, off, io.EOF
		}
		if r.end-off < recordHeaderSize {
			return nil, off, errorf(ErrTruncated, off, "%d bytes left, less than a record header", r.end-off)
		}
		mem, base := r.mem, int64(0)
		if r.file != nil {
			if !r.cur.has(off, recordHeaderSize) {
				if err := r.load(off); err != nil {
					return nil, off, err
				}
			}
			mem, base = r.cur.buf, r.cur.off
		}
		size := int64(r.o.Uint16(mem[off-base+6:]))
		if size < recordHeaderSize {
			return nil, off, errorf(ErrBadRecord, off, "record size %d", size)
		}
		if size > r.end-off {
			return nil, off, errorf(ErrTruncated, off, "record of %d bytes, %d left", size, r.end-off)
		}
		if r.file != nil && !r.cur.has(off, size) {
			if err := r.load(off); err != nil {
				return nil, off, err
			}
			mem, base = r.cur.buf, r.cur.off
		}
		r.pos += size
		return mem[off-base : off-base+size], off, nil
	}
	off := r.inOff
	n, err := io.ReadFull(r.in, r.sbuf[:recordHeaderSize])
	r.inOff += int64(n)
	if err != nil {
		if err == io.EOF {
			return nil, off, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return nil, off, errorf(ErrTruncated, off, "input ends inside a record header")
		}
		return nil, off, &Error{Off: off, DecompOff: -1, Kind: ErrIO, Err: err}
	}
	size := int(r.o.Uint16(r.sbuf[6:]))
	if size < recordHeaderSize {
		return nil, off, errorf(ErrBadRecord, off, "record size %d", size)
	}
	n, err = io.ReadFull(r.in, r.sbuf[recordHeaderSize:size])
	r.inOff += int64(n)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil, off, errorf(ErrTruncated, off, "record of %d bytes, input ends after %d", size, n+recordHeaderSize)
		}
		return nil, off, &Error{Off: off, DecompOff: -1, Kind: ErrIO, Err: err}
	}
	return r.sbuf[:size], off, nil
}

// payloadSize returns the size of the data that follows a record outside
// of it (tracing data, AUX trace), and whether the record is of a type
// that has such data.
func payloadSize(raw []byte, o binary.ByteOrder) (uint64, bool, bool) {
	switch RecordType(o.Uint32(raw)) {
	case RecordTracingData:
		if len(raw) < 12 {
			return 0, true, false
		}
		return uint64(o.Uint32(raw[8:])), true, true
	case RecordAuxtrace:
		if len(raw) < 16 {
			return 0, true, false
		}
		return o.Uint64(raw[8:]), true, true
	}
	return 0, false, true
}

// skipPayload skips the data that follows a tracing-data or AUX-trace
// record in the input.
func (r *Reader) skipPayload(raw []byte, off int64) error {
	n, has, ok := payloadSize(raw, r.o)
	if !has {
		return nil
	}
	if !ok {
		return errorf(ErrBadRecord, off, "%s record of %d bytes", RecordType(r.o.Uint32(raw)), len(raw))
	}
	if r.dir != nil {
		return r.skipDirPayload(n, off)
	}
	if r.in == nil {
		if n > uint64(r.end-r.pos) {
			return errorf(ErrTruncated, off, "%d bytes of payload after the record, %d left", n, r.end-r.pos)
		}
		r.pos += int64(n)
		return nil
	}
	if n > 1<<62 {
		return errorf(ErrTruncated, off, "payload of %d bytes", n)
	}
	m, err := r.in.Discard(int(min(n, 1<<62)))
	r.inOff += int64(m)
	if err != nil {
		return errorf(ErrTruncated, off, "%d bytes of payload after the record, input ends after %d", n, m)
	}
	return nil
}

// decompress feeds one COMPRESSED record to the decoder, whose data pull
// then appends to d.
func (r *Reader) decompress(raw []byte, off int64) error {
	comp := raw[recordHeaderSize:]
	if RecordType(r.o.Uint32(raw)) == RecordCompressed2 {
		if len(raw) < 16 {
			return errorf(ErrBadRecord, off, "COMPRESSED2 record of %d bytes", len(raw))
		}
		n := r.o.Uint64(raw[8:])
		comp = raw[16:]
		if n > uint64(len(comp)) {
			return errorf(ErrBadRecord, off, "COMPRESSED2 data size %d in a record of %d bytes", n, len(raw))
		}
		comp = comp[:n]
	}
	if r.z == nil {
		r.z = newZstream()
		attachZstream(r, r.z)
	}
	r.compIn += int64(len(comp))
	r.dOff, r.recOut = off, 0
	if err := r.z.feed(comp); err != nil {
		return &Error{Off: off, DecompOff: r.dBase + int64(len(r.d)), Kind: ErrCompressed, Err: err}
	}
	return nil
}

// pull appends the next piece of the current COMPRESSED record's data to
// d (keeping only its unread part, the start of a record), and checks the
// limits as the data comes, so that a bomb stops at the piece that
// crosses one.
func (r *Reader) pull() error {
	if r.dpos > 0 {
		n := copy(r.d, r.d[r.dpos:])
		r.dBase += int64(r.dpos)
		r.d = r.d[:n]
		r.dpos = 0
	}
	d, n, err := r.z.pull(r.d)
	r.d = d
	r.recOut += int64(n)
	r.compOut += int64(n)
	off := r.dOff
	if err != nil {
		return &Error{Off: off, DecompOff: r.dBase + int64(len(d)), Kind: ErrCompressed, Err: err}
	}
	if r.recOut > r.lim.MaxDecompressedRecord {
		return &Error{Off: off, DecompOff: r.dBase + int64(len(d)), Kind: ErrCompressed,
			Msg: fmt.Sprintf("COMPRESSED record decompresses to more than %d bytes (limit)", r.lim.MaxDecompressedRecord)}
	}
	if r.compOut > r.lim.MaxDecompressRatio*r.compIn+16<<20 {
		return &Error{Off: off, DecompOff: r.dBase + int64(len(d)), Kind: ErrLimit,
			Msg: fmt.Sprintf("%d compressed bytes decompress to more than %d (limit: ratio %d)", r.compIn, r.compOut, r.lim.MaxDecompressRatio)}
	}
	return nil
}

// setRecord fills r.rec from a record's bytes, through the Decoder;
// perf's own records that describe the recording update the header.
func (r *Reader) setRecord(raw []byte, off, doff int64) error {
	rec := &r.rec
	if RecordType(r.o.Uint32(raw)) >= RecordUserTypeStart {
		if err := r.userRecord(raw, off, doff); err != nil {
			return r.inFile(err, r.src)
		}
	}
	kind, at, msg := r.dec.decode(rec, raw)
	rec.Offset = off
	rec.DecompOffset = doff
	if at >= 0 {
		e := &Error{Off: off, DecompOff: doff, Kind: kind, Msg: rec.Type.String() + ": " + msg}
		if doff < 0 {
			e.Off += int64(at)
		} else {
			e.DecompOff += int64(at)
		}
		return r.inFile(e, r.src)
	}
	return nil
}

// userRecord applies perf's records that carry header information.
func (r *Reader) userRecord(raw []byte, off, doff int64) error {
	o := r.o
	t := RecordType(o.Uint32(raw))
	body := raw[recordHeaderSize:]
	bad := func(format string, args ...any) error {
		return &Error{Off: off, DecompOff: doff, Kind: ErrBadRecord, Msg: t.String() + ": " + fmt.Sprintf(format, args...)}
	}
	switch t {
	case RecordHeaderAttr:
		if len(r.hdr.Attrs) >= maxAttrs {
			return &Error{Off: off, DecompOff: doff, Kind: ErrLimit, Msg: fmt.Sprintf("more than %d events", maxAttrs)}
		}
		a, err := parseAttr(body, o, off+recordHeaderSize)
		if err != nil {
			e := err.(*Error)
			e.DecompOff = doff
			return e
		}
		ids := body[a.Size:]
		if len(ids)%8 != 0 {
			return bad("%d bytes of IDs", len(ids))
		}
		a.IDs = make([]uint64, len(ids)/8)
		for i := range a.IDs {
			a.IDs[i] = o.Uint64(ids[8*i:])
		}
		a.Index = len(r.hdr.Attrs)
		r.hdr.Attrs = append(r.hdr.Attrs, a)
		r.dec.setAttrs(r.hdr.Attrs)
	case RecordHeaderFeature:
		if len(body) < 8 {
			return bad("%d-byte body", len(body))
		}
		f := o.Uint64(body)
		if f == 0 || f >= NumFeatureBits {
			return nil // perf ignores features it does not know
		}
		data := append([]byte(nil), body[8:]...)
		if err := r.hdr.parseFeature(Feature(f), data, off+16, func() []*Attr { return r.hdr.Attrs }); err != nil {
			e := err.(*Error)
			e.DecompOff = doff
			return e
		}
	case RecordHeaderBuildID:
		bid, err := parseBuildID(o, Misc(o.Uint16(raw[4:])), body)
		if err != nil {
			return bad("%s", err.Msg)
		}
		r.hdr.BuildIDs = append(r.hdr.BuildIDs, bid)
	case RecordEventUpdate:
		// type (2 is the event's name), ID, then the data.
		if len(body) < 16 {
			return bad("%d-byte body", len(body))
		}
		if o.Uint64(body) == 2 {
			if a := r.dec.byID[o.Uint64(body[8:])]; a != nil {
				a.Name = cstring(body[16:])
			}
		}
	}
	return nil
}
