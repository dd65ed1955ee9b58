// SPDX-License-Identifier: GPL-2.0
//
// walk.c: the user-stack walker of sframe record --bpf, attached to the
// sampling perf events. For each sample it takes the user registers
// (from the event's context in user mode, from the task's saved user
// registers in the kernel), then, frame by frame, finds the PC's
// mapping in the process's table (procs), which says where its file's
// rows are, the row for the PC among the few of its bucket (rows,
// buckets), computes the CFA, reads the return address and frame
// pointer from the live stack, and goes on with bpf_loop up to
// max_depth frames. Where no row covers a PC it follows the frame
// pointer. It writes the program counters, with the thread, time (the
// perf records' clock, CLOCK_MONOTONIC) and CPU, into the stacks ring
// buffer, which the profiler reads with the perf rings and orders with
// their MMAP/COMM/FORK/EXIT records by time, and returns 0 so that the
// event writes no sample of its own. (A bpf-output perf event, which
// orders them itself, cost 0.4-0.5 µs a sample more.)
// When the walk met a process or an address it has no table for yet
// (the first milliseconds of a new program or library, until the
// profiler has read its records and loaded its tables), it writes
// nothing and returns 1 instead, with fallback set: the event writes its
// sample, with its copy of the user stack, walked in user space.
//
// The layout of the maps and records is bpfunwind's (bpf_linux.go,
// table.go, raw.go): keep them in step.

#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

typedef __u64 u64;
typedef __s64 s64;
typedef __u32 u32;
typedef __s32 s32;
typedef __u16 u16;
typedef __s16 s16;
typedef __u8 u8;

#define MAX_DEPTH 4096 // frames of user stack at most
#define MAX_KERN 128   // kernel frames at most (perf_event_max_stack: 127)
#define MAX_PCS (MAX_DEPTH + MAX_KERN)
#define MAX_MAPS 512 // executable mappings per process (a power of two)
#define MAP_STEPS 10 // log2(MAX_MAPS) + 1
#define ROW_STEPS 24 // rows per file < 1 << 23
// The window: the walk reads the user stack WIN bytes at a time into
// scratch (one bpf_probe_read_user for the frames it holds, where one a
// slot cost most of a frame's time), read again at the frame's SP when
// a slot falls outside it.
#define WIN 4096
#ifndef WIN0
// The first window: a read costs about as much as 4-8 frames' walk (0.1-0.2
// µs here), copying 1 KiB tens of ns; 1 KiB holds the 32 frames of
// recprog work (512 bytes needed two reads).
#define WIN0 1024
#endif
#define PAGE 4096

// Row flags.
#define R_CFA_FP 1 // CFA = FP + cfa_off, else SP + cfa_off
#define R_RA 2     // RA saved at CFA + ra_off
#define R_FP 4     // FP saved at CFA + fp_off, else unchanged
#define R_END 8    // outermost: the walk ends at this frame
#define R_NONE 16  // no rule: follow the frame pointer
// A signal trampoline: the interrupted SP, PC and FP at SP + cfa_off,
// ra_off and fp_off; the PC is not a return address.
#define R_SIG 32

struct row {
	u32 pc; // ELF address - file base
	s32 cfa_off;
	s16 ra_off;
	s16 fp_off;
	u8 flags;
	u8 pad[3];
};

// A mapping of a process's table, with where its file's rows are: a
// frame costs one search of the process's table (none when it is in the
// last frame's mapping or one of the CPU's cached ones, mcache) and one
// of a bucket of rows (none when the row cache has it).
struct mapping {
	u64 start, end; // runtime addresses
	u64 bias;       // runtime = ELF + bias
	u64 base;       // ELF address of pc 0 of its file's rows
	u32 span;       // the rows cover [base, base + span)
	u32 first;      // index of the file's first row in rows, and first bucket in buckets
	u32 n;          // rows, 0 for none (frame pointers)
	u32 nb;         // buckets in buckets, 1..n
	u32 shift;      // a bucket covers 1 << shift bytes of pc
	u32 file;       // the file's id (the row caches' key), 0 for none
};

struct proc {
	u32 n;
	u32 pad;
	struct mapping m[MAX_MAPS];
};

// Stop reasons (bpfunwind.Stop).
// USER32_CS is the code segment of a 32-bit task's user mode (the
// kernel's __USER32_CS on x86-64).
#define USER32_CS 0x23

#define STOP_END 0   // outermost frame, or a zero return address
#define STOP_DEPTH 1 // max_depth frames
#define STOP_READ 2  // a read of the stack failed
#define STOP_LOOP 3  // the stack pointer did not move up
#define STOP_NOREGS 4 // no user registers (a kernel thread)

// Counters (bpfunwind.Counters), per CPU.
enum {
	C_SAMPLES,
	C_KERNEL_MODE,
	C_FRAMES_SFRAME,
	C_FRAMES_FP,
	C_NO_PROC,
	C_NO_MAP,
	C_OUTPUT_ERR,
	C_FALLBACK,
	C_STOP, // C_STOP + reason
	C_READS = C_STOP + 8, // reads of user memory: windows and single slots
	C_MAX,
};

// The walk's state, in map memory rather than on the stack: values the
// verifier does not track, so that it checks each loop's body once
// instead of once per path through the searches.
struct state {
	u64 pc, sp, fp;
	u64 mstart, mend, bias; // the mapping of the last frame: frames come in runs
	u64 fbase;              // its file's rows (struct mapping)
	u32 fspan, ffirst, fn, fnb, fshift;
	u32 mfile; // its file, 0 for none
	u32 tgid;
	u32 n; // user frames so far
	u32 nkern;
	u32 stop;
	u32 lo, hi; // a binary search
	u64 woke;   // when this CPU last woke the profiler
	u32 missing; // the walk met a process or address without a table
	u32 frames_sframe, frames_fp;
	u32 reads;     // bpf_probe_read_user calls
	u64 wbase;     // the window's user address
	u32 wlen;      // bytes of it read, 0 for none
	u32 nowin;     // a window could not be read: single reads from here on
	u64 gen;       // the tables' generation (genmap) at the walk's start
	u32 tid;
	u32 sigframe; // the frame whose PC a signal interrupted (not a return address), 0 for none
	u64 unwoken; // bytes this CPU wrote to stacks since it last woke the profiler
};

// A row lookup's result, kept for the next lookups of the same address
// of the same file (file ids are never reused, and a file's rows never
// change while it has its id): a walk's frames are those of the last
// samples' walks, mostly.
struct cached {
	u64 addr; // the ELF address looked up
	u32 file; // its file, 0 for none
	u32 pad;
	struct row r; // the row, R_NONE where none covers addr
};

// The row cache's entries (a power of two), direct-mapped by address:
// the bucket's and the binary search's lookups cost a frame 8-10 ns,
// about 40% of its walk.
#define NCACHE 1024

// The rows of the frames of the last walks, by thread and frame number:
// tf[tid % NTF][n] the n-th frame's of the last walk of a thread of that
// slot, checked as the row cache's entries are (address and file). A
// thread's stack changes little from sample to sample, so the walk finds
// its rows in order, at addresses that do not wait for the frame's PC
// (the row cache's wait for it, one cache line a frame): the loads go
// ahead of the walk, and the lines are read in sequence.
#define NTF 16 // threads (a power of two)
#define NTFF 64 // frames a thread (a power of two)

// A stack as the profiler reads it (bpfunwind.Decode): the header, then
// nkern + nuser program counters.
struct hdr {
	u64 period;
	u32 nuser;
	u16 nkern;
	u16 stop; // the stop reason, the event's index << 8
	u64 time; // bpf_ktime_get_ns: CLOCK_MONOTONIC, the records' clock
	u32 pid, tid;
	u32 cpu;
	u32 sigframe; // the user frame a signal interrupted (its PC exact, the frame before it the trampoline), 0 for none
};

struct out {
	struct hdr h;
	u64 pcs[MAX_PCS]; // kernel frames, then user frames
};

// A record of the stacks ring reserved before the walk, which writes
// the frames into it as it finds them (and into the scratch's out),
// submitted as it is when they fit, where bpf_ringbuf_output copied the
// scratch's stack at the end: the ring's lines, which the profiler read
// last, are fetched while the walk goes on instead of all at once after
// it. Deeper stacks (and those with kernel frames) go out as before.
#define NREC 64

struct rec {
	struct hdr h;
	u64 pcs[NREC];
};

// A mapping found in a process's table, kept for the next walks on its
// CPU while the tables are those of generation gen: a walk's first frame,
// and each frame in another mapping than the last frame's, would
// otherwise search its process's table (a hash lookup and a binary
// search, 50-100 ns).
struct mcached {
	struct mapping m;
	u64 gen;
	u32 tgid;
	u32 pad;
};

#define NMCACHE 8 // a power of two

// Where the last walk of a thread stopped reading its stack: its last
// frame's CFA (all its reads were below it), while the tables keep
// generation gen. The next walk of the thread reads its first window
// up to there in one read, where the window would otherwise stop at
// the end of the SP's page and a second read take the rest (the 60-frame
// thread of the chains program, a stack across a page's end): each page
// of it is SP's or one the last walk read (the window is at most WIN
// bytes: two pages), so that no read goes where the thread's stack has
// not been seen.
struct top {
	u32 tid, tgid;
	u64 top;
	u64 gen;
};

#define NTOPS 64 // a power of two, direct-mapped by thread id

// A CPU's scratch: the walk's state first, where a field is one
// instruction's offset from the scratch's address (BPF's offsets are 16
// bits: beyond 32 KiB each access took three), then the stack, as it is
// output.
struct scratch {
	struct state st;
	struct mcached mcache[NMCACHE];
	u32 mnext; // the next entry of mcache to replace
	u32 pad;
	struct top tops[NTOPS];
	u8 win[WIN + 8];  // the window (8 bytes of slack for the verifier)
	struct cached cache[NCACHE]; // kept from sample to sample on this CPU
	struct cached tf[NTF][NTFF];
	struct out out;
};

#define OUT_HDR 40
// Decode reads the frames of both records after the header.
_Static_assert(__builtin_offsetof(struct out, pcs) == OUT_HDR, "struct out's frames");
_Static_assert(__builtin_offsetof(struct rec, pcs) == OUT_HDR, "struct rec's frames");

// rows and buckets are memory-mapped by the profiler, which writes a
// file's table into them as into its own memory (a syscall per row cost
// tens of milliseconds for the C library).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, struct row);
	__uint(max_entries, 1); // set at load
	__uint(map_flags, BPF_F_MMAPABLE);
} rows SEC(".maps");

// buckets[first + b]: the rows (relative to first) among which the row
// of a pc of bucket b is: from the last row starting at or below the
// bucket's first address to the next bucket's.
struct bucket {
	u32 lo, hi; // rows [lo, hi)
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, struct bucket);
	__uint(max_entries, 1); // set at load: as rows
	__uint(map_flags, BPF_F_MMAPABLE);
} buckets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, u32); // tgid
	__type(value, struct proc);
	__uint(max_entries, 1); // set at load
	__uint(map_flags, BPF_F_NO_PREALLOC);
} procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, struct scratch);
	__uint(max_entries, 1); // one per CPU, set at load
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, u32);
	__type(value, u64);
	__uint(max_entries, C_MAX);
} counters SEC(".maps");

// genmap holds the generation of the process tables, which the profiler
// bumps after each change of procs: the mapping caches (mcache) of older
// generations are stale.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, u64);
	__uint(max_entries, 1);
} genmap SEC(".maps");

// execgen counts the execs of processes that had a table (on_exec) and
// the mappings a new one cut (on_unmapped_area): the walker's generation
// is genmap's plus this one, each only ever growing, so that the mapping
// caches made before are stale at once, before the profiler has read the
// records.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, u32);
	__type(value, u64);
	__uint(max_entries, 1);
} execgen SEC(".maps");

// stacks takes the walks' stacks. The profiler is woken only once a
// CPU has written wake_bytes since it last woke it (it reads the ring at
// each pass over the perf rings too): a wakeup a sample would cost more
// than the walk. Counted per CPU (state.unwoken) rather than asked of
// the ring (bpf_ringbuf_query), whose positions the other CPUs and the
// profiler write: 4% of a sample in an A/B.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); // set at load
} stacks SEC(".maps");

// misses wakes the profiler when a frame's address is in no mapping of
// its process's table (or the process has none): a program, library or
// process it has not read the records of yet. At most once per
// WAKE_NS per CPU.
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} misses SEC(".maps");

#define WAKE_NS 10000000ULL

volatile const u32 max_depth = 128;
volatile const u32 kernel_stack = 0; // add the kernel's frames
volatile const u32 fallback = 0;     // pass samples without tables on
// The index of the event this copy of the program is attached to,
// written beside the stop reason: one copy per sampled event.
volatile const u32 event_index = 0;
volatile const u64 wake_bytes = 0;

// The task's saved user registers are the kernel's struct pt_regs,
// whose x86-64 layout is the user ABI's (linux/bpf_perf_event.h's, the
// ptrace layout): read at its offsets, with no relocation, so that
// loading needs no parse of the kernel's BTF (about 10 ms of the
// profiler's start).

// hide keeps the compiler from dropping a bounds mask it can prove
// redundant but the verifier cannot.
#define hide(v) asm volatile("" : "+r"(v))

static __always_inline void add(u32 c, u64 n) {
	u64 *v = bpf_map_lookup_elem(&counters, &c);
	if (v)
		*v += n;
}

static __always_inline void count(u32 c) { add(c, 1); }

// use makes m the mapping of st's frames.
static __always_inline void use(struct state *st, struct mapping *m) {
	st->mstart = m->start;
	st->mend = m->end;
	st->bias = m->bias;
	if (m->file == 0 || m->n == 0 || m->nb == 0)
		return;
	st->fbase = m->base;
	st->fspan = m->span;
	st->ffirst = m->first;
	st->fn = m->n;
	st->fnb = m->nb;
	st->fshift = m->shift;
	st->mfile = m->file;
}

// findmap finds the mapping of st->pc, or leaves st->mfile 0 (and
// st->mend 0 where there is none).
static __always_inline void findmap(struct scratch *o) {
	struct state *st = &o->st;
	u64 pc = st->pc;
	if (pc >= st->mstart && pc < st->mend)
		return;
	st->mfile = 0;
	st->mstart = st->mend = 0;
	u32 tgid = st->tgid;
	u64 gen = st->gen;
	for (int i = 0; i < NMCACHE; i++) {
		struct mcached *c = &o->mcache[i];
		if (c->tgid == tgid && c->gen == gen && pc >= c->m.start && pc < c->m.end) {
			use(st, &c->m);
			return;
		}
	}
	struct proc *p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p) {
		// Counted once a walk (its first frame), here rather than by a
		// lookup of its own.
		if (st->n == 1)
			count(C_NO_PROC);
		return;
	}
	st->lo = 0;
	st->hi = p->n;
	for (int i = 0; i < MAP_STEPS; i++) {
		u32 lo = st->lo, hi = st->hi;
		if (lo >= hi || hi > MAX_MAPS)
			break;
		u64 mid = (lo + hi) / 2;
		hide(mid);
		struct mapping *m = &p->m[mid & (MAX_MAPS - 1)];
		if (m->start <= pc)
			st->lo = mid + 1;
		else
			st->hi = mid;
	}
	u64 lo = st->lo;
	if (lo == 0 || lo > MAX_MAPS)
		return;
	lo--;
	hide(lo);
	struct mapping *m = &p->m[lo & (MAX_MAPS - 1)];
	if (pc >= m->end)
		return;
	u32 k = o->mnext++;
	struct mcached *c = &o->mcache[k & (NMCACHE - 1)];
	c->m = *m;
	c->gen = gen;
	c->tgid = tgid;
	use(st, m);
}

// search returns the index in rows of the row covering key (an offset
// from st's file's base), or ~0 for none.
static __always_inline u32 search(struct state *st, u32 key) {
	u32 first = st->ffirst;
	// The last row starting at or below key: from the bucket's first
	// candidate (which does) to the next bucket's.
	u32 b = (u32)((u64)key >> (st->fshift & 63));
	u32 nb = st->fnb;
	if (b >= nb)
		b = nb - 1;
	u32 k0 = first + b;
	struct bucket *bk = bpf_map_lookup_elem(&buckets, &k0);
	if (!bk)
		return ~0U;
	u32 hi0 = bk->hi;
	st->lo = bk->lo + 1;
	st->hi = hi0 < st->fn ? hi0 : st->fn;
	for (int i = 0; i < ROW_STEPS; i++) {
		u32 lo = st->lo, hi = st->hi;
		if (lo >= hi)
			break;
		u32 mid = (lo + hi) / 2;
		u32 k = first + mid;
		struct row *r = bpf_map_lookup_elem(&rows, &k);
		if (!r)
			return ~0U;
		if (r->pc <= key)
			st->lo = mid + 1;
		else
			st->hi = mid;
	}
	u32 lo = st->lo;
	if (lo == 0)
		return ~0U;
	return first + lo - 1;
}

// lookrow fills the row cache's entry h with the row covering the ELF
// address a in the file of o's walk (R_NONE for none): the bucket and the
// binary search. A global function, checked by the verifier once, not in
// each frame's copy of findrow (loading took 20 ms more with it inline);
// called only when the caches miss.
__noinline int lookrow(struct scratch *o, u64 h, u64 a) {
	if (!o)
		return 0;
	struct state *st = &o->st;
	struct cached *c = &o->cache[h & (NCACHE - 1)];
	c->addr = a;
	c->file = st->mfile;
	c->r.flags = R_NONE;
	if (a >= st->fbase && a - st->fbase < st->fspan) {
		u32 k = search(st, (u32)(a - st->fbase));
		struct row *r = bpf_map_lookup_elem(&rows, &k);
		if (r)
			c->r = *r;
	}
	return 0;
}

// findrow returns the row covering the ELF address a in st's file (flags
// R_NONE for none) for the n-th frame: from the thread's frames (tf), the
// row cache, or searched and cached (lookrow).
static __always_inline struct row *findrow(struct scratch *o, u64 a, u64 n) {
	struct state *st = &o->st;
	u32 file = st->mfile;
	struct cached *t = 0;
	if (n < NTFF) {
		u64 i = n;
		hide(i);
		t = &o->tf[st->tid & (NTF - 1)][i & (NTFF - 1)];
		if (t->addr == a && t->file == file)
			return &t->r;
	}
	u64 h = (a ^ (a >> 10)) & (NCACHE - 1);
	hide(h);
	h &= NCACHE - 1;
	struct cached *c = &o->cache[h];
	if (c->addr != a || c->file != file)
		lookrow(o, h, a);
	if (t)
		*t = *c;
	return &c->r;
}

// wake tells the profiler that st's process needs its table updated.
static __always_inline void wake(struct state *st) {
	u64 now = bpf_ktime_get_ns();
	if (now - st->woke < WAKE_NS)
		return;
	st->woke = now;
	u32 tgid = st->tgid;
	bpf_ringbuf_output(&misses, &tgid, sizeof(tgid), BPF_RB_FORCE_WAKEUP);
}

// window reads up to n bytes of the stack from base into the window, but
// never beyond base's page, so that a window never faults on the next
// mapping (a thread's stack ends where the guard page of the next one
// starts). It returns 0 if a window was read.
static __always_inline int window(struct scratch *o, u64 base, u64 n) {
	struct state *st = &o->st;
	u64 rest = PAGE - (base & (PAGE - 1));
	if (n > rest)
		n = rest;
	st->wlen = 0;
	st->wbase = base;
	if (n < 8 || n > WIN)
		return -1;
	st->reads++;
	if (bpf_probe_read_user(o->win, n, (void *)base)) {
		st->nowin = 1;
		return -1;
	}
	st->wlen = n;
	return 0;
}

// fill reads a window of WIN bytes from base, for a slot the walk's
// windows so far do not hold. (The walk's first window is read before
// the walk, by prefill.)
static __always_inline int fill(struct scratch *o, u64 base) { return window(o, base, WIN); }

// prefill reads the walk's first window, from its SP: up to where the
// thread's last walk stopped (struct top) where that is beyond what a
// window of WIN0 bytes cut at the page's end holds, and within WIN;
// else that window. Here rather than in fill, which each frame's reads
// inline: the verifier checked that path in every copy (its load took
// twice as long).
static __always_inline void prefill(struct scratch *o, u64 base) {
	struct state *st = &o->st;
	u64 rest = PAGE - (base & (PAGE - 1));
	u64 n = WIN0 < rest ? WIN0 : rest;
	struct top *t = &o->tops[st->tid & (NTOPS - 1)];
	u64 m = t->top - base;
	if (t->tid == st->tid && t->tgid == st->tgid && t->gen == st->gen && t->top > base && m > n && m <= WIN) {
		st->reads++;
		if (bpf_probe_read_user(o->win, m, (void *)base) == 0) {
			st->wbase = base;
			st->wlen = m;
			return;
		}
		t->tid = 0;
	}
	window(o, base, WIN0);
}

// read reads the u64 at addr of the user stack, the frame's SP being sp:
// from the window, read again from sp (or addr, beyond a window from sp)
// when it does not hold addr; with single reads once a window failed.
static __always_inline int read(struct scratch *o, u64 *v, u64 addr, u64 sp) {
	struct state *st = &o->st;
	u64 off = addr - st->wbase;
	// (wlen - off, not off + 8: an address at the top of the address
	// space must not wrap into the window.)
	if (addr < st->wbase || off >= st->wlen || st->wlen - off < 8) {
		if (st->nowin)
			goto single;
		// From the frame's SP, or the start of addr's page.
		u64 base = addr & ~(u64)(PAGE - 1);
		if (addr >= sp && sp > base)
			base = sp;
		if (fill(o, base))
			goto single;
		off = addr - base;
		if (off + 8 > st->wlen)
			goto single;
	}
	hide(off);
	off &= WIN - 1;
	// One load, not memcpy's eight of a byte: the slots of a sane stack
	// are 8-byte aligned, and x86-64's BPF loads need no alignment.
	*v = *(u64 *)(void *)&o->win[off];
	return 0;
single:
	st->reads++;
	return bpf_probe_read_user(v, sizeof(*v), (void *)addr);
}

// sigregs takes the caller of a signal row's frame (st's, frame st->n -
// 1): the interrupted PC, SP and FP, read at SP + ra_off, cfa_off and
// fp_off; non-zero ends the walk. A global function, as lookrow, checked
// by the verifier once rather than in each frame's copy (the program had
// a quarter more instructions with it inline), for frames that are rare.
__noinline int sigregs(struct scratch *o, s64 ra_off, s64 cfa_off, s64 fp_off) {
	if (!o)
		return 1;
	struct state *st = &o->st;
	u64 sp = st->sp, ra, cfa, fp;
	if (read(o, &ra, sp + ra_off, sp) || read(o, &cfa, sp + cfa_off, sp) || read(o, &fp, sp + fp_off, sp)) {
		st->stop = STOP_READ;
		return 1;
	}
	st->frames_sframe++;
	if (ra == 0) {
		st->stop = STOP_END;
		return 1;
	}
	// The next frame's PC is no return address: its row is its own.
	st->sigframe = st->n;
	st->pc = ra;
	st->sp = cfa;
	st->fp = fp;
	return 0;
}

// The walk's scratch, passed to each step (a lookup a frame less).
struct walkctx {
	struct scratch *o;
	struct rec *rec; // or 0
};

// frame records st->pc and finds its caller; non-zero ends the walk.
static __always_inline long frame(struct scratch *o, struct rec *rec) {
	struct state *st = &o->st;
	u64 n = st->n;
	u64 idx = (u64)st->nkern + n;
	if (idx >= MAX_PCS || n >= max_depth) {
		st->stop = STOP_DEPTH;
		return 1;
	}
	u64 pc = st->pc, sp = st->sp;
	o->out.pcs[idx] = pc;
	if (rec && idx < NREC)
		rec->pcs[idx] = pc;
	st->n = n + 1;

	// Callers' PCs are return addresses: their rows are those of the
	// call, one byte before (a call may end its function); but for the
	// PC a signal interrupted.
	u64 look = n > 0 && n != st->sigframe ? pc - 1 : pc;
	findmap(o);
	struct row *r = 0;
	if (st->mfile)
		r = findrow(o, look - st->bias, n);
	else if (st->mend == 0) {
		count(C_NO_MAP);
		st->missing = 1;
		wake(st);
	}

	u64 cfa, ra, fp = st->fp;
	if (r && !(r->flags & R_NONE)) {
		u8 fl = r->flags;
		if ((fl & R_END) || !(fl & R_RA)) {
			// A signal row (no R_RA): the kernel's signal frame at SP
			// holds the interrupted registers, whose SP need not be
			// above this one (sigaltstack). Here, off the common path.
			if (!(fl & R_SIG) || (fl & R_END)) {
				st->stop = STOP_END;
				return 1;
			}
			return sigregs(o, r->ra_off, r->cfa_off, r->fp_off) != 0;
		}
		cfa = ((fl & R_CFA_FP) ? fp : sp) + (s64)r->cfa_off;
		if (read(o, &ra, cfa + (s64)r->ra_off, sp)) {
			st->stop = STOP_READ;
			return 1;
		}
		if (fl & R_FP) {
			u64 at = cfa + (s64)r->fp_off;
			// A slot below SP was popped by the innermost frame's
			// epilogue: FP holds its value already.
			if (at >= sp && read(o, &fp, at, sp)) {
				st->stop = STOP_READ;
				return 1;
			}
		}
		st->frames_sframe++;
	} else {
		// Frame pointers: [FP] the caller's FP, [FP+8] the return
		// address, the caller's SP above them.
		u64 f0 = fp;
		if (f0 < sp || read(o, &fp, f0, sp) || read(o, &ra, f0 + 8, sp)) {
			st->stop = STOP_READ;
			return 1;
		}
		cfa = f0 + 16;
		st->frames_fp++;
	}
	if (ra == 0) {
		st->stop = STOP_END;
		return 1;
	}
	if (cfa <= sp) {
		st->stop = STOP_LOOP;
		return 1;
	}
	st->pc = ra;
	st->sp = cfa;
	st->fp = fp;
	return 0;
}

// step walks two frames: one bpf_loop iteration. The call of the
// callback cost about 4 ns a frame (2,004-frame walks: 15.6 ns a frame
// with one, 11.7 with two); four took 5% less a sample on the chains
// program, but the verifier's load of the program 72 ms instead of 22:
// not kept.
static long step(u64 i, void *ctx) {
	struct walkctx *w = ctx;
	struct scratch *o = w->o;
	struct rec *rec = w->rec;
	if (!o || frame(o, rec))
		return 1;
	return frame(o, rec);
}

SEC("perf_event")
int walk_stack(struct bpf_perf_event_data *ctx) {
	u32 cpu = bpf_get_smp_processor_id();
	struct scratch *o = bpf_map_lookup_elem(&scratch, &cpu);
	if (!o)
		return 0;
	struct state *st = &o->st;
	count(C_SAMPLES);
	u64 period = ctx->sample_period;
	o->out.h.period = period;

	u32 nk = 0;
	if (kernel_stack && (ctx->regs.cs & 3) == 0) {
		long n = bpf_get_stack(ctx, o->out.pcs, MAX_KERN * sizeof(u64), 0);
		if (n > 0)
			nk = n / sizeof(u64);
	}
	st->nkern = nk;
	st->n = 0;
	st->mstart = st->mend = 0;
	st->mfile = 0;
	st->pc = 0;
	st->missing = 0;
	st->sigframe = 0;
	st->frames_sframe = st->frames_fp = 0;
	st->reads = 0;
	st->wlen = 0;
	st->wbase = 0;
	st->nowin = 0;
	u64 sp0 = 0;
	struct rec *rec = 0;

	u64 ucs = 0;
	if ((ctx->regs.cs & 3) != 0) {
		st->pc = ctx->regs.rip;
		st->sp = ctx->regs.rsp;
		st->fp = ctx->regs.rbp;
		ucs = ctx->regs.cs;
	} else {
		// A kernel thread's saved registers are zero: no user mode.
		struct pt_regs *r = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
		if ((r->cs & 3) != 0) {
			st->pc = r->rip;
			st->sp = r->rsp;
			st->fp = r->rbp;
			ucs = r->cs;
			count(C_KERNEL_MODE);
		}
	}
	if (ucs == USER32_CS && fallback) {
		// A 32-bit (i386) task: its stack holds 4-byte slots, which
		// 64-bit rows and frame pointers would read as garbage frames.
		// The profiler says so of the sample (perf's ABI_32 registers).
		count(C_FALLBACK);
		return 1;
	}
	if (ucs == USER32_CS)
		st->pc = 0;
	u64 pt = bpf_get_current_pid_tgid();
	if (st->pc == 0) {
		st->stop = STOP_NOREGS;
	} else {
		st->tgid = pt >> 32;
		st->tid = (u32)pt;
		sp0 = st->sp;
		u32 zero = 0;
		u64 *gen = bpf_map_lookup_elem(&genmap, &zero);
		u64 *eg = bpf_map_lookup_elem(&execgen, &zero);
		st->gen = (gen ? *gen : 0) + (eg ? *eg : 0);
		st->stop = STOP_DEPTH;
		if (!kernel_stack) {
			// A full ring would lose the stack anyway: without a
			// record, no walk (and the walk is checked once, with one).
			rec = bpf_ringbuf_reserve(&stacks, sizeof(struct rec), 0);
			if (!rec) {
				count(C_OUTPUT_ERR);
				return 0;
			}
		}
		prefill(o, sp0);
		struct walkctx wc = {o, rec};
		bpf_loop((max_depth + 1) / 2, step, &wc, 0);
		// The thread's top for its next walk: below the last window's
		// end, so read, and within WIN of SP.
		u64 top = st->sp;
		if (!st->nowin && st->wlen && top > sp0 && top - sp0 <= WIN && top > st->wbase &&
		    top <= st->wbase + st->wlen) {
			struct top *t = &o->tops[st->tid & (NTOPS - 1)];
			t->tid = st->tid;
			t->tgid = st->tgid;
			t->top = top;
			t->gen = st->gen;
		}
	}
	add(C_FRAMES_SFRAME, st->frames_sframe);
	add(C_FRAMES_FP, st->frames_fp);
	add(C_READS, st->reads);
	if (st->missing && fallback) {
		if (rec)
			bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
		count(C_FALLBACK);
		return 1;
	}
	u32 stop = st->stop;
	count(C_STOP + (stop & 7));
	u32 nu = st->n;
	nk = st->nkern;
	u64 size = OUT_HDR + (u64)(nk + nu) * sizeof(u64);
	if (size > OUT_HDR + MAX_PCS * sizeof(u64))
		size = OUT_HDR + MAX_PCS * sizeof(u64);
	if (rec && nk + nu <= NREC)
		size = sizeof(struct rec);
	u64 flags = BPF_RB_NO_WAKEUP;
	u64 un = st->unwoken + size;
	if (un >= wake_bytes) {
		flags = BPF_RB_FORCE_WAKEUP;
		un = 0;
	}
	st->unwoken = un;
	struct hdr *h = &o->out.h;
	if (rec) {
		if (nk + nu <= NREC) {
			h = &rec->h;
			h->period = period;
		} else {
			bpf_ringbuf_discard(rec, BPF_RB_NO_WAKEUP);
			rec = 0;
		}
	}
	h->nuser = nu;
	h->nkern = nk;
	h->stop = stop | (event_index & 0xff) << 8;
	h->pid = pt >> 32;
	h->tid = (u32)pt;
	h->cpu = cpu;
	// The profiler names that frame at its PC, not at the byte before
	// (a return address's call), as the walk looked its row up.
	h->sigframe = st->sigframe < nu ? st->sigframe : 0;
	h->time = bpf_ktime_get_ns();
	if (rec) {
		bpf_ringbuf_submit(rec, flags);
		return 0;
	}
	if (bpf_ringbuf_output(&stacks, &o->out, size, flags))
		count(C_OUTPUT_ERR);
	return 0;
}

// on_exec runs as a process execs, before the new program's first
// instruction: its table describes the old program, whose files may sit
// at the new one's addresses (without address randomization, say), and
// the profiler reads the exec's records only later. The table goes, so
// that the new program's samples are passed on to the user-space walk
// (or their walk stops) until the profiler has its mappings, and the
// profiler is woken to read them.
SEC("tracepoint/sched/sched_process_exec")
int on_exec(void *ctx) {
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (bpf_map_delete_elem(&procs, &tgid))
		return 0;
	u32 zero = 0;
	u64 *eg = bpf_map_lookup_elem(&execgen, &zero);
	if (eg)
		__sync_fetch_and_add(eg, 1);
	bpf_ringbuf_output(&misses, &tgid, sizeof(tgid), BPF_RB_FORCE_WAKEUP);
	return 0;
}

// The vm_unmapped_area tracepoint's record (its format file).
struct unmapped_area {
	u64 common;
	u64 addr, total_vm, flags, length, low_limit, high_limit, align_mask, align_offset;
};

struct cutctx {
	struct proc *p;
	u64 start, end;
	u32 cut;
};

// cut_step empties mapping i of c's table if it overlaps [start, end):
// its end set to its start, no PC is in it, a walk there misses and
// wakes the profiler.
static long cut_step(u64 i, struct cutctx *c) {
	struct proc *p = c->p;
	if (i >= p->n || i >= MAX_MAPS)
		return 1;
	struct mapping *m = &p->m[i & (MAX_MAPS - 1)];
	if (m->start >= c->end)
		return 1;
	if (m->end > c->start && m->end > m->start) {
		m->end = m->start;
		c->cut = 1;
	}
	return 0;
}

// on_unmapped_area runs as the kernel picks the address of a new
// mapping (an mmap without MAP_FIXED, as the dynamic loader's first of
// a library): a mapping of the process's table there is gone (perf
// records no munmap), and the code mapped next there, a library loaded
// where an unloaded one was, must not be walked with the old one's rows
// until the profiler's next pass. The mapping is emptied in the kernel's
// table (and the mapping caches moved to a new generation), so that the
// walks there miss, and wake the profiler, which by then has the new
// MMAP record to read. A tracepoint of the mmap path only: the syscall
// tracepoints would slow every system call of the machine (dd with
// one-byte blocks: +28%).
SEC("tracepoint/mmap/vm_unmapped_area")
int on_unmapped_area(struct unmapped_area *ctx) {
	u64 addr = ctx->addr;
	if (addr >= (u64)-4095)
		return 0;
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc *p = bpf_map_lookup_elem(&procs, &tgid);
	if (!p)
		return 0;
	struct cutctx c = {p, addr, addr + ctx->length, 0};
	bpf_loop(MAX_MAPS, cut_step, &c, 0);
	if (c.cut) {
		u32 zero = 0;
		u64 *eg = bpf_map_lookup_elem(&execgen, &zero);
		if (eg)
			__sync_fetch_and_add(eg, 1);
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
