package perfevent

import (
	"os"
	"os/exec"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/sframekit/sframekit/arch"
	"github.com/sframekit/sframekit/perfdata"
	"golang.org/x/sys/unix"
)

// TestEnableOnExec profiles a command from its first instruction, as
// perf record -- COMMAND does: the events are opened, disabled, on the
// thread that starts the command, which inherits them and enables them
// when it executes the program. The records must be the new program's
// from the start (its exec COMM, then its mappings), none of this
// process, and the child must not notice: spinprog's child mode asks for
// SIGKILL at its parent's death (PR_SET_PDEATHSIG, a thread's death), and
// keeps spinning.
func TestEnableOnExec(t *testing.T) {
	needPerf(t)
	exe := buildProg(t)
	o := Options{RegsUser: UserRegsMask(arch.Host()), StackUser: 1024, Freq: 999,
		Mmap: true, Comm: true, Task: true, SampleIDAll: true, EnableOnExec: true, FinishedRound: true}
	type started struct {
		s   *Session
		cmd *exec.Cmd
		err error
	}
	ch := make(chan started)
	waited := make(chan error, 1)
	go func() {
		// The thread stays locked, blocked in Wait, until the child
		// exits: nothing else forks from it, and the child's parent
		// thread lives as long as it does.
		runtime.LockOSThread()
		o.TIDs = []int{unix.Gettid()}
		s, err := Open(o)
		if err != nil {
			ch <- started{err: err}
			return
		}
		cmd := exec.Command(exe, "child")
		if err := cmd.Start(); err != nil {
			s.Close()
			ch <- started{err: err}
			return
		}
		ch <- started{s: s, cmd: cmd}
		waited <- cmd.Wait()
	}()
	st := <-ch
	if st.err != nil {
		t.Fatal(st.err)
	}
	s, child := st.s, st.cmd.Process.Pid
	defer s.Close()
	defer st.cmd.Process.Kill()
	// The child keeps running (PR_SET_PDEATHSIG did not fire) until it
	// has run 300 ms, then is killed: CPU time, not time, however loaded
	// the machine is.
	ran := make(chan error, 1)
	go func() {
		err := runMore(child, []int{child}, 30)
		st.cmd.Process.Kill()
		ran <- err
	}()
	go func() {
		<-waited
		s.Stop()
	}()
	type ev struct {
		time uint64
		typ  perfdata.RecordType
		exec bool
		name string
		pid  uint32
	}
	var evs []ev
	rounds := 0
	runWithWatchdog(t, s, time.Minute, func(r *Record) error {
		if r.Type == perfdata.RecordFinishedRound {
			if r.CPU != -1 || len(r.Raw) != headerSize {
				t.Errorf("FINISHED_ROUND of CPU %d, %d bytes", r.CPU, len(r.Raw))
			}
			rounds++
			return nil
		}
		d := decoded(t, r)
		e := ev{time: d.ID.Time, typ: d.Type, pid: d.ID.Pid}
		switch {
		case d.Comm() != nil:
			e.exec, e.name = d.Comm().Exec, string(d.Comm().Comm)
		case d.Mmap() != nil:
			e.name = string(d.Mmap().Filename)
		}
		evs = append(evs, e)
		return nil
	})
	if err := <-ran; err != nil {
		t.Errorf("the child did not run 300 ms: killed early (at its parent thread's death?): %v", err)
	}
	if rounds == 0 {
		t.Error("no FINISHED_ROUND record")
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].time < evs[j].time })
	if len(evs) == 0 || evs[0].typ != perfdata.RecordComm || !evs[0].exec || evs[0].name != "spinprog" || evs[0].pid != uint32(child) {
		t.Fatalf("first record %+v, want the exec COMM of spinprog, process %d", evs[:min(len(evs), 1)], child)
	}
	var exeMapped, sampled bool
	samples := 0
	for _, e := range evs {
		if e.pid != uint32(child) {
			t.Fatalf("record %+v of process %d, not of the command %d (this process is %d)", e, e.pid, child, os.Getpid())
		}
		switch e.typ {
		case perfdata.RecordMmap2:
			if e.name == exe {
				exeMapped = true
				if sampled {
					t.Errorf("the executable's MMAP2 after a sample")
				}
			}
		case perfdata.RecordSample:
			sampled = true
			samples++
		}
	}
	if !exeMapped || samples < 20 {
		t.Errorf("executable mapped %v, %d samples in 0.3 s of CPU at 999 Hz", exeMapped, samples)
	}
	t.Logf("%d records, %d samples, %d rounds; %+v", len(evs), samples, rounds, s.Stats())
}
