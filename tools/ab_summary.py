#!/usr/bin/env python3
"""Summary of an A/B sweep (tools/ab_sweep.sh): one table, a row per point, from the sweep
bench's report of each (repeat, build, point), files named r<repeat>-<build>-<MxNxK>.md.

Each report's ratio ours / cuBLAS alone was timed in one process, interleaved; the builds ran
in separate processes, so their absolute times drift with the card's clock and the ratios to
cuBLAS are what compare. Columns are found by their headers in the sweep's report, never by
position, so a change of the report's layout fails here instead of reading the wrong column.

usage: ab_summary.py DIR BASE_NAME NEW_NAME
"""
import glob
import os
import re
import statistics
import sys
from collections import defaultdict

# The sweep report's points table is read by the heatmap's parser (columns by header name).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs"))
from plot_benchmarks import parse_sweep  # noqa: E402

RAW = "Tf32 raw W"
ALONE = "cuBLAS alone"
PLANS_KEY = "M×N×K"
PLAN_RAW = "Tf32, raw W"
ERRORS = "‖e‖/‖ref‖ raw, prepared, truncated"


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_plan(path):
    """(plan of ours raw W, [errors raw, prepared, truncated]) from the report's plans table."""
    header = None
    for line in open(path, encoding="utf-8"):
        if not line.startswith("|"):
            header = None
            continue
        row = cells(line)
        if row and row[0] == PLANS_KEY:
            header = {name: i for i, name in enumerate(row)}
            for need in (PLAN_RAW, ERRORS):
                if need not in header:
                    sys.exit(f"{path}: the plans table has no column {need!r}")
        elif header is not None and not set("".join(row)) <= set("-:"):
            return row[header[PLAN_RAW]], [float(e) for e in row[header[ERRORS]].split(",")]
    return None


def read_report(path):
    """(ours raw W µs, cuBLAS alone µs, ratio, plan of ours raw W, [errors raw, prepared, truncated])."""
    points, _, _ = parse_sweep([path])
    plan = read_plan(path)
    if len(points) != 1 or plan is None:
        return None
    (columns,) = points.values()
    for need in (RAW, ALONE):
        if need not in columns:
            sys.exit(f"{path}: the points table has no column {need!r}")
    raw, alone = columns[RAW], columns[ALONE]
    return (raw * 1e3, alone * 1e3, raw / alone) + plan


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    directory, base, new = sys.argv[1:]
    runs = defaultdict(dict)  # point -> (build, repeat) -> report
    missing = []
    for path in sorted(glob.glob(os.path.join(directory, "r*-*-*.md"))):
        m = re.fullmatch(r"r(\d+)-(.+)-(\d+x\d+x\d+)\.md", os.path.basename(path))
        if not m or m.group(2) not in (base, new):
            continue
        report = read_report(path)
        if report is None:
            missing.append(os.path.basename(path))
            continue
        runs[m.group(3)][(m.group(2), int(m.group(1)))] = report
    if not runs:
        sys.exit(f"no sweep reports for {base} and {new} in {directory}")

    print(f"| M×N×K | {base}, µs | {new}, µs | {base} / cuBLAS alone | {new} / cuBLAS alone | "
          f"{new} / {base} (median of the ratios to cuBLAS) |")
    print("|---|---|---|---|---|---:|")
    errors = {base: [0.0, 0.0, 0.0], new: [0.0, 0.0, 0.0]}
    plans = defaultdict(set)
    for point, by in runs.items():
        repeats = sorted({r for (_, r) in by})
        cols = []
        for build in (base, new):
            got = [by[(build, r)] for r in repeats if (build, r) in by]
            for g in got:
                errors[build] = [max(a, b) for a, b in zip(errors[build], g[4])]
                plans[(point, build)].add(g[3])
            cols.append(got)
        us = [", ".join(f"{g[0]:.2f}" for g in got) or "–" for got in cols]
        ratio = [", ".join(f"{g[2]:.3f}" for g in got) or "–" for got in cols]
        both = [r for r in repeats if (base, r) in by and (new, r) in by]
        rel = statistics.median(by[(new, r)][2] / by[(base, r)][2] for r in both) if both else float("nan")
        print(f"| {point.replace('x', '×')} | {us[0]} | {us[1]} | {ratio[0]} | {ratio[1]} | {rel:.3f} |")
    print()
    for build in (base, new):
        e = errors[build]
        print(f"- {build}: max ‖e‖/‖ref‖ against f64 (raw W Tf32, prepared W Tf32, Tf32Truncated): "
              f"{e[0]:.2e}, {e[1]:.2e}, {e[2]:.2e}")
    print()
    for point in runs:
        p = [" / ".join(sorted(plans[(point, b)])) for b in (base, new)]
        same = "the same plan" if p[0] == p[1] else f"{base}: {p[0]}; {new}: {p[1]}"
        print(f"- {point.replace('x', '×')}: {same}" + (f" ({p[0]})" if p[0] == p[1] else ""))
    if missing:
        print(f"\nreports without a point (the filter matched nothing, or the run failed): {', '.join(missing)}")


if __name__ == "__main__":
    main()
