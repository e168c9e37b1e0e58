#!/usr/bin/env python3
"""SASS and ptxas resource counts per kernel of a fatbin, as a markdown table (stdlib only).

One build:
    tools/sass_counts.py [--cuobjdump PATH] [--rename FILE] FATBIN PTXAS_LOG

Before/after diff of two builds:
    tools/sass_counts.py [--cuobjdump PATH] [--rename FILE] [--opcodes] \
        --before FATBIN PTXAS_LOG --after FATBIN PTXAS_LOG

FATBIN is a fatbin build.rs's nvcc commands write (`-fatbin`, one per unit of csrc/units/), or the
folder holding them (build.rs's OUT_DIR: every *.fatbin in it); PTXAS_LOG their stderr
(`-Xptxas=-v`; build.rs keeps all units' in OUT_DIR/nvcc-resource-usage.txt).
cuobjdump is taken from --cuobjdump, else $CUOBJDUMP, else PATH.

--rename FILE maps old kernel names to new ones so that both builds share one row key. FILE is
either lines `old=new` or a markdown table whose rows name the old and the new extern "C" symbol
(the first two cells that look like `ge_...` identifiers, as in docs' naming map).

Columns: registers, spill stores/loads (bytes), static smem (bytes), and the counts of HGMMA,
HMMA, UTMALDG (all variants, multicast included), UTMASTG, LDGSTS, BAR (every BAR.* opcode),
SYNCS (mbarrier operations), and the total instruction count (trailing NOP padding excluded).
The BAR and SYNCS opcodes are broken down in a second table. --opcodes adds, in diff mode, the
per-opcode differences of every kernel whose total changed.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

KEY_OPS = ["HGMMA", "HMMA", "UTMALDG", "UTMASTG", "LDGSTS", "BAR", "SYNCS"]

FUNC_RE = re.compile(r"^\s+Function : (\S+)")
ARCH_RE = re.compile(r"^arch = (\S+)")
ELF_RE = re.compile(r"^Fatbin elf code")
PTX_RE = re.compile(r"^Fatbin ptx code")
INST_RE = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(.*?);")


def opcode_of(text):
    """The opcode of one disassembled instruction, without its predicate."""
    parts = text.split()
    if parts and parts[0].startswith("@"):
        parts = parts[1:]
    return parts[0] if parts else ""


def family_of(op):
    """The counted class of an opcode (one of KEY_OPS), or None."""
    if op.startswith("HGMMA"):
        return "HGMMA"
    if op.startswith("HMMA"):
        return "HMMA"
    if op.startswith("UTMALDG"):
        return "UTMALDG"
    if op.startswith("UTMASTG"):
        return "UTMASTG"
    if op.startswith("LDGSTS"):
        return "LDGSTS"
    if op == "BAR" or op.startswith("BAR."):
        return "BAR"
    if op.startswith("SYNCS"):
        return "SYNCS"
    return None


def fatbins_of(path):
    """The fatbins a FATBIN argument names: the file, or every *.fatbin in a folder."""
    if os.path.isdir(path):
        found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".fatbin"))
        if not found:
            sys.exit(f"no .fatbin in {path}")
        return found
    return [path]


def read_sass(fatbin, cuobjdump):
    """{(name, arch): [opcode, ...]} for every function of every ELF in the fatbin(s)."""
    out = "".join(
        subprocess.run([cuobjdump, "-sass", f], check=True, capture_output=True, text=True).stdout
        for f in fatbins_of(fatbin)
    )
    funcs = {}
    arch, in_elf, current = None, False, None
    for line in out.splitlines():
        if ELF_RE.match(line):
            in_elf, current = True, None
            continue
        if PTX_RE.match(line):
            in_elf, current = False, None
            continue
        m = ARCH_RE.match(line)
        if m:
            arch = m.group(1)
            continue
        if not in_elf:
            continue
        m = FUNC_RE.match(line)
        if m:
            current = funcs.setdefault((m.group(1), arch), [])
            continue
        m = INST_RE.match(line)
        if m and current is not None:
            current.append(opcode_of(m.group(1)))
    for ops in funcs.values():  # alignment padding after the last instruction
        while ops and ops[-1] == "NOP":
            ops.pop()
    return funcs


def read_ptxas(log):
    """{(name, arch): {regs, stack, spill_st, spill_ld, smem}} from a `ptxas -v` report."""
    info = {}
    current = None
    # The stack and spill line follows "Function properties for NAME": the entry's own, or that of
    # a function it calls (an out-of-line device function), which is not the entry's.
    own_properties = False
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.search(r"Compiling entry function '([^']+)' for '([^']+)'", line)
            if m:
                entry = m.group(1)
                current = info.setdefault((entry, m.group(2)), {})
                continue
            if current is None:
                continue
            m = re.search(r"Function properties for (\S+)", line)
            if m:
                own_properties = m.group(1) == entry
                continue
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m:
                if own_properties:
                    current["stack"], current["spill_st"], current["spill_ld"] = map(int, m.groups())
                continue
            m = re.search(r"Used (\d+) registers", line)
            if m:
                current["regs"] = int(m.group(1))
                s = re.search(r"(\d+) bytes smem", line)
                current["smem"] = int(s.group(1)) if s else 0
    return info


def read_rename(path):
    """{old: new} from `old=new` lines or a markdown table naming ge_* symbols."""
    mapping = {}
    if not path:
        return mapping
    ident = re.compile(r"^`?(ge_[A-Za-z0-9_]+)`?$")
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("|"):
                names = [m.group(1) for c in line.strip("|").split("|") for m in [ident.match(c.strip())] if m]
                if len(names) >= 2:
                    mapping[names[0]] = names[1]
            elif "=" in line:
                old, new = (s.strip() for s in line.split("=", 1))
                mapping[old] = new
    return mapping


def collect(fatbin, log, cuobjdump, rename):
    """{(key, arch): row}; key = the new name of a renamed kernel."""
    sass = read_sass(fatbin, cuobjdump)
    ptxas = read_ptxas(log)
    rows = {}
    for (name, arch), ops in sass.items():
        fam = collections.Counter(f for f in map(family_of, ops) if f)
        detail = collections.Counter(op for op in ops if family_of(op) in ("BAR", "SYNCS"))
        res = ptxas.get((name, arch), {})
        rows[(rename.get(name, name), arch)] = {
            "name": name,
            "regs": res.get("regs", "?"),
            "spill": f"{res.get('spill_st', '?')}/{res.get('spill_ld', '?')}",
            "smem": res.get("smem", "?"),
            **{k: fam.get(k, 0) for k in KEY_OPS},
            "total": len(ops),
            "detail": detail,
            "hist": collections.Counter(ops),
        }
    return rows


def arch_order(arch):
    return (0 if arch == "sm_90a" else 1, arch)


def sort_keys(rows):
    return sorted(rows, key=lambda k: (arch_order(k[1]), k[0]))


COLS = ["regs", "spill", "smem"] + KEY_OPS + ["total"]
HEAD = ["regs", "spill st/ld", "smem"] + KEY_OPS + ["total SASS"]


def table(rows):
    lines = ["| kernel | arch | " + " | ".join(HEAD) + " |", "|" + "---|" * (len(HEAD) + 2)]
    for key in sort_keys(rows):
        r = rows[key]
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(str(r[c]) for c in COLS) + " |")
    lines += ["", "BAR and SYNCS by opcode:", "", "| kernel | arch | opcodes |", "|---|---|---|"]
    for key in sort_keys(rows):
        d = rows[key]["detail"]
        if d:
            lines.append(f"| {key[0]} | {key[1]} | " + ", ".join(f"{op} x{n}" for op, n in sorted(d.items())) + " |")
    return "\n".join(lines)


def diff_table(before, after, opcodes):
    lines = [
        "| kernel | arch | " + " | ".join(HEAD) + " | match |",
        "|" + "---|" * (len(HEAD) + 3),
    ]
    keys = sorted(set(before) | set(after), key=lambda k: (arch_order(k[1]), k[0]))
    changed = []
    for key in keys:
        b, a = before.get(key), after.get(key)
        if b is None or a is None:
            lines.append(f"| {key[0]} | {key[1]} | " + " | ".join("-" for _ in COLS) +
                         (" | only after |" if b is None else " | only before |"))
            continue
        cells = []
        for c in COLS:
            if b[c] == a[c]:
                cells.append(str(a[c]))
            elif c == "total":
                cells.append(f"{b[c]} -> {a[c]} ({a[c] - b[c]:+d})")
            else:
                cells.append(f"**{b[c]} -> {a[c]}**")
        key_same = all(b[c] == a[c] for c in COLS if c != "total") and b["detail"] == a["detail"]
        verdict = ("identical" if b["hist"] == a["hist"] else "key counts equal") if key_same else "**KEY COUNT DIFFERS**"
        lines.append(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {verdict} |")
        if b["hist"] != a["hist"]:
            changed.append((key, b, a))
    if opcodes and changed:
        lines += ["", "Opcode differences (after - before):", "", "| kernel | arch | opcodes |", "|---|---|---|"]
        for key, b, a in changed:
            delta = collections.Counter(a["hist"])
            delta.subtract(b["hist"])
            items = ", ".join(f"{op} {n:+d}" for op, n in sorted(delta.items()) if n)
            lines.append(f"| {key[0]} | {key[1]} | {items} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuobjdump", default=os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump"))
    ap.add_argument("--rename", help="old=new lines, or a markdown table of old/new ge_* symbols")
    ap.add_argument("--before", nargs=2, metavar=("FATBIN", "PTXAS_LOG"))
    ap.add_argument("--after", nargs=2, metavar=("FATBIN", "PTXAS_LOG"))
    ap.add_argument("--opcodes", action="store_true", help="diff mode: per-opcode deltas of changed kernels")
    ap.add_argument("build", nargs="*", metavar="FATBIN PTXAS_LOG")
    args = ap.parse_args()
    if not args.cuobjdump:
        ap.error("no cuobjdump: pass --cuobjdump or set $CUOBJDUMP")
    rename = read_rename(args.rename)
    if args.before or args.after:
        if not (args.before and args.after) or args.build:
            ap.error("diff mode takes --before FATBIN LOG --after FATBIN LOG and nothing else")
        before = collect(*args.before, args.cuobjdump, rename)
        after = collect(*args.after, args.cuobjdump, rename)
        print(diff_table(before, after, args.opcodes))
    else:
        if len(args.build) != 2:
            ap.error("expected FATBIN PTXAS_LOG")
        print(table(collect(*args.build, args.cuobjdump, rename)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
