package perfevent

import (
	"errors"
	"fmt"
)

// Kinds of failure, for errors.Is on the errors of Open and Tasks.
var (
	// ErrPermission: perf_event_open refused (perf_event_paranoid, or a
	// process of another user).
	ErrPermission = errors.New("not permitted")
	// ErrNoProcess: the process or thread does not exist (it exited).
	ErrNoProcess = errors.New("no such process")
	// ErrUnsupported: the kernel or machine has no such event (a hardware
	// event in a virtual machine).
	ErrUnsupported = errors.New("event not supported")
	// ErrLockedMemory: the locked-memory limit refused even the smallest
	// useful ring buffer.
	ErrLockedMemory = errors.New("locked-memory limit")
)

// Error is a failure to set up sampling: what was being done, the
// system's error, its kind and a hint at the remedy, in one line.
type Error struct {
	Op   string // what failed: "open cpu-clock for thread 123 on CPU 0"
	Err  error  // the system's error (a syscall.Errno)
	Kind error  // ErrPermission, ErrNoProcess, ErrUnsupported, ErrLockedMemory or nil
	Hint string // the likely cause and remedy
}

// Error returns "OP: ERR: HINT" (no package name: the command names
// itself).
func (e *Error) Error() string {
	s := e.Op + ": " + e.Err.Error()
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// Unwrap returns the kind and the system's error.
func (e *Error) Unwrap() []error {
	if e.Kind == nil {
		return []error{e.Err}
	}
	return []error{e.Kind, e.Err}
}

// paranoidHint explains a refusal by kernel.perf_event_paranoid: what
// needs which value. paranoid is the current value (ok false when it
// could not be read).
func paranoidHint(o *Options, paranoid int, ok bool) string {
	need, what := o.paranoidNeeded()
	const caps = "or the profiler needs CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8)"
	if !ok {
		return fmt.Sprintf("for %s kernel.perf_event_paranoid must be %d or lower, %s", what, need, caps)
	}
	if paranoid > need {
		return fmt.Sprintf("kernel.perf_event_paranoid is %d; for %s it must be %d or lower (sysctl kernel.perf_event_paranoid=%d), %s", paranoid, what, need, need, caps)
	}
	if o.SystemWide {
		return fmt.Sprintf("kernel.perf_event_paranoid is %d, which allows %s; a security module or seccomp filter refused it", paranoid, what)
	}
	return fmt.Sprintf("kernel.perf_event_paranoid is %d, which allows %s; profiling another user's process needs CAP_PERFMON or CAP_SYS_PTRACE", paranoid, what)
}
