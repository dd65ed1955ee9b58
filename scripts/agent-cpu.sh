#!/usr/bin/env bash
# CPU of sframe agent at 99 Hz with every CPU busy (run by hand; figures in
# docs/PERFORMANCE.md): one spinning recprog per CPU (three threads each
# in chains of 5, 20 and 60 frames), the agent profiling every process
# (-a) for SECONDS (default 120) with 15 s periods, serving pprof and, if
# given, pushing to Pyroscope: profiling, naming, encoding and shipping
# together. The agent's CPU time is read from /proc/PID/stat; the target
# is at most 1% of one core.
#
#   bash scripts/agent-cpu.sh [SECONDS] [PYROSCOPE_URL]
set -euo pipefail
secs=${1:-120}
pyro=${2:-}
. "$(dirname "$0")/lib.sh"
temp_build sframe-agentcpu -Wa,--gsframe
pids=()
for _ in $(seq "$(nproc)"); do "$work/recprog" spin $((secs + 30)) >/dev/null & pids+=($!); done
trap 'kill ${pids[*]} 2>/dev/null || true' EXIT
args=(agent -a --listen 127.0.0.1:0)
[ -n "$pyro" ] && args+=(--pyroscope "$pyro")
"$work/sframe" "${args[@]}" 2>"$work/agent.log" &
agent=$!
sleep "$secs"
hz=$(getconf CLK_TCK)
ticks=$(awk '{print $14 + $15}' /proc/$agent/stat)
kill -TERM $agent
wait $agent || true
awk -v t="$ticks" -v hz="$hz" -v s="$secs" 'BEGIN {printf "agent CPU: %.2f s in %d s at 99 Hz, every CPU busy: %.2f%% of one core\n", t / hz, s, 100 * t / hz / s}'
tail -2 "$work/agent.log"
