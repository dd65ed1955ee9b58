// Package bpfunwind walks user stacks in the kernel: a BPF program
// (bpf/walk.c, compiled by clang for the BPF target through
// github.com/cilium/ebpf's bpf2go at go generate time; the object and
// its Go bindings are committed, so building needs no clang) attached to
// the sampling perf events of sframe record --bpf, which walks each
// sample's user stack from per-file SFrame rows and reads nothing but
// the return addresses and saved frame pointers, with
// bpf_probe_read_user, from live memory: no stack is copied, and a walk
// is as deep as --max-depth (4,096 frames by default).
//
// # Attachment
//
// The program is attached (PERF_EVENT_IOC_SET_BPF) to the events the
// recorder opens anyway: per thread with inherit for processes and
// commands (the kernel selects the profiled threads and follows the
// threads and processes they start, which inherit the program), per CPU
// for -a. One copy of the program per sampled event (cpu-clock, and
// context-switches for --off-cpu), which writes its event's index into
// each stack. For a sample taken in user mode it takes the registers of
// the event's context; in the kernel (system calls, page faults, the
// scheduler's switch-outs), the task's saved user registers
// (bpf_task_pt_regs).
//
// # Output
//
// Each stack goes out as a record of a BPF ring buffer (stacks; Decode):
// the sampled event's period and index, the thread, the CPU, the time
// (bpf_ktime_get_ns: CLOCK_MONOTONIC, the clock the recorder's perf events
// use) and the frames. The record, room for 64 frames, is reserved before
// the walk, which writes the frames into it as it finds them (the ring's
// lines, which the recorder read last, come in while the walk goes on); a
// deeper stack, or one with kernel frames, is copied out of the scratch
// map at the end instead (bpf_ringbuf_output). A record may so be longer
// than its frames (Decode, StackKey). The recorder reads it at each pass
// over the perf rings (ReadStacks) and orders the stacks by time with the
// MMAP, COMM, FORK and EXIT records that name their frames, as it does
// samples of different CPUs: a stack whose process has records waiting, or
// whose address is not mapped yet, waits for its turn. The program wakes
// the recorder only once a CPU has written its share of a quarter of the
// ring (StackFD; counted per CPU, not asked of the ring, whose positions
// the other CPUs write): a wakeup per stack would cost more than the walk.
// A bpf-output perf event per CPU, which orders stacks with the records by
// itself, cost 0.4-0.5 µs a sample more (bpf_perf_event_output). Stacks
// are not aggregated in the kernel (stack id -> count): the recorder keeps
// its per-thread, per-period merging and its time order (off-CPU weights
// come from matching switch-outs with switch-ins), and a stack record
// costs 552 bytes up to 64 frames (reserved whole before the walk), 40
// bytes plus 8 per frame beyond, instead of a 16 KiB copy. The program
// returns 0, so that the event writes no sample of its own.
//
// # Tables
//
// A file's table (Table, BuildTable) is its SFrame (its own .sframe, or
// compiled from its CFI as record does, unwind.LoadFileTables with
// SFrameFromCFI) reduced to the rule shapes the walker applies: CFA = SP
// or FP + offset; RA saved at CFA + offset (x86-64's fixed -8 included);
// FP saved at CFA + offset or unchanged; outermost (RA undefined, and
// the file's outermost code, unwind.Tables.Outermost) ends the walk;
// a PC-mask function's rows (a PLT's: CFA = SP + 8, SP + 16 after an
// entry's push) are repeated for each of its entries; a signal
// trampoline is a signal row, the interrupted SP, PC and FP read from
// the kernel's signal frame at SP (unwind.SignalSlots), which also
// covers the address right after the trampoline (a sample in
// rt_sigreturn). Rows of other shapes are counted by Reason and left to
// frame pointers, as are the gaps between functions and the files
// without tables. Rows are 16 bytes, with PCs
// relative to the file's first row, in one array map shared by every
// file (each file a range of it, first fit); a file's table is loaded
// once, keyed by the recorder's *perfunwind.File (one per file and
// build), and shared by every process that maps it; once no process's
// table names it, it stays loaded, idle, for the next process that maps
// the file (a program run again, the libraries after an exec), and the
// oldest idle tables are evicted when rows or files are needed, or
// beyond 64. Beside its rows, a file has buckets (Table.Buckets, a
// second array map at the same indices): for each stretch of 2^k bytes
// of its code, the last row starting at or before it, k the least that
// gives no more buckets than rows; the row of a PC is among the few
// (1-21 for the C library) from its bucket's to the next one's. Tables
// are kept on disk by build ID (Options.TableCache; DecodeTable checks
// them when read), so that the next runs do not make them again (tens
// of milliseconds for a C library whose SFrame is compiled from CFI).
//
// A process's table is its executable mappings, sorted: start, end, load
// bias and where its file's rows and buckets are (their first index,
// counts, the bucket size), so that a frame in another mapping costs
// the search of the process's table and no lookup of its file. The
// recorder keeps them in a Mirror, changed as soon as the records that
// change them are read (MMAP of an executable mapping, FORK of a
// process, exec), seeded from /proc, and dropped at the process's exit.
// An exec drops it in the kernel too, at once: a second program attached
// to the sched_process_exec tracepoint deletes the process's table (and
// moves the walker's mapping caches to a new generation) before the new
// program runs, since the recorder reads the exec's records only later
// and the old program's files may sit at the new one's addresses
// (without address randomization).
// A library unloaded (dlclose) and another loaded where it was has the
// same problem, and perf records no munmap: a third program, on the
// vm_unmapped_area tracepoint (the kernel picking the address of a new
// mapping, as the dynamic loader's first mmap of a library), empties
// the mappings of the process's table that the new one overlaps, so
// that walks there miss and wake the recorder, which then has the new
// MMAP record to read. It costs an mmap without MAP_FIXED about 0.3 µs
// while recording (500,000 mmap/munmap pairs: 2.10-2.15 s against
// 1.91-2.13 s). Code mapped with MAP_FIXED over other code, without an
// address search (a JIT's doing), is not covered.
// When a walk meets a process or an address it has no
// table for (a program, library or process the recorder has not read the
// records of, or whose tables it is still loading: tens of milliseconds
// for a C library whose SFrame is compiled from CFI), the program wakes
// the recorder (a BPF ring buffer polled with the perf rings; at most
// every 10 ms per CPU) and, with Options.Fallback, passes the sample on
// (returns 1): the event writes it with its stack copy, walked in user
// space as record does without --bpf.
//
// # The walk
//
// Per frame: the mapping of the PC (the last frame's mapping first, then a
// bounded binary search of the process's table), the row of the PC (a
// bounded binary search of its bucket's rows, skipped when the thread's
// rows of its last walk (by frame number) or the CPU's row cache (by
// address) hold it; for callers at the return address - 1, the call,
// but for the PC a signal interrupted), the CFA, the return address and,
// if saved, the frame pointer read from the stack (a saved slot below SP,
// popped by the innermost frame's epilogue, keeps the register's value;
// a signal row reads the three registers, whose SP may be below this one
// on a sigaltstack). No row: the frame pointer ([FP] the
// caller's FP, [FP+8] the return address). A walk ends at an outermost
// row, a zero return address, a read that fails, a stack pointer that does
// not move up (but through a signal frame), or MaxDepth frames. The frames are iterated with bpf_loop,
// two a call. Each CPU keeps the rows its walks found in a direct-mapped
// cache of 1,024, keyed by file and address (a file's id is never reused):
// the frames of a sample are mostly those of the samples before, whose
// bucket and binary search cost a frame 8-10 ns of its 20; before it, the
// rows of the first 64 frames of the last walks of 16 threads (by thread
// id), by frame number, checked the same way: a thread's n-th frame is
// mostly its n-th frame of the last sample, and these loads do not wait
// for the frame's PC, as the cache's do, so they go ahead of the walk (the
// chains program: 0.94 -> 0.81 µs a sample with the record written in
// place); and the last 8 mappings it found in the process tables, while
// those keep their generation (genmap, which the profiler bumps after each
// change of a table), which spare a walk's first frame and each frame that
// changes mapping a hash lookup and a binary search; the walk's state
// lives in the per-CPU scratch map rather than on the stack, so that the
// verifier checks each search's body once rather than once per path
// through it.
//
// The stack is read a window at a time into the scratch map: one
// bpf_probe_read_user of 1 KiB from the SP for the walk's first frames,
// then of 4 KiB from the SP of the first frame whose slot is beyond it,
// each cut at the end of its page, so that a window never faults on the
// next mapping (a thread's stack ends where the next thread's guard page
// starts), while the page of the slot it is read for is the stack's. The
// first window goes further, in one read, up to where the thread's last
// walk on the CPU stopped (its last frame's CFA, kept for 64 threads while
// the tables keep their generation) where that is beyond the page's end
// and within 4 KiB of the SP: each page of it is the SP's or one that walk
// read. The first read of a sample costs about 0.2 µs (an 8-byte one as
// much as 1 KiB: the first touch of the thread's stack, and the helper
// call, 65 ns), a second one 0.1 µs. A slot a window does not hold (across
// a page's end) is read alone, and so is every slot after a window's read
// failed (a page not present). A read of user memory costs about as much
// as the rest of a frame's walk: a 32-frame stack needs one or two reads
// instead of 32 to 64, a 2,000-frame recursion (32 bytes a frame) about 17
// instead of 2,000. Counters.Reads counts them.
//
// # Bounds
//
// rows: DefaultMaxRows rows of 16 bytes (32 MiB). buckets: as many of 8
// bytes (16 MiB). Both memory-mapped into the profiler, which writes
// tables into them directly. DefaultMaxFiles tables loaded at most.
// procs: DefaultMaxProcesses tables of MaxMappings mappings of 56 bytes
// (28 KiB each, allocated as used). scratch: 103 KiB per CPU (4,096 user
// and 128 kernel frames, the walk's state, the 4 KiB stack window, the
// row cache's 1,024 entries of 32 bytes, the threads' frames' 16 × 64
// of 32, the mapping cache's 8 of 72, the threads' tops' 64 of 24).
// genmap, execgen: one 8-byte generation each.
// counters: 17 per-CPU counters. misses: a 4 KiB ring buffer. stacks:
// DefaultStackRing per CPU (Options.StackRing, at most MaxStackRing).
// The table cache on disk: 128 files and 64 MiB (Options.TableCache).
//
// # Architectures
//
// The program is built for x86-64 (bpf2go -target amd64: pt_regs fields
// ip, sp, bp). The table format and walker are written for AArch64 too
// (registers from package arch: CFA from SP or FP, RA and FP at CFA +
// offset), but AArch64 needs its own build of the program, reading the
// link register for the first frame of a leaf (whose RA is not saved:
// ReasonRA today) and stripping PAC signatures: not done, and not tested.
package bpfunwind
