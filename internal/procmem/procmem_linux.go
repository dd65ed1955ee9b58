package procmem

import (
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/arch"
)

// Reader reads a process's memory with process_vm_readv: one system
// call, from any thread, without a file descriptor. What it cannot read
// that way (pages the process itself may not read) it reads through
// /proc/PID/mem, opened on first need and kept until Close. Its methods
// are safe for concurrent use.
type Reader struct {
	pid    int
	mu     sync.Mutex
	fd     int // /proc/PID/mem, or -1
	closed bool
}

// New returns a Reader of process pid's memory.
func New(pid int) *Reader {
	return &Reader{pid: pid, fd: -1}
}

// Read reads len(b) bytes at addr of process pid once, with a Reader
// closed at once: for the rare reader that keeps none.
func Read(pid int, b []byte, addr int64) (int, error) {
	r := New(pid)
	defer r.Close()
	return r.ReadAt(b, addr)
}

// ReadAt reads len(b) bytes at addr; addresses above 1<<63 are negative
// offsets. An address the process has not mapped is an error wrapping
// arch.ErrUnmapped.
func (r *Reader) ReadAt(b []byte, addr int64) (int, error) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("memory of %d read after Close", r.pid)
	}
	n := 0
	for n < len(b) {
		local := []unix.Iovec{{Base: &b[n]}}
		local[0].SetLen(len(b) - n)
		remote := []unix.RemoteIovec{{Base: uintptr(uint64(addr) + uint64(n)), Len: len(b) - n}}
		k, err := unix.ProcessVMReadv(r.pid, local, remote, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			break
		}
		n += k
	}
	if n == len(b) {
		return n, nil
	}
	k, err := r.pread(b[n:], uint64(addr)+uint64(n))
	n += k
	if err != nil {
		return n, fmt.Errorf("reading %d bytes at %#x of %d: %w", len(b)-n, uint64(addr)+uint64(n), r.pid, err)
	}
	return n, nil
}

// pread reads through /proc/PID/mem, which reads what process_vm_readv
// refuses (pages without read permission).
func (r *Reader) pread(b []byte, addr uint64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errors.New("closed")
	}
	if r.fd < 0 {
		fd, err := unix.Open(fmt.Sprintf("/proc/%d/mem", r.pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return 0, fmt.Errorf("%w (%w)", arch.ErrUnmapped, err)
		}
		r.fd = fd
	}
	n := 0
	for n < len(b) {
		k, err := unix.Pread(r.fd, b[n:], int64(addr+uint64(n)))
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			if err == nil || err == unix.EIO || err == unix.EFAULT {
				err = arch.ErrUnmapped
			}
			return n, err
		}
		n += k
	}
	return n, nil
}

// Close releases the Reader's file descriptor, if it opened one; reads
// after it fail.
func (r *Reader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
	r.closed = true
}
