#!/usr/bin/env bash
# Times `sframe stack PID` against `gdb -batch -p PID -ex 'thread apply all
# bt'` and `eu-stack -p PID` on one process: unwind/testdata/stackprog.c
# built with SFrame v1 (gas 2.40) and without frame pointers, run with 5
# threads blocked 200+ frames deep (plus main, 3 shallow workers, a thread
# in a signal handler and one in qsort). All three tools stop the same
# process, in one run of this script.
# Usage: scripts/bench-stack.sh [DEPTH]   (default 250; RUNS=15, GDB_RUNS=5,
# HF_RUNS=40, PERF_RUNS=30; DEEP=N deep threads instead of 5: DEEP=0
# leaves 6 shallow threads)
#
# On a shared machine wall times move with the load (printed at the start
# and the end): the counts of `perf stat` (CPU time, page faults, context
# switches, system calls, threads created) move much less, and are printed
# for sframe stack and eu-stack when perf is installed.
set -euo pipefail
depth=${1:-250}
deep=${DEEP:-5}
. "$(dirname "$0")/lib.sh"
workdir /tmp/sframekit-bench-stack
gcc -O2 -fomit-frame-pointer -Wa,--gsframe -pthread -o "$work/stackprog" "$root/unwind/testdata/stackprog.c"
build_sframe
cd "$work"
rm -f ready.txt stdin.fifo
mkfifo stdin.fifo
# stdin is a FIFO this script holds open: the program exits at EOF when the
# script ends, and is killed by the trap in any case.
./stackprog "$deep" "$depth" < stdin.fifo > ready.txt &
pid=$!
exec 3> stdin.fifo
trap 'kill $pid 2>/dev/null || true; rm -f stdin.fifo' EXIT
for _ in $(seq 100); do grep -q ready ready.txt 2>/dev/null && break; sleep 0.1; done
sleep 0.2
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# Same work first: every tool must see the deep threads whole.
sf_frames=$(./sframe stack "$pid" | grep -c '^#')
if command -v eu-stack >/dev/null; then eu_frames=$( (eu-stack -p "$pid" 2>/dev/null || true) | grep -c "^#"); else eu_frames=NA; fi
gdb_frames=$(gdb -batch -p "$pid" -ex 'thread apply all bt' 2>/dev/null | grep -c '^#')
echo "frames printed: sframe=$sf_frames eu-stack=$eu_frames gdb=$gdb_frames"

# The machine is shared: time each run, interleave the tools so that they
# see the same load, and report medians (and the minimum).
runs=${RUNS:-15}
gdb_runs=${GDB_RUNS:-5}
once() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(( (e - s) / 1000 )); }
sf_t=() eu_t=() gd_t=()
for i in $(seq "$runs"); do
  sf_t+=("$(once ./sframe stack "$pid")")
  if command -v eu-stack >/dev/null; then eu_t+=("$(once eu-stack -p "$pid")"); fi
  if [ "$i" -le "$gdb_runs" ]; then gd_t+=("$(once gdb -batch -p "$pid" -ex 'thread apply all bt')"); fi
done
median() { [ $# -eq 0 ] && { echo NA; return; }; printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
minimum() { [ $# -eq 0 ] && { echo NA; return; }; printf '%s\n' "$@" | sort -n | head -1; }
sf=$(median "${sf_t[@]}") eu=$(median "${eu_t[@]}") gd=$(median "${gd_t[@]}")
ratio() { [ "$2" = NA ] && echo NA || awk "BEGIN{printf \"%.3f\", $1/$2}"; }
echo "depth=$depth threads=$(ls /proc/$pid/task | wc -l) runs=$runs (gdb $gdb_runs), median (min) microseconds:"
echo "  sframe stack: $sf ($(minimum "${sf_t[@]}"))"
echo "  eu-stack:     $eu ($(minimum "${eu_t[@]}"))"
echo "  gdb:          $gd ($(minimum "${gd_t[@]}"))"
echo "  sframe/eu-stack=$(ratio "$sf" "$eu") sframe/gdb=$(ratio "$sf" "$gd")"

# Counts per run, the two tools interleaved in rounds of 5 runs.
if command -v perf >/dev/null && command -v eu-stack >/dev/null && perf stat -e task-clock true >/dev/null 2>&1; then
  events=task-clock,page-faults,context-switches
  if perf stat -e raw_syscalls:sys_enter,syscalls:sys_enter_clone true >/dev/null 2>&1; then
    events=$events,raw_syscalls:sys_enter,syscalls:sys_enter_clone
  fi
  for _ in $(seq $(( (${PERF_RUNS:-30} + 4) / 5 ))); do
    perf stat -r 5 -x, -e "$events" ./sframe stack "$pid" 2>&1 >/dev/null | sed 's/^/sframe,/'
    # eu-stack exits 1 after printing every frame (hence || true).
    { perf stat -r 5 -x, -e "$events" eu-stack -p "$pid" 2>&1 >/dev/null || true; } | sed 's/^/eu-stack,/'
  done | awk -F, '{ k = $1 SUBSEP $4; s[k] += $2; n[k]++; ev[$4] = 1 }
    END {
      print "perf stat means per run (CPU ms, faults, switches, syscalls, clones):"
      for (t = 0; t < 2; t++) {
        tool = t ? "eu-stack" : "sframe"
        printf "  %-13s", tool ":"
        split("task-clock page-faults context-switches raw_syscalls:sys_enter syscalls:sys_enter_clone", order, " ")
        for (i = 1; i <= 5; i++) { k = tool SUBSEP order[i]; if (n[k]) printf " %s=%.1f", order[i], s[k] / n[k] }
        print ""
      }
    }'
fi

# The loop above times each run from a shell, whose own fork+exec of
# `date` lands inside every interval. hyperfine (Debian package hyperfine)
# runs the commands directly (-N) and is the figure docs/PERFORMANCE.md
# quotes; -i because eu-stack exits 1 after printing every frame.
if command -v hyperfine >/dev/null && command -v eu-stack >/dev/null; then
  hyperfine -N -i --warmup 3 --runs "${HF_RUNS:-40}" --prepare "sleep 0.05" --export-json hf.json \
    "./sframe stack $pid" "eu-stack -p $pid" >/dev/null 2>&1
  python3 - <<'PY'
import json
r = json.load(open("hf.json"))["results"]
sf, eu = r[0]["mean"] * 1e3, r[1]["mean"] * 1e3
print(f"hyperfine means: sframe stack {sf:.1f} ms, eu-stack {eu:.1f} ms, sframe/eu-stack={sf/eu:.3f}")
PY
fi
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
