package elffile

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// unguarded lists the methods of debug/elf that read section bytes
// without elffile's bounds (a compressed section decompressed whole to
// the size it declares, or a nil ReaderAt called): outside elffile the
// tree reads sections through SectionData, SectionReader, ReadSectionAt,
// DWARF, Symbols and DynamicSymbols instead.
var unguarded = map[string][]string{
	"Section": {"Data", "Open", "ReadAt"},
	"File":    {"Symbols", "DynamicSymbols", "DWARF", "DynString", "DynValue", "ImportedSymbols", "ImportedLibraries", "DynamicVersions", "DynamicVersionNeeds"},
}

// TestGuardedReadsOnly type-checks every package of the module (its
// non-test files, for this GOOS) and fails on a use of one of the
// unguarded methods of *elf.Section or *elf.File outside elffile,
// called directly or through a type embedding them (elffile.File).
func TestGuardedReadsOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool")
	}
	cmd := exec.Command(gotool, "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Module", "./...")
	cmd.Dir = ".."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath, Dir, Export string
		GoFiles                 []string
		Module                  *struct{ Path string }
	}
	exports := map[string]string{}
	var ours []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/sframekit/sframekit" {
			ours = append(ours, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if e := exports[path]; e != "" {
			return os.Open(e)
		}
		return nil, errors.New("no export data for " + path)
	})
	checked := 0
	for _, p := range ours {
		if p.ImportPath == "github.com/sframekit/sframekit/elffile" {
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
		conf := types.Config{Importer: imp, Error: func(error) {}}
		if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
			t.Fatalf("type-checking %s: %v", p.ImportPath, err)
		}
		checked++
		for expr, sel := range info.Selections {
			if sel.Kind() == types.FieldVal {
				continue
			}
			if through := elfTypeOf(sel); through != "" {
				t.Errorf("%s: (*elf.%s).%s reads section bytes unbounded: use elffile's guarded readers", fset.Position(expr.Sel.Pos()), through, sel.Obj().Name())
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d packages checked", checked)
	}
}

// elfTypeOf returns "Section" or "File" when sel selects one of the
// unguarded methods of that debug/elf type, on it or on a type that
// embeds it; else "".
func elfTypeOf(sel *types.Selection) string {
	name := sel.Obj().Name()
	typ := sel.Recv()
	idx := sel.Index()
	for i := 0; ; i++ {
		if p, ok := typ.(*types.Pointer); ok {
			typ = p.Elem()
		}
		if n, ok := typ.(*types.Named); ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "debug/elf" {
			for _, m := range unguarded[n.Obj().Name()] {
				if m == name {
					return n.Obj().Name()
				}
			}
		}
		if i >= len(idx)-1 {
			return ""
		}
		st, ok := typ.Underlying().(*types.Struct)
		if !ok {
			return ""
		}
		typ = st.Field(idx[i]).Type()
	}
}
