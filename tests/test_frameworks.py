"""Which framework a module is written for (``semantic/frameworks.py``): a module that imports
another deep-learning framework and nothing of PyTorch's gets no finding of a PyTorch rule."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from torchlint.config import select_rules
from torchlint.engine import lint_module_source
from torchlint.rule import Prescreen
from torchlint.semantic import SemanticModel
from torchlint.semantic.frameworks import imported_modules, other_framework

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MXNET = (FIXTURES / "rules" / "TL301" / "clean_mxnet_gluon.py").read_text()


@pytest.mark.parametrize(
    "source,expected",
    [
        ("import tensorflow as tf\n", "tensorflow"),
        ("from mxnet import autograd, gluon\n", "mxnet"),
        ("import jax.numpy as jnp\n", "jax"),
        ("from d2l import mxnet as d2l\nfrom mxnet import np\n", "mxnet"),
        ("def f():\n    import paddle\n", "paddle"),
        ("import tensorflow as tf\nimport torch\n", None),  # a converter between the two
        ("import keras\nimport lightning as L\n", None),  # built on PyTorch
        ("from d2l import torch as d2l\nimport jax\n", None),
        ("import tensorflow as tf\nfrom torchvision import models\n", None),
        ("import numpy as np\n", None),  # no framework: a helper given tensors
        ("from .mxnet import train\n", None),  # a file of the project, whatever its name
        ("", None),
    ],
)
def test_other_framework(source, expected):
    assert other_framework(imported_modules(Prescreen.of_source(source))) == expected
    model = SemanticModel(MetadataWrapper(cst.parse_module(source)))
    assert model.other_framework == expected


@pytest.mark.parametrize("path", sorted((FIXTURES / "rules").rglob("*.py")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_both_trees_read_the_same_imports(path):
    """The prescreen (Python's ``ast``) and the semantic model (LibCST) agree on every fixture."""
    source = path.read_bytes()
    model = SemanticModel(MetadataWrapper(cst.parse_module(source)))
    assert sorted(model.imported_modules) == sorted(imported_modules(Prescreen.of_source(source)))


@pytest.mark.parametrize("prescreen", [True, False])
def test_a_module_of_another_framework_gets_no_finding(prescreen):
    rules = select_rules(["ALL"], [], [])
    assert lint_module_source(MXNET.encode(), rules, prescreen=prescreen).findings == []
    # The same loop with torch imported is PyTorch code: TL301 reports the kept loss.
    with_torch = MXNET.replace("from mxnet import", "import torch\nfrom mxnet import", 1)
    found = lint_module_source(with_torch.encode(), rules, prescreen=prescreen).findings
    assert [f.code for f in found] == ["TL301"]
