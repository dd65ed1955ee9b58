#!/usr/bin/env python3
"""Times sframe report against perf on one recording, the commands
interleaved run by run (so that each sees the same moment of a shared
machine's load), and prints means, medians and the ratios against perf.

Usage (in the directory of the recording):
    scripts/report-interleaved.py RECORDING NEW_SFRAME [BASE_SFRAME] [ROUNDS]
ROUNDS defaults to 12, after one round of warm-up. The commands are the
ones of docs/PERFORMANCE.md, "perf recordings": perf script -F
comm,tid,time,ip,sym,dso and sframe report --format text against each
other, perf report --stdio and sframe report (pprof) against each other.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

if len(sys.argv) < 3:
    sys.exit(__doc__)
data, new = sys.argv[1], sys.argv[2]
base = sys.argv[3] if len(sys.argv) > 3 and not sys.argv[3].isdigit() else None
rounds = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 12
pb = os.path.join(tempfile.mkdtemp(), 'p.pb.gz')
cmds = {'perf script': ['perf', 'script', '-i', data, '-F', 'comm,tid,time,ip,sym,dso']}
if base:
    cmds['text base'] = [base, 'report', '--format', 'text', '-q', '-o', '/dev/null', data]
cmds['text new'] = [new, 'report', '--format', 'text', '-q', '-o', '/dev/null', data]
cmds['perf report'] = ['perf', 'report', '-i', data, '--stdio']
if base:
    cmds['pprof base'] = [base, 'report', '-q', '-o', pb, data]
cmds['pprof new'] = [new, 'report', '-q', '-o', pb, data]

res = {k: [] for k in cmds}
with open(os.devnull, 'w') as null:
    for r in range(rounds + 1):
        for k, c in cmds.items():
            t = time.perf_counter()
            subprocess.run(c, stdout=null, stderr=null, check=True)
            if r > 0:  # round 0 warms the caches up
                res[k].append((time.perf_counter() - t) * 1000)
with open('/proc/loadavg') as f:
    print('load after:', ' '.join(f.read().split()[:3]))
for k, v in res.items():
    print('%-12s mean %8.1f ms  median %8.1f ms  min %8.1f  max %8.1f' % (k, statistics.mean(v), statistics.median(v), min(v), max(v)))
for peer, ours in (('perf script', ('text base', 'text new')), ('perf report', ('pprof base', 'pprof new'))):
    for k in ours:
        if k in res:
            p, o = res[peer], res[k]
            print('%-12s vs %s: %.1fx by means, %.1fx by medians' % (k, peer, statistics.mean(p) / statistics.mean(o), statistics.median(p) / statistics.median(o)))
