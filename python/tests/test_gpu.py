"""FusedLinear on the GPU against the seed model (nn.Linear, then y*s + y.clone()), an f64
reference with the bound of docs/EPILOGUE.md for the precision used, and PyTorch's own
epilogue bit for bit on exact inputs; odd shapes and strides, batch dimensions, misuse, two
streams, CUDA graphs, torch.compile, opcheck and gradients."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gemm_epilogue
import gemm_epilogue.torch as ge

PRECISIONS = list(gemm_epilogue.PRECISIONS)
# Unit roundoff of the operands as each precision converts them (tests/common/bounds.rs).
UNIT = {"tf32": 2.0**-11, "tf32-truncated": 2.0**-10, "tf32x3": 1.5 * 2.0**-22}
# Fewest elements for the normalised-error check (tests/common/bounds.rs).
MIN_NORM_COUNT = 256


class Seed(nn.Module):
    def __init__(self, k, n, s, bias=True):
        super().__init__()
        self.linear = nn.Linear(k, n, bias=bias)
        self.s = s

    def forward(self, x):
        y = self.linear(x)
        return y * self.s + y.clone()


def fp32_precision(mode):
    """PyTorch's fp32 matmul precision ("ieee" or "tf32"), the new API only (mixing APIs is
    refused since 2.9)."""
    torch.backends.cuda.matmul.fp32_precision = mode


def reference(x, w, b, s):
    """The f64 result and each element's magnitude (1+|s|)(Σ|x||w| + |b|)."""
    xd, wd = x.detach().double(), w.detach().double()
    v = xd @ wd.T
    mag = xd.abs() @ wd.abs().T
    if b is not None:
        v = v + b.detach().double()
        mag = mag + b.detach().double().abs()
    return v * s + v, (1 + abs(s)) * mag


def assert_within_bound(out, x, w, b, s, precision, what):
    """|out − ref| ≤ (2u + u² + (K+3)·2⁻²³)·magnitude + 2⁻¹²⁰ on every element, and the
    normalised error of the precision (1e-3 rounded, 2e-3 truncated, 1e-6 3xTF32)."""
    k = x.shape[-1]
    ref, mag = reference(x.reshape(-1, k), w, b, s)
    got = out.detach().reshape(ref.shape).double()
    assert torch.isfinite(got).all(), f"{what}: non-finite output"
    u = UNIT[precision]
    bound = (2 * u + u * u + (k + 3) * 2.0**-23) * mag + 2.0**-120
    excess = (got - ref).abs() - bound
    worst = int(excess.argmax())
    assert excess.max() <= 0, f"{what}: element {worst} off by {float((got - ref).abs().flatten()[worst]):.3e} > bound {float(bound.flatten()[worst]):.3e}"
    norm = float((got - ref).norm() / ref.norm()) if ref.norm() > 0 else 0.0
    # The statistical check needs enough elements that no single cancelling one (v ≈ 0 against
    # |x||w|) dominates ‖ref‖, as tests/common/bounds.rs's MIN_NORM_COUNT; the bound above
    # holds for every element whatever the count.
    if ref.numel() >= MIN_NORM_COUNT:
        tol = {"tf32": 1e-3, "tf32-truncated": 2e-3, "tf32x3": 1e-6}[precision]
        assert norm <= tol, f"{what}: ‖e‖/‖ref‖ = {norm:.3e} > {tol}"
    return norm


def randn(gen, *shape, scale=1.0, device):
    return (torch.randn(*shape, generator=gen) * scale).to(device)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_fused_linear_matches_the_seed_model_within_its_precision(cuda, gen, precision):
    m, k, n, s = 1536, 1024, 768, 0.5
    seed = Seed(k, n, s).to(cuda)
    fused = nn.Module()
    fused.linear = ge.FusedLinear(k, n, s, precision=precision, device=cuda)
    fused.load_state_dict(seed.state_dict())
    x = randn(gen, m, k, device=cuda)
    with torch.no_grad():
        fp32_precision("ieee")
        want = seed(x)
        got = fused.linear(x)
    norm = assert_within_bound(got, x, seed.linear.weight, seed.linear.bias, s, precision, precision)
    print(f"{precision}: ‖e‖/‖ref‖ {norm:.3e}")
    if precision == "tf32x3":
        # The strict fp32 check the seed workload asks for, against PyTorch's FP32 model.
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("s", [0.5, 0.3, -1.75])
def test_exact_inputs_give_pytorchs_epilogue_bit_for_bit(cuda, gen, precision, s):
    # Integers of at most 4 bits, K ≤ 64: every product and sum is exact in TF32 and fp32, so v
    # is exact whatever the precision, and out must be PyTorch's y*s + y for that v, bitwise.
    m, k, n = 257, 64, 130
    x = torch.randint(-8, 9, (m, k), generator=gen).float().to(cuda)
    w = torch.randint(-8, 9, (n, k), generator=gen).float().to(cuda)
    b = torch.randint(-64, 65, (n,), generator=gen).float().to(cuda)
    fp32_precision("ieee")
    y = F.linear(x, w, b)
    want = y * s + y.clone()
    layer = ge.FusedLinear(k, n, s, precision=precision, device=cuda)
    with torch.no_grad():
        layer.weight.copy_(w)
        layer.bias.copy_(b)
        got = layer(x)
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))
    assert torch.equal(ge.fused_linear(x, w, b, s, precision).view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_odd_shapes_strides_and_offsets(cuda, gen, precision):
    cases = [(1, 1, 1), (7, 33, 3), (129, 65, 131), (1000, 257, 4096 + 4), (300, 1, 96)]
    for m, n, k in cases:
        what = f"{m}×{n}×{k} {precision}"
        big_x = randn(gen, m + 5, k + 9, device=cuda)
        big_w = randn(gen, n + 3, k + 7, scale=1 / math.sqrt(k), device=cuda)
        big_b = randn(gen, 2 * n + 1, device=cuda)
        views = {
            "dense": (big_x[:m, :k].contiguous(), big_w[:n, :k].contiguous(), big_b[:n].contiguous()),
            "strided rows, offsets": (big_x[5:, 2 : 2 + k], big_w[3:, 7:], big_b[1 : 1 + n]),
            "transposed x, every other bias": (big_x[:m, :k].T.contiguous().T, big_w[:n, :k], big_b[::2][:n]),
        }
        for name, (x, w, b) in views.items():
            out = torch.full((m, n), float("nan"), device=cuda)
            with torch.no_grad():
                ge.fused_linear(x, w, b, 0.5, precision, out=out)
            assert_within_bound(out, x, w, b, 0.5, precision, f"{what}, {name}")


def test_batch_dimensions_and_vectors(cuda, gen):
    k, n = 96, 40
    layer = ge.FusedLinear(k, n, 0.25, device=cuda)
    w, b = layer.weight.detach(), layer.bias.detach()
    with torch.no_grad():
        for lead in [(2, 3), (4, 1, 5), (6,), ()]:
            x = randn(gen, *lead, k, device=cuda)
            y = layer(x)
            assert y.shape == (*lead, n)
            assert_within_bound(y, x, w, b, 0.25, "tf32", f"x {tuple(x.shape)}")
        # Batch dimensions that do not flatten in place (a permuted view): copied, same values.
        x = randn(gen, 5, 3, k, device=cuda).permute(1, 0, 2)
        assert torch.equal(layer(x), layer(x.contiguous()))
        # Empty batches: nothing to compute, nothing launched.
        assert layer(torch.empty(0, k, device=cuda)).shape == (0, n)


def test_bad_input_raises_the_crates_error_and_writes_nothing(cuda, gen):
    m, k, n = 64, 32, 32
    x = randn(gen, m, k, device=cuda)
    w = randn(gen, n, k, device=cuda)
    b = randn(gen, n, device=cuda)
    Err = gemm_epilogue.GemmEpilogueError
    out = torch.full((m, n), float("nan"), device=cuda)
    with torch.no_grad():
        with pytest.raises(Err, match="x: a cpu tensor"):
            ge.fused_linear(x.cpu(), w, b, 0.5, out=out)
        with pytest.raises(Err, match="dtype torch.float64"):
            ge.fused_linear(x, w.double(), b, 0.5, out=out)
        with pytest.raises(Err, match="bias: a cpu tensor"):
            ge.fused_linear(x, w, b.cpu(), 0.5, out=out)
        with pytest.raises(Err, match="K"):  # the crate's ShapeMismatch: K of x against K of w
            ge.fused_linear(x[:, :31], w, b, 0.5, out=out)
        with pytest.raises(Err, match="bias"):
            ge.fused_linear(x, w, b[:31], 0.5, out=out)
        with pytest.raises(Err, match="out: shape"):
            ge.fused_linear(x, w, b, 0.5, out=out[:, :31])
        with pytest.raises(Err, match="overlaps"):  # the crate's Overlapping: out is x
            ge.fused_linear(x, w, b, 0.5, out=x)
        if torch.cuda.device_count() > 1:
            with pytest.raises(Err, match="every operand on one device"):
                ge.fused_linear(x, w.to("cuda:1"), b, 0.5, out=out)
    torch.cuda.synchronize()
    assert torch.isnan(out).all(), "a refused call wrote"
    # Nothing is poisoned for the next call.
    with torch.no_grad():
        ge.fused_linear(x, w, b, 0.5, out=out)
    assert_within_bound(out, x, w, b, 0.5, "tf32", "after the refusals")
    with pytest.raises(Err, match="autograd"):
        ge.fused_linear(x, w.requires_grad_(), b, 0.5, out=out)


def test_two_streams_give_the_default_streams_bits(cuda, gen):
    k, n = 512, 384
    layer = ge.FusedLinear(k, n, 0.5, precision="tf32x3", device=cuda)
    xs = [randn(gen, 700 + 100 * i, k, device=cuda) for i in range(2)]
    with torch.no_grad():
        want = [layer(x) for x in xs]
        streams = [torch.cuda.Stream() for _ in xs]
        got = [None, None]
        for i, (st, x) in enumerate(zip(streams, xs)):
            st.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(st):
                got[i] = layer(x)
        for st in streams:
            torch.cuda.current_stream().wait_stream(st)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_cuda_graph_replays_bitwise(cuda, gen):
    m, k, n = 1024, 768, 512
    layer = ge.FusedLinear(k, n, 0.5, device=cuda)
    static_x = randn(gen, m, k, device=cuda)
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture: the weight gets prepared
            layer(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = layer(static_x)
        for _ in range(2):
            x = randn(gen, m, k, device=cuda)
            static_x.copy_(x)
            graph.replay()
            assert torch.equal(static_out, layer(x))


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_torch_compile_fullgraph(cuda, gen, precision):
    k, n, s = 256, 192, 0.5
    model = nn.Sequential(ge.FusedLinear(k, n, s, precision=precision, device=cuda), nn.ReLU())
    compiled = torch.compile(model, fullgraph=True)
    x = randn(gen, 333, k, device=cuda)
    with torch.no_grad():
        got = compiled(x)
        lin = model[0]
        want = torch.relu(ge.fused_linear(x, lin.weight, lin.bias, s, precision))
    assert torch.equal(got, want)
    # The compiled model trains too (the op's autograd formula).
    xg = x.clone().requires_grad_()
    compiled(xg).sum().backward()
    assert xg.grad is not None and model[0].weight.grad is not None


def test_opcheck(cuda, gen):
    k, n = 64, 48
    x = randn(gen, 3, 5, k, device=cuda)
    w = randn(gen, n, k, scale=0.1, device=cuda)
    b = randn(gen, n, device=cuda)
    op = torch.ops.gemm_epilogue.fused_linear.default
    for precision in PRECISIONS:
        prepared = ge.prepare_weight(w, precision)
        for args in [
            (x, w, b, 0.5, precision, None),
            (x, w, None, -2.0, precision, prepared),
            (x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_(), 0.5, precision, None),
        ]:
            torch.library.opcheck(op, args)


@pytest.mark.parametrize("precision", ["tf32", "tf32x3"])
def test_gradients_match_the_seed_model(cuda, gen, precision):
    m, k, n, s = 512, 384, 256, 0.5
    seed = Seed(k, n, s).to(cuda)
    fused = ge.FusedLinear.from_linear(seed.linear, s, precision=precision)
    fp32_precision("ieee")  # both backwards in fp32
    x = randn(gen, 2, m // 2, k, device=cuda)
    grad = randn(gen, 2, m // 2, n, device=cuda)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    seed(x1).backward(grad)
    want = (x1.grad, seed.linear.weight.grad.clone(), seed.linear.bias.grad.clone())
    seed.zero_grad()
    out = fused(x2)
    with torch.no_grad():  # the forward under autograd is the inference path's kernel
        assert torch.equal(out, fused(x))
    out.backward(grad)
    got = (x2.grad, fused.weight.grad, fused.bias.grad)
    # f64 gradients: grad_v = grad·(1+s); grad_x = grad_v·W, grad_W = grad_vᵀ·X, grad_b = Σ grad_v.
    gv = grad.double().reshape(-1, n) * (1 + s)
    ref = ((gv @ seed.linear.weight.double()).reshape(x.shape), gv.T @ x.double().reshape(-1, k), gv.sum(0))
    for name, g, w, r in zip(("x", "weight", "bias"), got, want, ref):
        g = g.detach()
        err = float((g.double() - r).norm() / r.norm())
        assert err <= 1e-5, f"grad {name}: ‖e‖/‖ref‖ = {err:.3e}"
        diff = float((g - w).double().norm() / w.double().norm())
        assert diff <= 1e-5, f"grad {name} against the seed model's: {diff:.3e}"


def test_inference_needs_no_autograd_and_updates_reprepare(cuda, gen):
    k, n = 128, 96
    layer = ge.FusedLinear(k, n, 0.5, precision="tf32x3", device=cuda)
    x = randn(gen, 50, k, device=cuda)
    with torch.no_grad():
        y0 = layer(x)
    assert y0.grad_fn is None
    layer.weight.requires_grad_(False)
    layer.bias.requires_grad_(False)
    assert layer(x).grad_fn is None
    layer.weight.requires_grad_(True)
    layer.bias.requires_grad_(True)
    # An optimizer step changes the weight in place: the next forward sees it.
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    layer(x).square().sum().backward()
    opt.step()
    with torch.no_grad():
        y1 = layer(x)
        assert not torch.equal(y0, y1)
        fresh = ge.fused_linear(x, layer.weight, layer.bias, 0.5, "tf32x3")
    assert_within_bound(y1, x, layer.weight.detach(), layer.bias.detach(), 0.5, "tf32x3", "after a step")
    assert torch.allclose(y1, fresh, rtol=1e-6, atol=1e-6)
    # The prepared weight is no parameter and no state.
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
    assert set(layer.state_dict()) == {"weight", "bias"}
    # load_state_dict copies in place too.
    other = ge.FusedLinear(k, n, 0.5, precision="tf32x3", device=cuda)
    layer.load_state_dict(other.state_dict())
    with torch.no_grad():
        assert torch.equal(layer(x), other(x))


def test_the_inference_fast_path_follows_the_module(cuda, gen):
    """The bound layer of the inference forward gives the general path's bits, and follows
    every change a module sees: a new bias, no bias, another precision, a swapped weight
    (after weight_changed), a copy of the module."""
    import copy
    import io

    from gemm_epilogue.torch import _run

    k, n = 96, 72
    layer = ge.FusedLinear(k, n, 0.5, device=cuda)
    wide = randn(gen, 40, k + 8, device=cuda)
    inputs = {
        "2-D": randn(gen, 33, k, device=cuda),
        "3-D": randn(gen, 2, 5, k, device=cuda),
        "strided rows": wide[:, 3 : 3 + k],
        "one row": randn(gen, 1, k, device=cuda),
        "column-major (the general path copies it)": randn(gen, k, 30, device=cuda).T,
    }

    def check(what, precision="tf32"):
        w, b = layer.weight.detach(), None if layer.bias is None else layer.bias.detach()
        for name, x in inputs.items():
            y = layer(x)
            general = _run(x, layer.weight, layer.bias, 0.5, layer.precision, layer._prepared)
            assert torch.equal(y, general), f"{what}, {name}: the fast path's bits differ from the general path's"
            assert_within_bound(y, x, w, b, 0.5, precision, f"{what}, {name}")

    with torch.no_grad():
        check("as made")
        assert layer._fast is not None, "the 2-D forward did not bind a layer"
        layer.bias = nn.Parameter(randn(gen, n, device=cuda))
        check("a new bias")
        layer.bias = None
        check("no bias")
        layer.bias = nn.Parameter(randn(gen, n, device=cuda))
        layer.precision = "tf32x3"
        check("tf32x3", "tf32x3")
        layer.precision = "tf32"
        layer.weight.data = randn(gen, n, k, scale=1 / math.sqrt(k), device=cuda)
        layer.weight_changed()
        check("a swapped weight")
        x = inputs["2-D"]
        for copy_of in (copy.deepcopy, lambda m: torch.load(io.BytesIO(_saved(m)), weights_only=False)):
            other = copy_of(layer)
            assert torch.equal(other(x), layer(x)), "a copy computes what its original computes"
            assert set(other.state_dict()) == {"weight", "bias"}
        # The form set after a forward is the next forward's.
        layer.scale = 0.25
        w, b = layer.weight.detach(), layer.bias.detach()
        assert_within_bound(layer(x), x, w, b, 0.25, "tf32", "scale set after a forward")
        layer.scale, layer.activation = None, "relu"
        v = _run(x, layer.weight, layer.bias, 0.0, "tf32", layer._prepared, activation="identity")
        assert torch.equal(layer(x), torch.relu(v)), "activation set after a forward"


def _saved(module):
    import io

    buf = io.BytesIO()
    torch.save(module, buf)
    return buf.getvalue()


def test_the_functional_form_without_autograd_is_the_op(cuda, gen):
    k, n = 64, 48
    x = randn(gen, 17, k, device=cuda)
    w = randn(gen, n, k, scale=1 / math.sqrt(k), device=cuda)
    b = randn(gen, n, device=cuda)
    with torch.no_grad():
        for activation, scale in ((None, 0.5), ("gelu", None), ("silu", None)):
            direct = ge.fused_linear(x, w, b, scale, activation=activation)
            op = torch.ops.gemm_epilogue.fused_linear(x, w, b, scale or 0.0, "tf32", None, activation or "scale_add")
            assert torch.equal(direct, op), f"{activation or 'scale_add'}"
