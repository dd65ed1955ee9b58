// Package corpus locates the shared reference corpus for tests.
//
// Tests find it through SFRAMEKIT_CORPUS, defaulting to ../shared/corpus
// relative to the module root. When it is absent they skip, except under
// CI (the CI variable set), where a missing corpus is a failure: a green
// run that compared nothing would hide regressions.
package corpus

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// Dir returns the corpus directory, or skips (fails under CI) the test.
func Dir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("SFRAMEKIT_CORPUS")
	if d == "" {
		_, file, _, _ := runtime.Caller(0)
		// file is .../internal/corpus/corpus.go; the module root is two up.
		root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		d = filepath.Join(root, "..", "shared", "corpus")
	}
	if st, err := os.Stat(d); err != nil || !st.IsDir() {
		if os.Getenv("CI") != "" {
			t.Fatalf("reference corpus not found at %s (set SFRAMEKIT_CORPUS); required under CI", d)
		}
		t.Skipf("reference corpus not found at %s (set SFRAMEKIT_CORPUS to run this test)", d)
	}
	return d
}

// ELFs returns every ELF file of the corpus (those with a .sframe.txt
// dump beside them), sorted, as paths.
func ELFs(t testing.TB) []string {
	t.Helper()
	d := Dir(t)
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
	if len(out) == 0 {
		t.Fatalf("no ELF files with .sframe.txt dumps under %s", d)
	}
	return out
}
