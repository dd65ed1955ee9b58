#!/usr/bin/env bash
# Side by side, in one run: `sframe record --bpf` (stacks walked in the
# kernel), `sframe record` (16 KiB stack copies walked in user space)
# and `perf record --call-graph dwarf` + `perf script`, profiling
# recorder/testdata/recprog.c (mode work, SFrame build, two threads 32
# frames deep) at 999 Hz, for a short and a long amount of work,
# interleaved, RUNS times. For each profiler it fits the whole-process
# CPU time (user+system, lib.sh's tm; for sframe, minus the
# program's own CPU, which it runs) against the samples taken:
#   per sample  (median long - median short) / (their samples' difference)
# and prints, per run, the program's CPU time and wall time (its
# slowdown), the samples lost, and for --bpf the BPF program's own run
# time per sample (the kernel's BPF statistics, from the summary).
# Then the BPF run time per sample for walks of 5, 32 and 2,004 frames
# (recprog deep with --max-depth 5, deep, recurse), 2 s each.
#
# CPU times are the children's rusage to the millisecond (lib.sh's tm;
# /usr/bin/time's hundredths of a second were coarser than the
# differences measured).
# With BASE=/path/to/sframe, a fourth profiler, `$BASE record --bpf`
# (an older build), runs interleaved with the others: before and after
# in one run.
#
# Usage: scripts/bench-bpf.sh [SHORT_ITERS [LONG_ITERS]]
#        (defaults 1500000000 and 6000000000; RUNS=3; PARTS="fit depth
#        steady" or some of them; WINDOW=6; needs root)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
sizes 1500000000 6000000000 3 "$@"
recprog_setup /tmp/sframekit-bench-bpf
modes="bpf user perf"
[ -n "${BASE:-}" ] && modes="base bpf user perf"
parts=${PARTS:-fit depth steady}
if [[ $parts == *fit* ]]; then
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%T) UTC"
printf '%-5s %-6s %3s %8s %10s %9s %8s %8s %5s %9s %8s\n' mode size run samples prof_cpu_s us/sample prog_cpu elapsed lost bpf_us rec_s
for r in $(seq "$runs"); do
  for size in short long; do
    it=$short; [ $size = long ] && it=$long
    for mode in $modes; do
      lost=0; bpf=-; rec=-
      case $mode in
      perf)
        tm perf record -q -F 999 --call-graph dwarf -o perf.data -- ./recprog work "$it" >out.txt 2>err.txt
        tm perf script -i perf.data >/dev/null 2>err2.txt
        cpu=$(awk '/^elapsed/ {print $4}' out.txt)
        read -r _ u s _ < <(grep '^TIME' err.txt)
        read -r _ u2 s2 _ < <(grep '^TIME' err2.txt)
        samples=$(perf report -i perf.data --stats 2>/dev/null | awk '/SAMPLE events:/ {print $3; exit}')
        lost=$(perf report -i perf.data --stats 2>/dev/null | awk '/LOST_SAMPLES events:/ {print $3; exit}')
        prof=$(awk "BEGIN{printf \"%.4f\", $u + $s - $cpu + $u2 + $s2}")
        ;;
      *)
        flag=; bin=./sframe
        [ $mode != user ] && flag=--bpf
        [ $mode = base ] && bin=$BASE
        tm "$bin" record $flag -o out.pb.gz -- ./recprog work "$it" >out.txt 2>err.txt
        cpu=$(awk '/^elapsed/ {print $4}' out.txt)
        read -r _ u s _ < <(grep '^TIME' err.txt)
        samples=$(sed -n 's/^\([0-9]*\) samples read.*/\1/p' err.txt)
        lost=$(sed -n 's/^lost: \([0-9]*\).*/\1/p' err.txt); lost=${lost:-0}
        # Stacks the BPF program found no room for in its ring.
        rl=$(sed -n 's/.*stacks lost (their ring full) \([0-9]*\).*/\1/p' err.txt); lost=$((lost + ${rl:-0}))
        if [ $mode != user ]; then bpf=$(sed -n 's/.*), \([0-9.]*\)\(ns\|µs\|ms\) per sample in the BPF program.*/\1\2/p' err.txt); fi
        prof=$(awk "BEGIN{printf \"%.4f\", $u + $s - $cpu}")
        # The profiler's own CPU time while recording (its summary: after
        # loading the BPF program, before naming the frames).
        rec=$(sed -n 's/^profiler CPU: \([0-9.]*\)\(µs\|ms\|s\) while recording.*/\1 \2/p' err.txt | awk '{ f = $2 == "s" ? 1 : $2 == "ms" ? 1e-3 : 1e-6; printf "%.6f", $1 * f }')
        ;;
      esac
      el=$(awk '/^elapsed/ {print $2}' out.txt)
      printf '%-5s %-6s %3s %8s %10s %9.1f %8s %8s %5s %9s %8s\n' $mode $size "$r" "$samples" "$prof" "$(awk "BEGIN{print 1e6 * $prof / $samples}")" "$cpu" "$el" "${lost:-0}" "$bpf" "$rec"
    done
  done
done | tee results.txt
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%T) UTC"
awk '
  function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((k + 1) / 2)] }
  $2 == "short" || $2 == "long" { n[$1, $2] = n[$1, $2] " " $4; p[$1, $2] = p[$1, $2] " " $5; c[$1, $2] = c[$1, $2] " " $7; q[$1, $2] = q[$1, $2] " " $11
    # Each run pairs its short and long recordings (they follow each other).
    if ($2 == "short") { sn[$1] = $4; sp[$1] = $5; sq[$1] = $11 } else { pr[$1] = pr[$1] " " (1e6 * ($5 - sp[$1]) / ($4 - sn[$1])); if ($11 != "-") pq[$1] = pq[$1] " " (1e6 * ($11 - sq[$1]) / ($4 - sn[$1])) } }
  END {
    k = split(modes, ms, " ")
    for (i = 1; i <= k; i++) {
      m = ms[i]
      ns = med(n[m, "short"]); nl = med(n[m, "long"]); ps = med(p[m, "short"]); pl = med(p[m, "long"])
      printf "%-5s per sample %.2f us (medians: %d samples %.3f s, %d samples %.3f s); program CPU, long: %s s\n", m, 1e6 * (pl - ps) / (nl - ns), ns, ps, nl, pl, med(c[m, "long"])
      printf "      each run, long - short: %s us; median %.2f\n", pr[m], med(pr[m])
      if (pq[m] != "") printf "      the same, the CPU time while recording of the summary: %s us; median %.2f\n", pq[m], med(pq[m])
    }
  }' modes="$modes" results.txt
fi
if [[ $parts == *depth* ]]; then
echo
echo "BPF run time per sample by depth (2 s at 999 Hz each):"
for spec in "deep --max-depth 5" "deep" "recurse"; do
  set -- $spec; prog=$1; shift
  ./sframe record --bpf --duration 2 "$@" -o depth.pb.gz -- ./recprog "$prog" 3 >/dev/null 2>err.txt
  echo "  $spec: $(sed -n 's/.*), \([0-9.]*\(ns\|µs\|ms\)\) per sample in the BPF program.*/\1/p' err.txt), $(sed -n 's/.*(\([0-9]*\) by SFrame.*//;s/^walked in the kernel (--bpf): \([0-9]*\) samples.*/\1 samples/p' err.txt)"
done
fi

# The steady state, without the fixed costs whose run-to-run variation
# (tens of ms: loading the program, compiling tables) swamps the fit
# above: the profiler's CPU time (the sum of its threads' run time in
# /proc/PID/task/*/schedstat, nanoseconds) between 2 s and 2 + WINDOW s
# into a recording of recprog work, per sample taken in between (the
# program's threads' CPU time in that window x 999 Hz), interleaved,
# RUNS times.
if [[ $parts == *steady* ]]; then
window=${WINDOW:-6}
steady_modes=${modes/ perf/}
echo
echo "steady state: profiler CPU per sample between 2 s and $((2 + window)) s ($(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%T) UTC)"
# (mawk's %d stops at 2^31: %.0f.)
runtime_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }
for r in $(seq "$runs"); do
  for mode in $steady_modes; do
    flag=; bin=./sframe
    [ $mode != user ] && flag=--bpf
    [ $mode = base ] && bin=$BASE
    "$bin" record $flag -o steady.pb.gz -- ./recprog work 100000000000 >/dev/null 2>steady-err.txt &
    spid=$!
    sleep 2
    ppid=$(pgrep -P "$spid" recprog || true)
    s0=$(runtime_ns "$spid"); p0=$(runtime_ns "$ppid")
    sleep "$window"
    s1=$(runtime_ns "$spid"); p1=$(runtime_ns "$ppid")
    kill -INT "$ppid" 2>/dev/null || true
    wait "$spid" || true
    awk -v m=$mode -v r=$r -v s=$((s1 - s0)) -v p=$((p1 - p0)) 'BEGIN { n = p * 999 / 1e9; printf "  %-5s run %d: %.1f ms for %d samples, %.2f us per sample\n", m, r, s / 1e6, n, s / 1e3 / n }'
  done
done | tee steady.txt
awk '
  function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((k + 1) / 2)] }
  { v[$1] = v[$1] " " $(NF - 3) }
  END { for (m in v) printf "  %-5s median %.2f us per sample (%s)\n", m, med(v[m]), v[m] }' steady.txt
fi
