package elffile

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// ErrNotELF is the error of Open and NewFile for input that does not
// start with the ELF magic number (including empty input).
var ErrNotELF = errors.New("not an ELF file")

// TruncatedError is the error of Open and NewFile for an ELF file that
// ends before the headers, sections or segments its header describes: a
// short copy, a core cut off by a size limit.
type TruncatedError struct {
	Size int64  // bytes present
	Want uint64 // bytes the headers need; 0 when not known
}

func (e *TruncatedError) Error() string {
	if e.Want == 0 {
		return fmt.Sprintf("truncated ELF file (%d bytes, ending inside what its headers describe)", e.Size)
	}
	return fmt.Sprintf("truncated ELF file (%d of %d bytes)", e.Size, e.Want)
}

// MaxStreamSize bounds what ReadStream reads into memory: 1 GiB.
const MaxStreamSize = 1 << 30

// maxStream is MaxStreamSize, smaller in tests.
var maxStream int64 = MaxStreamSize

// ReadStream reads all of r (standard input, a pipe), which debug/elf
// cannot read in place since it seeks, refusing more than MaxStreamSize
// bytes.
func ReadStream(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxStream+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > maxStream {
		return nil, fmt.Errorf("input larger than %d bytes; give it as a file", maxStream)
	}
	return data, nil
}

// File is an ELF file opened by Open, OpenArg or NewFile; Close releases
// what it reads from.
type File struct {
	*elf.File
	closer io.Closer
}

// Close closes the underlying file.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// Open opens the ELF file at path as elf.Open does, but only a regular
// file (internal/sysfile.OpenRegular: a FIFO or device that a recording,
// a core or /proc names is refused at once, never waited on), and says
// what is wrong with input that is not a whole ELF file in words a user
// can act on: ErrNotELF, or a *TruncatedError with the sizes (the caller
// names the file). File system errors are returned as they are (an
// *os.PathError, naming it).
func Open(path string) (*File, error) {
	osf, err := sysfile.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	st, err := osf.Stat()
	if err == nil {
		var ef *elf.File
		if ef, err = newFile(osf, st.Size()); err == nil {
			return &File{File: ef, closer: osf}, nil
		}
	}
	osf.Close()
	return nil, err
}

// OpenArg is Open for a file the user named on the command line: a pipe
// or character device given by name (<(cmd), /dev/stdin) is read into
// memory first, as ReadStream does, since debug/elf seeks.
//
// The type is checked with stat, not with Open's non-blocking open: any
// open of a FIFO's read end lets its writer in, and closing it again
// before the second open makes the writer fail (EPIPE: the data is lost)
// or leaves the second open waiting for a writer that already quit.
func OpenArg(path string) (*File, error) {
	if st, err := os.Stat(path); err != nil || st.Mode().IsRegular() {
		return Open(path)
	}
	osf, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer osf.Close()
	data, err := ReadStream(osf)
	if err != nil {
		return nil, err
	}
	return NewFile(data)
}

// NewFile parses the ELF file held in data, with the errors of Open (not
// naming a file).
func NewFile(data []byte) (*File, error) {
	ef, err := newFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	return &File{File: ef}, nil
}

// NewFileAt is NewFile for the size bytes r holds (a file already open,
// an image in memory): nothing is read before the headers are checked
// against size.
func NewFileAt(r io.ReaderAt, size int64) (*File, error) {
	ef, err := newFile(r, size)
	if err != nil {
		return nil, err
	}
	return &File{File: ef}, nil
}

func newFile(r io.ReaderAt, size int64) (*elf.File, error) {
	if err := checkHeader(r, size); err != nil {
		return nil, err
	}
	f, err := elf.NewFile(r)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// debug/elf read past the end (a string table, a section group
		// cut off): its bare "EOF" says nothing of the file.
		return nil, &TruncatedError{Size: size}
	}
	if err != nil {
		return nil, err
	}
	// The header fits; the contents it describes must too.
	var want uint64
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOBITS {
			want = maxEnd(want, s.Offset, s.FileSize)
		}
	}
	for _, p := range f.Progs {
		want = maxEnd(want, p.Off, p.Filesz)
	}
	if want > uint64(size) {
		return nil, &TruncatedError{size, want}
	}
	return f, nil
}

// maxEnd is max(want, off+n), ignoring an end past 2^63, which no
// truncation explains (debug/elf reports such headers when read).
func maxEnd(want, off, n uint64) uint64 {
	end := off + n
	if end < off || end > 1<<63 {
		return want
	}
	return max(want, end)
}

// checkHeader returns ErrNotELF or a *TruncatedError when the file header
// or the header tables it points to do not fit in size bytes. Other
// defects (an unknown class or byte order among them) are left to
// debug/elf.
func checkHeader(r io.ReaderAt, size int64) error {
	h, err := ReadHeader(io.NewSectionReader(r, 0, size))
	var te *TruncatedError
	switch {
	case errors.Is(err, ErrNotELF) || errors.As(err, &te):
		return err
	case err != nil:
		return nil
	}
	want := uint64(ehdrSize32)
	if h.Class != elf.ELFCLASS32 {
		want = ehdrSize64
	}
	if h.Phnum > 0 {
		want = maxEnd(want, h.Phoff, uint64(h.Phentsize)*uint64(h.Phnum))
	}
	if h.Shoff != 0 {
		// shnum 0 with an offset: the count is in section 0 (extended
		// numbering), which must be there.
		want = maxEnd(want, h.Shoff, uint64(h.Shentsize)*uint64(max(h.Shnum, 1)))
	}
	if want > uint64(size) {
		return &TruncatedError{size, want}
	}
	return nil
}
