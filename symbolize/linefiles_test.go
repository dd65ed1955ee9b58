package symbolize

import (
	"debug/dwarf"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestLineFileNames builds a program from a relative path, with a header
// reached through "../", by each compiler and DWARF version, and checks
// the file names of its lines and inlined calls: as libdw forms them
// (eu-stack's), the directory entry joined to the name as it stands.
// gcc's DWARF 5 puts the source in directory 1 ("sub"); its DWARF 4 has
// comp_dir as directory 0 and "sub" as 1; clang's DWARF 5 puts it in
// directory 0 (the compilation directory) as "sub/main.c". debug/dwarf
// joined each to the compilation directory and cleaned the result
// ("/tmp/.../inc/h.h" for gcc's DWARF 4 "sub/../inc/h.h").
func TestLineFileNames(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"inc/h.h":    "static inline __attribute__((always_inline)) int twice(int x) { return x * 2; }\n",
		"sub/main.c": "#include \"../inc/h.h\"\nvolatile int v;\n__attribute__((noinline)) int f(void) {\n\treturn twice(v);\n}\nint main(void) { return f(); }\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		cc, flag     string
		file, called string
	}{
		{"gcc", "-gdwarf-5", "sub/main.c", "sub/../inc/h.h"},
		{"gcc", "-gdwarf-4", "sub/main.c", "sub/../inc/h.h"},
		{"clang", "-gdwarf-5", dir + "/sub/main.c", "sub/../inc/h.h"},
		{"clang", "-gdwarf-4", "sub/main.c", "sub/../inc/h.h"},
	} {
		t.Run(c.cc+c.flag, func(t *testing.T) {
			testprog.NeedTool(t, c.cc)
			exe := filepath.Join(dir, c.cc+c.flag)
			cmd := exec.Command(c.cc, "-g", c.flag, "-O2", "-o", exe, "sub/main.c")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "PWD="+dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", c.cc, err, out)
			}
			f, err := elf.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			syms, _ := f.Symbols()
			var addr uint64
			for _, s := range syms {
				if s.Name == "f" {
					addr = s.Value
				}
			}
			s := New()
			found := false
			for a := addr; a < addr+32; a++ {
				calls := s.Inlines(exe, a)
				if len(calls) == 0 {
					continue
				}
				found = true
				sym, _ := s.Lookup(exe, a)
				if sym.File != c.called || calls[0].File != c.file {
					t.Errorf("%#x: at %s, inlined at %s; want %s, %s", a, sym.File, calls[0].File, c.called, c.file)
				}
			}
			if !found {
				t.Errorf("no inlined call in f at %#x", addr)
			}
		})
	}
}

// TestLineFileNamesCorrupt reads the first line tables of the C
// library's debug file with each byte of their headers replaced by 0x00,
// 0x7f and 0xff in turn: no panic, whatever the names.
func TestLineFileNamesCorrupt(t *testing.T) {
	dbg := New().DebugFile("/lib/x86_64-linux-gnu/libc.so.6")
	if dbg == "" {
		t.Skip("no debug file for libc.so.6 (libc6-dbg)")
	}
	f, err := elf.Open(dbg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	secs, ok := readLineSections(f)
	if !ok {
		t.Fatal("no .debug_line")
	}
	dw, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	r := dw.Reader()
	units := 0
	for e, err := r.Next(); e != nil && err == nil && units < 20; e, err = r.Next() {
		r.SkipChildren()
		off, ok := e.Val(dwarf.AttrStmtList).(int64)
		if !ok {
			continue
		}
		units++
		dir, hasDir := e.Val(dwarf.AttrCompDir).(string)
		if names := lineFileNames(secs, off, dir, hasDir); len(names) < 2 {
			t.Fatalf("unit at %#x: names %q", e.Offset, names)
		}
		for i := off; i < off+1024 && i < int64(len(secs.line)); i++ {
			orig := secs.line[i]
			for _, b := range []byte{0, 0x7f, 0xff} {
				secs.line[i] = b
				lineFileNames(secs, off, dir, hasDir)
			}
			secs.line[i] = orig
		}
	}
}
