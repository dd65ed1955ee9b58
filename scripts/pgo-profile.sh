#!/usr/bin/env bash
# Writes cmd/sframe/default.pgo, the CPU profile that `go build` and
# `go install` of sframe use for profile-guided optimization (Go's PGO:
# the calls the profile shows hot are inlined, and the interface calls
# devirtualized). The profile is that of the benchmarks of the hot paths
# of sframe record, report and stack, run without PGO: unwinding a C++
# compiler's samples (perfunwind's ColdCXX, the per-sample path of a live
# recording, recorder's OnlineSample), naming its frames and writing the
# profile (recorder's WritePprofCXX, which also records g++), merging
# stacks, reading symbol tables, perf.data records and unwind tables, and
# printing. Rerun it after changing those paths; a stale profile costs
# only the gain (Go matches the profile to the code by function and line).
#
# Usage: scripts/pgo-profile.sh   (needs g++, and perf events for the
# recorder's benchmarks: run as root or with perf_event_paranoid <= 1)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
n=0
bench() { # PACKAGE REGEXP BENCHTIME
  n=$((n + 1))
  go test -pgo=off -run '^$' -bench "$2" -benchtime "$3" -o "$tmp/$n.test" \
    -cpuprofile "$tmp/$n.prof" "./$1" | grep -E '^(Benchmark|ok|FAIL)' || true
  [ -s "$tmp/$n.prof" ] || { echo "$1: no profile written" >&2; exit 1; }
}
bench perfunwind 'ColdCXX' 8x
bench perfunwind 'UnwindSamples|Process$' 3x
bench recorder 'OnlineSample' 20000x
bench recorder 'WritePprofCXX' 12x
bench recorder 'Intern' 20x
bench symbolize 'LoadCC1plus|LoadLibc' 50x
bench unwind 'UnwindSFrame|UnwindCFI|RuleTable' 0.2s
bench perfdata 'Reader|Decode' 20x
bench sframe 'DecodeValidate|FindFRE' 0.2s
bench cfi 'RowForPC' 0.2s
bench dump 'Text' 0.2s
go tool pprof -proto "$tmp"/*.prof >"$tmp/default.pgo"
mv "$tmp/default.pgo" cmd/sframe/default.pgo
echo "cmd/sframe/default.pgo: $(wc -c <cmd/sframe/default.pgo) bytes from $n benchmark runs"
