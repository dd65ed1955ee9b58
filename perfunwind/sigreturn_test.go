package perfunwind_test

import (
	"runtime"
	"slices"
	"testing"

	"github.com/sframekit/sframekit/internal/testprog"
)

// TestSigreturnSyscall: a sample taken while the kernel runs rt_sigreturn
// has as its user PC the address after the signal trampoline's system
// call, which glibc's FDE of __restore_rt ends before. Its walk goes on
// through the signal frame into the code the signal interrupted (raise,
// under main) and on to the outermost frame; perf script stops at the
// trampoline.
func TestSigreturnSyscall(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skip("signal frames are recognized on x86-64 and AArch64")
	}
	path := record(t, recording{name: "sigreturn", prog: func(t testing.TB) []string {
		return []string{testprog.Build(t, "testdata/sigreturn.c", "-O2", "-g"), work(t)}
	}})
	calls := newCallSites()
	defer calls.close()
	in, bad := 0, 0
	for _, o := range ours(t, path, calls) {
		u := o.user()
		if len(u) == 0 || (u[0].sym != "__restore_rt" && u[0].sym != "__kernel_rt_sigreturn") {
			continue
		}
		in++
		if !o.complete || !slices.ContainsFunc(u, func(f scriptFrame) bool { return f.sym == "main" }) {
			if bad++; bad <= 3 {
				t.Errorf("%s a walk from the trampoline that does not reach main and the outermost frame: %s", o.header, fmtFrames(u))
			}
		}
	}
	if in == 0 {
		t.Fatal("no sample in the signal trampoline")
	}
	t.Logf("%d samples in the signal trampoline, %d of them not unwound through it", in, bad)
}
