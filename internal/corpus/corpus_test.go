package corpus

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// helperEnv makes TestSkipping's child run TestSkipHelper.
const helperEnv = "SFRAMEKIT_CORPUS_TEST_HELPER"

// TestSkipHelper, in TestSkipping's child, is two tests that need the
// corpus and one that does not.
func TestSkipHelper(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("run by TestSkipping")
	}
	t.Run("a", func(t *testing.T) { Dir(t) })
	t.Run("b", func(t *testing.T) { ELFs(t) })
	t.Run("c", func(t *testing.T) {})
}

// TestSkipping runs this test binary without a corpus (and without a
// terminal, so that the summary goes to standard output): the run ends
// with one line saying how many tests skipped and why; with the corpus,
// or under CI (where the tests fail instead), no such line.
func TestSkipping(t *testing.T) {
	run := func(env ...string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSkipHelper$")
		cmd.Env = append(os.Environ(), append([]string{helperEnv + "=1", "CI="}, env...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no /dev/tty
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	missing := t.TempDir() + "/no-corpus"
	out, err := run("SFRAMEKIT_CORPUS=" + missing)
	want := "corpus: 2 tests skipped: no reference corpus at " + missing + " (set SFRAMEKIT_CORPUS; see README.md, Tests)\n"
	if err != nil || !strings.HasSuffix(out, want) {
		t.Errorf("without a corpus: %v, output %q; want it to end with %q", err, out, want)
	}
	if d, ok := Find(); ok {
		out, err := run("SFRAMEKIT_CORPUS=" + d)
		if err != nil || strings.Contains(out, "corpus:") {
			t.Errorf("with the corpus: %v, output %q", err, out)
		}
	}
	out, err = run("SFRAMEKIT_CORPUS="+missing, "CI=true")
	if err == nil || strings.Contains(out, "corpus: 2 tests skipped") || !strings.Contains(out, "required under CI") {
		t.Errorf("without a corpus under CI: %v (want a failure), output %q", err, out)
	}
}
