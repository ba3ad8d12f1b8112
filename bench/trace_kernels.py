#!/usr/bin/python3
"""Where a traced step's time went: sums the complete events ("ph": "X") of a Chrome trace
written by `tower train --trace=FILE` per lane (a replica's host thread, a GPU stream's timed
kernels) and per event name, and prints the largest, with each one's share of its lane.

  bench/trace_kernels.py trace.json [--lane=SUBSTRING] [--top=20]
"""
import argparse
import collections
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--lane", default="", help="only lanes whose name holds this")
    p.add_argument("--top", type=int, default=20, help="events per lane")
    a = p.parse_args()
    try:
        with open(a.trace) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"trace_kernels: cannot read a Chrome trace from {a.trace}: {e}")
    lanes = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            lanes[(e["pid"], e["tid"])] = e["args"]["name"]
    totals = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0]))
    for e in events:
        if e.get("ph") != "X":
            continue
        lane = lanes.get((e["pid"], e["tid"]), f"pid {e['pid']} tid {e['tid']}")
        if a.lane not in lane:
            continue
        entry = totals[lane][e["name"]]
        entry[0] += float(e.get("dur", 0))
        entry[1] += 1
    if not totals:
        sys.exit(f"trace_kernels: no complete events in {a.trace} (lane filter '{a.lane}')")
    for lane in sorted(totals):
        names = totals[lane]
        lane_us = sum(us for us, _ in names.values())
        print(f"{lane}: {lane_us:.1f} us in {sum(n for _, n in names.values())} events")
        for name, (us, n) in sorted(names.items(), key=lambda kv: -kv[1][0])[:a.top]:
            print(f"  {us:10.1f} us {100 * us / lane_us:5.1f}% {n:6d}x  {name}")


if __name__ == "__main__":
    main()
