// Package corpus locates the shared reference corpus for tests.
//
// Tests find it through SFRAMEKIT_CORPUS, defaulting to ../shared/corpus
// relative to the module root. When it is absent they skip, except under
// CI (the CI variable set), where a missing corpus is a failure: a green
// run that compared nothing would hide regressions. The skips are
// counted, and Main (or PrintSummary, from another TestMain) says at the
// end of a test binary's run how many tests skipped and why.
package corpus

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// skipped counts the tests Dir skipped in this test binary.
var skipped atomic.Int64

// Main runs the tests, prints the summary of PrintSummary and exits: the
// TestMain of a package whose tests use the corpus.
func Main(m *testing.M) {
	code := m.Run()
	PrintSummary()
	os.Exit(code)
}

// Summary is the line that says how many tests of this binary skipped
// for want of the corpus, and why; "" when none did.
func Summary() string {
	n := skipped.Load()
	if n == 0 {
		return ""
	}
	d, _ := Find()
	tests := "tests"
	if n == 1 {
		tests = "test"
	}
	return fmt.Sprintf("corpus: %d %s skipped: no reference corpus at %s (set SFRAMEKIT_CORPUS; see README.md, Tests)", n, tests, d)
}

// PrintSummary prints Summary, when there is one, where the user sees it:
// the terminal (/dev/tty) when there is one, since go test ./... shows
// nothing that a passing package's test binary writes on its standard
// output; else standard output (go test -v, go test in a package's
// directory, go test -json).
func PrintSummary() {
	line := Summary()
	if line == "" {
		return
	}
	var w io.Writer = os.Stdout
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		w = tty
	}
	fmt.Fprintln(w, line)
}

// Find returns the corpus directory and whether it exists, for callers
// such as fuzz seeders that use the corpus when present and do without it
// otherwise.
func Find() (string, bool) {
	d := os.Getenv("SFRAMEKIT_CORPUS")
	if d == "" {
		_, file, _, _ := runtime.Caller(0)
		// file is .../internal/corpus/corpus.go; the module root is two up.
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		d = filepath.Join(root, "..", "shared", "corpus")
	}
	st, err := os.Stat(d)
	return d, err == nil && st.IsDir()
}

// Dir returns the corpus directory, or skips (fails under CI) the test.
func Dir(t testing.TB) string {
	t.Helper()
	d, ok := Find()
	if !ok {
		if os.Getenv("CI") != "" {
			t.Fatalf("reference corpus not found at %s (set SFRAMEKIT_CORPUS); required under CI", d)
		}
		skipped.Add(1)
		t.Skipf("reference corpus not found at %s (set SFRAMEKIT_CORPUS to run this test)", d)
	}
	return d
}

// ELFs returns every ELF file of the corpus (those with a .sframe.txt
// dump beside them), sorted, as paths.
func ELFs(t testing.TB) []string {
	t.Helper()
	out := list(Dir(t))
	if len(out) == 0 {
		t.Fatalf("no ELF files with .sframe.txt dumps under %s", Dir(t))
	}
	return out
}

// Frames returns the corpus ELF files that also have a readelf frames
// dump (FILE.frames.txt) beside them, sorted, as paths.
func Frames(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, p := range ELFs(t) {
		if _, err := os.Stat(p + ".frames.txt"); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no corpus files with .frames.txt")
	}
	return out
}

// Rel returns p relative to the corpus directory, for messages, or p
// itself when it is not below it.
func Rel(t testing.TB, p string) string {
	r, err := filepath.Rel(Dir(t), p)
	if err != nil {
		return p
	}
	return r
}

// List returns the corpus ELF files, or nil when there is no corpus.
func List() []string {
	d, ok := Find()
	if !ok {
		return nil
	}
	return list(d)
}

func list(d string) []string {
	var out []string
	filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if strings.HasSuffix(p, ".sframe.txt") {
			out = append(out, strings.TrimSuffix(p, ".sframe.txt"))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// FirstDiff describes the first line where got and want, texts compared
// with a reference dump, differ, with spaces shown as "·" since column
// padding is what usually differs.
func FirstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + strings.ReplaceAll(gl, " ", "·") + "\nwant: " + strings.ReplaceAll(wl, " ", "·")
		}
	}
	return "(same lines, different bytes)"
}
