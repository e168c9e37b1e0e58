"""gemm-epilogue for Python: ``out = v*s + v`` with ``v = x @ weight.T + bias`` in one CUDA kernel.

PyTorch users want :mod:`gemm_epilogue.torch` (``FusedLinear``, the ``torch.library`` ops);
importing this package does not import torch.

``gemm_epilogue._native`` is the crate's raw entry, private to the package: it takes device
addresses and trusts the caller to pass live tensors of the handle's device.
"""

from ._native import GemmEpilogueError

PRECISIONS = ("tf32", "tf32x3", "tf32-truncated")
"""How the fp32 operands become TF32 (docs/EPILOGUE.md): ``"tf32"`` rounds them to nearest
(cuBLAS's TF32, the default); ``"tf32x3"`` splits each into two TF32 parts and sums three
products (the error of an fp32 GEMM); ``"tf32-truncated"`` lets the tensor cores drop the low
bits (faster where rounding costs, biased toward zero)."""

__all__ = ["GemmEpilogueError", "PRECISIONS"]
