#!/usr/bin/env bash
# Counts the instructions per frame of BenchmarkUnwindSFrame and
# BenchmarkUnwindCFI with valgrind's callgrind: a measure that, unlike
# time, does not move with the load of this shared machine. The snapshot
# is the benchmarks' own (stackprog, SFrame v1, no frame pointers, a
# thread 1,000 calls deep), taken from a gcore core file so that the
# benchmark runs under valgrind without ptrace or child processes.
# Each benchmark runs twice, with -benchtime 1x and (N+1)x: 2 and N+4 calls
# of Unwind (one before the timer, and the testing package's first run
# with b.N = 1); the difference, divided by N+2 times the frame count, is
# the cost of a frame. Only instructions executed inside Unwinder.Unwind
# are counted. The figure in parentheses, the one to compare, leaves out
# two kinds of noise (and needs python3): the NOPs the Go assembler pads
# code with so that no jump crosses a 32-byte boundary, which move with
# the address of every function, so that a change anywhere in the binary
# adds or removes a few per frame; and the runtime's functions other than
# memmove and memclr, which run inside Unwind only when the scheduler
# preempts it (a few thousand instructions, at random). GOMAXPROCS=1
# keeps the benchmark's goroutine on one thread: callgrind toggles
# collection per thread, and a walk that moved to another one after a
# preemption went uncounted from there on (1% of a CFI run, at random).
# Usage: scripts/unwind-instructions.sh [N]   (default 200)
set -euo pipefail
n=${1:-200}
. "$(dirname "$0")/lib.sh"
workdir /tmp/sframekit-unwind-instr
gcc -O2 -fomit-frame-pointer -Wa,--gsframe -pthread -o "$work/stackprog" "$root/unwind/testdata/stackprog.c"
(cd "$root/unwind" && go test -c -o "$work/unwind.test" .)
cd "$work"
rm -f ready.txt stdin.fifo core.*
mkfifo stdin.fifo
./stackprog 1 1000 < stdin.fifo > ready.txt &
pid=$!
exec 3> stdin.fifo
trap 'kill $pid 2>/dev/null || true; rm -f stdin.fifo' EXIT
for _ in $(seq 100); do grep -q ready ready.txt 2>/dev/null && break; sleep 0.1; done
sleep 0.2
tid=
for t in /proc/$pid/task/*; do
	if [ "$(cat "$t/comm")" = deep0 ]; then tid=${t##*/}; fi
done
gcore -o core "$pid" >/dev/null 2>&1
export UNWIND_BENCH_CORE="$work/core.$pid,$work/stackprog,$tid"
export GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off # callgrind cannot follow Go's preemption signals, nor execute RDTSCP (valgrind 3.19)
export GOMAXPROCS=1 # (golang.org/x/sys/cpu reads GODEBUG too, and warns that it knows no rdtscp: harmless)

go tool objdump "$work/unwind.test" >"$work/objdump.txt"

total() { # benchmark iterations -> instructions of the whole run, and those of the noise
	valgrind --tool=callgrind --dump-instr=yes --toggle-collect='*Unwinder).Unwind' --callgrind-out-file="$work/cg.out" \
		"$work/unwind.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "$2x" >"$work/bench.txt" 2>"$work/valgrind.txt"
	grep -q "^$1" "$work/bench.txt" || { cat "$work/bench.txt" "$work/valgrind.txt" >&2; exit 1; }
	python3 - "$work/objdump.txt" "$work/cg.out" <<'EOF'
import re, sys
nops = set()
for l in open(sys.argv[1]):
    f = [x for x in l.split('\t') if x.strip()]
    if len(f) >= 4 and f[1].startswith('0x') and f[3].startswith('NOP'):
        nops.add(int(f[1], 16))
# Cost lines are "instr line Ir", each position absolute (0x...),
# relative (+N, -N) or repeated (*), under the fn= they follow; the line
# after calls= is a call's inclusive cost, counted where it is spent.
keep = ('runtime.memmove', 'runtime.memclr', 'runtime.duff')
names, runtime = {}, False
total = noise = 0
prev = [0, 0]
skip = False
for l in open(sys.argv[2]):
    if l.startswith(('fn=', 'cfn=')):
        m = re.match(r'c?fn=\((\d+)\)(?: (.*))?', l.strip())
        if m.group(2):
            names[m.group(1)] = m.group(2)
        if l.startswith('fn='):
            name = names[m.group(1)]
            runtime = name.startswith('runtime.') and not name.startswith(keep)
        continue
    if l.startswith('calls='):
        skip = True
        continue
    if not (l[:1].isdigit() or l[:1] in '+-*'):
        continue
    parts = l.split()
    for i, p in enumerate(parts[:2]):
        if p == '*':
            continue
        if p[0] in '+-':
            d = int(p[1:], 16) if p[1:].startswith('0x') else int(p[1:])
            prev[i] += d if p[0] == '+' else -d
        else:
            prev[i] = int(p, 0)
    if skip:
        skip = False
        continue
    ir = int(parts[2]) if len(parts) > 2 else 0
    total += ir
    if runtime or prev[0] in nops:
        noise += ir
print(total, noise)
EOF
}
declare -A per
for b in BenchmarkUnwindSFrame BenchmarkUnwindCFI; do
	r=$(total "$b" 1) && read -r a anop <<<"$r"
	r=$(total "$b" $((n + 1))) && read -r z znop <<<"$r"
	frames=$(awk '/^Benchmark/ {for (i = 1; i < NF; i++) if ($(i+1) == "frames") print $i}' "$work/bench.txt")
	per[$b]=$(awk -v a="$a" -v z="$z" -v n="$n" -v f="$frames" 'BEGIN {printf "%.1f", (z - a) / ((n + 2) * f)}')
	nonop=$(awk -v a="$((a - anop))" -v z="$((z - znop))" -v n="$n" -v f="$frames" 'BEGIN {printf "%.1f", (z - a) / ((n + 2) * f)}')
	echo "$b: ${per[$b]} instructions/frame ($frames frames; $nonop without alignment NOPs and the scheduler)"
done
awk -v s="${per[BenchmarkUnwindSFrame]}" -v c="${per[BenchmarkUnwindCFI]}" 'BEGIN {printf "CFI/SFrame: %.1fx\n", c / s}'
