package testprog

import (
	"fmt"
	"os"
	"os/exec"
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
	key := "go\x00" + pkg
	if strings.HasPrefix(pkg, ".") {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			t.Fatal(err)
		}
		key = "go\x00" + abs
	}
	mu.Lock()
	defer mu.Unlock()
	if exe, ok := builds[key]; ok {
		return exe
	}
	sub := filepath.Join(dirLocked(t), fmt.Sprint(len(builds)))
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(sub, filepath.Base(pkg))
	if out, err := exec.Command("go", "build", "-o", exe, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build -o %s %s: %v\n%s", exe, pkg, err, out)
	}
	builds[key] = exe
	return exe
}
