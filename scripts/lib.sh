# The setup the benchmark scripts share, sourced by them:
#   . "$(dirname "$0")/lib.sh"
# It sets root, the module's folder, and defines:
#   workdir DEFAULT      work: $BENCH_DIR, else DEFAULT; created
#   build_sframe         $work/sframe: a copy of $SFRAME when set (another
#                        build to measure), else built from root
#   build_recprog FLAGS  $work/recprog from recorder/testdata/recprog.c,
#                        gcc -O2 FLAGS -pthread (-Wa,--gsframe: SFrame)
#   sizes SHORT LONG RUNS [ARG...]  the runs of a benchmark over two
#                        sizes: short and long (iterations), the script's
#                        first two ARGs, else SHORT and LONG; runs, $RUNS,
#                        else RUNS
#   recprog_setup DEFAULT  the setup of a benchmark profiling recprog:
#                        workdir DEFAULT, an SFrame build of recprog,
#                        build_sframe, cd "$work"
#   recprog_bench DEFAULT  recprog_setup DEFAULT, then print_load
#   temp_build NAME FLAGS  work: a new folder /tmp/NAME.XXXXXX, with
#                        build_sframe and build_recprog FLAGS; cd "$root"
#   tm CMD...            runs CMD and prints "TIME user sys elapsed" on
#                        standard error: the CPU seconds of CMD and of
#                        every process it waited for, to the millisecond
#                        (bash's time), and the wall seconds
#   print_load           the load averages, before a measurement
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
workdir() {
  work=${BENCH_DIR:-$1}
  mkdir -p "$work"
}
build_sframe() {
  if [ -n "${SFRAME:-}" ]; then cp "$SFRAME" "$work/sframe"; else (cd "$root" && go build -o "$work/sframe" ./cmd/sframe); fi
}
build_recprog() { gcc -O2 "$@" -pthread -o "$work/recprog" "$root/recorder/testdata/recprog.c"; }
sizes() {
  short=${4:-$1}
  long=${5:-$2}
  runs=${RUNS:-$3}
}
recprog_setup() {
  workdir "$1"
  build_recprog -Wa,--gsframe
  build_sframe
  cd "$work"
}
recprog_bench() {
  recprog_setup "$1"
  print_load
}
temp_build() {
  work=$(mktemp -d "/tmp/$1.XXXXXX")
  build_sframe
  build_recprog "${@:2}"
  cd "$root"
}
# (Not /usr/bin/time: GNU time cuts %U and %S to 10 ms each, which made
# a profiler's CPU in bench-cc1plus.sh 10 ms a run less than it was, on
# average, as its baseline rows showed: -3 to -15 ms with no profiler.)
tm() {
  local TIMEFORMAT='TIME %3U %3S %3R'
  time "$@"
}
print_load() { echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"; }
