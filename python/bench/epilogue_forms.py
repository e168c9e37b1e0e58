"""Each epilogue form fused against PyTorch's routes to the same expression, interleaved.

    python3 python/bench/epilogue_forms.py [--rounds 15] [--shapes 16384x4096x4096,...] [--forms gelu,relu,...]

For each M×N×K (default: the seed's, a BERT-base MLP's first Linear, a LLaMA-7B MLP's) and each
form ``f(F.linear(x, w, b))`` (GELU erf, GELU tanh, SiLU, ReLU) and ``F.linear(x, w, b) + C``:

- ``F.linear`` alone (the unit of the table), TF32 allowed (cuBLAS rounds to TF32);
- eager: ``F.linear`` then PyTorch's kernel for the form (``F.gelu``, ``torch.add``, ...);
- cuBLASLt's epilogue where it has one: ``torch._addmm_activation(b, x, w.T, use_gelu=...)``
  (RELU_BIAS; GELU_BIAS, the tanh approximation), and for the residual cuBLAS's own
  ``beta·C``: ``torch.addmm(C, x, w.T)`` then the bias;
- ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the eager expression;
- ours: ``FusedLinear(activation=...)`` (``forward(x, C)`` for the residual), TF32 rounded to
  nearest, and ours in the seed's form ``v*0.5 + v`` on the same shape (what every form should
  cost: the ≤ 1.02× target).

Times, rounds interleaved (in a Williams design's orders, rounded up to whole designs:
round_order), medians: one call (CUDA events around one call behind a
``torch.cuda._sleep`` spin, L2 emptied before it: the GPU starts it at its boost clock, from
memory) and sustained (events around
ten calls back to back, per call: the clock the 700 W cap leaves under load, as in a model's
forward). The two can rank kernels differently (docs/BENCHMARKS.md, "Epilogue forms"). Errors: ‖e‖/‖ref‖ of each route's output against the expression in f64 on the same
fresh ``randn`` data (all are TF32 GEMMs: ~3e-4). Prints one markdown table per shape.
"""

import argparse
import os
import statistics
import subprocess

import torch
import torch.nn.functional as F

import gemm_epilogue.torch as ge

FORMS = {
    "gelu": (F.gelu, "gelu"),
    "gelu_tanh": (lambda v: F.gelu(v, approximate="tanh"), "gelu_tanh"),
    "silu": (F.silu, "silu"),
    "relu": (torch.relu, "relu"),
    "residual": (None, "identity"),
}
F64 = {
    "gelu": lambda v: 0.5 * v * (1 + torch.erf(v / 2**0.5)),
    "gelu_tanh": lambda v: 0.5 * v * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (v + 0.044715 * v**3))),
    "silu": lambda v: v * torch.sigmoid(v),
    "relu": torch.relu,
}


_L2_FLUSH = {}


def one_call_ms(fn, spin):
    # L2 emptied first (256 MiB written, five times the H200's L2), so that no route finds the
    # operands of the one timed before it there: the routes read different copies of W (ours its
    # prepared one), so a warm L2 favoured whichever followed a route with the same W.
    dev = torch.cuda.current_device()
    if dev not in _L2_FLUSH:
        _L2_FLUSH[dev] = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    _L2_FLUSH[dev].zero_()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(spin)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def sustained_ms(fn, calls=10):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def commit():
    env = os.environ.get("GEMM_EPILOGUE_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def bench_shape(m, n, k, forms, rounds, spin):
    dev = torch.device("cuda")
    x = torch.randn(m, k, device=dev)
    w = torch.randn(n, k, device=dev) * k**-0.5
    b = torch.randn(n, device=dev)
    c = torch.randn(m, n, device=dev)
    with torch.no_grad():
        v64 = x.double() @ w.double().T + b.double()
    rows = []
    for form in forms:
        torch_f, act = FORMS[form]
        ours = ge.FusedLinear(k, n, activation=None if act == "identity" else act, device=dev)
        seed = ge.FusedLinear(k, n, 0.5, device=dev)
        with torch.no_grad():
            for layer in (ours, seed):
                layer.weight.copy_(w)
                layer.bias.copy_(b)
        if form == "residual":
            eager = lambda: torch.add(F.linear(x, w, b), c)  # noqa: E731
            lt = lambda: torch.addmm(c, x, w.T).add_(b)  # noqa: E731  (cuBLAS's beta·C, then the bias)
            mine = lambda: ours(x, c)  # noqa: E731
            want = v64 + c.double()
        else:
            eager = lambda: torch_f(F.linear(x, w, b))  # noqa: E731
            lt = None
            if form in ("gelu_tanh", "relu"):
                # cuBLASLt's GELU_BIAS is the tanh approximation; the error column says which it computed.
                lt = lambda: torch._addmm_activation(b, x, w.T, use_gelu=form == "gelu_tanh")  # noqa: E731
            mine = lambda: ours(x)  # noqa: E731
            want = F64[form](v64)
        compiled_fn = torch.compile(eager, mode="max-autotune-no-cudagraphs")
        variants = {
            "F.linear alone": lambda: F.linear(x, w, b),
            "eager": eager,
            "cuBLASLt epilogue" if form != "residual" else "addmm(C, x, wᵀ) + b": lt,
            "torch.compile max-autotune": compiled_fn,
            "ours fused": mine,
            "ours, seed form v·s + v": lambda: seed(x),
        }
        variants = {name: fn for name, fn in variants.items() if fn is not None}
        with torch.no_grad():
            errors = {}
            for name, fn in variants.items():
                for _ in range(3):
                    out = fn()
                torch.cuda.synchronize()
                ref = want if "seed" not in name and name != "F.linear alone" else None
                if ref is not None:
                    errors[name] = float((out.double() - ref).norm() / ref.norm())
            times = {(mode, name): [] for mode in MODES for name in variants}
            names = list(variants)
            for r in range(whole_designs(rounds, len(names))):
                # A round's one-call samples before its sustained ones (no one-call sample
                # follows a burst of ten calls), in the order of round_order.
                order = [names[i] for i in round_order(len(names), r)]
                for name in order:
                    times[("one call", name)].append(one_call_ms(variants[name], spin))
                for name in order:
                    times[("sustained", name)].append(sustained_ms(variants[name]))
        for mode in MODES:
            med = {name: statistics.median(times[(mode, name)]) for name in variants}
            unit = med["F.linear alone"]
            best_pytorch = min(med[nm] for nm in variants if nm not in ("F.linear alone", "ours fused", "ours, seed form v·s + v"))
            rows.append((mode, form, med, unit, best_pytorch, errors))
    return rows


MODES = ("one call", "sustained")


def round_order(n, r):
    """The routes' order in round r: row r of a Williams design (src/testbed/timing.rs's
    round_order), the Latin square whose first row is 0, 1, n-1, 2, n-2, ... and whose row r adds
    r (mod n), the rows of the second n rounds reversed for odd n. Over n (even n) or 2n (odd n)
    rounds every route runs directly after each other route equally often (a rotation ran each
    route after the same one in all rounds but one in n)."""
    first = [0 if j == 0 else (j + 1) // 2 if j % 2 == 1 else n - j // 2 for j in range(n)]
    row = [(b + r) % n for b in first]
    return row[::-1] if n % 2 == 1 and (r // n) % 2 == 1 else row


def whole_designs(rounds, n):
    """rounds rounded up to whole Williams designs of n routes (n rounds, 2n for odd n)."""
    period = n if n % 2 == 0 else 2 * n
    return -(-rounds // period) * period


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--shapes", default="16384x4096x4096,4096x3072x768,8192x11008x4096", help="MxNxK,...")
    ap.add_argument("--forms", default=",".join(FORMS), help="a comma-separated subset of " + ", ".join(FORMS))
    args = ap.parse_args()
    forms = args.forms.split(",")
    unknown = [f for f in forms if f not in FORMS]
    if unknown:
        ap.error(f"--forms: {', '.join(unknown)}: expected a subset of {', '.join(FORMS)}")
    torch.set_float32_matmul_precision("high")  # TF32 for every PyTorch route (the legacy switch: inductor reads it)
    spin = 2_000_000
    print(f"commit {commit()}, {torch.cuda.get_device_name()}, PyTorch {torch.__version__}, {args.rounds} rounds (rounded up to whole designs)")
    for shape in args.shapes.split(","):
        m, n, k = map(int, shape.split("x"))
        rows = bench_shape(m, n, k, forms, args.rounds, spin)
        for mode in MODES:
            print_table(m, n, k, mode, [r[1:] for r in rows if r[0] == mode])


def print_table(m, n, k, mode, rows):
    print(f"\n{m}×{n}×{k}, {mode}: ms (median), / F.linear alone; ‖e‖/‖ref‖ vs f64\n")
    names = ["F.linear alone", "eager", "cuBLASLt epilogue", "addmm(C, x, wᵀ) + b", "torch.compile max-autotune",
             "ours fused", "ours, seed form v·s + v"]
    print("| form | " + " | ".join(names) + " | ours / best PyTorch | ours / ours seed form |")
    print("|---|" + "---:|" * (len(names) + 2))
    for form, med, unit, best, errors in rows:
        cells = []
        for nm in names:
            if nm in med:
                e = f", {errors[nm]:.1e}" if nm in errors else ""
                cells.append(f"{med[nm]:.3f} ({med[nm] / unit:.3f}{e})")
            else:
                cells.append("–")
        ratio_best = med["ours fused"] / best
        ratio_seed = med["ours fused"] / med["ours, seed form v·s + v"]
        print(f"| {form} | " + " | ".join(cells) + f" | **{ratio_best:.3f}** | {ratio_seed:.3f} |")


if __name__ == "__main__":
    main()
