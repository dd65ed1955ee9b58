#!/usr/bin/env bash
# Times `sframe dump` against `objdump --sframe` on one large SFrame v1
# binary made with this machine's gcc (binutils 2.40 emits v1), in one run.
# Usage: scripts/bench-dump.sh [NFUNCS]   (default 100000)
set -euo pipefail
n=${1:-100000}
. "$(dirname "$0")/lib.sh"
corpus=${SFRAMEKIT_CORPUS:-$root/../shared/corpus}
workdir /tmp/sframekit-bench
exe=$work/big$n.elf
if [ ! -f "$exe" ]; then
  python3 "$corpus/src/gen_big.py" "$n" > "$work/big$n.c"
  gcc -O2 -Wa,--gsframe -o "$exe" "$work/big$n.c"
fi
build_sframe
cd "$work"
# Same output first: the comparison is only fair if both print the same.
cmp <(objdump --sframe "big$n.elf") <(./sframe dump "big$n.elf")
runs=${RUNS:-5}
t() { local s e; s=$(date +%s%N); for _ in $(seq "$runs"); do "$@" >/dev/null; done; e=$(date +%s%N); echo $(( (e - s) / runs / 1000000 )); }
ob=$(t objdump --sframe "big$n.elf")
sf=$(t ./sframe dump "big$n.elf")
echo "functions=$n objdump_ms=$ob sframe_ms=$sf ratio=$(awk "BEGIN{printf \"%.2f\", $sf/$ob}")"
