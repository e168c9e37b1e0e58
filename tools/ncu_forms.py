#!/usr/bin/env python3
"""F.linear, our seed form, plain Linear, ReLU and GELU on one shape, in a fixed order, for ncu.

    ncu --nvtx --nvtx-include timed/ --clock-control base --cache-control none|all \\
        --section WarpStateStats --metrics gpu__time_duration.sum,smsp__pcsamp_warps_issue_stalled_no_instructions \\
        --csv --page raw python3 tools/ncu_forms.py [MxNxK] [ROUNDS]

Each route is one call inside the NVTX range `timed/` (after one untimed call of each), ROUNDS
times over (default 3) in the order above, so that each kernel runs after a different one, as
python/bench/epilogue_forms.py runs them. All TF32: cuBLAS rounds to TF32, ours rounds on load;
every FusedLinear here holds the same weight and bias. With `--cache-control none` a kernel
finds the caches as the one before it left them (the one-call case), with `all` emptied;
`--section SourceCounters` instead and tools/ncu_blocks.py place the stalls in the SASS
(docs/BENCHMARKS.md, "Epilogue forms", measured fused ReLU's one-call gap this way).
"""

import sys

import torch
import torch.nn.functional as F

import gemm_epilogue.torch as ge


def main():
    m, n, k = (int(v) for v in (sys.argv[1] if len(sys.argv) > 1 else "4096x3072x768").split("x"))
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    torch.backends.cuda.matmul.allow_tf32 = True
    x = torch.randn(m, k, device="cuda")
    seed = ge.FusedLinear(k, n, 0.5, device="cuda")
    forms = {"linear": ge.FusedLinear(k, n, device="cuda")}
    for act in ("relu", "gelu"):
        forms[act] = ge.FusedLinear(k, n, activation=act, device="cuda")
    with torch.no_grad():
        for mod in forms.values():
            mod.weight.copy_(seed.weight)
            mod.bias.copy_(seed.bias)
            mod.weight_changed()
    w, b = seed.weight.detach(), seed.bias.detach()
    routes = [("F.linear", lambda: F.linear(x, w, b)), ("seed", lambda: seed(x))]
    routes += [(name, (lambda mod: lambda: mod(x))(mod)) for name, mod in forms.items()]
    with torch.no_grad():
        for _, run in routes:
            run()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("timed")
        for _ in range(rounds):
            for name, run in routes:
                torch.cuda.nvtx.range_push(name)
                run()
                torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
    print("routes per round:", ", ".join(name for name, _ in routes))


if __name__ == "__main__":
    main()
