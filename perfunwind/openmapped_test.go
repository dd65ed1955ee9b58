//go:build linux

package perfunwind

import (
	"bytes"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/procmaps"
	"github.com/sframekit/sframekit/internal/testprog"
)

// TestOpenMappedOnlyTheRecordedFile: a recording's file found nowhere
// else is read from the running process that maps it (openMapped) only
// when it is the recorded one: the device and inode of the MMAP2 record
// as the process maps them at the recorded range, or the build ID an
// MMAP record carries; never on the build ID of the recording's table
// (read at the path on this machine), another inode or device (the
// process id reused by another process, another file), nor for a
// recording of another machine or under --symfs.
func TestOpenMappedOnlyTheRecordedFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: reads /proc/PID/map_files")
	}
	exe := testprog.Build(t, "testdata/nsloop.c", "-O1")
	cmd := exec.Command(exe)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Its text mapping, once the loader has made it.
	var text arch.Mapping
	for deadline := time.Now().Add(time.Minute); text.Inode == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		maps, _ := procmaps.Read(cmd.Process.Pid)
		for _, m := range maps {
			if m.Path == exe && m.Exec() {
				text = m
			}
		}
	}
	if text.Inode == 0 {
		t.Fatalf("no text mapping of %s", exe)
	}
	major, minor, ok := procmaps.DevNumbers(text.Dev)
	if !ok {
		t.Fatalf("device %q", text.Dev)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	_, own, err := readELFInfo(bytes.NewReader(b), int64(len(b)))
	if err != nil || len(own) == 0 {
		t.Fatalf("build ID of %s: %x, %v", exe, own, err)
	}
	other := append(bytes.Clone(own[:len(own)-1]), own[len(own)-1]^1)
	// The recorded path holds nothing on this machine (a file of
	// another mount namespace).
	name := "/nonexistent" + exe
	fid := fileID{major, minor, text.Inode}
	at := &liveMapping{uint32(cmd.Process.Pid), text.Start, text.End}
	for _, c := range []struct {
		what  string
		opts  Options
		id    []byte
		fid   fileID
		at    *liveMapping
		found bool
	}{
		{"device and inode", Options{}, nil, fid, at, true},
		{"MMAP record's build ID", Options{}, own, fileID{}, at, true},
		{"another inode", Options{}, nil, fileID{major, minor, text.Inode + 1}, at, false},
		{"another device", Options{}, nil, fileID{major + 1, minor, text.Inode}, at, false},
		{"another range", Options{}, nil, fid, &liveMapping{at.pid, at.start, at.end + 0x1000}, false},
		{"another build ID", Options{}, other, fileID{}, at, false},
		{"the table's build ID only", Options{BuildIDs: map[string][]byte{name: own}}, nil, fileID{}, at, false},
		{"nothing recorded", Options{}, nil, fileID{}, at, false},
		{"another machine", Options{SameMachine: false}, nil, fid, at, false},
		{"symfs", Options{SymFS: t.TempDir()}, nil, fid, at, false},
	} {
		t.Run(c.what, func(t *testing.T) {
			opts := c.opts
			opts.Arch = arch.Host()
			opts.SameMachine = c.what != "another machine"
			s, err := NewSession(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			f := s.file(name, c.id, c.fid, c.at)
			if found := f.Path != ""; found != c.found {
				t.Errorf("found %v (%q, %v), want %v", found, f.Path, f.Err, c.found)
			}
			if c.found && !bytes.Equal(f.BuildID, own) {
				t.Errorf("build ID %x, want %x", f.BuildID, own)
			}
		})
	}
	// The first process to map it has exited; a later one still runs.
	s, err := NewSession(Options{Arch: arch.Host(), SameMachine: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if f := s.file(name, nil, fid, &liveMapping{1 << 30, at.start, at.end}); f.Path != "" {
		t.Fatalf("found %q in a process that does not exist", f.Path)
	}
	if f := s.file(name, nil, fid, at); f.Path == "" {
		t.Errorf("not found in the process still running, after one that exited: %v", f.Err)
	}
}
