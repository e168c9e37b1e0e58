#!/usr/bin/env python3
"""Warp-state samples of one kernel per block of straight-line SASS, from ncu's source page (stdlib only).

    ncu --section SourceCounters ... -o REPORT PROGRAM
    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > SOURCE.csv
    tools/ncu_blocks.py [--top N] [--sort REASON] [--range NAME:LO-HI ...] SOURCE.csv[.gz]

A block is a run of consecutive instructions that executed or were sampled (an instruction that
did neither ends it). Prints the N blocks with the most samples (offsets from the kernel's first
instruction, instructions executed, samples, the leading stall reasons, the block's first
instruction), then the samples and instructions executed per named offset range (`--range
order_wait:0x2400-0x2600`; offsets outside every range count as `other`), so that a kernel's
time can be split by role (mainloop, epilogue, producer) with ranges read off its SASS.
`--sort no_inst` lists the blocks with the most samples of that stall reason instead (ncu's
column name without `stall_`: no_inst, long_sb, wait, barrier, ...).
"""

import argparse
import collections
import csv
import gzip
import sys


def rows_of(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        rows = list(csv.reader(f))
    head = next(i for i, r in enumerate(rows) if "Address" in r and "Source" in r)
    return rows[head], rows[head + 1 :]


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("source")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--range", action="append", default=[], metavar="NAME:LO-HI")
    ap.add_argument("--sort", metavar="REASON", help="order blocks by this stall reason's samples")
    args = ap.parse_args()
    header, data = rows_of(args.source)
    col = {name: i for i, name in enumerate(header)}
    samples, executed, text = col["Warp Stall Sampling (All Samples)"], col["Instructions Executed"], col["Source"]
    reasons = [(i, c[len("stall_") :]) for i, c in enumerate(header) if c.startswith("stall_") and "Not Issued" not in c]
    if args.sort and not any(why == args.sort for _, why in reasons):
        sys.exit(f"no stall reason {args.sort!r}: " + ", ".join(why for _, why in reasons))
    recs = [r for r in data if len(r) > samples and r[col["Address"]].startswith("0x")]
    if not recs:
        sys.exit("no instructions in " + args.source)
    base = int(recs[0][col["Address"]], 16)
    ranges = []
    for spec in args.range:
        name, span = spec.split(":")
        lo, hi = (int(x, 16) for x in span.split("-"))
        ranges.append((name, lo, hi))

    blocks, cur = [], None
    per_range = collections.defaultdict(lambda: [0.0, 0.0])
    for r in recs:
        off = int(r[col["Address"]], 16) - base
        s, e = number(r[samples]), number(r[executed])
        name = next((n for n, lo, hi in ranges if lo <= off < hi), "other")
        per_range[name][0] += s
        per_range[name][1] += e
        if s == 0 and e == 0:
            cur = None
            continue
        if cur is None:
            cur = {"lo": off, "hi": off, "n": 0, "e": 0.0, "s": 0.0, "why": collections.Counter(), "first": r[text]}
            blocks.append(cur)
        cur["hi"] = off
        cur["n"] += 1
        cur["e"] += e
        cur["s"] += s
        for i, why in reasons:
            cur["why"][why] += number(r[i])

    total = sum(b["s"] for b in blocks) or 1.0
    print("| offsets | instructions | executed | samples | share | leading stalls | first instruction |")
    print("|---|---:|---:|---:|---:|---|---|")
    order = (lambda b: -b["why"][args.sort]) if args.sort else (lambda b: -b["s"])
    for b in sorted(blocks, key=order)[: args.top]:
        why = ", ".join(f"{k} {v:.0f}" for k, v in b["why"].most_common(4) if v)
        print(
            f"| {b['lo']:#x}–{b['hi']:#x} | {b['n']} | {b['e']:.0f} | {b['s']:.0f} | {b['s'] / total:.3f} "
            f"| {why} | `{b['first'].strip()[:48]}` |"
        )
    print()
    print("| range | samples | share | executed |")
    print("|---|---:|---:|---:|")
    for name, (s, e) in sorted(per_range.items(), key=lambda kv: -kv[1][0]):
        print(f"| {name} | {s:.0f} | {s / total:.3f} | {e:.0f} |")


if __name__ == "__main__":
    main()
