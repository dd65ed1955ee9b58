#!/usr/bin/env bash
# Before/after of the BPF walker, interleaved in one session: the BPF
# program's run time per sample (the recorder's summary: the kernel's BPF
# statistics) and its reads of user memory, for two sframe binaries, on
# recorder/testdata/recprog.c (SFrame build): `work` (two threads 32
# frames deep, 1,500,000,000 iterations), 3 s of the chains program
# (`spin`: threads 5, 20 and 60 frames deep) and 2 s each of `deep
# --max-depth 5`, `deep` (32 frames), `recurse` (2,004 frames) and
# `recurse:1000` (recprog's recursion 1,000 deep: 1,004 frames; PROG:N
# passes N to recprog after its seconds).
# At the end, each spec's median and range per build.
#
# Usage: scripts/bench-bpf-ab.sh BEFORE_SFRAME AFTER_SFRAME
#        (build BEFORE from the base revision, e.g. with git worktree add;
#        ROUNDS=2; SPECS='spin 3' runs only those specs, separated by
#        commas; needs root)
set -euo pipefail
before=$(realpath "$1")
after=$(realpath "$2")
rounds=${ROUNDS:-2}
specs=${SPECS:-work 1500000000,spin 3,deep 2 --max-depth 5,deep 2,recurse 2,recurse:1000 2}
. "$(dirname "$0")/lib.sh"
workdir /tmp/sframekit-bench-bpf-ab
build_recprog -Wa,--gsframe
cd "$work"
: >results.txt
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%T) UTC"
IFS=, read -ra speclist <<<"$specs"
for r in $(seq "$rounds"); do
  for b in before after; do
    bin=$before; [ $b = after ] && bin=$after
    for spec in "${speclist[@]}"; do
      set -- $spec; prog=${1%%:*}; arg=$2; shift 2
      extra=(); [[ $spec == *:* ]] && { extra=("${spec%% *}"); extra=("${extra[0]#*:}"); }
      if [ "$prog" = work ]; then
        "$bin" record --bpf "$@" -o ab.pb.gz -- ./recprog "$prog" "$arg" >/dev/null 2>err.txt
      else
        "$bin" record --bpf --duration "$arg" "$@" -o ab.pb.gz -- ./recprog "$prog" 3 "${extra[@]}" >/dev/null 2>err.txt
      fi
      t=$(sed -n 's/.*, \([0-9.]*\(ns\|µs\|ms\)\) per sample in the BPF program.*/\1/p' err.txt)
      printf '%s %-6s %-22s %s per sample, %s samples, reads %s\n' "$r" $b "$spec" "$t" \
        "$(sed -n 's/^walked in the kernel (--bpf): \([0-9]*\) samples.*/\1/p' err.txt)" \
        "$(sed -n 's/.*reads of user memory \([0-9]*\).*/\1/p' err.txt)"
      printf '%s\t%s\t%s\n' "$spec" $b "$t" >>results.txt
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%T) UTC"
# Medians in µs (ns and ms converted).
for spec in "${speclist[@]}"; do
  for b in before after; do
    awk -F'\t' -v s="$spec" -v b=$b '$1 == s && $2 == b {
        v = $3; u = v; sub(/[0-9.]+/, "", u); v += 0
        if (u == "ns") v /= 1000; else if (u == "ms") v *= 1000
        print v }' results.txt | sort -g | awk -v s="$spec" -v b=$b '{ x[++n] = $1 }
      END { if (!n) exit
        m = n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
        printf "%-22s %-6s median %.2f µs (%.2f-%.2f), %d runs\n", s, b, m, x[1], x[n], n }'
  done
done
