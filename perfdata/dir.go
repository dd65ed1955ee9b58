package perfdata

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// A perf.data directory (perf record --threads; the header's DIR_FORMAT
// feature, version 1) holds a header file, data, whose data section has
// perf's own records, and one file of records per writer thread, data.N,
// records from offset 0 to its end and no header. perf script reads them
// as perf's session.c does (__perf_session__process_dir_events): the
// files in turn, dirTurn bytes of records from each (the header file's
// data section first, then the data.N files in directory order), all into
// one time-ordered queue that the end flushes (perf record writes no
// FINISHED_ROUND in a directory). The Reader does the same, so that
// records of equal times come in perf's order; a data.N file is opened
// only while its turn's bytes are read, so that what is open at once is
// bounded however many files there are.
//
// perf's queue has no bound; the Reader's does (Limits.MaxQueued). Files
// of uneven rates are far apart in time after the same bytes, so a full
// queue released by time span would deliver records of the slower files
// early and those still to be read out of order. Once the queue is half
// full, the Reader therefore reads by time (balanced turns): the next
// turn is the file whose latest turn began earliest, a turn is short
// enough for every file's to fit in the queue (between 64 KiB and
// dirTurn), and what every file not done has passed is released. The
// choice scans the files, so it is made only for up to maxBalanced files;
// beyond that, a full queue is released as a single file's is.
const (
	// maxDirFiles bounds the data.N files of a directory: perf record
	// writes one per thread, at most one per CPU.
	maxDirFiles = 1 << 16
	// dirTurn is perf's READER_MAX_SIZE.
	dirTurn = 2 << 20
	// dirBuf holds a turn's records: the last starts before dirTurn and
	// is less than 64 KiB.
	dirBuf = dirTurn + 1<<16
	// minBalancedTurn is the shortest balanced turn.
	minBalancedTurn = 64 << 10
	// maxBalanced bounds the files of a directory read by balanced turns:
	// each turn's choice is a pass over the files (perf writes at most one
	// a CPU).
	maxBalanced = 4096
)

// dirInput is the files of records of a perf.data directory.
type dirInput struct {
	// files[0] is the header file, whose data section the Reader reads
	// as it reads a single file; the data.N files follow.
	files []dirFile
	cur   int   // the file whose turn it is
	turn  int64 // bytes of records read from it in this turn
	left  int   // files not done

	// Balanced turns (time order with a queue half full): turns of
	// turnSize bytes, the next to the file of the earliest turnMin.
	balanced bool
	turnSize int64
	curMin   uint64 // the earliest time queued in the current turn
	curTimed bool   // curMin is set
	passed   uint64 // the earliest turnMin of the files not done

	buf     []byte // bytes of files[bufFile] from offset bufOff
	bufFile int
	bufOff  int64

	featErr error // the header file's FeatureErr, returned at the end
}

// dirFile is one file of a directory.
type dirFile struct {
	path string
	name string      // its name in the directory, for errors
	ino  uint64      // its inode when listed
	size int64       // its size when listed: the bytes of records
	pos  int64       // offset of the next record
	dz   decompState // its COMPRESSED records' state, during other files' turns
	done bool
	// turnMin is the earliest time queued in its latest turn that
	// queued any (0 before): the records still to come are taken to be
	// no earlier, as each file's records are in time order but for those
	// of its CPUs' rings read in one pass.
	turnMin uint64
}

// openDir reads the perf.data directory dir, opened as f (closed here).
// Without the DIR_FORMAT feature, or without data.N files, only the
// header file is read, as perf does.
func openDir(f *os.File, dir string) (*Reader, error) {
	defer f.Close()
	hf, err := sysfile.OpenRegular(filepath.Join(dir, "data"))
	if err != nil {
		return nil, err
	}
	st, err := hf.Stat()
	if err != nil {
		hf.Close()
		return nil, err
	}
	r, err := newFile(hf, st)
	if err != nil {
		hf.Close()
		return nil, err
	}
	r.close = hf
	if !r.hdr.Features.Has(FeatDirFormat) {
		return r, nil
	}
	if v := r.hdr.DirVersion; v != 1 {
		err := r.hdr.FeatureErr
		if v != 0 || err == nil {
			err = errorf(ErrBadFeature, 0, "DIR_FORMAT: directory data version %d, not 1", v)
		}
		r.Close()
		return nil, err
	}
	files, err := listDir(f, dir)
	if err != nil {
		r.Close()
		return nil, err
	}
	if len(files) > 0 {
		r.dir = &dirInput{files: files, left: len(files), bufFile: -1, turnSize: dirTurn}
	}
	return r, nil
}

// listDir returns the header file's entry and the data.N files of dir,
// as perf's perf_data__open_dir takes them: the names starting with
// "data.", in directory order, that stat (following symbolic links) finds
// regular, of a size other than 0. Nothing is opened: a FIFO or device is
// left out as perf leaves it out.
func listDir(f *os.File, dir string) ([]dirFile, error) {
	files := []dirFile{{path: filepath.Join(dir, "data"), name: "data"}}
	for {
		ents, err := f.ReadDir(256)
		for _, e := range ents {
			name := e.Name()
			if !strings.HasPrefix(name, "data.") {
				continue
			}
			if len(files) > maxDirFiles {
				return nil, errorf(ErrLimit, 0, "a perf.data directory of more than %d data.N files", maxDirFiles)
			}
			path := filepath.Join(dir, name)
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
				continue
			}
			files = append(files, dirFile{path: path, name: name, ino: sysfile.Inode(fi), size: fi.Size()})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(files) == 1 {
		return nil, nil
	}
	return files, nil
}

// readDirInput returns the next record of a directory's files in perf's
// order, with its offset in its file (dir.cur).
func (r *Reader) readDirInput() ([]byte, int64, error) {
	d := r.dir
	for {
		f := &d.files[d.cur]
		if !f.done && d.turn < d.turnSize {
			raw, off, err := r.readDirFile(f)
			if err == nil {
				d.turn += int64(len(raw))
				return raw, off, nil
			}
			if err != io.EOF {
				return nil, off, err
			}
			if r.dpos < len(r.d) {
				return nil, 0, r.inFile(&Error{Off: r.dOff, DecompOff: r.dBase + int64(r.dpos), Kind: ErrTruncated,
					Msg: fmt.Sprintf("compressed data ends inside a record (%d bytes left over)", len(r.d)-r.dpos)}, d.cur)
			}
			f.done = true
			f.dz.z.close()
			r.z.close()
			r.decompState = decompState{}
			d.left--
			if d.left == 0 {
				if d.featErr != nil {
					return nil, 0, d.featErr
				}
				return nil, 0, io.EOF
			}
		}
		// The next file's turn: its decompression state replaces this
		// one's.
		d.files[d.cur].dz = r.decompState
		d.cur = d.nextTurn()
		d.turn = 0
		r.decompState = d.files[d.cur].dz
		d.files[d.cur].dz = decompState{}
	}
}

// nextTurn ends the current file's turn and returns the file whose turn
// is next: the next in order, or with balanced turns the file not done
// of the earliest turnMin (the first after the current one among equals),
// the earliest turnMin of the files not done then set in passed.
func (d *dirInput) nextTurn() int {
	if d.curTimed {
		d.files[d.cur].turnMin = d.curMin
	}
	d.curTimed = false
	if !d.balanced {
		return (d.cur + 1) % len(d.files)
	}
	next, n := -1, len(d.files)
	for i := 1; i <= n; i++ {
		j := (d.cur + i) % n
		if f := &d.files[j]; !f.done && (next < 0 || f.turnMin < d.files[next].turnMin) {
			next = j
		}
	}
	if next < 0 {
		// All done: the caller returns at the end of its loop.
		return (d.cur + 1) % n
	}
	d.passed = d.files[next].turnMin
	return next
}

// queued notes a record of time ts queued from the current file.
func (d *dirInput) queued(ts uint64) {
	if !d.curTimed || ts < d.curMin {
		d.curMin, d.curTimed = ts, true
	}
}

// balance starts balanced turns, for a queue that may hold maxQueued
// bytes. A directory of more than maxBalanced files keeps perf's turns.
func (d *dirInput) balance(maxQueued int64) {
	if d.balanced || len(d.files) > maxBalanced {
		return
	}
	d.balanced = true
	d.turnSize = min(dirTurn, max(minBalancedTurn, maxQueued/int64(4*len(d.files))))
}

// readDirFile returns the next record of f, the current file, or io.EOF
// after its last.
func (r *Reader) readDirFile(f *dirFile) ([]byte, int64, error) {
	d := r.dir
	if d.cur == 0 {
		raw, off, err := r.readInput()
		if err != nil && err == r.hdr.FeatureErr {
			// The header file's features are cut: the other files'
			// records are still read, and the error ends them.
			d.featErr, err = err, io.EOF
		}
		return raw, off, err
	}
	off := f.pos
	if off >= f.size {
		return nil, off, io.EOF
	}
	if f.size-off < recordHeaderSize {
		return nil, off, errorf(ErrTruncated, off, "%d bytes left, less than a record header", f.size-off)
	}
	if !d.has(off, recordHeaderSize) {
		if err := r.loadDirFile(f); err != nil {
			return nil, off, err
		}
	}
	at := off - d.bufOff
	size := int64(r.o.Uint16(d.buf[at+6:]))
	if size < recordHeaderSize {
		return nil, off, errorf(ErrBadRecord, off, "record size %d", size)
	}
	if size > f.size-off {
		return nil, off, errorf(ErrTruncated, off, "record of %d bytes, %d left", size, f.size-off)
	}
	if !d.has(off, size) {
		if err := r.loadDirFile(f); err != nil {
			return nil, off, err
		}
		at = 0
	}
	f.pos += size
	return d.buf[at : at+size], off, nil
}

// has reports whether buf holds the n bytes at offset off of the
// current file.
func (d *dirInput) has(off, n int64) bool {
	return d.bufFile == d.cur && off >= d.bufOff && off+n <= d.bufOff+int64(len(d.buf))
}

// loadDirFile reads into buf the bytes of f from its next record, up to
// what one turn reads, opening f for this only. A file that is no longer
// the regular file listed, or shorter than it was, ends the reading.
func (r *Reader) loadDirFile(f *dirFile) error {
	d := r.dir
	d.bufFile = -1
	n := min(d.turnSize+1<<16, f.size-f.pos)
	if cap(d.buf) < dirBuf {
		d.buf = make([]byte, dirBuf)
	}
	fd, err := sysfile.OpenRegular(f.path)
	if err != nil {
		return &Error{Off: f.pos, DecompOff: -1, Kind: ErrIO, Err: err}
	}
	defer fd.Close()
	if st, err := fd.Stat(); err != nil || sysfile.Inode(st) != f.ino {
		return errorf(ErrIO, f.pos, "not the file listed in the directory")
	}
	m, err := fd.ReadAt(d.buf[:n], f.pos)
	if int64(m) < n {
		if err == io.EOF {
			return errorf(ErrTruncated, f.pos+int64(m), "the file ends after %d bytes of records, %d when listed", f.pos+int64(m), f.size)
		}
		return &Error{Off: f.pos, DecompOff: -1, Kind: ErrIO, Msg: fmt.Sprintf("reading %d bytes of records", n), Err: err}
	}
	d.buf, d.bufFile, d.bufOff = d.buf[:n], d.cur, f.pos
	return nil
}

// skipDirPayload skips the data after a tracing-data or AUX-trace record
// of the current file of a directory.
func (r *Reader) skipDirPayload(n uint64, off int64) error {
	d := r.dir
	d.turn += int64(min(n, 1<<62))
	if d.cur == 0 {
		if n > uint64(r.end-r.pos) {
			return errorf(ErrTruncated, off, "%d bytes of payload after the record, %d left", n, r.end-r.pos)
		}
		r.pos += int64(n)
		return nil
	}
	f := &d.files[d.cur]
	if n > uint64(f.size-f.pos) {
		return errorf(ErrTruncated, off, "%d bytes of payload after the record, %d left", n, f.size-f.pos)
	}
	f.pos += int64(n)
	return nil
}

// inFile names in err, an *Error, the data.N file of a directory (files
// index src) that it is about.
func (r *Reader) inFile(err error, src int) error {
	// The header file's FeatureErr, returned at the end, is not.
	if e, ok := err.(*Error); ok && r.dir != nil && src > 0 && e.File == "" && err != r.hdr.FeatureErr {
		e.File = r.dir.files[src].name
	}
	return err
}

// dirLossNote is lossNote for an error in the data.N file name.
func (r *Reader) dirLossNote(name string, off int64) string {
	for _, f := range r.dir.files[1:] {
		if f.name == name && off < f.size {
			return fmt.Sprintf("the records in the last %d of its %d bytes are lost", f.size-off, f.size)
		}
	}
	return ""
}
