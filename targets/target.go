package targets

import (
	"encoding/binary"
	"errors"
	"io"
	"strings"

	"github.com/sframekit/sframekit/arch"
)

// ErrGone is wrapped by the error of AttachProcess when the process does
// not exist or has exited: no such PID, a zombie, or a process that
// exited during the attach. A caller sampling a process repeatedly can
// tell its end from a failure with errors.Is(err, ErrGone).
var ErrGone = errors.New("process gone")

// goneError is an error about a process that is gone, with its own text.
type goneError struct{ msg string }

func (e *goneError) Error() string        { return e.msg }
func (e *goneError) Is(target error) bool { return target == ErrGone }

// ReadUint64 reads a little-endian 64-bit word at addr.
func ReadUint64(m arch.Memory, addr uint64) (uint64, error) {
	var b [8]byte
	if _, err := m.ReadAt(b[:], int64(addr)); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// memReader adapts an arch.Memory to an io.ReaderAt based at base, for parsing
// ELF headers out of a target's memory.
type memReader struct {
	m    arch.Memory
	base uint64
}

// ReadAt reads at offset off from the base address.
func (r memReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, io.EOF
	}
	return r.m.ReadAt(p, int64(r.base+uint64(off)))
}

// permUnion combines mapping permissions as Module.Perm documents.
func permUnion(ms []arch.Mapping) string {
	var b [4]byte
	copy(b[:], "---p")
	for i, m := range ms {
		for j, c := range []byte("rwx") {
			if strings.IndexByte(m.Perm, c) >= 0 {
				b[j] = c
			}
		}
		if i == 0 && len(m.Perm) == 4 {
			b[3] = m.Perm[3]
		}
	}
	return string(b[:])
}

var (
	_ arch.Target = (*Process)(nil)
	_ arch.Target = (*Core)(nil)
)
