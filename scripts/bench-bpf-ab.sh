#!/usr/bin/env bash
# Before/after of the BPF walker, interleaved in one session: the BPF
# program's run time per sample (the recorder's summary: the kernel's BPF
# statistics) and its reads of user memory, for two sframe binaries, on
# recorder/testdata/recprog.c (SFrame build): `work` (two threads 32
# frames deep, 1,500,000,000 iterations), 3 s of the chains program
# (`spin`: threads 5, 20 and 60 frames deep) and 2 s each of `deep
# --max-depth 5`, `deep` (32 frames) and `recurse` (2,004 frames).
#
# Usage: scripts/bench-bpf-ab.sh BEFORE_SFRAME AFTER_SFRAME
#        (build BEFORE from the base revision, e.g. with git worktree add;
#        ROUNDS=2; needs root)
set -euo pipefail
before=$(realpath "$1")
after=$(realpath "$2")
rounds=${ROUNDS:-2}
. "$(dirname "$0")/lib.sh"
workdir /tmp/sframekit-bench-bpf-ab
build_recprog -Wa,--gsframe
cd "$work"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%T) UTC"
for r in $(seq "$rounds"); do
  for b in before after; do
    bin=$before; [ $b = after ] && bin=$after
    for spec in "work 1500000000" "spin 3" "deep 2 --max-depth 5" "deep 2" "recurse 2"; do
      set -- $spec; prog=$1; arg=$2; shift 2
      if [ "$prog" = work ]; then
        "$bin" record --bpf "$@" -o ab.pb.gz -- ./recprog "$prog" "$arg" >/dev/null 2>err.txt
      else
        "$bin" record --bpf --duration "$arg" "$@" -o ab.pb.gz -- ./recprog "$prog" 3 >/dev/null 2>err.txt
      fi
      printf '%s %-6s %-22s %s per sample, %s samples, reads %s\n' "$r" $b "$spec" \
        "$(sed -n 's/.*, \([0-9.]*\(ns\|µs\|ms\)\) per sample in the BPF program.*/\1/p' err.txt)" \
        "$(sed -n 's/^walked in the kernel (--bpf): \([0-9]*\) samples.*/\1/p' err.txt)" \
        "$(sed -n 's/.*reads of user memory \([0-9]*\).*/\1/p' err.txt)"
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%T) UTC"
