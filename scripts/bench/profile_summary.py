#!/usr/bin/env python3
"""Where the time goes: sums a Chrome trace written by `nmt_bench train --profile TRACE.json` (or
`nmt_bench translate --profile`) by name, as self time (a span's time less that of the spans it
called), and prints the largest entries. With LibTorch 2 on a GPU the trace also holds the CUDA
runtime's calls and the GPU's kernels: their names carry their category, [cuda_runtime] or [kernel].

Usage: scripts/bench/profile_summary.py TRACE.json [TOP]
Standard library only.
"""
import collections
import json
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    try:
        with open(path, encoding="utf-8") as handle:
            trace = json.load(handle)
    except (OSError, json.JSONDecodeError) as error:
        sys.exit(f"profile_summary: {path}: {error}")
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    spans = [e for e in events if e.get("ph") == "X" and "dur" in e]
    by_thread = collections.defaultdict(list)
    for span in spans:
        by_thread[(span.get("pid", 0), span.get("tid", 0))].append(span)

    self_time = collections.Counter()
    calls = collections.Counter()
    busy = 0.0
    for thread_spans in by_thread.values():
        thread_spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []  # [end, name, child time]
        for span in thread_spans:
            start, end = span["ts"], span["ts"] + span["dur"]
            while stack and stack[-1][0] <= start:
                finished = stack.pop()
                self_time[finished[1]] += finished[3] - finished[2]
            if stack:
                stack[-1][2] += span["dur"]
            else:
                busy += span["dur"]
            name = span["name"]
            if span.get("cat") not in (None, "cpu_op", "Operator", "user_annotation"):
                name = f"[{span['cat']}] {name}"
            stack.append([end, name, 0.0, span["dur"]])
            calls[name] += 1
        for finished in stack:
            self_time[finished[1]] += finished[3] - finished[2]

    print(f"{len(spans)} operator calls, {busy / 1e3:.1f} ms inside operators (top level)")
    print(f"{'self ms':>10} {'%':>6} {'calls':>8}  operator")
    for name, micros in self_time.most_common(top):
        print(f"{micros / 1e3:10.1f} {100 * micros / busy:6.1f} {calls[name]:8d}  {name}")


if __name__ == "__main__":
    main()
