#!/usr/bin/env python3
"""Line up TestFloor's hand-offs with etcd's fdatasyncs (docs/etcd.md,
"The hand-off floor").

  perf record -k mono -a -e syscalls:sys_enter_fdatasync,syscalls:sys_exit_fdatasync -o fs.perf &
  DISTLOCK_SANDBOX=local DISTLOCK_FLOOR_OUT=/tmp/spans.txt go test -count=1 -v -run TestFloor ./etcd/
  kill -INT %1; perf script -i fs.perf -F pid,tid,time,event,trace > fs.txt
  python3 etcd/testdata/floorperf.py /tmp/spans.txt fs.txt

For each library: the hand-offs at or over its p99, and all of them, by
what they overlap: a bbolt commit's fdatasync (the db file; etcd applies no
write while its backend commits), a WAL fdatasync over 2 ms, both, or none.
"""
import bisect
import re
import sys
from collections import defaultdict

spans, fds, pid = defaultdict(list), {}, None
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "H":
        spans[f[1]].append((float(f[2]), float(f[3]), f[4] == "true"))
    elif f[0] == "PID":
        pid = int(f[1])
    elif f[0] == "FD":
        fds[int(f[1])] = f[2]

ev = re.compile(r"^\s*(\d+)/\s*(\d+)\s+([\d.]+):\s+syscalls:sys_(enter|exit)_fdatasync:\s*(.*)$")
open_, syncs = {}, {"db": [], "wal": []}
for line in open(sys.argv[2]):
    m = ev.match(line)
    if not m or int(m.group(1)) != pid:
        continue
    tid, t, kind, rest = int(m.group(2)), float(m.group(3)), m.group(4), m.group(5)
    if kind == "enter":
        fd = int(re.search(r"fd: (0x[0-9a-f]+)", rest).group(1), 16)
        open_[tid] = (t, fds.get(fd, "?"))
    elif tid in open_:
        t0, target = open_.pop(tid)
        if target.endswith("/db"):
            syncs["db"].append((t0, t))
        elif target.endswith(".wal"):
            syncs["wal"].append((t0, t))
for k in syncs:
    syncs[k].sort()
    d = sorted(e - s for s, e in syncs[k])
    if d:
        print(f"{k} fdatasyncs: n={len(d)} p50={1000*d[len(d)//2]:.2f} p99={1000*d[len(d)*99//100]:.2f} max={1000*d[-1]:.2f} ms")


def overlaps(lst, a, b, min_len=0.0):
    i = bisect.bisect_left(lst, (a - 1.0,))
    for s, e in lst[i:]:
        if s > b:
            return False
        if e > a and e - s >= min_len:
            return True
    return False


def classify(hs):
    c = defaultdict(int)
    for a, b, _ in hs:
        db = overlaps(syncs["db"], a, b)
        wal = overlaps(syncs["wal"], a, b, 0.002)
        c[("db+slow WAL" if wal else "db") if db else ("slow WAL" if wal else "neither")] += 1
    n = max(1, len(hs))
    return ", ".join(f"{k} {100*v/n:.0f}%" for k, v in sorted(c.items()))


for lib, hs in spans.items():
    ds = sorted(b - a for a, b, _ in hs)
    p99 = ds[len(ds) * 99 // 100]
    slow = [h for h in hs if h[1] - h[0] >= p99]
    print(f"{lib}: {len(hs)} hand-offs, p50 {1000*ds[len(ds)//2]:.2f} ms, p99 {1000*p99:.2f} ms")
    print(f"  the {len(slow)} at or over p99 overlap: {classify(slow)}")
    print(f"  all hand-offs overlap:        {classify(hs)}")
