from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


@pytest.fixture(autouse=True)
def _no_cache_pollution(monkeypatch, tmp_path):
    # Tests run the CLI from a scratch directory so the result cache lands there.
    monkeypatch.chdir(tmp_path)
    yield


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES") != ""
