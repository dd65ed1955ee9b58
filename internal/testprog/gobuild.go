package testprog

import (
	"path/filepath"
	"strings"
	"testing"
)

// BuildGo builds the Go package pkg (an import path such as "cmd/gofmt",
// or a directory relative to the test's package directory) with the go
// command on PATH (go test puts its own first), and returns the
// executable's path. Each package is built once per test binary; the
// executable has the package's base name. Tests that need a Go program
// with its symbols build one: test binaries are linked without them.
func BuildGo(t testing.TB, pkg string) string {
	t.Helper()
	NeedTool(t, "go")
	key := pkg
	if strings.HasPrefix(pkg, ".") {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			t.Fatal(err)
		}
		key = abs
	}
	return buildOnce(t, "go\x00"+key, filepath.Base(pkg), func(exe string) []string {
		return []string{"go", "build", "-o", exe, pkg}
	})
}
