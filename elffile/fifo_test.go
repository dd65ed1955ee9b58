//go:build linux

package elffile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// TestOpenFIFO checks that a pipe given by name (as <(cmd) or /dev/stdin
// are) is read by OpenArg, where debug/elf alone fails with "illegal
// seek", and refused by Open, at once, without a writer. The writer opens
// the pipe when it likes, as the command of <(cmd) does: before OpenArg
// (waiting in open for a reader) or after. OpenArg must open the pipe's
// read end once: a second open lets a writer in at the first and cuts it
// off at its close (EPIPE), which lost the data or left OpenArg waiting
// for a writer gone, when the writer wrote between the two.
func TestOpenFIFO(t *testing.T) {
	whole, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("writer first %v", early), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(path, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
			if f, err := Open(path); !errors.Is(err, sysfile.ErrNotRegular) {
				t.Errorf("Open of a FIFO: %v, want ErrNotRegular", err)
				if err == nil {
					f.Close()
				}
			}
			closes := watchReadCloses(t, path)
			opened := make(chan struct{})
			written := make(chan error, 1)
			writer := func() {
				w, err := os.OpenFile(path, os.O_WRONLY, 0)
				close(opened)
				if err != nil {
					written <- err
					return
				}
				_, err = w.Write(whole)
				w.Close()
				written <- err
			}
			if early {
				// A writer waiting in open: the first open of the read
				// end lets it in.
				go writer()
			}
			got := make(chan *File, 1)
			go func() {
				f, err := OpenArg(path)
				if err != nil {
					t.Error(err)
				}
				got <- f
			}()
			if !early {
				go writer()
			}
			var f *File
			select {
			case f = <-got:
			case <-time.After(time.Minute):
				// Let it out (a writer that opens and closes at once),
				// so that it ends before the test.
				if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
				<-got
				t.Fatal("OpenArg still waiting for a writer after a minute (the writer came and went)")
			}
			<-opened
			if err := <-written; err != nil {
				t.Errorf("the writer: %v", err)
			}
			if n := closes(); n != 1 {
				t.Errorf("OpenArg opened and closed the pipe's read end %d times, want 1", n)
			}
			if f == nil {
				return
			}
			defer f.Close()
			if FindSFrame(f.File, "") == nil {
				t.Error("no .sframe read from the pipe")
			}
		})
	}
}

// watchReadCloses watches path with inotify; the function it returns
// counts the closes of descriptors opened on it without write access so
// far (IN_CLOSE_NOWRITE; opens are watched too, since inotify merges an
// event with the same one queued just before it).
func watchReadCloses(t *testing.T, path string) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Skipf("inotify: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_CLOSE_NOWRITE); err != nil {
		t.Skipf("inotify: %v", err)
	}
	return func() int {
		n := 0
		buf := make([]byte, 4096)
		for {
			k, err := unix.Read(fd, buf)
			if err != nil || k <= 0 {
				return n
			}
			for off := 0; off+unix.SizeofInotifyEvent <= k; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_CLOSE_NOWRITE != 0 {
					n++
				}
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}
