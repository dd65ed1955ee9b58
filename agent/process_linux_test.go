package agent

import (
	"os/exec"
	"testing"

	"github.com/sframekit/sframekit/perfunwind"
)

// TestReadProcExecedSince: a period's samples are named as it ends, when
// the process may have executed another program whose exec record the
// session has not read yet (it waits in a ring): /proc then shows the
// new program, the session still the old one. The samples taken under
// the old program keep its service (TestPyroscopeExec failed now and
// then: "service afterexec has the samples of execprog's
// pre_exec_spin").
func TestReadProcExecedSince(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := uint32(cmd.Process.Pid)
	sess, err := perfunwind.NewSession(perfunwind.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The recording saw the process execute "oldprog", and not yet what
	// it runs now (sleep).
	sess.Comm(pid, pid, "oldprog", true)
	a := &Agent{}
	st := &perfunwind.Stack{Pid: pid, Tid: pid, Comm: "oldprog", Exec: "oldprog"}
	if pi := a.readProc(st, sess); pi.service != "oldprog" {
		t.Errorf("a sample under oldprog: service %q, want oldprog", pi.service)
	}
	// Once the session has the exec, samples under the program the
	// process runs are its executable's.
	sess.Comm(pid, pid, "sleep", true)
	st = &perfunwind.Stack{Pid: pid, Tid: pid, Comm: "sleep", Exec: "sleep"}
	if pi := a.readProc(st, sess); pi.service != "sleep" {
		t.Errorf("a sample under sleep: service %q, want sleep", pi.service)
	}
}
