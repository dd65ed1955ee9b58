package outfile

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func readBack(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTemp fails when a temporary file was left in dir.
func noTemp(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

func TestRegularFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out")
	// A new file gets the permissions asked for, whatever the umask.
	old := syscall.Umask(0o077)
	err := Write(p, []byte("one"), 0o755, nil)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o755 || readBack(t, p) != "one" {
		t.Errorf("new file: mode %v, %q", fi.Mode(), readBack(t, p))
	}
	// An existing file is replaced: a reader holding the old one keeps
	// its contents, and the new one has the new permissions.
	held, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := Write(p, []byte("two!"), 0o644, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(held); string(b) != "one" {
		t.Errorf("the old file changed under its reader: %q", b)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o644 || readBack(t, p) != "two!" {
		t.Errorf("replaced file: mode %v, %q", fi.Mode(), readBack(t, p))
	}
	noTemp(t, dir)
}

// TestSymlinks: a link is followed, its target replaced and the link
// kept, through chains and to a target that does not exist yet.
func TestSymlinks(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "sub", "target")
	os.Mkdir(filepath.Dir(target), 0o755)
	os.WriteFile(target, []byte("old"), 0o600)
	link1 := filepath.Join(dir, "link1")
	link2 := filepath.Join(dir, "link2")
	os.Symlink("sub/target", link1) // relative to the link's directory
	os.Symlink(link1, link2)
	if err := Write(link2, []byte("new"), 0o644, nil); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{link1, link2} {
		if fi, err := os.Lstat(l); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symbolic link", l)
		}
	}
	if got := readBack(t, target); got != "new" {
		t.Errorf("target holds %q", got)
	}
	noTemp(t, filepath.Dir(target))
	noTemp(t, dir)

	dangling := filepath.Join(dir, "dangling")
	os.Symlink("created", dangling)
	if err := Write(dangling, []byte("x"), 0o644, nil); err != nil {
		t.Fatal(err)
	}
	if got := readBack(t, filepath.Join(dir, "created")); got != "x" {
		t.Errorf("dangling link's target holds %q", got)
	}
	loop := filepath.Join(dir, "loop")
	os.Symlink("loop", loop)
	if err := Write(loop, []byte("x"), 0o644, nil); err == nil || !strings.Contains(err.Error(), loop) {
		t.Errorf("link loop: %v", err)
	}
}

// TestFIFOAndPipes: a FIFO, and a link to a pipe through /proc/self/fd
// (which readlink names "pipe:[N]"), are written to and stay what they
// are.
func TestFIFOAndPipes(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	// Held open for writing, so that the reader never waits for a writer
	// that does not come (when the FIFO is replaced).
	holder, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	// The reader opens the FIFO before anything is written, while the
	// holder keeps it from waiting, and reads to the end.
	opened := make(chan bool)
	go func() {
		r, err := os.Open(fifo)
		opened <- true
		if err != nil {
			got <- ""
			return
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	<-opened
	err = Write(fifo, []byte("through the fifo"), 0o644, nil)
	holder.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the fifo" {
		t.Errorf("FIFO reader got %q", s)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi.Mode(), err)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	link := filepath.Join(dir, "stdout")
	os.Symlink(fmt.Sprintf("/proc/self/fd/%d", w.Fd()), link)
	go func() {
		b, _ := io.ReadAll(r)
		got <- string(b)
	}()
	err = Write(link, []byte("through the pipe"), 0o644, nil)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the pipe" {
		t.Errorf("pipe reader got %q", s)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link to the pipe was replaced")
	}
}

// TestDevices: a device node is written to, never replaced, and its
// write errors are reported under the name given: /dev/full's ENOSPC.
// As root, on a copy of /dev/full made in a temporary directory (root
// could replace the real one).
func TestDevices(t *testing.T) {
	full := "/dev/full"
	if os.Geteuid() == 0 {
		full = filepath.Join(t.TempDir(), "full")
		if err := unix.Mknod(full, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 7))); err != nil {
			t.Skipf("mknod: %v", err)
		}
	} else if _, err := os.Stat(full); err != nil {
		t.Skip(err)
	}
	err := Write(full, []byte("data"), 0o644, nil)
	if err == nil || !strings.Contains(err.Error(), full+": write: no space left on device") {
		t.Errorf("writing to %s: %v", full, err)
	}
	if fi, err := os.Lstat(full); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		t.Errorf("%s is no longer a character device: %v", full, fi.Mode())
	}
	if err := Write(os.DevNull, []byte("data"), 0o644, nil); err != nil {
		t.Errorf("writing to %s: %v", os.DevNull, err)
	}
}

func TestStdoutAndErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := Write("-", []byte("to stdout"), 0o644, &buf); err != nil || buf.String() != "to stdout" {
		t.Errorf("-: %q, %v", buf.String(), err)
	}
	dir := t.TempDir()
	if err := Write(dir, []byte("x"), 0o644, nil); err == nil || err.Error() != dir+": is a directory" {
		t.Errorf("directory: %v", err)
	}
	missing := filepath.Join(dir, "no", "such", "dir", "out")
	err := Write(missing, []byte("x"), 0o644, nil)
	if err == nil || !strings.HasPrefix(err.Error(), missing+": ") || strings.Contains(err.Error(), ".tmp") {
		t.Errorf("missing directory: %v (must name the path given, not a temporary file)", err)
	}
}

// TestCreateStreams: Create writes a regular file piece by piece into a
// temporary file; Abort leaves the old file as it was, Commit replaces
// it; a dangling link keeps being a link, to the file created.
func TestCreateStreams(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out")
	os.WriteFile(path, []byte("old"), 0o600)
	f, err := Create(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("a"))
	f.Abort()
	if got := readBack(t, path); got != "old" {
		t.Errorf("after Abort the file holds %q", got)
	}
	noTemp(t, dir)
	if f, err = Create(path, 0o644, nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"n", "e", "w"} {
		if _, err := f.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if got := readBack(t, path); got != "old" {
		t.Errorf("before Commit the file holds %q", got)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); readBack(t, path) != "new" || fi.Mode().Perm() != 0o644 {
		t.Errorf("after Commit: %q, mode %v", readBack(t, path), fi.Mode().Perm())
	}
	noTemp(t, dir)

	dangling := filepath.Join(dir, "dangling")
	os.Symlink("created", dangling)
	if f, err = Create(dangling, 0o644, nil); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(dangling); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Error("the dangling link was replaced")
	}
	if got := readBack(t, filepath.Join(dir, "created")); got != "x" {
		t.Errorf("dangling link's target holds %q", got)
	}
}
