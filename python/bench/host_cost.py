"""Where a FusedLinear forward's host time goes, at a decoding size, against F.linear's.

    python3 python/bench/host_cost.py [--m 1 --k 768 --n 3072 --reps 3000]

Each row is the median host time of one call, timed with ``time.perf_counter_ns`` from the
call to its return with the GPU idle (a ``torch.cuda.synchronize()`` before each), the rows
interleaved in rounds so that clock and cache drift reach all of them alike. The rows split the
forward into its layers: ``nn.Module.__call__`` of a module that does nothing, the output's
allocation, PyTorch's current-stream lookup, the crate's native call with its arguments already
built (checks, dispatch, launch), and the driver's pointer query the crate makes per operand
(CuPy's ``cudaPointerGetAttributes``, the runtime's wrapper of it). Prints one markdown table.
"""

import argparse
import os
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F
from torch import nn

import gemm_epilogue.torch as ge


class Nothing(nn.Module):
    def forward(self, x):
        return x


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--k", type=int, default=768)
    ap.add_argument("--n", type=int, default=3072)
    ap.add_argument("--reps", type=int, default=3000, help="calls per row, in rounds of 100")
    args = ap.parse_args()
    m, k, n = args.m, args.k, args.n
    dev = torch.device("cuda")
    torch.set_float32_matmul_precision("high")
    commit = os.environ.get("GEMM_EPILOGUE_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()

    fused = ge.FusedLinear(k, n, 0.5, device=dev)
    linear = nn.Linear(k, n, device=dev)
    linear.load_state_dict(fused.state_dict())
    w, b = fused.weight, fused.bias
    x = torch.randn(m, k, device=dev)
    with torch.no_grad():
        fused(x)  # prepares the weight and makes the handle
    fast = fused._fast  # what the inference forward binds: the crate's Layer, the device
    layer = fast[6]
    stream = torch._C._cuda_getCurrentRawStream(0)
    out = torch.empty(m, n, device=dev)
    xp, op = x.data_ptr(), out.data_ptr()
    nothing = Nothing()
    rows = {
        "`F.linear(x, w, b)`": lambda: F.linear(x, w, b),
        "`nn.Linear` module": lambda: linear(x),
        "`FusedLinear` forward (the module)": lambda: fused(x),
        "`fused_linear(x, w, b, 0.5)` (W rounded on load)": lambda: ge.fused_linear(x, w, b, 0.5),
        "`nn.Module.__call__` of a module that returns x": lambda: nothing(x),
        "`x.new_empty((m, n))`": lambda: x.new_empty((m, n)),
        "`torch.empty((m, n), device=dev)`": lambda: torch.empty((m, n), device=dev),
        "PyTorch's current raw stream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "native `Layer.run` (checks, dispatch, launch)": lambda: layer.run(stream, xp, m, k, op),
    }
    try:
        import cupy

        ptr = b.data_ptr()
        rows["`cudaPointerGetAttributes` (CuPy), one operand"] = lambda: cupy.cuda.runtime.pointerGetAttributes(ptr)
    except ImportError:
        pass

    times = {name: [] for name in rows}
    with torch.no_grad():
        for fn in rows.values():
            for _ in range(50):
                fn()
        torch.cuda.synchronize()
        for _ in range(max(1, args.reps // 100)):
            for name, fn in rows.items():
                for _ in range(100):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter_ns()
                    fn()
                    times[name].append(time.perf_counter_ns() - t0)
        torch.cuda.synchronize()
    print(f"## Host time per call, {m}×{n}×{k}, GPU idle: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"commit {commit or 'unknown'}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")
    print("| call | µs, median | µs, 10th percentile |\n|---|---:|---:|")
    for name, t in times.items():
        t = sorted(t)
        print(f"| {name} | {statistics.median(t) / 1e3:.2f} | {t[len(t) // 10] / 1e3:.2f} |")


if __name__ == "__main__":
    main()
