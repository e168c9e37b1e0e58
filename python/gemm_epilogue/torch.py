"""PyTorch integration: ``FusedLinear`` and the ``torch.library`` op it runs.

``FusedLinear(in_features, out_features, scale)`` is ``nn.Linear`` followed by ``y*scale +
y.clone()``, computed in one kernel on PyTorch's current stream: the same parameters (``weight``
N×K, ``bias`` N, initialised as ``nn.Linear`` does), so a model's ``state_dict`` loads into it.
``FusedLinear(in_features, out_features, activation="gelu")`` is ``F.gelu(linear(x))`` instead
(:data:`ACTIVATIONS`; none and no scale: plain ``linear(x)``), and ``forward(x, residual, beta)``
adds ``torch.add(y, residual, alpha=beta)`` in the same kernel. Each form gives, for the same
``v = linear(x)``, bitwise what PyTorch's own kernel for the expression gives.

- The op ``torch.ops.gemm_epilogue.fused_linear(x, weight, bias, scale, precision, prepared,
  activation, residual, beta)`` has a fake (meta) implementation, so
  ``torch.compile(fullgraph=True)`` traces it, and an autograd formula (backward through
  PyTorch's own matmuls and activation derivatives, ``v`` recomputed by ``F.linear``).
- Tensors cross as device addresses, shapes and strides; the crate checks each against the
  driver's record of its allocation. Inputs whose rows are not contiguous are copied first
  (``.contiguous()``); strided rows (``x[:, :k]`` of a wider tensor) are read in place.
- A ``FusedLinear`` keeps its weight prepared for the kernels (rows padded to 128 bytes, rounded
  or split as its precision reads it: one more N×K copy on the device) and prepares it again
  when the parameter changes (its version counter, its storage or its device). Writes through
  ``weight.data`` bypass the version counter: call ``FusedLinear.weight_changed()`` after them.
"""

from __future__ import annotations

import math
import threading
from typing import Optional

import torch
from torch import Tensor, nn

from . import PRECISIONS, GemmEpilogueError, _native

__all__ = ["FusedLinear", "fused_linear", "prepare_weight", "GemmEpilogueError", "PRECISIONS", "ACTIVATIONS"]

#: The activations ``f`` of ``f(linear(x))`` and their codes in the crate's header
#: (``GE_ACTIVATION_*``); ``"scale_add"`` is the seed's ``y*scale + y`` (code 0).
ACTIVATIONS = {"identity": 1, "relu": 2, "gelu": 3, "gelu_tanh": 4, "silu": 5}
_SCALE_ADD = "scale_add"


def _epilogue(scale: Optional[float], activation: Optional[str]) -> tuple:
    """(activation name, scale) of a FusedLinear or a functional call: a scale alone is the
    seed's ``y*scale + y``, an activation alone ``f(y)``, neither plain ``y``."""
    if activation is None:
        return (_SCALE_ADD, float(scale)) if scale is not None else ("identity", 0.0)
    if scale is not None:
        raise ValueError("scale and activation: give one (scale is the seed's y*scale + y)")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation {activation!r}: one of {', '.join(map(repr, ACTIVATIONS))}")
    return activation, 0.0


def _code(activation: str) -> int:
    if activation == _SCALE_ADD:
        return 0
    code = ACTIVATIONS.get(activation)
    if code is None:
        raise GemmEpilogueError(f"activation {activation!r}: {_SCALE_ADD!r} or one of {', '.join(map(repr, ACTIVATIONS))}")
    return code

_handles: dict = {}
_handles_lock = threading.Lock()


def _gemm(device: torch.device, precision: str) -> "_native.Gemm":
    """The crate's handle for this device and precision, made once per process."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, precision)
    handle = _handles.get(key)
    if handle is None:
        with _handles_lock:
            handle = _handles.get(key)
            if handle is None:
                handle = _native.Gemm(index, precision)
                _handles[key] = handle
    return handle


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(map(repr, PRECISIONS))}")


def _check_operands(x: Tensor, weight: Tensor, bias: Optional[Tensor]) -> None:
    """What the crate cannot see in an address: the device type, the dtype, the device. On the
    forward's path: cheap attributes first, the words only on failure."""
    device = None
    for name, t in (("x", x), ("weight", weight), ("bias", bias)):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda:
            raise GemmEpilogueError(f"{name}: a {t.device.type} tensor; gemm_epilogue computes on CUDA tensors")
        if t.dtype is not torch.float32:
            raise GemmEpilogueError(f"{name}: dtype {t.dtype}; gemm_epilogue takes torch.float32")
        index = t.get_device()
        if device is None:
            device = index
        elif index != device:
            raise GemmEpilogueError(f"{name} is on {t.device} but x on {x.device}: every operand on one device")
    if weight.dim() != 2:
        raise GemmEpilogueError(f"weight: {weight.dim()} dimensions; it is N × K (out_features × in_features)")
    if bias is not None and bias.dim() != 1:
        raise GemmEpilogueError(f"bias: {bias.dim()} dimensions; it is a vector of N (out_features)")
    if x.dim() == 0:
        raise GemmEpilogueError("x: a scalar; x is (..., K) with K = in_features")


def _row_major(t: Tensor) -> Tensor:
    """``t`` (2-D) itself when the kernel can read it (elements of a row contiguous, rows at
    any stride of at least a row), else a contiguous copy."""
    rows, cols = t.shape
    if (cols <= 1 or t.stride(1) == 1) and (rows <= 1 or t.stride(0) >= cols):
        return t
    return t.contiguous()


def _matrix(t: Tensor) -> tuple:
    """(address, rows, cols, row stride, elements it spans) of a 2-D row-major tensor; the
    crate checks its allocation holds them."""
    rows, cols = t.shape
    ld = t.stride(0) if rows > 1 and t.stride(0) > cols else cols
    return (t.data_ptr(), rows, cols, ld, (rows - 1) * ld + cols if rows and cols else 0)


# PyTorch's current stream of a device as a `cudaStream_t` integer, without making a
# torch.cuda.Stream object (what inductor's generated code calls too).
_current_raw_stream = torch._C._cuda_getCurrentRawStream


def _prepared_len(n: int, k: int, precision: str) -> int:
    """Elements of a prepared weight: N rows of K rounded up to 32, both 3xTF32 parts for
    ``"tf32x3"`` (the split form sm_90 reads; other GPUs use the first half)."""
    return n * (-(-k // 32) * 32) * (2 if precision == "tf32x3" else 1)


def prepare_weight(weight: Tensor, precision: str = "tf32") -> Tensor:
    """``weight`` (N × K) prepared for the kernels of ``precision``, as a new 1-D tensor on its
    device (queued on the current stream): pass it as ``prepared`` to the op with the same
    weight, unchanged since, and the same precision."""
    _check_precision(precision)
    _check_operands(weight, weight, None)
    n, k = weight.shape
    w = _row_major(weight.detach())
    dst = torch.empty(_prepared_len(n, k, precision), dtype=torch.float32, device=weight.device)
    gemm = _gemm(weight.device, precision)
    gemm.prepare_weight(_current_raw_stream(weight.get_device()), _matrix(w), (dst.data_ptr(), dst.numel()))
    return dst


def _run(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    scale: float,
    precision: str,
    prepared: Optional[Tensor],
    out: Optional[Tensor] = None,
    activation: str = _SCALE_ADD,
    residual: Optional[Tensor] = None,
    beta: float = 1.0,
) -> Tensor:
    """The fused kernel on the current stream: ``out = f(v) + beta * residual``,
    ``v = x @ weight.T + bias`` (``f``: ``activation``; the seed's ``v*scale + v`` by default)."""
    _check_precision(precision)
    _check_operands(x, weight, bias)
    code = _code(activation)
    k = x.shape[-1]
    n = weight.shape[0]
    lead = x.shape[:-1]
    x2 = _row_major(x if x.dim() == 2 else x.reshape(-1, k))
    if out is None:
        out = torch.empty((*lead, n), dtype=torch.float32, device=x.device)
        out2 = out if out.dim() == 2 else out.view(-1, n)
    else:
        if not isinstance(out, Tensor) or out.device != x.device or out.dtype != torch.float32:
            raise GemmEpilogueError("out: a torch.float32 tensor on x's device")
        if out.shape != (*lead, n):
            raise GemmEpilogueError(f"out: shape {tuple(out.shape)}, the result is {(*lead, n)}")
        try:
            out2 = out.view(-1, n)
        except RuntimeError:
            raise GemmEpilogueError("out: its batch dimensions do not flatten into rows (use a contiguous out)") from None
        if n > 1 and out2.stride(1) != 1:
            raise GemmEpilogueError("out: the elements of a row are not contiguous")
    if prepared is not None:
        if prepared.get_device() != weight.get_device() or prepared.dtype is not torch.float32:
            raise GemmEpilogueError("prepared: not a prepared weight of this weight's device")
        if prepared.numel() < _prepared_len(n, weight.shape[1], precision):
            raise GemmEpilogueError(f"prepared: {prepared.numel()} elements, not a {precision} prepared weight of {n} × {weight.shape[1]}")
        w = (prepared.data_ptr(), n, weight.shape[1], weight.shape[1], prepared.numel())
    else:
        w = _matrix(_row_major(weight))
    if bias is not None:
        if bias.shape[0] != n:
            raise GemmEpilogueError(f"bias: {bias.shape[0]} elements, but N = {n} (weight.shape[0])")
        if n > 1 and bias.stride(0) != 1:
            bias = bias.contiguous()
    c = None
    if residual is not None:
        if not isinstance(residual, Tensor) or not residual.is_cuda or residual.dtype is not torch.float32:
            raise GemmEpilogueError("residual: a torch.float32 CUDA tensor")
        if residual.get_device() != x.get_device():
            raise GemmEpilogueError(f"residual is on {residual.device} but x on {x.device}: every operand on one device")
        if residual.shape != (*lead, n):
            raise GemmEpilogueError(f"residual: shape {tuple(residual.shape)}, the result is {(*lead, n)}")
        if residual is out:
            c = _matrix(out2)  # in place: the crate reads each element before it writes it
        else:
            c = _matrix(_row_major(residual if residual.dim() == 2 else residual.reshape(-1, n)))
    index = x.get_device()
    gemm = _handles.get((index, precision)) or _gemm(x.device, precision)
    xm = _matrix(x2)
    is_prepared = prepared is not None
    ws_len = gemm.workspace_len(xm, w, is_prepared)
    ws = torch.empty(ws_len, dtype=torch.float32, device=x.device) if ws_len else None
    gemm.run(
        _current_raw_stream(index),
        xm,
        w,
        is_prepared,
        None if bias is None else (bias.data_ptr(), n),
        (code, float(scale), c, float(beta)),
        _matrix(out2),
        None if ws is None else (ws.data_ptr(), ws_len),
    )
    return out


@torch.library.custom_op("gemm_epilogue::fused_linear", mutates_args=())
def _fused_linear_op(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    scale: float,
    precision: str,
    prepared: Optional[Tensor],
    activation: str = _SCALE_ADD,
    residual: Optional[Tensor] = None,
    beta: float = 1.0,
) -> Tensor:
    return _run(x, weight, bias, scale, precision, prepared, None, activation, residual, beta)


@_fused_linear_op.register_fake
def _fused_linear_fake(x, weight, bias, scale, precision, prepared, activation=_SCALE_ADD, residual=None, beta=1.0):
    _check_precision(precision)
    _code(activation)
    for name, t in (("x", x), ("weight", weight), ("bias", bias), ("residual", residual)):
        torch._check(t is None or t.dtype == torch.float32, lambda: f"{name}: gemm_epilogue takes torch.float32")
    torch._check(weight.dim() == 2, lambda: "weight is N × K")
    torch._check(x.shape[-1] == weight.shape[1], lambda: f"x has K = {x.shape[-1]}, weight {weight.shape[1]}")
    if bias is not None:
        torch._check(bias.shape == (weight.shape[0],), lambda: "bias has N elements")
    shape = (*x.shape[:-1], weight.shape[0])
    if residual is not None:
        torch._check(residual.shape == shape, lambda: f"residual: shape {tuple(residual.shape)}, the result is {shape}")
    return x.new_empty(shape)


def _setup_context(ctx, inputs, output):
    x, weight, bias, scale, _precision, _prepared, activation, _residual, beta = (
        *inputs,
        *(_SCALE_ADD, None, 1.0)[len(inputs) - 6 :],
    )
    ctx.scale, ctx.activation, ctx.beta = scale, activation, beta
    # v is recomputed (F.linear) for the activations whose derivative needs it.
    ctx.save_for_backward(x, weight, bias if activation not in (_SCALE_ADD, "identity") else None)


def _grad_v(ctx, grad, x, weight, bias):
    """d out / d v applied to ``grad``, as autograd computes it for PyTorch's expression."""
    a = ctx.activation
    if a == _SCALE_ADD:
        # out = v*s + v: what autograd gives for `y*s + y.clone()`, rounded alike.
        return grad * ctx.scale + grad
    if a == "identity":
        return grad
    with torch.no_grad():
        v = torch.nn.functional.linear(x, weight, bias)
    if a == "relu":
        return torch.ops.aten.threshold_backward(grad, torch.relu(v), 0)
    if a == "silu":
        return torch.ops.aten.silu_backward(grad, v)
    if a in ("gelu", "gelu_tanh"):
        return torch.ops.aten.gelu_backward(grad, v, approximate="tanh" if a == "gelu_tanh" else "none")
    # A form added to ACTIVATIONS without its derivative here must fail, not take another's.
    raise NotImplementedError(f"gemm_epilogue: no backward for activation {a!r}")


def _backward(ctx, grad):
    x, weight, bias = ctx.saved_tensors
    grad_v = _grad_v(ctx, grad, x, weight, bias)
    n, k = weight.shape
    grad_x = grad_w = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_x = grad_v @ weight
    if ctx.needs_input_grad[1]:
        grad_w = grad_v.reshape(-1, n).T @ x.reshape(-1, k)
    if ctx.needs_input_grad[2]:
        grad_b = grad_v.reshape(-1, n).sum(0)
    # Traced calls may leave the defaulted arguments out: one gradient per input given.
    needs = ctx.needs_input_grad
    grad_c = grad * ctx.beta if len(needs) > 7 and needs[7] else None
    return (grad_x, grad_w, grad_b, None, None, None, None, grad_c, None)[: len(needs)]


_fused_linear_op.register_autograd(_backward, setup_context=_setup_context)


def fused_linear(
    x: Tensor,
    weight: Tensor,
    bias: Optional[Tensor],
    scale: Optional[float] = None,
    precision: str = "tf32",
    *,
    activation: Optional[str] = None,
    residual: Optional[Tensor] = None,
    beta: float = 1.0,
    out: Optional[Tensor] = None,
) -> Tensor:
    """``f(v) + beta * residual`` with ``v = F.linear(x, weight, bias)``, in one kernel: ``f`` is
    the seed's ``v*scale + v`` given ``scale``, ``activation`` (:data:`ACTIVATIONS`) given that,
    else ``v``; ``residual`` (the result's shape) is optional. With ``out`` the result is written
    there (no autograd), and ``residual=out`` updates it in place; else it is the op
    ``gemm_epilogue::fused_linear``."""
    act, s = _epilogue(scale, activation)
    needs_grad = torch.is_grad_enabled() and any(
        isinstance(t, Tensor) and t.requires_grad for t in (x, weight, bias, residual)
    )
    if out is not None:
        if needs_grad:
            raise GemmEpilogueError("out=: no autograd through a preallocated output (use torch.no_grad())")
        return _run(x, weight, bias, s, precision, None, out, act, residual, beta)
    if type(x) is Tensor and not needs_grad and not torch.compiler.is_compiling():
        # A plain tensor, nothing to trace or differentiate: the kernel without the dispatcher's
        # per-call cost (subclasses, fake tensors among them, take the op and its fake kernel).
        return _run(x, weight, bias, s, precision, None, None, act, residual, beta)
    return torch.ops.gemm_epilogue.fused_linear(x, weight, bias, s, precision, None, act, residual, float(beta))


def _is_current(fast: Optional[tuple], w: Tensor, bias: Optional[Tensor], precision: str) -> bool:
    """Whether ``FusedLinear._bind``'s state was made for this weight (the same parameter,
    version and storage), this bias (the same tensor and storage) and this precision."""
    return (
        fast is not None
        and fast[0] is w
        and fast[1] == w._version
        and fast[3] is bias
        and fast[2] == w.data_ptr()
        and (bias is None or fast[4] == bias.data_ptr())
        and fast[5] == precision
    )


class FusedLinear(nn.Module):
    """``nn.Linear(in_features, out_features, bias)`` followed by ``y*scale + y.clone()`` (given
    ``scale``), by ``activation(y)`` (given an :data:`ACTIVATIONS` name), or by nothing, in one
    kernel (module docs); ``forward(x, residual, beta)`` adds ``beta * residual``.
    ``precision``: ``"tf32"`` (default), ``"tf32x3"`` or ``"tf32-truncated"``
    (:data:`gemm_epilogue.PRECISIONS`)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        scale: Optional[float] = None,
        bias: bool = True,
        precision: str = "tf32",
        device=None,
        dtype=None,
        activation: Optional[str] = None,
    ) -> None:
        super().__init__()
        _check_precision(precision)
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self._set_epilogue(scale, activation)
        self.precision = precision
        self.weight = nn.Parameter(torch.empty((out_features, in_features), **factory))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self._prepared: Optional[Tensor] = None
        self._prepared_for: Optional[tuple] = None
        object.__setattr__(self, "_prepared_param", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``nn.Linear``'s initialisation."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)

    def _set_epilogue(self, scale: Optional[float], activation: Optional[str]) -> None:
        self._activation, self._scale = _epilogue(scale, activation)
        object.__setattr__(self, "_scale_arg", None if scale is None else float(scale))
        object.__setattr__(self, "_activation_arg", activation)
        self._epi = (_code(self._activation), self._scale, None, 1.0)  # the native call's form
        self._fast = None

    @property
    def scale(self) -> Optional[float]:
        """``s`` of the seed's ``y*s + y`` (``None``: an activation or plain ``linear(x)``);
        setting it changes the form of the next forward (with an activation set, it raises)."""
        return self._scale_arg

    @scale.setter
    def scale(self, value: Optional[float]) -> None:
        self._set_epilogue(value, self._activation_arg)

    @property
    def activation(self) -> Optional[str]:
        """The :data:`ACTIVATIONS` name of ``f(linear(x))`` (``None``: the seed's form or plain
        ``linear(x)``); setting it changes the form of the next forward."""
        return self._activation_arg

    @activation.setter
    def activation(self, value: Optional[str]) -> None:
        self._set_epilogue(self._scale_arg, value)

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, scale: Optional[float] = None, precision: str = "tf32", activation: Optional[str] = None
    ) -> "FusedLinear":
        """A ``FusedLinear`` over ``linear``'s own parameters (shared, not copied)."""
        fused = cls.__new__(cls)
        nn.Module.__init__(fused)
        _check_precision(precision)
        fused.in_features, fused.out_features = linear.in_features, linear.out_features
        fused._set_epilogue(scale, activation)
        fused.precision = precision
        fused.weight = linear.weight
        if linear.bias is not None:
            fused.bias = linear.bias
        else:
            fused.register_parameter("bias", None)
        fused._prepared, fused._prepared_for = None, None
        object.__setattr__(fused, "_prepared_param", None)
        return fused

    def weight_changed(self) -> None:
        """Forget the prepared weight (after writes the version counter does not see: through
        ``weight.data`` or ``bias.data``)."""
        self._prepared, self._prepared_for, self._fast = None, None, None
        object.__setattr__(self, "_prepared_param", None)

    def __getstate__(self):
        # The prepared weight and the crate's handles are this process's and this device's:
        # a copy (copy.deepcopy, pickle) prepares its own on its first forward.
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        state = dict(state)
        for name in ("_prepared", "_prepared_for", "_prepared_param", "_fast"):
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_scale_arg" not in self.__dict__:  # pickled before scale and activation were properties
            self._set_epilogue(self.__dict__.pop("scale", None), self.__dict__.pop("activation", None))
        self._prepared, self._prepared_for, self._fast = None, None, None
        object.__setattr__(self, "_prepared_param", None)

    def _prepared_weight(self) -> Optional[Tensor]:
        w = self.weight
        for_ = self._prepared_for
        # The common case first, in few attribute reads: the same parameter, unchanged.
        if (
            for_ is not None
            and self._prepared_param is w
            and for_[1] == w._version
            and for_[2] == w.data_ptr()
            and for_[5] == self.precision
        ):
            return self._prepared
        if not w.is_cuda or w.dtype is not torch.float32:
            return None  # the op refuses such a weight with the crate's message
        key = (id(w), w._version, w.data_ptr(), w.get_device(), w.shape, self.precision)
        if self._prepared is None or self._prepared_for != key:
            with torch.no_grad():
                self._prepared = prepare_weight(w, self.precision)
            self._prepared_for = key
            self._fast = None
            # Not through nn.Module.__setattr__, which would register the Parameter a second
            # time (in parameters() and the state_dict).
            object.__setattr__(self, "_prepared_param", w)
        return self._prepared

    def _bind(self) -> Optional[tuple]:
        """The state of the inference fast path (:meth:`forward`) for the weight just prepared
        and the bias as it is: the crate's ``Layer`` (prepared weight, bias and form bound
        once) and what says it is still current. ``None`` when the bias is not one the
        kernel reads as it is (the general path words or copies it)."""
        w, bias = self.weight, self.bias
        index = self._prepared_for[3]  # the weight's device
        n, k = w.shape
        if bias is not None and not (
            bias.is_cuda
            and bias.dtype is torch.float32
            and bias.get_device() == index
            and bias.dim() == 1
            and bias.shape[0] == n
            and (n <= 1 or bias.stride(0) == 1)
        ):
            self._fast = None
            return None
        b = None if bias is None else (bias.data_ptr(), n)
        prepared = self._prepared
        w_prepared = (prepared.data_ptr(), n, k, k, prepared.numel())
        layer = _gemm(w.device, self.precision).layer(w_prepared, b, self._epi)
        self._fast = (w, w._version, w.data_ptr(), bias, 0 if bias is None else bias.data_ptr(), self.precision, layer, index, k, n)
        return self._fast

    @staticmethod
    def _launch(fast: tuple, x: Tensor) -> Optional[Tensor]:
        """The bound layer on x: ``None`` when x is not a plain CUDA float32 tensor of the layer's
        device with K columns and rows the kernel reads as they are (the general path words
        or copies it). Batch dimensions are flattened (``reshape``: a copy where their strides
        need one)."""
        layer, index, k, n = fast[6], fast[7], fast[8], fast[9]
        if type(x) is not Tensor or not (x.is_cuda and x.dtype is torch.float32) or x.get_device() != index:
            return None
        dims = x.dim()
        if dims == 2:
            x2 = x
        elif dims > 2 and x.shape[-1] == k:
            x2 = x.reshape(-1, k)
        else:
            return None
        rows, cols = x2.shape
        row_stride, col_stride = x2.stride()
        if cols != k or (k > 1 and col_stride != 1) or (rows > 1 and row_stride < k):
            return None
        out = x.new_empty((rows, n) if dims == 2 else (*x.shape[:-1], n))
        ld = row_stride if rows > 1 and row_stride > k else k
        stream = _current_raw_stream(index)
        xp, op = x2.data_ptr(), out.data_ptr()
        needed = layer.run(stream, xp, rows, ld, op)
        if needed:
            ws = x.new_empty(needed)
            layer.run(stream, xp, rows, ld, op, ws.data_ptr(), needed)
        return out

    def forward(self, x: Tensor, residual: Optional[Tensor] = None, beta: float = 1.0) -> Tensor:
        """``f(linear(x))``, plus ``beta * residual`` when given (the result's shape)."""
        if residual is None and not torch.compiler.is_compiling():
            # Inference with the weight, bias and form of the last call: straight to the bound
            # layer, in few attribute reads (parameters from the module's dict, not __getattr__).
            params = self._parameters
            w, bias = params["weight"], params["bias"]
            fast = self._fast
            if _is_current(fast, w, bias, self.precision) and not (
                torch.is_grad_enabled()
                and (x.requires_grad or w.requires_grad or (bias is not None and bias.requires_grad))
            ):
                out = self._launch(fast, x)
                if out is not None:
                    return out
        return self._forward(x, residual, beta)

    def _forward(self, x: Tensor, residual: Optional[Tensor], beta: float) -> Tensor:
        act, s = self._activation, self._scale
        if torch.compiler.is_compiling():
            # Traced: W as it is (the kernel rounds it on load, or splits it into the workspace).
            op = torch.ops.gemm_epilogue.fused_linear
            return op(x, self.weight, self.bias, s, self.precision, None, act, residual, float(beta))
        prepared = self._prepared_weight()
        bias = self.bias
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad
            or self.weight.requires_grad
            or (bias is not None and bias.requires_grad)
            or (residual is not None and residual.requires_grad)
        )
        if needs_grad or type(x) is not Tensor:
            op = torch.ops.gemm_epilogue.fused_linear
            return op(x, self.weight, self.bias, s, self.precision, prepared, act, residual, float(beta))
        # Inference: the kernel without the dispatcher's and autograd's per-call cost.
        if prepared is not None and residual is None:
            fast = self._fast
            if not _is_current(fast, self.weight, bias, self.precision):
                fast = self._bind()
            out = None if fast is None else self._launch(fast, x)
            if out is not None:
                return out
        return _run(x, self.weight, bias, s, self.precision, prepared, None, act, residual, beta)

    def extra_repr(self) -> str:
        form = f"scale={self.scale}" if self.scale is not None else f"activation={self.activation!r}"
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, {form}, "
            f"bias={self.bias is not None}, precision={self.precision!r}"
        )
