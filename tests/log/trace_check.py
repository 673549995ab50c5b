"""Checks a trace written by tests/log/trace_test.cpp: valid JSON with the structure Perfetto reads.

Usage: trace_check.py TRACE RANK EVENTS BEGIN_END_PAIRS THREAD_NAME
"""
import json
import sys

path, rank, events, pairs, thread_name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
    int(sys.argv[4]), sys.argv[5]
d = json.load(open(path))
ev = d["traceEvents"]
x = [e for e in ev if e["ph"] in ("B", "E", "i")]
assert len(x) == events, (len(x), events)
assert all(e["pid"] == rank for e in ev)
assert sum(e["ph"] == "B" for e in x) == sum(e["ph"] == "E" for e in x) == pairs
for tid in {e["tid"] for e in x}:
    ts = [e["ts"] for e in x if e["tid"] == tid]
    assert ts == sorted(ts), "time goes back on thread %d" % tid
    depth = 0
    for e in (e for e in x if e["tid"] == tid):
        depth += {"B": 1, "E": -1, "i": 0}[e["ph"]]
        assert depth >= 0, "end before begin on thread %d" % tid
    assert depth == 0
assert any(e["ph"] == "M" and e["name"] == "thread_name" and e["args"]["name"] == thread_name
           for e in ev)
assert d["otherData"]["dropped_events"] == 0
