// Package perfevent samples running programs with the kernel's perf
// events (perf_event_open through golang.org/x/sys/unix, no cgo): the
// event and ring-buffer layer of a sampling profiler that unwinds user
// stacks itself, from the registers and stack bytes each sample carries.
//
// # Sessions
//
// Open opens one event per thread and CPU of the processes (PIDs) or
// threads (TIDs) to profile, with inherit so that threads and child
// processes created later are sampled too; or one per CPU for the whole
// system (SystemWide). Each CPU has one ring buffer, mapped into this
// process, that all of the CPU's events write into. Options choose the
// events (cpu-clock, task-clock, cycles, instructions, context-switches
// for off-CPU samples), the frequency or period, what a sample holds
// (RegsUser, StackUser, Callchain) and which side records the kernel adds
// (Mmap, Comm, Task, ContextSwitch, SampleIDAll, Monotonic clock).
//
//	s, err := perfevent.Open(perfevent.Options{
//		PIDs:      []int{pid},
//		Freq:      99,
//		RegsUser:  perfevent.UserRegsMask(arch.Host()),
//		StackUser: 8192,
//		Mmap:      true, Comm: true, Task: true, SampleIDAll: true,
//	})
//	if err != nil {
//		return err // one line, e.g. naming the perf_event_paranoid value needed
//	}
//	defer s.Close()
//	s.Enable()
//	err = sess.SeedProcess(pid) // a perfunwind.Session: mappings and threads from before
//	go func() { <-ctx.Done(); s.Stop() }()
//	err = s.Run(func(r *perfevent.Record) error {
//		rec, err := r.Decode() // a *perfdata.Record, as a perf.data file's
//		if err != nil {
//			return err
//		}
//		switch rec.Type {
//		case perfdata.RecordSample:
//			smp := rec.Sample()
//			// smp.RegsUser, smp.StackUser: unwind now; they are
//			// views into the ring, gone when this function returns.
//		case perfdata.RecordMmap2:
//			// a module loaded after Enable
//		}
//		return nil
//	})
//
// # Records
//
// Run hands out each record as its raw bytes (Record.Raw, in the
// kernel's layout, which perf.data files share): a view into the ring,
// valid until the callback returns, copied only when the record wraps
// around the ring's end. Record.Decode decodes it in place with package
// perfdata's Decoder into a *perfdata.Record, the type a perf.data
// recording's records decode into, matched to its event (a
// *perfdata.Attr, read by perfdata.ParseAttr from the very
// perf_event_attr given to the kernel), so that one sample-unwinding path
// serves live sessions and recordings. Record types, sample fields and
// attribute flags are package perfdata's constants.
//
// Records of one ring come in the order the kernel wrote them; those of
// different CPUs are not ordered with each other (Options.FinishedRound
// marks the passes over the rings, by which perf orders them). Records
// the kernel dropped because a ring was full are counted by LOST records,
// summed in Stats.Lost.
//
// # Commands
//
// A command is profiled from its first instruction as perf record --
// COMMAND does it, without stopping it: open the events with
// EnableOnExec on the thread that is about to start it (TIDs: the
// thread's own ID, with the goroutine locked to it), start it from that
// thread (os/exec), which gives the child inherited copies of the
// events, and keep the thread until the child exits (its death would
// reparent the child and fire a PR_SET_PDEATHSIG the child may have
// asked for). The events start when the child executes the command: its
// exec COMM and its mappings are the first records.
//
// # Privileges
//
// kernel.perf_event_paranoid decides what an unprivileged profiler may
// do: per-thread user-space sampling of its own user's processes needs 2
// or lower; sampling in the kernel (Kernel, kernel callchains, and
// context-switches, whose samples the scheduler takes) 1 or lower;
// system-wide sampling 0 or lower; CAP_PERFMON (CAP_SYS_ADMIN before
// Linux 5.8) allows all. KernelIfPermitted samples the kernel where that
// is allowed and falls back to user space where not (Session.UserOnly). Ring buffers are locked memory, limited per user
// by kernel.perf_event_mlock_kb per CPU and then RLIMIT_MEMLOCK; Open
// shrinks the rings to fit and says so in Session.Warnings.
//
// The profiled programs are never stopped or signalled: no ptrace, no
// signal; the kernel takes the samples in its interrupt and scheduler
// paths.
//
// Linux only: perf events exist nowhere else, and on other systems Open
// fails with an error saying so (the package builds everywhere).
package perfevent
