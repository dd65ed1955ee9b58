package procmaps

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/internal/sysfile"
)

// TestParseLine checks lines of /proc/PID/maps: paths with spaces,
// deleted files, anonymous memory, special areas, bad lines.
func TestParseLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want arch.Mapping
		ok   bool
	}{
		{"7f00-7f10 r-xp 00001000 fe:01 1234       /tmp/a dir/lib x.so (deleted)", arch.Mapping{Start: 0x7f00, End: 0x7f10, Offset: 0x1000, Perm: "r-xp", Dev: "fe:01", Inode: 1234, Path: "/tmp/a dir/lib x.so (deleted)"}, true},
		{"55d0c8a00000-55d0c8a01000 r-xp 00001000 08:01 1234                       /usr/bin/my prog", arch.Mapping{Start: 0x55d0c8a00000, End: 0x55d0c8a01000, Offset: 0x1000, Perm: "r-xp", Dev: "08:01", Inode: 1234, Path: "/usr/bin/my prog"}, true},
		{"7f0000000000-7f0000002000 rw-p 00000000 00:00 0 ", arch.Mapping{Start: 0x7f0000000000, End: 0x7f0000002000, Offset: 0, Perm: "rw-p", Dev: "00:00", Inode: 0, Path: ""}, true},
		{"7f0000000000-7f0000002000 rw-p 00000000 00:00 0", arch.Mapping{Start: 0x7f0000000000, End: 0x7f0000002000, Offset: 0, Perm: "rw-p", Dev: "00:00", Inode: 0, Path: ""}, true},
		{"7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]", arch.Mapping{Start: 0x7ffc00000000, End: 0x7ffc00021000, Offset: 0, Perm: "rw-p", Dev: "00:00", Inode: 0, Path: "[stack]"}, true},
		{"7f00 rw-p 0 00:00 0", arch.Mapping{}, false},
		{"zzzz-7ffc00021000 rw-p 00000000 00:00 0", arch.Mapping{}, false},
		{"7ffc00021000-7ffc00000000 rw-p 00000000 00:00 0", arch.Mapping{}, false},
		{"7f00-7f10 rw-p 00000000 00:00", arch.Mapping{}, false},
		{"7f00-7f10 rw-p 00000000 00:00 x /a", arch.Mapping{}, false},
	} {
		got, err := ParseLine(c.line)
		if (err == nil) != c.ok || c.ok && got != c.want {
			t.Errorf("%q: %+v %v, want %+v (ok %v)", c.line, got, err, c.want, c.ok)
		}
	}
	if m := (arch.Mapping{Perm: "r-xp"}); !m.Exec() {
		t.Error("r-xp not executable")
	}
	if m := (arch.Mapping{Perm: "rw"}); m.Exec() {
		t.Error("rw executable")
	}
}

// TestParseBadLine checks that a bad line fails the file, naming its
// line number.
func TestParseBadLine(t *testing.T) {
	_, err := Parse([]byte("7f00-7f10 r-xp 00001000 fe:01 1234 /a\n\nbad\n"))
	if err == nil || !strings.Contains(err.Error(), "maps line 3") {
		t.Errorf("error %v, want one naming line 3", err)
	}
}

// TestRead reads this process's maps and finds its executable mapped
// with its inode and device, and the vDSO; a process that does not exist
// is an error.
func TestRead(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	for _, pid := range []int{0, os.Getpid()} {
		maps, err := Read(pid)
		if err != nil {
			t.Fatal(err)
		}
		found, vdso := false, false
		for _, m := range maps {
			if m.End <= m.Start || len(m.Perm) != 4 {
				t.Errorf("bad entry %+v", m)
			}
			if m.Path == exe && m.Exec() && m.Inode == ino && strings.Contains(m.Dev, ":") {
				found = true
			}
			vdso = vdso || m.Path == "[vdso]"
		}
		if !found || !vdso {
			t.Errorf("pid %d: executable mapping of %s found %v, [vdso] %v, in %d entries", pid, exe, found, vdso, len(maps))
		}
	}
	if _, err := Read(-1); err == nil {
		t.Error("Read(-1): no error")
	}
}

// TestDevNumbers reads the device field as /proc/PID/maps writes it (two
// hexadecimal digits at least), and a file's device as Read gives it must
// be the one sysfile.Device reads from stat, as perfunwind compares them;
// but on btrfs, whose stat gives a subvolume's device.
func TestDevNumbers(t *testing.T) {
	for _, c := range []struct {
		dev      string
		maj, min uint32
		ok       bool
	}{
		{"fe:01", 0xfe, 1, true}, {"00:2a", 0, 0x2a, true}, {"103:1f4", 0x103, 0x1f4, true},
		{"fe01", 0, 0, false}, {"fe:", 0, 0, false}, {"x:1", 0, 0, false}, {"", 0, 0, false},
	} {
		maj, min, ok := DevNumbers(c.dev)
		if maj != c.maj || min != c.min || ok != c.ok {
			t.Errorf("DevNumbers(%q) = %x, %x, %v; want %x, %x, %v", c.dev, maj, min, ok, c.maj, c.min, c.ok)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var fs syscall.Statfs_t
	if syscall.Statfs(exe, &fs) == nil && fs.Type == 0x9123683e {
		t.Skip("btrfs: stat gives the subvolume's device, maps the file system's")
	}
	fi, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	maj, min, ok := sysfile.Device(fi)
	maps, err := Read(0)
	if err != nil || !ok {
		t.Fatal(err, ok)
	}
	for _, m := range maps {
		if m.Path == exe && m.Exec() {
			if a, b, ok := DevNumbers(m.Dev); !ok || a != maj || b != min {
				t.Errorf("%s: device %q in maps, %x:%x by stat", exe, m.Dev, maj, min)
			}
			return
		}
	}
	t.Errorf("no executable mapping of %s", exe)
}

// FuzzParse feeds arbitrary text to Parse: it may not panic, and what it
// returns are mappings whose end is not below their start.
func FuzzParse(f *testing.F) {
	f.Add([]byte("7f00-7f10 r-xp 00001000 fe:01 1234       /tmp/a dir/lib x.so (deleted)\n7f10-7f20 rw-p 00000000 00:00 0 \n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ms, err := Parse(data)
		for _, m := range ms {
			if err == nil && m.End < m.Start {
				t.Fatalf("mapping %+v", m)
			}
		}
	})
}
