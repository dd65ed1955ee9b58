package procmem

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/arch"
)

// TestReader reads this process's own memory: a readable buffer (by
// process_vm_readv), a page it may not read (PROT_NONE: through
// /proc/PID/mem, as a tracer reads a guard page), an address nothing maps
// (ErrUnmapped), and nothing after Close.
func TestReader(t *testing.T) {
	want := []byte("the bytes a walk would read")
	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(page)
	copy(page, want)
	if err := unix.Mprotect(page, unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	r := New(os.Getpid())
	for _, c := range []struct {
		what string
		addr uintptr
	}{{"readable", uintptr(unsafe.Pointer(&want[0]))}, {"PROT_NONE", uintptr(unsafe.Pointer(&page[0]))}} {
		got := make([]byte, len(want))
		if n, err := r.ReadAt(got, int64(c.addr)); err != nil || n != len(want) || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes %q, %v", c.what, n, got[:n], err)
		}
	}
	if n, err := Read(os.Getpid(), make([]byte, 8), 8); !errors.Is(err, arch.ErrUnmapped) {
		t.Errorf("address 8: %d bytes, %v, want ErrUnmapped", n, err)
	}
	r.Close()
	if _, err := r.ReadAt(make([]byte, 8), int64(uintptr(unsafe.Pointer(&want[0])))); err == nil {
		t.Error("read after Close")
	}
}
