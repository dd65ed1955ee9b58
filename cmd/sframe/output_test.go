package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/corpus"
	"github.com/sframekit/sframekit/internal/testprog"
)

// corpusCopy copies the corpus's x86_64 v3 basic-O2.elf (which has both
// .eh_frame and .sframe) to dir with the permissions perm.
func corpusCopy(t *testing.T, dir string, perm fs.FileMode) string {
	t.Helper()
	data := mustRead(t, filepath.Join(corpus.Dir(t), "x86_64", "v3", "basic-O2.elf"))
	p := filepath.Join(dir, "in.elf")
	if err := os.WriteFile(p, data, perm); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, perm)
	return p
}

func isELF(b []byte) bool { return len(b) > 4 && string(b[:4]) == "\x7fELF" }

// TestOutputSymlinks: gen, convert and stack --pprof follow a symbolic
// link at the output path and replace its target, keeping the link.
func TestOutputSymlinks(t *testing.T) {
	dir := t.TempDir()
	in := corpusCopy(t, dir, 0o755)
	for _, args := range [][]string{
		{"gen"},
		{"convert", "--to-version", "2"},
	} {
		target := filepath.Join(dir, args[0]+".target")
		os.WriteFile(target, []byte("old"), 0o644)
		link := filepath.Join(dir, args[0]+".link")
		os.Symlink(filepath.Base(target), link)
		if _, errs, rc := runCLI(t, append(args, "-o", link, in)...); rc != 0 {
			t.Fatalf("%v: exit %d: %s", args, rc, errs)
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s -o LINK replaced the link", args[0])
		}
		if !isELF(mustRead(t, target)) {
			t.Errorf("%s -o LINK did not write the link's target", args[0])
		}
		if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: output mode %v, want the input's 0755", args[0], fi.Mode().Perm())
		}
	}

	p, _ := startStackProg(t)
	target := filepath.Join(dir, "stack.pb.gz")
	link := filepath.Join(dir, "stack.link")
	os.Symlink(target, link)
	if _, errs, rc := runCLI(t, "stack", "--pprof", link, strconv.Itoa(p.PID())); rc != 0 {
		t.Fatalf("stack --pprof: exit %d: %s", rc, errs)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("stack --pprof LINK replaced the link")
	}
	f, err := os.Open(target)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := profile.Parse(f); err != nil {
		t.Errorf("the link's target is no profile: %v", err)
	}
}

// TestOutputNonRegular: a FIFO, a link to a pipe through /proc/self/fd
// and a device are written to, never replaced; a device's write error is
// reported (exit 1) under the name given.
func TestOutputNonRegular(t *testing.T) {
	dir := t.TempDir()
	in := corpusCopy(t, dir, 0o644)

	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Held open for writing, so that the reader never waits for a writer
	// that does not come (when the FIFO is replaced).
	holder, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	// The reader opens the FIFO before anything is written, while the
	// holder keeps it from waiting, and reads to the end.
	opened := make(chan bool)
	go func() {
		r, err := os.Open(fifo)
		opened <- true
		if err != nil {
			got <- nil
			return
		}
		defer r.Close()
		b, _ := io.ReadAll(r)
		got <- b
	}()
	<-opened
	_, errs, rc := runCLI(t, "gen", "-o", fifo, in)
	holder.Close()
	if rc != 0 {
		t.Fatalf("gen -o FIFO: exit %d: %s", rc, errs)
	}
	if b := <-got; !isELF(b) {
		t.Errorf("the FIFO's reader got %d bytes, no ELF file", len(b))
	}
	if fi, _ := os.Lstat(fifo); fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("gen -o FIFO replaced the FIFO")
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
		got <- b
	}()
	_, errs, rc = runCLI(t, "convert", "--to-version", "2", "-o", link, in)
	w.Close()
	if rc != 0 {
		t.Fatalf("convert -o LINK-TO-PIPE: exit %d: %s", rc, errs)
	}
	if b := <-got; !isELF(b) {
		t.Errorf("the pipe's reader got %d bytes, no ELF file", len(b))
	}
	if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("convert -o LINK-TO-PIPE replaced the link")
	}

	// As root, a copy of /dev/full (root could replace the real one).
	full := "/dev/full"
	if os.Geteuid() == 0 {
		full = filepath.Join(dir, "full")
		if err := unix.Mknod(full, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 7))); err != nil {
			t.Fatalf("mknod: %v", err)
		}
	}
	for _, cmd := range []string{"gen", "convert"} {
		args := []string{cmd, "-o", full, in}
		if cmd == "convert" {
			args = append([]string{cmd, "--to-version", "2"}, args[1:]...)
		}
		_, errs, rc := runCLI(t, args...)
		if rc != 1 || !strings.Contains(errs, full+": write: no space left on device") {
			t.Errorf("%s -o %s: exit %d, %q; want 1 and the write error", cmd, full, rc, errs)
		}
		if fi, err := os.Lstat(full); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
			t.Fatalf("%s -o %s replaced the device", cmd, full)
		}
	}
}

// TestOutputMessages: -o DIR says the path is a directory; errors name
// the path given, never the temporary file; -o - writes the file to
// standard output and the summary to standard error; a bare section is
// written with mode 0644 and an ELF file with its input's.
func TestOutputMessages(t *testing.T) {
	dir := t.TempDir()
	in := corpusCopy(t, dir, 0o750)
	_, errs, rc := runCLI(t, "gen", "-o", dir, in)
	if rc != 1 || !strings.Contains(errs, dir+": is a directory") {
		t.Errorf("gen -o DIR: exit %d, %q", rc, errs)
	}
	missing := filepath.Join(dir, "no", "such", "out")
	_, errs, rc = runCLI(t, "gen", "-o", missing, in)
	if rc != 1 || !strings.Contains(errs, missing+": ") || strings.Contains(errs, ".tmp") {
		t.Errorf("gen -o %s: exit %d, %q", missing, rc, errs)
	}
	out, errs, rc := runCLI(t, "gen", "-o", "-", in)
	if rc != 0 || !isELF([]byte(out)) || !strings.Contains(errs, "-: SFRAME_VERSION_3 loadable .sframe") {
		t.Errorf("gen -o -: exit %d, %d bytes on stdout, stderr %q", rc, len(out), errs)
	}
	raw := filepath.Join(dir, "raw")
	if _, errs, rc := runCLI(t, "gen", "--raw", "-o", raw, in); rc != 0 {
		t.Fatalf("gen --raw: %d %s", rc, errs)
	}
	elfOut := filepath.Join(dir, "out")
	if _, errs, rc := runCLI(t, "gen", "-o", elfOut, in); rc != 0 {
		t.Fatalf("gen: %d %s", rc, errs)
	}
	for p, want := range map[string]fs.FileMode{raw: 0o644, elfOut: 0o750} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

// TestGenMessages: gen says (on stderr, as a note, exit 0) that the
// input's SFrame section is replaced, and counts in the singular for
// one.
func TestGenMessages(t *testing.T) {
	dir := t.TempDir()
	in := corpusCopy(t, dir, 0o755)
	out, errs, rc := runCLI(t, "gen", "-o", filepath.Join(dir, "out"), in)
	if rc != 0 || !strings.Contains(errs, "note: "+in+" already has an SFrame section (.sframe, SFRAME_VERSION_3)") {
		t.Errorf("gen over an existing .sframe: exit %d, stderr %q", rc, errs)
	}
	if strings.Contains(out, "function(s)") {
		t.Errorf("gen: %q", out)
	}
	// A program of one function with CFI (the start files have none
	// with -nostartfiles).
	testprog.NeedTool(t, "gcc")
	src := filepath.Join(dir, "one.c")
	os.WriteFile(src, []byte("void _start(void) { for (;;) ; }\n"), 0o644)
	one := filepath.Join(dir, "one")
	if o, e, rc := runCmd(t, nil, "gcc", "-O2", "-nostdlib", "-static", "-o", one, src); rc != 0 {
		t.Fatalf("gcc: %s%s", o, e)
	}
	out, errs, rc = runCLI(t, "gen", "--stats", "-o", one+".gen", one)
	if rc != 0 || !strings.Contains(out, ", 1 function, ") || strings.Contains(out, "1 functions") || strings.Contains(errs, "already has") {
		t.Errorf("gen of one function: exit %d, %q %q", rc, out, errs)
	}
}
