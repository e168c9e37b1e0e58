"""The activations of csrc/common/epilogue.cuh, the code every kernel's epilogue runs, on every
one of the 2^32 float bit patterns against PyTorch's own kernels, bit for bit: ``erf_rn`` (our
libdevice-equivalent ``erff``) against ``torch.erf``, ``gelu_erf`` and ``gelu_tanh`` against
``F.gelu``, and ``silu`` and ``silu_row`` (rows of eight, one guard for the row's fast division)
against ``F.silu``. The header is compiled here with the toolkit's nvcc and loaded with CuPy
(both on the GPU machine); without them the test fails under ``GEMM_EPILOGUE_REQUIRE_GPU=1``
and skips otherwise."""

import os
import pathlib
import shutil
import subprocess

import pytest
import torch
import torch.nn.functional as F

CSRC = pathlib.Path(__file__).resolve().parents[2] / "csrc"

KERNEL = r"""
#include "epilogue.cuh"
using namespace ge::epilogue;

// which: 0 erf_rn, 1 gelu_erf, 2 gelu_tanh, 3 silu, 4 silu_row over rows of x[i + e * n/8]
// (eight far-apart values: rows that mix the fast and the guarded ranges), 5 silu_row over
// rows of eight neighbours.
extern "C" __global__ void activation(const float *x, float *out, long long n, int which) {
    const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
    if (which >= 4) {
        const long long rows = n / 8;
        if (i >= rows) return;
        const long long first = which == 4 ? i : 8 * i, step = which == 4 ? rows : 1;
        float v[8];
        for (int e = 0; e < 8; ++e) v[e] = x[first + e * step];
        silu_row(v);
        for (int e = 0; e < 8; ++e) out[first + e * step] = v[e];
        return;
    }
    if (i >= n) return;
    const float v = x[i];
    out[i] = which == 0 ? erf_rn(v) : which == 1 ? gelu_erf(v) : which == 2 ? gelu_tanh(v) : silu(v);
}
"""

CASES = {
    "erf_rn": (0, torch.erf),
    "gelu_erf": (1, F.gelu),
    "gelu_tanh": (2, lambda v: F.gelu(v, approximate="tanh")),
    "silu": (3, F.silu),
    "silu_row, rows of far-apart values": (4, F.silu),
    "silu_row, rows of neighbours": (5, F.silu),
}


def _unavailable(reason):
    if os.environ.get("GEMM_EPILOGUE_REQUIRE_GPU") == "1":
        pytest.fail(f"GEMM_EPILOGUE_REQUIRE_GPU=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def activation_kernel(tmp_path_factory):
    """The test kernel, built from the header with nvcc for this GPU, as a CuPy function."""
    if not torch.cuda.is_available():
        _unavailable("skipped: no CUDA device (torch.cuda.is_available() is False)")
    try:
        import cupy
    except ImportError:
        _unavailable("skipped: CuPy is not installed")
    nvcc = shutil.which("nvcc") or next(
        (p for p in ("/usr/local/cuda/bin/nvcc",) if os.access(p, os.X_OK)), None)
    if nvcc is None:
        _unavailable("skipped: no nvcc on PATH or in /usr/local/cuda/bin")
    major, minor = torch.cuda.get_device_capability()
    build = tmp_path_factory.mktemp("activations")
    (build / "activations.cu").write_text(KERNEL)
    cubin = build / "activations.cubin"
    subprocess.run([nvcc, "-std=c++17", "-O3", "-cubin", f"-arch=sm_{major}{minor}", "-I", str(CSRC / "common"),
                    "-I", str(CSRC / "include"), "-o", str(cubin), str(build / "activations.cu")], check=True)
    return cupy.RawModule(path=str(cubin)).get_function("activation")


@pytest.mark.parametrize("name", list(CASES))
def test_each_activation_is_pytorchs_on_every_float(cuda, activation_kernel, name):
    import cupy

    which, reference = CASES[name]
    chunk = 1 << 28
    x = torch.empty(chunk, dtype=torch.int32, device=cuda)
    out = torch.empty(chunk, dtype=torch.float32, device=cuda)
    threads = 256
    differing, first = 0, None
    for lo in range(0, 1 << 32, chunk):
        bits = torch.arange(lo, lo + chunk, dtype=torch.int64, device=cuda)
        x.copy_(torch.where(bits >= 1 << 31, bits - (1 << 32), bits))
        v = x.view(torch.float32)
        out.fill_(-3.0e38)  # poisoned: below every function's range (erf >= -1, GELU and SiLU > -0.3)
        rows = chunk // 8 if which >= 4 else chunk
        with cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream):
            activation_kernel(((rows + threads - 1) // threads,), (threads,),
                              (v.data_ptr(), out.data_ptr(), cupy.int64(chunk), cupy.int32(which)))
        want = reference(v)
        same = (out.view(torch.int32) == want.view(torch.int32)) | (torch.isnan(out) & torch.isnan(want))
        bad = (~same).nonzero()
        if bad.numel():
            differing += bad.shape[0]
            if first is None:
                j = int(bad[0, 0])
                first = (hex(lo + j), float(v[j]), float(out[j]), float(want[j]))
    assert differing == 0, f"{name}: {differing} of 2^32 inputs differ; first (bits, x, ours, PyTorch's): {first}"
