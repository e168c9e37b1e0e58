#!/usr/bin/env python3
"""Per-point medians over several sweep runs of the same build, against issue 17's targets.

    python3 tools/sweep_medians.py docs/notebook/data/sweep-4e0cc95*.md

One sweep run's worst point is the largest of 108 ratios, each from one process's interleaved
samples, and a single point can move by 5-15 % between runs of the same build
(docs/notebook/BENCHMARKS-notebook.md, "Shared tails at short K"). Given several runs, this prints each run's
summary next to the per-point medians over all of them: the geometric mean, the worst median
and its point, the points whose median is behind cuBLAS + elementwise, the named points, and
the points above 1.03 in any run with all their ratios. It reads the sweep report's "Points"
table by its column names, and the epilogue form from its "Epilogue: `FORM`" line (none: the
seed's), refusing runs of different forms; it ignores everything else.
"""
import math
import statistics
import sys

COLUMNS = {
    "raw / alone": "raw",
    "prepared / alone": "prepared",
    "raw / (+ew)": "raw_ew",
    "prepared / (+ew)": "prepared_ew",
}
NAMED = [((1, 4096, 4096), 1.00), ((16, 4096, 4096), 1.00), ((1, 768, 3072), 1.10)]


def read(path):
    """{(m, n, k): {key: ratio}} from one report's points table, its title line and its epilogue form."""
    points, header, title, form = {}, None, path, "seed"
    for line in open(path, encoding="utf-8"):
        if line.startswith("Epilogue: `"):
            form = line.split("`")[1]
        if line.startswith("## sweep run"):
            # "## sweep run, DATE TIME UTC, commit C ...": keep the time and the commit.
            parts = line[3:].split(", ")
            title = f"{parts[1]}, {parts[2].split(' (')[0]}" if len(parts) > 2 else line[3:].strip()
        if not line.startswith("|"):
            header = None if not line.strip() else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:3] == ["M", "N", "K"]:
            header = cells
            continue
        if header is None or not cells[0].isdigit():
            continue
        row = dict(zip(header, cells))
        shape = (int(row["M"]), int(row["N"]), int(row["K"]))
        points[shape] = {key: float(row[col]) for col, key in COLUMNS.items() if col in row}
    if not points:
        sys.exit(f"{path}: no points table")
    return title, points, form


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values))


def name(shape):
    return "×".join(map(str, shape))


def summary(label, points, key="raw"):
    ratios = {s: r[key] for s, r in points.items()}
    worst = max(ratios, key=ratios.get)
    behind = sorted(name(s) for s, r in points.items() if r[key + "_ew"] >= 1.0)
    named = ", ".join(f"{name(s)} {ratios[s]:.3f}" for s, _ in NAMED if s in ratios)
    behind_text = f"{len(behind)} ({', '.join(behind)})" if behind else "0"
    print(f"| {label} | {geomean(ratios.values()):.3f} | {ratios[worst]:.3f} at {name(worst)} | "
          f"{sum(v <= 1.03 for v in ratios.values())} / {len(ratios)} | {behind_text} | {named} |")


def main(paths):
    if len(paths) < 2:
        sys.exit(__doc__)
    runs = [read(p) for p in paths]
    shapes, form = set(runs[0][1]), runs[0][2]
    for path, (_, points, this_form) in zip(paths, runs):
        if set(points) != shapes:
            sys.exit(f"{path}: not the same points as {paths[0]}")
        if this_form != form:
            sys.exit(f"{path}: epilogue {this_form}, not {paths[0]}'s {form}")
    epilogue = "" if form == "seed" else f", epilogue {form}"
    medians = {s: {k: statistics.median(r[1][s][k] for r in runs) for k in COLUMNS.values()} for s in shapes}
    for key in ("raw", "prepared"):
        print(f"\n### ours, Tf32 ({key} W) / cuBLAS alone{epilogue}\n")
        print("| run | geomean | worst | points ≤ 1.03 | points behind cuBLAS + ew | named points |")
        print("|---|---:|---|---:|---|---|")
        for path, (title, points, _) in zip(paths, runs):
            summary(f"{title} ({path.rsplit('/', 1)[-1]})", points, key)
        summary(f"median over the {len(runs)} runs, per point", medians, key)
    print("\n### Points above 1.03 in any run (raw W / cuBLAS alone, run by run; median)\n")
    print("| M×N×K | ratios | median |")
    print("|---|---|---:|")
    for s in sorted(shapes):
        values = [r[1][s]["raw"] for r in runs]
        if max(values) > 1.03:
            print(f"| {name(s)} | {', '.join(f'{v:.3f}' for v in values)} | {medians[s]['raw']:.3f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
