"""The epilogue forms on the GPU against PyTorch's own kernels, bit for bit: for the same
``v`` (our plain-Linear output), ``f(linear) + beta * C`` from one fused call must equal
PyTorch's expression applied to ``v`` — ``torch.relu``, ``F.gelu`` (erf and tanh), ``F.silu``,
``torch.add(y, C, alpha=beta)`` — on odd shapes (Auto's kernels: TMA, mma.sync, skinny, GEMV;
tests/gpu_epilogue.rs holds every forced kernel to the same formulas), in place, with NaN and
Inf; and the op under torch.compile, opcheck and autograd."""

import pytest
import torch
import torch.nn.functional as F

import gemm_epilogue.torch as ge

PYTORCH = {
    "identity": lambda v: v,
    "relu": torch.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
    "silu": F.silu,
}
# (M, N, K): unaligned (repacks, direct stores), TMA-aligned, decoding sizes, a BERT MLP's.
SHAPES = [(77, 45, 61), (130, 96, 64), (1, 67, 256), (8, 200, 512), (512, 3072, 768)]


def randn(gen, *shape, scale=1.0, device):
    return (torch.randn(*shape, generator=gen) * scale).to(device)


def operands(gen, m, n, k, device):
    x = randn(gen, m, k, device=device)
    w = randn(gen, n, k, scale=k**-0.5, device=device)
    b = randn(gen, n, device=device)
    c = randn(gen, m, n, scale=2.0, device=device)
    return x, w, b, c


def assert_bitwise(got, want, what):
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    if not bool(same.all()):
        bad = (~same).nonzero()
        i = tuple(bad[0].tolist())
        ulp = (got.view(torch.int32).long() - want.view(torch.int32).long()).abs()[~same].max()
        pytest.fail(f"{what}: {bad.shape[0]} of {got.numel()} elements differ (max {int(ulp)} ulp), "
                    f"first at {i}: {float(got[i])!r} vs {float(want[i])!r}")


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
@pytest.mark.parametrize("activation", list(ge.ACTIVATIONS))
@pytest.mark.parametrize("shape", SHAPES)
def test_each_form_is_pytorchs_expression_of_the_same_v(cuda, gen, shape, activation, precision):
    m, n, k = shape
    x, w, b, c = operands(gen, m, n, k, cuda)
    with torch.no_grad():
        v = ge.fused_linear(x, w, b, precision=precision)
        f = PYTORCH[activation]
        assert_bitwise(ge.fused_linear(x, w, b, precision=precision, activation=activation), f(v), activation)
        for beta in (1.0, 0.75, -2.5):
            want = torch.add(f(v), c, alpha=beta)
            got = ge.fused_linear(x, w, b, precision=precision, activation=activation, residual=c, beta=beta)
            assert_bitwise(got, want, f"{activation} + {beta}·C")
            # In place: out is C, read before it is written.
            y = c.clone()
            ge.fused_linear(x, w, b, precision=precision, activation=activation, residual=y, beta=beta, out=y)
            assert_bitwise(y, want, f"{activation} + {beta}·out in place")


def test_the_seed_form_is_unchanged_and_takes_a_residual(cuda, gen):
    x, w, b, c = operands(gen, 130, 96, 64, cuda)
    with torch.no_grad():
        v = ge.fused_linear(x, w, b)
        seed = ge.fused_linear(x, w, b, 0.5)
        assert_bitwise(seed, v * 0.5 + v, "v*s + v")
        assert_bitwise(ge.fused_linear(x, w, b, 0.5, residual=c), torch.add(v * 0.5 + v, c), "v*s + v + C")


def test_nan_and_inf_behave_as_pytorchs(cuda, gen):
    m, n, k = 64, 64, 32
    x, w, b, c = operands(gen, m, n, k, cuda)
    x[3, 5] = float("nan")  # a row of NaN in v
    b[5], b[6] = float("inf"), float("-inf")  # columns of +Inf and -Inf
    with torch.no_grad():
        v = ge.fused_linear(x, w, b)
        assert torch.isnan(v[3]).all() and bool((v[:3, 5] == float("inf")).all())
        for activation, f in PYTORCH.items():
            assert_bitwise(ge.fused_linear(x, w, b, activation=activation), f(v), f"{activation} of NaN/Inf")


def test_modules_batches_and_strided_residuals(cuda, gen):
    k, n = 96, 80
    layer = ge.FusedLinear(k, n, activation="gelu", device=cuda)
    x = randn(gen, 3, 7, k, device=cuda)
    wide = randn(gen, 3, 7, n + 5, device=cuda)
    c = wide[..., :n]  # not contiguous: rows at a stride of n + 5
    plain = ge.FusedLinear(k, n, device=cuda)
    plain.load_state_dict(layer.state_dict())  # the same prepared weight, so the same kernel and v
    with torch.no_grad():
        v = F.linear(x, layer.weight, layer.bias)  # PyTorch's own v: TF32 off, so close to ours
        ours_v = plain(x)
        assert_bitwise(layer(x), F.gelu(ours_v), "module gelu")
        assert_bitwise(layer(x, c, 0.5), torch.add(F.gelu(ours_v), c, alpha=0.5), "module gelu + strided C")
        assert float((ours_v - v).abs().max()) < 1e-2
    assert "activation=None" in repr(plain)
    with pytest.raises(ValueError):
        ge.FusedLinear(k, n, 0.5, activation="relu")
    with pytest.raises(ValueError):
        ge.FusedLinear(k, n, activation="tanh")
    with pytest.raises(ge.GemmEpilogueError, match="residual"):
        with torch.no_grad():
            layer(x, c[..., :-1])


def test_compile_opcheck_and_gradients(cuda, gen):
    k, n = 64, 48
    x, w, b, c = operands(gen, 40, n, k, cuda)
    op = torch.ops.gemm_epilogue.fused_linear.default
    for activation in ge.ACTIVATIONS:
        torch.library.opcheck(op, (x, w, b, 0.0, "tf32", None, activation, c, 0.5))
    layer = ge.FusedLinear(k, n, activation="silu", device=cuda)
    compiled = torch.compile(lambda t, r: layer(t, r, 2.0), fullgraph=True)
    with torch.no_grad():
        # Traced, the op takes W as it is (the TMA rounds it on load), as fused_linear does.
        want = ge.fused_linear(x, layer.weight, layer.bias, activation="silu", residual=c, beta=2.0)
        assert torch.equal(compiled(x, c), want)
    # Gradients against PyTorch's own expression, everything in fp32 (TF32 off).
    torch.backends.cuda.matmul.fp32_precision = "ieee"
    for activation, f in PYTORCH.items():
        lin = ge.FusedLinear(k, n, activation=activation, precision="tf32x3", device=cuda)
        xs = [x.clone().requires_grad_() for _ in range(2)]
        cs = [c.clone().requires_grad_() for _ in range(2)]
        lin(xs[0], cs[0], 0.5).backward(c)
        got = (xs[0].grad, cs[0].grad, lin.weight.grad.clone(), lin.bias.grad.clone())
        lin.zero_grad()
        torch.add(f(F.linear(xs[1], lin.weight, lin.bias)), cs[1], alpha=0.5).backward(c)
        want = (xs[1].grad, cs[1].grad, lin.weight.grad, lin.bias.grad)
        for name, g, r in zip(("x", "residual", "weight", "bias"), got, want):
            err = float((g - r).norm() / r.norm())
            assert err <= 1e-5, f"{activation}: grad {name}: ‖e‖/‖ref‖ = {err:.3e}"
