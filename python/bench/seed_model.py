"""The seed workload in PyTorch against FusedLinear, every variant interleaved in one process.

    python3 python/bench/seed_model.py [--m 16384 --k 4096 --n 4096 --scale 0.5]

The seed model is ``nn.Linear(K, N)`` on an M × K batch, then ``y*s + y.clone()``. Variants,
each with how its fp32 operands reach the tensor cores:

- the model as written, PyTorch's defaults (FP32: ``set_float32_matmul_precision("highest")``);
- the model with TF32 allowed (``"high"``: cuBLAS rounds to TF32);
- ``F.linear`` (TF32) then one in-place elementwise kernel, ``torch.add(y, y, alpha=s, out=y)``;
- ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the model, TF32;
- ours, ``FusedLinear(precision="tf32")`` (rounded to nearest: by the TMA on load on sm_90);
- ours, ``FusedLinear(precision="tf32x3")`` (3xTF32, the error of an fp32 GEMM).

Times: CUDA events around one call queued behind a short ``torch.cuda._sleep`` (so host
overhead is hidden), rounds interleaved, medians; sustained: back-to-back calls for at least
``--sustained-ms`` per variant and round, the mean per call. Errors: ‖e‖/‖ref‖ against an f64
reference of the same fresh ``randn`` data, and ``torch.allclose`` to the FP32 model's output at
rtol = atol = 1e-5, 1e-4, 1e-2. Host time: one call's return time with the GPU idle, medians.
At a decoding size (1 × 3072 × 768) it also compares back-to-back forwards with one call's GPU
time. Prints markdown tables (the commit: `git rev-parse`, or `GEMM_EPILOGUE_COMMIT` where the
tree has no git).
"""

import argparse
import os
import platform
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F
from torch import nn

import gemm_epilogue.torch as ge


class Seed(nn.Module):
    def __init__(self, k, n, s):
        super().__init__()
        self.linear = nn.Linear(k, n)
        self.s = s

    def forward(self, x):
        y = self.linear(x)
        return y * self.s + y.clone()


def set_precision(mode):
    # The legacy switch only: inductor's autotuner reads it, and PyTorch refuses a mix of the
    # legacy and the new (`fp32_precision`) APIs in one process.
    torch.set_float32_matmul_precision("highest" if mode == "ieee" else "high")


def one_call_ms(fn, x, spin_cycles):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(spin_cycles)
    start.record()
    fn(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def sustained_ms(fn, x, at_least_ms, one_ms):
    calls = max(3, int(at_least_ms / max(one_ms, 1e-3)))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn(x)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def host_us(fn, x, reps=200):
    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=16384)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--scale", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--sustained-rounds", type=int, default=3)
    ap.add_argument("--sustained-ms", type=float, default=200.0)
    ap.add_argument("--seed", type=int, default=None, help="default: a fresh one, printed")
    ap.add_argument("--no-compile", action="store_true", help="leave out torch.compile")
    args = ap.parse_args()
    m, k, n, s = args.m, args.k, args.n, args.scale
    seed = args.seed if args.seed is not None else int(time.time_ns() % (1 << 31))
    torch.manual_seed(seed)
    dev = torch.device("cuda")
    commit = os.environ.get("GEMM_EPILOGUE_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"## Seed model {m}×{n}×{k}, s = {s}: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"Python {platform.python_version()}, commit {commit or 'unknown'}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, seed {seed}\n")

    model = Seed(k, n, s).to(dev)
    x = torch.randn(m, k, device=dev)
    fused = {p: ge.FusedLinear.from_linear(model.linear, s, precision=p) for p in ("tf32", "tf32x3")}
    w, b = model.linear.weight.detach(), model.linear.bias.detach()

    def in_place(x):
        y = F.linear(x, w, b)
        return torch.add(y, y, alpha=s, out=y)

    variants = [
        ("the model as written, PyTorch defaults", "FP32 (no TF32)", "ieee", model),
        ("the model with TF32 allowed", "TF32, cuBLAS rounds", "tf32", model),
        ("`F.linear` + one in-place elementwise kernel", "TF32, cuBLAS rounds", "tf32", in_place),
    ]
    if not args.no_compile:
        set_precision("tf32")
        compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
        with torch.no_grad():
            t0 = time.perf_counter()
            compiled(x)
            torch.cuda.synchronize()
        print(f"torch.compile(max-autotune-no-cudagraphs): compiled in {time.perf_counter() - t0:.1f} s\n")
        variants.append(("`torch.compile(mode=\"max-autotune-no-cudagraphs\")`", "TF32, cuBLAS rounds", "tf32", compiled))
    variants += [
        ("ours, `FusedLinear(precision=\"tf32\")`", "TF32, rounded to nearest", "tf32", fused["tf32"]),
        ("ours, `FusedLinear(precision=\"tf32x3\")`", "3xTF32", "tf32", fused["tf32x3"]),
    ]

    with torch.no_grad():
        xd = x.double()
        v = xd @ w.double().T + b.double()
        ref = v * s + v
        del xd, v
        set_precision("ieee")
        fp32_out = model(x)
        outs = {}
        for name, _, mode, fn in variants:  # warm-up, and each variant's output
            set_precision(mode)
            for _ in range(3):
                outs[name] = fn(x)
        torch.cuda.synchronize()
        spin = 2_000_000  # ~1 ms of spinning at H200 clocks: covers one call's host time
        one = {name: [] for name, *_ in variants}
        for _ in range(args.rounds):
            for name, _, mode, fn in variants:
                set_precision(mode)
                one[name].append(one_call_ms(fn, x, spin))
        one = {name: statistics.median(t) for name, t in one.items()}
        sus = {name: [] for name, *_ in variants}
        for _ in range(args.sustained_rounds):
            for name, _, mode, fn in variants:
                set_precision(mode)
                sus[name].append(sustained_ms(fn, x, args.sustained_ms, one[name]))
        sus = {name: statistics.median(t) for name, t in sus.items()}
        host = {}
        for name, _, mode, fn in variants:
            set_precision(mode)
            host[name] = host_us(fn, x, reps=50)

        base_fp32 = one[variants[0][0]]
        base_tf32 = one[variants[1][0]]
        print("| variant | operands | ms, one call | ms, sustained | / TF32 model | / FP32 model | ‖e‖/‖ref‖ vs f64 | allclose to FP32 model at 1e-5 / 1e-4 / 1e-2 | host µs per call |")
        print("|---|---|---:|---:|---:|---:|---:|---|---:|")
        for name, operands, _, _ in variants:
            out = outs[name]
            err = float((out.double() - ref).norm() / ref.norm())
            close = " / ".join("yes" if torch.allclose(out, fp32_out, rtol=t, atol=t) else "no" for t in (1e-5, 1e-4, 1e-2))
            print(f"| {name} | {operands} | {one[name]:.3f} | {sus[name]:.3f} | {one[name] / base_tf32:.3f} | "
                  f"{one[name] / base_fp32:.3f} | {err:.2e} | {close} | {host[name]:.1f} |")
        if not args.no_compile:
            cname = variants[3][0]
            print(f"\nours `tf32` / torch.compile: {one[variants[4][0]] / one[cname]:.3f} one call, "
                  f"{sus[variants[4][0]] / sus[cname]:.3f} sustained")
        del outs, ref, fp32_out

        # Decoding size: the host cost of a forward, against F.linear's and against its GPU time.
        dm, dn, dk = 1, 3072, 768
        small = ge.FusedLinear(dk, dn, s, device=dev)
        small3 = ge.FusedLinear(dk, dn, s, precision="tf32x3", device=dev)
        small3.load_state_dict(small.state_dict())
        xs = torch.randn(dm, dk, device=dev)
        set_precision("tf32")
        lin = lambda t: F.linear(t, small.weight, small.bias)  # noqa: E731
        for fn in (small, small3, lin):
            for _ in range(10):
                fn(xs)
        torch.cuda.synchronize()
        def back_to_back_ms(fn, reps=2000):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(spin)
            start.record()
            for _ in range(reps):
                fn(xs)
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / reps

        def graph_ms(fn, reps=100):
            # `reps` forwards captured in one CUDA graph, replayed: no host work per forward.
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                fn(xs)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(reps):
                    fn(xs)
            graph.replay()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / reps

        # cuBLAS may run an FP32 kernel at M = 1 although TF32 is allowed: the error row says which
        # rounding each one used, and ours "tf32x3" is the like-for-like column for an FP32 one.
        print(f"\n| decoding {dm}×{dn}×{dk}, TF32 allowed | ours `FusedLinear` \"tf32\" µs | "
              f"ours \"tf32x3\" µs | `F.linear` alone µs |\n|---|---:|---:|---:|")
        rows = {
            "one call, GPU time": lambda fn: statistics.median(one_call_ms(fn, xs, spin) for _ in range(50)) * 1e3,
            "back-to-back forwards, per call": lambda fn: back_to_back_ms(fn) * 1e3,
            "forwards replayed from one CUDA graph, per call": lambda fn: graph_ms(fn) * 1e3,
            "host time per forward, GPU idle": lambda fn: host_us(fn, xs),
        }
        for what, measure in rows.items():
            print(f"| {what} | {measure(small):.2f} | {measure(small3):.2f} | {measure(lin):.2f} |")
        xsd, wsd, bsd = xs.double(), small.weight.double(), small.bias.double()
        vs = xsd @ wsd.T + bsd
        rel = lambda got, want: float((got.double() - want).norm() / want.norm())  # noqa: E731
        print(f"| ‖e‖/‖ref‖ vs f64 (of each one's own result: v·s + v, v) | {rel(small(xs), vs * s + vs):.2e} | "
              f"{rel(small3(xs), vs * s + vs):.2e} | {rel(lin(xs), vs):.2e} |")
        print(f"| host time per forward, GPU idle, seed shape | {host_us(fused['tf32'], x, 50):.2f} | "
              f"{host_us(fused['tf32x3'], x, 50):.2f} | {host_us(lambda t: F.linear(t, w, b), x, 50):.2f} |")

if __name__ == "__main__":
    main()
