#!/usr/bin/env bash
# Profiles a compilation of a large C++ translation unit (cc1plus: deep
# stacks, no SFrame, a long tail of functions) with `sframe record` and
# with `perf record --call-graph dwarf`, side by side in one run, and
# reports each profiler's own CPU time per sample and their ratio.
#
# The work: `g++ -std=c++17 -O2 -c scripts/bench-cc1plus.cc` (every
# libstdc++ header and NUM instantiations of containers, algorithms,
# regex, streams and futures). It runs under `bash -c '...; times'`, so
# that each run prints the CPU time of the compilation itself (the
# shell's and its children's); the profiler's own CPU time is then
# the whole run's user+system (lib.sh's tm) minus that. Runs are
# interleaved (baseline, sframe, perf dwarf, ...) so that each profiler
# sees the same load on this shared machine.
#
# Usage: scripts/bench-cc1plus.sh   (RUNS=3, NUM=8, FREQ=999; SFRAME=path
# to measure another build of sframe; BASE=path to an older sframe adds
# it as tool sframe-base, measured in the same runs; BPF=1 adds `sframe
# record --bpf` as tool sframe-bpf; SIZE=bytes of stack per sample for
# both profilers, default 16384, sframe's default)
#
# Per tool and run:
#   prog_cpu_s   the compilation's CPU seconds (user+system), which include
#                the kernel's work of taking each sample
#   samples      samples taken (sframe's summary, perf's "(N samples)")
#   prof_cpu_s   the profiler's user+system seconds
#   us/sample    prof_cpu_s / samples
#   rec_us       sframe only: its summary's "profiler CPU ... while
#                recording" per sample (unwinding included; naming the
#                frames and writing the profile, after, left out)
#   copy_end     sframe only: walks that ended where the stack copy ends
#   bpf_us       sframe-bpf only: the BPF program's run time per sample
#                (the kernel's statistics; charged to the compilation, not
#                in prof_cpu_s)
#   name_ms      sframe only: its summary's milliseconds "to name the
#                frames and write the profile", after the recording (a
#                cost per function reached more than per sample)
set -euo pipefail
runs=${RUNS:-3}
num=${NUM:-8}
freq=${FREQ:-999}
size=${SIZE:-16384}
. "$(dirname "$0")/lib.sh"
workdir /tmp/sframekit-bench-cc1plus
cp "$root/scripts/bench-cc1plus.cc" "$work/tu.cc"
build_sframe
cd "$work"
compile="g++ -std=c++17 -O2 -DNUM=$num -c tu.cc -o tu.o; times"
# seconds of `times` output ("0m1.234s 0m0.056s" per line): the sum of all four
secs() { grep -E '^[0-9]+m[0-9.]+s [0-9]+m[0-9.]+s$' | tr 'ms' '  ' | awk '{t += 60 * $1 + $2 + 60 * $3 + $4} END {printf "%.3f", t}'; }

print_load
echo "$(g++ --version | head -1); $(perf --version); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs"
printf '%-10s %4s %10s %8s %10s %9s %7s %8s %7s %7s\n' tool run prog_cpu_s samples prof_cpu_s us/sample rec_us copy_end bpf_us name_ms
for r in $(seq "$runs"); do
  for tool in baseline sframe ${BASE:+sframe-base} ${BPF:+sframe-bpf} perf-dwarf; do
    rm -f out.pb.gz perf.data err.txt out.txt
    case $tool in
      baseline)   tm bash -c "$compile" >out.txt 2>err.txt ;;
      sframe-base) tm "$BASE" record -F "$freq" --stack-size "$size" -o out.pb.gz -- bash -c "$compile" >out.txt 2>err.txt ;;
      sframe-bpf) tm ./sframe record --bpf -F "$freq" -o out.pb.gz -- bash -c "$compile" >out.txt 2>err.txt ;;
      sframe)     tm ./sframe record -F "$freq" --stack-size "$size" -o out.pb.gz -- bash -c "$compile" >out.txt 2>err.txt ;;
      perf-dwarf) tm perf record -F "$freq" --call-graph "dwarf,$size" -o perf.data -- bash -c "$compile" >out.txt 2>err.txt ;;
    esac
    prog=$(secs <out.txt)
    read -r _ u s _ < <(grep '^TIME' err.txt)
    prof=$(awk "BEGIN{printf \"%.3f\", $u + $s - $prog}")
    samples=0 rec=NA copyend=NA bpf=NA name=NA
    case $tool in
      sframe*)
        samples=$(sed -n 's/^\([0-9]*\) samples read.*/\1/p' err.txt)
        rec=$(sed -n 's/.* \([0-9.]*\) µs per sample.*/\1/p' err.txt)
        name=$(sed -n 's/.*; \([0-9.]*\)ms to name the frames.*/\1/p' err.txt)
        copyend=$(sed -n 's/.*, \([0-9]*\) where the stack copy ends.*/\1/p' err.txt)
        bpf=$(sed -n 's/.*, \([0-9.]*\)\(ns\|µs\) per sample in the BPF program.*/\1 \2/p' err.txt | awk '{ if ($2 == "ns") $1 /= 1000; printf "%.2f", $1 }') ;;
      perf-dwarf)
        samples=$(sed -n 's/.*(\([0-9]*\) samples).*/\1/p' err.txt) ;;
    esac
    per=NA
    [ "${samples:-0}" -gt 0 ] && per=$(awk "BEGIN{printf \"%.1f\", 1e6 * $prof / $samples}")
    printf '%-10s %4s %10s %8s %10s %9s %7s %8s %7s %7s\n' "$tool" "$r" "$prog" "${samples:-0}" "$prof" "$per" "${rec:-NA}" "${copyend:-NA}" "${bpf:-NA}" "${name:-NA}"
  done
done | tee results.txt
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
awk '
  function med(s,   a, k, i, j, t) { k = split(s, a, " "); for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((k + 1) / 2)] }
  $1 != "tool" { prog[$1] = prog[$1] " " $3; per[$1] = per[$1] " " $6; prof[$1] = prof[$1] " " $5; rec[$1] = rec[$1] " " $7; bpfus[$1] = bpfus[$1] " " $9; nm[$1] = nm[$1] " " $10 }
  END {
    printf "\nmedians: compilation %.2f s CPU alone; profiler CPU per sample: sframe %.1f us (%.1f while recording, %.0f ms naming and writing), perf dwarf %.1f us; sframe / perf %.2fx (profiler CPU %.3f s vs %.3f s)\n",
      med(prog["baseline"]), med(per["sframe"]), med(rec["sframe"]), med(nm["sframe"]), med(per["perf-dwarf"]), med(per["sframe"]) / med(per["perf-dwarf"]), med(prof["sframe"]), med(prof["perf-dwarf"])
    if (base) printf "sframe-base: %.1f us per sample (%.1f while recording, %.0f ms naming and writing), %.2fx perf dwarf (profiler CPU %.3f s)\n", med(per["sframe-base"]), med(rec["sframe-base"]), med(nm["sframe-base"]), med(per["sframe-base"]) / med(per["perf-dwarf"]), med(prof["sframe-base"])
    if (bpf) printf "sframe-bpf: %.1f us per sample (%.1f while recording) and %.2f us in the BPF program, %.2fx perf dwarf for the process alone (profiler CPU %.3f s)\n", med(per["sframe-bpf"]), med(rec["sframe-bpf"]), med(bpfus["sframe-bpf"]), med(per["sframe-bpf"]) / med(per["perf-dwarf"]), med(prof["sframe-bpf"])
  }' base="${BASE:+1}" bpf="${BPF:+1}" results.txt
