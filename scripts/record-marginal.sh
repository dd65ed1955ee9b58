#!/usr/bin/env bash
# Splits the CPU time of `sframe record` into a fixed cost per run and a
# cost per sample: it profiles recorder/testdata/recprog.c (mode work,
# SFrame build, two threads 32 frames deep; see bench-record.sh) at 999
# Hz for a short and a long amount of work, interleaved, RUNS times, and
# fits the profiler's whole-process CPU time (user+system, lib.sh's
# tm, minus the program's own) against the samples taken:
#   per sample  (median long - median short) / (their samples' difference)
#   fixed       median short - per sample * its samples
# The whole-process figure per sample of each run is printed too: it
# includes the fixed cost (start-up, the files' tables, naming, writing).
#
# Usage: scripts/record-marginal.sh [SHORT_ITERS [LONG_ITERS]]
#        (defaults 3000000000 and 12000000000: about 1 s and 4 s of two
#        busy threads; RUNS=5, SFRAME=path to use another build)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
sizes 3000000000 12000000000 5 "$@"
recprog_bench /tmp/sframekit-record-marginal
printf '%-6s %4s %8s %10s %9s\n' size run samples prof_cpu_s us/sample
for r in $(seq "$runs"); do
  for size in short long; do
    it=$short; [ $size = long ] && it=$long
    tm ./sframe record -o out.pb.gz -- ./recprog work "$it" >out.txt 2>err.txt
    cpu=$(awk '/^elapsed/ {print $4}' out.txt)
    read -r _ u s _ < <(grep '^TIME' err.txt)
    samples=$(sed -n 's/^\([0-9]*\) samples read.*/\1/p' err.txt)
    prof=$(awk "BEGIN{printf \"%.4f\", $u + $s - $cpu}")
    printf '%-6s %4s %8s %10s %9.1f\n' $size "$r" "$samples" "$prof" "$(awk "BEGIN{print 1e6 * $prof / $samples}")"
  done
done | tee results.txt
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
  function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((k + 1) / 2)] }
  $1 == "short" || $1 == "long" { n[$1] = n[$1] " " $3; p[$1] = p[$1] " " $4 }
  END {
    ns = med(n["short"]); nl = med(n["long"]); ps = med(p["short"]); pl = med(p["long"])
    per = (pl - ps) / (nl - ns)
    printf "\nmedians: short %d samples %.4f s, long %d samples %.4f s\n", ns, ps, nl, pl
    printf "per sample %.2f us, fixed %.1f ms; whole process %.1f us/sample (short), %.1f (long)\n", 1e6 * per, 1e3 * (ps - per * ns), 1e6 * ps / ns, 1e6 * pl / nl
  }' results.txt
