#!/usr/bin/env bash
# Reproduces the numbers of docs/PERFORMANCE.md "SFrame format library":
# the go benchmarks of package sframe, libsframe (binutils 2.40, cgo)
# against sframekit on the same 100,000-function v1 section in one run,
# and `sframe dump` against `objdump --sframe` (scripts/bench-dump.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
count=${COUNT:-5}
go test ./sframe -run '^$' -bench 'DecodeValidate|FindFRE|SearchBaseline' -benchtime 2s -count "$count"
scripts/bench-dump.sh 100000
SFRAMEKIT_BIG_V1=${BENCH_DIR:-/tmp/sframekit-bench}/big100000.elf \
  go test -tags libsframe ./internal/libsframe -run Agree -bench . -benchtime 2s -count "$count"
