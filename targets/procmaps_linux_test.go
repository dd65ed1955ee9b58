package targets

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestReadMaps(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	maps, err := ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(exe)
	if err != nil {
		t.Fatal(err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	found := false
	for _, m := range maps {
		if m.End <= m.Start || len(m.Perm) != 4 {
			t.Errorf("bad entry %+v", m)
		}
		if m.Path == exe && strings.Contains(m.Perm, "x") && m.Inode == ino && strings.Contains(m.Dev, ":") {
			found = true
		}
	}
	if !found {
		t.Errorf("no executable mapping of %s in %d entries", exe, len(maps))
	}
	if _, err := ReadMaps(-1); err == nil {
		t.Error("ReadMaps(-1): no error")
	}
}
