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
# are counted.
# Usage: scripts/unwind-instructions.sh [N]   (default 200)
set -euo pipefail
n=${1:-200}
root=$(cd "$(dirname "$0")/.." && pwd)
work=${BENCH_DIR:-/tmp/sframekit-unwind-instr}
mkdir -p "$work"
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

total() { # benchmark iterations -> instructions of the whole run
	valgrind --tool=callgrind --toggle-collect='*Unwinder).Unwind' --callgrind-out-file="$work/cg.out" \
		"$work/unwind.test" -test.run '^$' -test.bench "^$1\$" -test.benchtime "$2x" >"$work/bench.txt" 2>"$work/valgrind.txt"
	grep -q "^$1" "$work/bench.txt" || { cat "$work/bench.txt" "$work/valgrind.txt" >&2; exit 1; }
	callgrind_annotate "$work/cg.out" | awk '/PROGRAM TOTALS/ && !done {gsub(",", "", $1); print $1; done = 1}'
}
declare -A per
for b in BenchmarkUnwindSFrame BenchmarkUnwindCFI; do
	a=$(total "$b" 1)
	z=$(total "$b" $((n + 1)))
	frames=$(awk '/^Benchmark/ {for (i = 1; i < NF; i++) if ($(i+1) == "frames") print $i}' "$work/bench.txt")
	per[$b]=$(awk -v a="$a" -v z="$z" -v n="$n" -v f="$frames" 'BEGIN {printf "%.1f", (z - a) / ((n + 2) * f)}')
	echo "$b: ${per[$b]} instructions/frame ($frames frames)"
done
awk -v s="${per[BenchmarkUnwindSFrame]}" -v c="${per[BenchmarkUnwindCFI]}" 'BEGIN {printf "CFI/SFrame: %.1fx\n", c / s}'
