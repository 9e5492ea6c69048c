"""GPU tests run only by tools/gpu-check, on a machine with an NVIDIA GPU or an AMD one (torch's
ROCm build). They fail (never skip) when there is none: gpu-check must not pass vacuously."""

import pytest
import torch


def pytest_configure(config):
    if not torch.cuda.is_available():
        raise pytest.UsageError("tests/gpu need a GPU: NVIDIA, or AMD through torch's ROCm build "
                                "(torch.cuda.is_available() is False)")
