"""The GPU fixture: tests that need a CUDA device skip visibly without one (run pytest with
``-rs`` to list the reasons), and fail instead when ``GEMM_EPILOGUE_REQUIRE_GPU=1``, as the Rust
tests do."""

import os

import pytest
import torch


def _require_gpu() -> bool:
    return os.environ.get("GEMM_EPILOGUE_REQUIRE_GPU") == "1"


@pytest.fixture
def cuda():
    """The CUDA device the GPU tests run on, its TF32 switch off (each test states its own)."""
    if not torch.cuda.is_available():
        reason = "skipped: no CUDA device (torch.cuda.is_available() is False)"
        if _require_gpu():
            pytest.fail(f"GEMM_EPILOGUE_REQUIRE_GPU=1 but {reason}")
        pytest.skip(reason)
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    yield device
    torch.cuda.synchronize(device)


@pytest.fixture
def gen():
    """A generator seeded per test, so that each test's data is fresh but reproducible."""
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return torch.Generator().manual_seed(seed)
