package unwind

import (
	"os"
	"testing"
)

// TestCacheRetain: Retain drops the tables of the paths it rejects.
func TestCacheRetain(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache()
	c.Load([]string{exe, "/nonexistent"})
	if len(c.tables) != 2 {
		t.Fatalf("%d entries, want 2", len(c.tables))
	}
	c.Retain(func(path string) bool { return path == exe })
	if len(c.tables) != 1 {
		t.Fatalf("%d entries after Retain, want 1", len(c.tables))
	}
	for k := range c.tables {
		if k.path != exe {
			t.Errorf("kept %s", k.path)
		}
	}
}
