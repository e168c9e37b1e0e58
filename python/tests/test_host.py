"""What holds without a GPU: the package imports, refuses bad input with the crate's words,
gives the op's output shapes under fake tensors, and traces into one graph."""

import subprocess
import sys

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode

import gemm_epilogue
import gemm_epilogue.torch as ge


def test_import_does_not_import_torch():
    code = "import sys, gemm_epilogue; assert 'torch' not in sys.modules, 'gemm_epilogue imported torch'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_precisions_are_named_and_checked():
    assert gemm_epilogue.PRECISIONS == ("tf32", "tf32x3", "tf32-truncated")
    with pytest.raises(ValueError, match="precision 'fp16'"):
        ge.FusedLinear(4, 4, 0.5, precision="fp16", device="meta")
    with pytest.raises(ValueError, match="precision 'tf32x2'"):
        ge.fused_linear(torch.ones(2, 3), torch.ones(4, 3), None, 0.5, "tf32x2")


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: (torch.ones(2, 3), torch.ones(4, 3), None), "x: a cpu tensor"),
        (lambda: (torch.ones(2, 3, dtype=torch.float64), torch.ones(4, 3), None), "x: a cpu tensor"),
        (lambda: (torch.ones(2, 3), torch.ones(4, 3), torch.ones(4)), "x: a cpu tensor"),
    ],
)
def test_host_tensors_are_refused_with_the_crates_error(make, words):
    x, w, b = make()
    with pytest.raises(gemm_epilogue.GemmEpilogueError, match=words):
        ge.fused_linear(x, w, b, 0.5)
    layer = ge.FusedLinear(3, 4, 0.5)
    with pytest.raises(gemm_epilogue.GemmEpilogueError, match="a cpu tensor"):
        layer(torch.ones(2, 3))


def test_the_native_handle_needs_a_driver_or_says_why():
    # On a machine without the NVIDIA driver the crate says so; with one, a handle loads.
    try:
        handle = gemm_epilogue._native.Gemm(0, "tf32")
    except gemm_epilogue.GemmEpilogueError as e:
        assert "driver" in str(e) or "device" in str(e), str(e)
    else:
        assert handle.precision == "tf32"
    with pytest.raises(ValueError, match="precision"):
        gemm_epilogue._native.Gemm(0, "bf16")


@pytest.mark.parametrize("lead", [(), (7,), (2, 3), (2, 1, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_fake_tensors_give_the_output_shape(lead, bias):
    with FakeTensorMode():
        x = torch.empty((*lead, 64), device="cuda")
        w = torch.empty(48, 64, device="cuda")
        b = torch.empty(48, device="cuda") if bias else None
        y = torch.ops.gemm_epilogue.fused_linear(x, w, b, 0.5, "tf32", None)
        assert y.shape == (*lead, 48) and y.dtype == torch.float32 and y.device.type == "cuda"
        assert y.is_contiguous()


def test_fake_tensors_refuse_mismatched_shapes():
    with FakeTensorMode():
        x, w = torch.empty(8, 64, device="cuda"), torch.empty(48, 63, device="cuda")
        with pytest.raises(Exception, match="K = 64"):
            torch.ops.gemm_epilogue.fused_linear(x, w, None, 0.5, "tf32", None)
        with pytest.raises(Exception, match="bias"):
            torch.ops.gemm_epilogue.fused_linear(x, torch.empty(48, 64, device="cuda"), torch.empty(47, device="cuda"), 0.5, "tf32", None)


class Seed(nn.Module):
    """The seed model: nn.Linear, then y*s + y.clone()."""

    def __init__(self, k, n, s):
        super().__init__()
        self.linear = nn.Linear(k, n)
        self.s = s

    def forward(self, x):
        y = self.linear(x)
        return y * self.s + y.clone()


class Fused(nn.Module):
    def __init__(self, k, n, s, precision="tf32"):
        super().__init__()
        self.linear = ge.FusedLinear(k, n, s, precision=precision)

    def forward(self, x):
        return self.linear(x)


def test_the_seed_models_state_dict_loads():
    seed, fused = Seed(96, 80, 0.5), Fused(96, 80, 0.5)
    assert {k: v.shape for k, v in seed.state_dict().items()} == {k: v.shape for k, v in fused.state_dict().items()}
    fused.load_state_dict(seed.state_dict())
    assert torch.equal(fused.linear.weight, seed.linear.weight) and torch.equal(fused.linear.bias, seed.linear.bias)
    shared = ge.FusedLinear.from_linear(seed.linear, 0.5, precision="tf32x3")
    assert shared.weight is seed.linear.weight and shared.bias is seed.linear.bias
    assert "precision='tf32x3'" in repr(shared)
    no_bias = ge.FusedLinear(8, 4, 2.0, bias=False)
    assert no_bias.bias is None and set(no_bias.state_dict()) == {"weight"}


def test_dynamo_traces_one_graph_with_the_op():
    model = Fused(64, 32, 0.5).to("meta")
    x = torch.empty(8, 64, device="meta")
    graph, _ = torch._dynamo.export(model)(x)
    ops = [str(n.target) for n in graph.graph.nodes if n.op == "call_function"]
    assert ops == ["gemm_epilogue.fused_linear"], ops


def test_the_form_follows_scale_and_activation_when_set():
    import pytest

    import gemm_epilogue.torch as ge

    layer = ge.FusedLinear(8, 4, 0.5)
    assert (layer.scale, layer.activation, layer._epi[:2]) == (0.5, None, (0, 0.5))
    layer.scale = 0.25
    assert layer._epi[:2] == (0, 0.25), "the seed's s follows the attribute"
    layer.scale = None
    assert layer._epi[:2] == (ge.ACTIVATIONS["identity"], 0.0), "no scale, no activation: plain linear(x)"
    layer.activation = "gelu"
    assert (layer.scale, layer.activation, layer._epi[0]) == (None, "gelu", ge.ACTIVATIONS["gelu"])
    with pytest.raises(ValueError, match="give one"):
        layer.scale = 0.5
    with pytest.raises(ValueError, match="activation 'tanh'"):
        layer.activation = "tanh"
    assert layer._epi[0] == ge.ACTIVATIONS["gelu"], "a refused setting changes nothing"
    assert "activation='gelu'" in repr(layer)
    copy = ge.FusedLinear.from_linear(__import__("torch").nn.Linear(8, 4), scale=2.0)
    assert (copy.scale, copy._epi[:2]) == (2.0, (0, 2.0))


def test_a_copy_keeps_the_form():
    import copy
    import io
    import pickle

    import torch

    import gemm_epilogue.torch as ge

    layer = ge.FusedLinear(8, 4, activation="silu")
    for other in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert (other.scale, other.activation, other._epi) == (None, "silu", layer._epi)
        assert torch.equal(other.weight, layer.weight)
    # A module pickled when scale and activation were plain attributes.
    state = dict(layer.__dict__)
    for name in ("_scale_arg", "_activation_arg"):
        state.pop(name)
    state.update(scale=0.75, activation=None)
    old = ge.FusedLinear.__new__(ge.FusedLinear)
    old.__setstate__(state)
    assert (old.scale, old._epi[:2]) == (0.75, (0, 0.75))
    buf = io.BytesIO()
    torch.save(layer, buf)
    buf.seek(0)
    assert torch.load(buf, weights_only=False).activation == "silu"
