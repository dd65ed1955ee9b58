package perfdata

import (
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// newChunkMem returns the memory of a chunk, chunkMem bytes on a 2 MiB
// boundary advised for transparent huge pages, and the function that
// releases it, once no record can refer to it. Reading into it costs
// one page fault instead of 512: on a virtual machine a page fault can
// cost tens of microseconds, more than copying the page (the faults of
// fresh 4 KiB pages were most of sframe report's system time). The
// memory is mapped, not allocated: the runtime would clear memory it
// reuses, touching twice the size (for the alignment) before the first
// read (4% of sframe report's time, with a chunk for each of the reads
// ahead). Should mapping fail, it comes from the heap.
func newChunkMem() ([]byte, func()) {
	const n = 2 * chunkMem
	p, err := unix.MmapPtr(-1, 0, nil, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, chunkMem), func() {}
	}
	// Keep the aligned chunkMem bytes: unmap the rest before and after.
	head := -uintptr(p) & (chunkMem - 1)
	lo := unsafe.Add(p, head)
	if head > 0 {
		unix.MunmapPtr(p, head)
	}
	if tail := n - head - chunkMem; tail > 0 {
		unix.MunmapPtr(unsafe.Add(lo, chunkMem), tail)
	}
	m := unsafe.Slice((*byte)(lo), chunkMem)
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE) // only advice: the memory works without
	return m, func() { unix.MunmapPtr(lo, chunkMem) }
}

// readChunk reads len(b) bytes at offset off of f, as f.ReadAt does, but
// with raw system calls, which keep the goroutine's processor (P) for
// the read instead of handing it over: a 2 MiB read takes about a
// millisecond, long enough for the runtime's monitor to move the P to
// another thread, which must be woken, and the reader then parks its own
// thread when it returns to a P that is busy. With the reads ahead
// running on both processors, those hand-offs were half of sframe
// report's runs: 750-1,000 thread switches instead of 150-200, and the
// run a third slower. A read that waits for a disk holds its processor
// meanwhile; the decoding waits for that read anyway.
//
// On 32-bit systems, whose pread64 takes the offset in two words, it is
// f.ReadAt.
func readChunk(f *os.File, b []byte, off int64) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil || unsafe.Sizeof(uintptr(0)) < 8 {
		return f.ReadAt(b, off)
	}
	n := 0
	var rerr error
	cerr := rc.Read(func(fd uintptr) bool {
		for n < len(b) {
			m, _, e := unix.RawSyscall6(unix.SYS_PREAD64, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), uintptr(off+int64(n)), 0, 0)
			switch {
			case e == unix.EINTR:
				continue
			case e != 0:
				rerr = e
				return true
			case m == 0:
				rerr = io.EOF
				return true
			}
			n += int(m)
		}
		return true
	})
	if rerr == nil {
		rerr = cerr
	}
	return n, rerr
}
