#!/usr/bin/env python3
"""Draws docs/benchmarks.svg from the interleaved tables the bench appends to target/interleaved.md.

    python3 docs/plot_benchmarks.py docs/data/interleaved-*.md > docs/benchmarks.svg

For each shape (a later file wins over an earlier one), one group of bars: each variant's median
time relative to cuBLAS's TF32 GEMM alone (lower is faster; 1.0 is the ceiling to beat), from the
one-call tables (the bench's second, sustained-sample tables are skipped).
No dependencies: plain SVG.
"""
import re
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
            if shape and m and m.group(1) in VARIANTS:
                shapes[shape][m.group(1)] = float(m.group(2))
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
    out.append(f'<text x="{left}" y="36" fill="#555">{", ".join(days)}; commits {", ".join(commits)}; {"; ".join(devices)}</text>')
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


if __name__ == "__main__":
    rows, meta = parse(sys.argv[1:])
    print(svg(rows, meta))
