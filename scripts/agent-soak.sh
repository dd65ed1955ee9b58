#!/usr/bin/env bash
# Soak of sframe agent (run by hand; figures in docs/PERFORMANCE.md):
# the agent profiles, at 99 Hz with 15 s periods and serving pprof on
# 127.0.0.1, a workload that starts a new short process every second (a
# new PID, new mappings, its files' tables), for MINUTES (default 20),
# with a pprof scrape every 30 s. By default it follows the workload's
# process tree (-p): on a shared machine, -a would also measure whatever
# else runs (other people's builds and tests, whose binaries' tables the
# agent holds while they run); AGENT_ARGS=-a profiles every process. The
# agent's RSS is sampled every 10 s; at the end the RSS after the first
# minute and at the end are compared (the target: within 10%), with the
# agent's CPU.
#
#   bash scripts/agent-soak.sh [MINUTES] [PYROSCOPE_URL]
set -euo pipefail
minutes=${1:-20}
pyro=${2:-}
. "$(dirname "$0")/lib.sh"
temp_build sframe-soak
# The churn: a new process every second, each working ~0.1 s.
( while :; do "$work/recprog" work 300000000 >/dev/null 2>&1 & sleep 1; done ) &
churn=$!
args=(agent ${AGENT_ARGS:--p $churn} --listen 127.0.0.1:0 --period 15s)
[ -n "$pyro" ] && args+=(--pyroscope "$pyro")
"$work/sframe" "${args[@]}" 2>"$work/agent.log" &
agent=$!
trap 'kill $churn $agent 2>/dev/null || true' EXIT
sleep 1
addr=$(grep -o 'http://[0-9.:]*' "$work/agent.log" | head -1)
echo "seconds,rss_kib,cpu_ticks" >"$work/rss.csv"
end=$((SECONDS + minutes * 60))
t0=$SECONDS
while [ $SECONDS -lt $end ]; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$agent/status)
  ticks=$(awk '{print $14 + $15}' /proc/$agent/stat)
  echo "$((SECONDS - t0)),$rss,$ticks" >>"$work/rss.csv"
  if [ $(((SECONDS - t0) % 30)) -lt 10 ] && [ -n "$addr" ]; then
    curl -s -o /dev/null "$addr/debug/pprof/profile?seconds=2" || true
  fi
  sleep 10
done
kill -TERM $agent
wait $agent || true
hz=$(getconf CLK_TCK)
awk -F, -v hz="$hz" -v min="$minutes" 'NR==1 {next}
  $1 >= 60 && first == "" {first = $2}
  {last = $2; ticks = $3; secs = $1}
  END {
    printf "RSS after the first minute %d KiB, at the end %d KiB: %+.1f%%\n", first, last, 100 * (last - first) / first
    printf "agent CPU: %.2f s in %d s: %.2f%% of one core\n", ticks / hz, secs, 100 * ticks / hz / secs
  }' "$work/rss.csv"
echo "samples: $work/rss.csv; log: $work/agent.log"
tail -3 "$work/agent.log"
