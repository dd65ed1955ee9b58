package targets

// AttachOptions adjust AttachProcessWith.
type AttachOptions struct {
	// CallerThread runs the ptrace requests on the calling goroutine's
	// OS thread instead of on a goroutine and thread of their own, which
	// AttachProcess starts: no thread to start, and no switch between
	// threads for the attach and for Close (on a busy 2-CPU virtual
	// machine those cost `sframe stack` 0.5-1 ms of its 20). Linux
	// accepts ptrace requests for a tracee only from the thread that
	// attached it, so AttachProcessWith locks the calling goroutine to
	// its thread (runtime.LockOSThread) until Close unlocks it, and Close
	// must be called from that goroutine: a Close from another goroutine
	// (CloseOnSignal's) waits until that goroutine's Close has detached
	// (at most ForeignCloseTimeout). Should the goroutine end without
	// Close, its thread ends with it, and the kernel detaches the threads.
	CallerThread bool
}
