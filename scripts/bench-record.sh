#!/usr/bin/env bash
# Profiles one CPU-bound program at one rate with `sframe record` and with
# `perf record` (--call-graph dwarf, and -g), side by side in one run, and
# reports for each: the program's slowdown, the output's size, lost
# samples and the profiler's own CPU time per sample.
#
# The program: recorder/testdata/recprog.c in mode work, built with SFrame
# (gcc -O2 -Wa,--gsframe): two threads running a loop 32 frames deep for
# a fixed amount of work; it prints the seconds the work took and its
# CPU seconds. Runs are interleaved (baseline, sframe, perf dwarf, perf
# -g, ...) so that each tool sees the same load on this shared machine.
#
# Usage: scripts/bench-record.sh [ITERATIONS]   (default 600000000, about
# 1.5 s per thread alone; RUNS=5, FREQ=999; BASE=path/to/an/older/sframe
# adds it as tool sframe-base, measured in the same runs)
#
# Per tool and run:
#   work_s, cpu_s    the work's seconds, and the program's CPU seconds
#   sys_s            the program's system seconds: the kernel takes each
#                    sample (registers, stack copy) in the program's time
#   prof_cpu_s       user+system seconds of the profiler (time's figure,
#                    which includes the program, minus the program's own)
#   us/sample        prof_cpu_s / samples taken
#   size_B           the output file
#   lost             samples the kernel dropped (rings full)
# and over the runs, against the baseline's medians:
#   slowdown wall    work_s / baseline - 1: the figure asked for, but on a
#                    shared machine others' load swamps it
#   slowdown cpu     cpu_s / baseline - 1
#   cost             (sys_s - baseline sys_s + prof_cpu_s) / baseline
#                    cpu_s: the CPU time profiling adds, relative to the
#                    program's, which is the slowdown of a program that
#                    keeps every core busy; insensitive to others' load
set -euo pipefail
iters=${1:-600000000}
runs=${RUNS:-5}
freq=${FREQ:-999}
. "$(dirname "$0")/lib.sh"
recprog_bench /tmp/sframekit-bench-record
printf '%-11s %4s %9s %9s %9s %8s %10s %9s %10s %5s\n' tool run work_s cpu_s sys_s samples prof_cpu_s us/sample size_B lost
for r in $(seq "$runs"); do
  for tool in baseline sframe ${BASE:+sframe-base} sframe-8k perf-dwarf perf-g; do
    rm -f out.pb.gz perf.data err.txt out.txt
    case $tool in
      baseline)   tm ./recprog work "$iters" >out.txt 2>err.txt ;;
      sframe)     tm ./sframe record -F "$freq" -o out.pb.gz -- ./recprog work "$iters" >out.txt 2>err.txt ;;
      sframe-base) tm "$BASE" record -F "$freq" -o out.pb.gz -- ./recprog work "$iters" >out.txt 2>err.txt ;;
      sframe-8k)  tm ./sframe record -F "$freq" --stack-size 8192 -o out.pb.gz -- ./recprog work "$iters" >out.txt 2>err.txt ;;
      perf-dwarf) tm perf record -F "$freq" --call-graph dwarf -o perf.data -- ./recprog work "$iters" >out.txt 2>err.txt ;;
      perf-g)     tm perf record -F "$freq" -g -o perf.data -- ./recprog work "$iters" >out.txt 2>err.txt ;;
    esac
    read -r _ wall cpu sys < <(grep '^elapsed' out.txt | awk '{print "x", $2, $4, $6}')
    read -r _ u s _ < <(grep '^TIME' err.txt)
    prof=$(awk "BEGIN{printf \"%.3f\", $u + $s - $cpu}")
    samples=0 size=0 lost=0
    case $tool in
      sframe*)
        samples=$(sed -n 's/^\([0-9]*\) samples read.*/\1/p' err.txt)
        lost=$(sed -n 's/.* \([0-9]*\) lost by the kernel.*/\1/p' err.txt); lost=${lost:-0}
        size=$(stat -c %s out.pb.gz) ;;
      perf-*)
        samples=$(sed -n 's/.*(\([0-9]*\) samples).*/\1/p' err.txt)
        lost=$(perf report -i perf.data --stats 2>/dev/null | awk '/LOST events:/ {print $3}'); lost=${lost:-0}
        size=$(stat -c %s perf.data) ;;
    esac
    per=NA
    [ "${samples:-0}" -gt 0 ] && per=$(awk "BEGIN{printf \"%.1f\", 1e6 * $prof / $samples}")
    printf '%-11s %4s %9s %9s %9s %8s %10s %9s %10s %5s\n' "$tool" "$r" "$wall" "$cpu" "$sys" "${samples:-0}" "$prof" "$per" "$size" "$lost"
  done
done | tee results.txt
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Medians per tool, and slowdowns against the baseline's medians.
awk '
  $1 != "tool" { wall[$1] = wall[$1] " " $3; cpu[$1] = cpu[$1] " " $4; sys[$1] = sys[$1] " " $5; prof[$1] = prof[$1] " " $7; per[$1] = per[$1] " " $8; size[$1] = size[$1] " " $9; lost[$1] = lost[$1] " " $10; n[$1]++ }
  function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((k + 1) / 2)] }
  function lo(s,   a, k, i, m) { k = split(s, a, " "); m = a[1]; for (i = 2; i <= k; i++) if (a[i] + 0 < m + 0) m = a[i]; return m }
  function hi(s,   a, k, i, m) { k = split(s, a, " "); m = a[1]; for (i = 2; i <= k; i++) if (a[i] + 0 > m + 0) m = a[i]; return m }
  function costs(t,   a, b, p, k, i, out) { k = split(sys[t], a, " "); split(prof[t], p, " "); out = ""; for (i = 1; i <= k; i++) out = out " " 100 * (a[i] - bs + p[i]) / bc; return out }
  END {
    bw = med(wall["baseline"]); bc = med(cpu["baseline"]); bs = med(sys["baseline"])
    printf "\nmedians (ranges) over %d runs; baseline: work %.3f s, cpu %.3f s, sys %.3f s\n", n["baseline"], bw, bc, bs
    printf "%-11s %22s %22s %22s %20s %10s %12s %s\n", "tool", "slowdown wall %", "slowdown cpu %", "cost %", "prof cpu s", "us/sample", "size B", "lost"
    nt = split("sframe" (base ? " sframe-base" : "") " sframe-8k perf-dwarf perf-g", tools, " ")
    for (i = 1; i <= nt; i++) {
      t = tools[i]; c = costs(t)
      printf "%-11s %6.1f (%6.1f..%6.1f) %6.1f (%6.1f..%6.1f) %6.1f (%6.1f..%6.1f) %6s (%s..%s) %10s %12s %s\n", t,
        100 * (med(wall[t]) / bw - 1), 100 * (lo(wall[t]) / bw - 1), 100 * (hi(wall[t]) / bw - 1),
        100 * (med(cpu[t]) / bc - 1), 100 * (lo(cpu[t]) / bc - 1), 100 * (hi(cpu[t]) / bc - 1),
        med(c), lo(c), hi(c), med(prof[t]), lo(prof[t]), hi(prof[t]), med(per[t]), med(size[t]), lost[t]
    }
  }' base="${BASE:+1}" results.txt
