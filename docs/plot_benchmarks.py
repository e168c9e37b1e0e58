#!/usr/bin/env python3
"""Draws the charts of docs/BENCHMARKS.md from the benches' markdown output. No dependencies: plain SVG.

    python3 docs/plot_benchmarks.py docs/notebook/data/interleaved-*.md > docs/benchmarks.svg
    python3 docs/plot_benchmarks.py --sweep docs/notebook/data/sweep-*.md > docs/sweep.svg
    python3 docs/plot_benchmarks.py --sweep --median docs/notebook/data/sweep-4e0cc95*.md > docs/sweep.svg

Bars (fused_vs_cublas, target/interleaved.md): for each shape (a later file wins over an earlier
one), one group of bars: each variant's median time relative to cuBLAS's TF32 GEMM alone (lower is
faster; 1.0 is the ceiling to beat), from the one-call tables (the bench's second, sustained-sample
tables are skipped). "ours" is the default handle on the raw W (labelled "ours (fused)…").

Heatmap (--sweep, the sweep bench's report, target/sweep.md): ours / cuBLAS alone over M (rows) ×
(N, K) (columns), one panel per variant of ours; --variants raw,prepared,truncated picks them
(default raw,prepared); cublaslt (cuBLASLt + bias / cuBLAS alone) and raw-vs-cublaslt (ours / cuBLASLt
+ bias) draw the sweep's cuBLASLt columns (reports from 36735e9 on). A later file wins per point;
with --median (several runs of one build), each cell is the median of the runs' values instead,
since a single run's point can move by 5-15 % (docs/notebook/BENCHMARKS-notebook.md, "Shared tails at short K").
"""
import math
import re
import statistics
import sys

VARIANTS = ["ours (fused)", "cuBLAS GEMM + elementwise", "cuBLASLt bias+alpha (1 call)", "cuBLAS GEMM alone (no bias/epilogue)"]
LABELS = ["ours (fused, 1 kernel)", "cuBLAS + elementwise", "cuBLASLt bias·(1+s)", "cuBLAS GEMM alone"]
COLORS = ["#2b8a3e", "#868e96", "#4dabf7", "#1c3d5a"]


def parse(paths):
    shapes, order, meta = {}, [], []
    for path in paths:
        shape = None
        for line in open(path, encoding="utf-8"):
            m = re.match(r"## fused_vs_cublas interleaved run, (.*)", line)
            if m:
                meta.append(m.group(1).strip())
            m = re.match(r"### (\S+) \(M×N×K\)", line)
            if m and "sustained samples" in line:
                shape = None  # the chart shows one-call samples; sustained tables are skipped
                continue
            if m:
                shape = m.group(1)
                if shape not in shapes:
                    order.append(shape)
                shapes[shape] = {}
                continue
            m = re.match(r"\| (.+?) \| ([0-9.]+) \| ([0-9.]+) \|", line)
            # Since the rounding rows (issue 13) the default is labelled "ours (fused), Nearest (default), raw W".
            label = m and ("ours (fused)" if m.group(1).startswith("ours (fused)") else m.group(1))
            if shape and m and label in VARIANTS:
                shapes[shape][label] = float(m.group(2))
    return [(s, shapes[s]) for s in order if len(shapes[s]) == len(VARIANTS)], meta


def svg(rows, meta):
    bar, gap, left, top, height = 14, 18, 70, 50, 260
    width = max(left + len(rows) * (4 * bar + gap) + 20, 780)
    ymax = max(max(t[v] / t[VARIANTS[3]] for v in VARIANTS) for _, t in rows)
    ymax = max(1.2, ymax * 1.05)
    y = lambda r: top + height - r / ymax * height
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{top + height + 150}" font-family="sans-serif" font-size="11">']
    out.append(f'<text x="{left}" y="20" font-size="14">Median time relative to cuBLAS TF32 GEMM alone (lower is faster), H200</text>')
    commits = sorted({m.split("commit ")[1].split(",")[0] for m in meta if "commit " in m})
    days = sorted({m.split(" ")[0] for m in meta})
    devices = sorted({m.split("commit ", 1)[1].split(", ", 1)[1] for m in meta if "commit " in m})
    runs = f"; per-point median of {len(meta)} runs" if median else ""
    out.append(f'<text x="{left}" y="36" fill="#555">{", ".join(days)}; commits {", ".join(commits)}; {"; ".join(devices)}{runs}</text>')
    for r in [0, 0.5, 1.0, 1.5, 2.0, 2.5]:
        if r <= ymax:
            out.append(f'<line x1="{left}" x2="{width - 10}" y1="{y(r):.1f}" y2="{y(r):.1f}" stroke="{"#000" if r == 1.0 else "#ddd"}"/>')
            out.append(f'<text x="{left - 8}" y="{y(r) + 4:.1f}" text-anchor="end">{r:.1f}</text>')
    for i, (shape, t) in enumerate(rows):
        x0 = left + 10 + i * (4 * bar + gap)
        for j, v in enumerate(VARIANTS):
            r = t[v] / t[VARIANTS[3]]
            out.append(f'<rect x="{x0 + j * bar}" y="{y(r):.1f}" width="{bar - 2}" height="{top + height - y(r):.1f}" fill="{COLORS[j]}"><title>{LABELS[j]}: {t[v]:.4f} ms ({r:.3f}×)</title></rect>')
        out.append(f'<text x="{x0 + 2 * bar}" y="{top + height + 14}" text-anchor="end" transform="rotate(-35 {x0 + 2 * bar} {top + height + 14})">{shape}</text>')
    for j, label in enumerate(LABELS):
        out.append(f'<rect x="{left + j * 175}" y="{top + height + 110}" width="12" height="12" fill="{COLORS[j]}"/>')
        out.append(f'<text x="{left + j * 175 + 16}" y="{top + height + 120}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out)




# --- Heatmap of the sweep ---------------------------------------------------------------------

# --variants name -> (column of the report's "### Points" table, panel title)
# (the bench's ratio column: computed before the times were rounded for printing)
SWEEP_VARIANTS = {
    "raw": ("raw / alone", "ours (default Tf32, raw W)"),
    "prepared": ("prepared / alone", "ours (Tf32, prepared W: Linear)"),
    "truncated": ("truncated / alone", "ours (Tf32Truncated, raw W)"),
    "cublaslt": ("cuBLASLt / alone", "cuBLASLt, GEMM + bias epilogue (1 call)"),
    "raw-vs-cublaslt": ("raw / cuBLASLt", "ours (default Tf32, raw W) / cuBLASLt + bias"),
}
OURS_VS_ALONE = {"raw", "prepared", "truncated"}  # panels of ours / cuBLAS alone


def parse_sweep(paths, median=False):
    """{(m, n, k): {column: value}}, the run headers, and the (n, k) in order of appearance. The
    value is the last file's, or with `median` the median over the files that have the point."""
    runs, meta, layers = {}, [], []
    for path in paths:
        columns = None
        for line in open(path, encoding="utf-8"):
            m = re.match(r"## sweep run, (.*)", line)
            if m:
                meta.append(m.group(1).strip())
            if line.startswith("### "):
                columns = None
            cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
            if cells and cells[:3] == ["M", "N", "K"]:
                columns = cells
            elif columns and cells and re.fullmatch(r"[0-9]+", cells[0]):
                m_, n, k = (int(c) for c in cells[:3])
                for c, v in zip(columns[3:], cells[3:]):
                    if re.fullmatch(r"[0-9.]+|nan|NaN", v):
                        runs.setdefault((m_, n, k), {}).setdefault(c, []).append(float(v))
                if (n, k) not in layers:
                    layers.append((n, k))
    pick = statistics.median if median else (lambda values: values[-1])
    points = {shape: {c: pick(values) for c, values in columns.items()} for shape, columns in runs.items()}
    return points, meta, layers


def color(r):
    """Green below 1 (ours faster), red above, white at 1; saturated at 0.5x and 2x (log scale)."""
    if r is None or not math.isfinite(r) or r <= 0:
        return "#e9ecef"
    t = max(-1.0, min(1.0, math.log2(r)))
    hi = (47, 158, 68) if t < 0 else (224, 49, 49)
    mix = [round(255 + (c - 255) * abs(t)) for c in hi]
    return "#%02x%02x%02x" % tuple(mix)


def sweep_svg(points, meta, layers, variants, median=False):
    cw, ch, left, top, gap = 78, 20, 84, 64, 36
    ms = sorted({m for (m, _, _) in points})
    panel_h = 30 + len(ms) * ch + gap
    width = max(left + len(layers) * cw + 20, 720)
    height = top + len(variants) * panel_h + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">']
    ours_vs_alone = set(variants) <= OURS_VS_ALONE
    headline = "Median time of ours / cuBLAS TF32 GEMM alone, over M × (N, K); green: ours faster" if ours_vs_alone else "Median time ratios over M × (N, K), each panel the ratio it names; green: below 1"
    out.append(f'<text x="{left}" y="20" font-size="14">{headline}</text>')
    days = sorted({m.split(" ")[0] for m in meta})
    commits = sorted({m.split("commit ")[1].split(",")[0] for m in meta if "commit " in m})
    devices = sorted({m.split("commit ", 1)[1].split(", ", 1)[1] for m in meta if "commit " in m and ", " in m.split("commit ", 1)[1]})
    runs = f"; per-point median of {len(meta)} runs" if median else ""
    out.append(f'<text x="{left}" y="36" fill="#555">{", ".join(days)}; commits {", ".join(commits)}; {"; ".join(devices)}{runs}</text>')
    for i, name in enumerate(variants):
        column, title = SWEEP_VARIANTS[name]
        y0 = top + i * panel_h
        ratios = [t[column] for t in points.values() if t.get(column)]
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
        worst = max(ratios) if ratios else float("nan")
        below = "ahead on" if name in OURS_VS_ALONE else "below 1 on"
        out.append(f'<text x="{left}" y="{y0}" font-size="12">{title}: geomean {geo:.3f}, worst {worst:.3f}, {below} {sum(r < 1 for r in ratios)} / {len(ratios)}</text>')
        for j, (n, k) in enumerate(layers):
            out.append(f'<text x="{left + j * cw + cw / 2}" y="{y0 + 22}" text-anchor="middle">{n}×{k}</text>')
        out.append(f'<text x="{left - 6}" y="{y0 + 22}" text-anchor="end" fill="#555">N×K</text>')
        for r_, m in enumerate(ms):
            y = y0 + 28 + r_ * ch
            out.append(f'<text x="{left - 6}" y="{y + 14}" text-anchor="end">M = {m}</text>')
            for j, (n, k) in enumerate(layers):
                t = points.get((m, n, k), {})
                r = t.get(column)
                label = f"{r:.2f}" if r is not None else "–"
                tip = f"{m}×{n}×{k}: {r:.3f}× ({t.get('cuBLAS alone', float('nan')):.5f} ms for cuBLAS alone)" if r is not None else f"{m}×{n}×{k}: not measured"
                out.append(f'<rect x="{left + j * cw}" y="{y}" width="{cw - 1}" height="{ch - 1}" fill="{color(r)}"><title>{tip}</title></rect>')
                out.append(f'<text x="{left + j * cw + cw / 2}" y="{y + 14}" text-anchor="middle">{label}</text>')
    y = height - 24
    for j, r in enumerate([0.5, 0.71, 0.85, 1.0, 1.18, 1.41, 2.0]):
        out.append(f'<rect x="{left + j * 48}" y="{y}" width="47" height="14" fill="{color(r)}"/>')
        out.append(f'<text x="{left + j * 48 + 24}" y="{y + 11}" text-anchor="middle">{r:.2f}</text>')
    legend = "ours / cuBLAS alone" if ours_vs_alone else "ratio"
    out.append(f'<text x="{left + 7 * 48 + 8}" y="{y + 11}">{legend} (colour on a log scale)</text>')
    out.append("</svg>")
    return "\n".join(out)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["--sweep"]:
        argv, variants, median = argv[1:], ["raw", "prepared"], False
        if argv[:1] == ["--median"]:
            median, argv = True, argv[1:]
        if argv[:1] == ["--variants"]:
            variants, argv = argv[1].split(","), argv[2:]
        unknown = [v for v in variants if v not in SWEEP_VARIANTS]
        if unknown or not argv:
            sys.exit(f"usage: plot_benchmarks.py --sweep [--median] [--variants {','.join(SWEEP_VARIANTS)}] FILE...")
        points, meta, layers = parse_sweep(argv, median)
        print(sweep_svg(points, meta, layers, variants, median))
    else:
        rows, meta = parse(argv)
        print(svg(rows, meta))
