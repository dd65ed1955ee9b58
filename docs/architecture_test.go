// Package docs holds no code: its test keeps docs/ARCHITECTURE.md's table of
// imports equal to the package graph that `go list` derives from the code, so
// the document a new engineer reads first cannot drift from the tree.
package docs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/sframekit/sframekit/"

// goListImports returns, for every package of the module, the packages of
// the module it imports (tests excluded), sorted.
func goListImports(t *testing.T) map[string][]string {
	t.Helper()
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		pkg := strings.TrimPrefix(f[0], module)
		if pkg == "docs" {
			continue
		}
		var ours []string
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				ours = append(ours, strings.TrimPrefix(imp, module))
			}
		}
		slices.Sort(ours)
		graph[pkg] = ours
	}
	return graph
}

// docImports reads the table under the "## Imports" heading of
// ARCHITECTURE.md: one row per package, `pkg` | `a`, `b` (or "—").
func docImports(t *testing.T) map[string][]string {
	t.Helper()
	text, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "\n## Imports\n")
	if !ok {
		t.Fatal("ARCHITECTURE.md has no \"## Imports\" section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 4 || !strings.Contains(cells[1], "`") {
			continue
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		var ours []string
		for _, imp := range strings.Split(cells[2], ",") {
			imp = strings.Trim(strings.TrimSpace(imp), "`")
			if imp != "" && imp != "—" {
				ours = append(ours, imp)
			}
		}
		slices.Sort(ours)
		if _, dup := graph[pkg]; dup {
			t.Errorf("ARCHITECTURE.md lists %s twice", pkg)
		}
		graph[pkg] = ours
	}
	return graph
}

// TestArchitectureImports fails when ARCHITECTURE.md's table of imports
// differs from the code's: a package missing or extra, or an edge that one
// side has and the other lacks.
func TestArchitectureImports(t *testing.T) {
	code := goListImports(t)
	doc := docImports(t)
	for pkg, imps := range code {
		d, ok := doc[pkg]
		if !ok {
			t.Errorf("package %s is missing from ARCHITECTURE.md's imports table (it imports %v)", pkg, imps)
			continue
		}
		for _, imp := range imps {
			if !slices.Contains(d, imp) {
				t.Errorf("%s imports %s; ARCHITECTURE.md does not say so", pkg, imp)
			}
		}
		for _, imp := range d {
			if !slices.Contains(imps, imp) {
				t.Errorf("ARCHITECTURE.md says %s imports %s; it does not", pkg, imp)
			}
		}
	}
	for pkg := range doc {
		if _, ok := code[pkg]; !ok {
			t.Errorf("ARCHITECTURE.md lists %s, which is not a package of the module", pkg)
		}
	}
}
