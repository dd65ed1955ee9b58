package perfdata

import (
	"errors"
	"fmt"

	"github.com/sframekit/sframekit/internal/enumstr"
)

// ErrKind classifies errors so that callers and tests can tell them apart
// without matching text.
type ErrKind uint8

// Error kinds.
const (
	// ErrTruncated: the input ended inside a structure.
	ErrTruncated ErrKind = iota + 1
	// ErrBadMagic: not a perf.data file (or the old PERFFILE format).
	ErrBadMagic
	// ErrBadHeader: an inconsistent file header or section table.
	ErrBadHeader
	// ErrBadAttr: an unusable event attribute.
	ErrBadAttr
	// ErrBadRecord: a record whose size or content does not fit its type.
	ErrBadRecord
	// ErrBadFeature: a feature section that does not parse.
	ErrBadFeature
	// ErrCompressed: compressed data that does not decompress, or would
	// exceed the decompression limits.
	ErrCompressed
	// ErrLimit: the input exceeds one of the limits of this package.
	ErrLimit
	// ErrNeedSeek: a file-mode perf.data given as a stream; only the pipe
	// format can be read without random access.
	ErrNeedSeek
	// ErrIO: the underlying reader failed.
	ErrIO
)

var errKindNames = [...]string{
	ErrTruncated:  "truncated",
	ErrBadMagic:   "bad magic",
	ErrBadHeader:  "bad header",
	ErrBadAttr:    "bad event attribute",
	ErrBadRecord:  "bad record",
	ErrBadFeature: "bad feature section",
	ErrCompressed: "bad compressed data",
	ErrLimit:      "limit exceeded",
	ErrNeedSeek:   "needs random access",
	ErrIO:         "read error",
}

// String describes the kind.
func (k ErrKind) String() string { return enumstr.Name(errKindNames[:], k, "ErrKind") }

// Error is a decoding failure. Off is the byte offset in the input (the
// file, or the pipe stream counting its 16-byte header) of the structure
// that failed: a record, a header field, a feature section. For a record
// inside compressed data, Off is the offset of the COMPRESSED record whose
// data completed it and DecompOff its offset in the decompressed stream
// (else DecompOff is -1).
type Error struct {
	// File is the data.N file of a perf.data directory (perf record
	// --threads) that Off is in, "" for the header file or a single file.
	File      string
	Off       int64
	DecompOff int64
	Kind      ErrKind
	Msg       string
	Err       error // underlying error (I/O, zstd), if any
}

// Error formats the error with its offsets.
func (e *Error) Error() string {
	s := fmt.Sprintf("offset %#x", e.Off)
	if e.File != "" {
		s = e.File + ": " + s
	}
	if e.DecompOff >= 0 {
		s += fmt.Sprintf(" (decompressed offset %#x)", e.DecompOff)
	}
	s += ": " + e.Kind.String()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

func errorf(kind ErrKind, off int64, format string, args ...any) *Error {
	return &Error{Off: off, DecompOff: -1, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err if it is (or wraps) an *Error, else 0.
func KindOf(err error) ErrKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}
