"""Which framework a module is written for, from its imports (the prescreen's ``ast`` nodes).

torchlint's rules are about PyTorch code, and several of them know a training loop by its
shape (``loss.backward()``, ``trainer.step(...)``, a loss kept in a list): MXNet's Gluon and
other frameworks write loops of the same shape, where those findings are wrong (Gluon clears
gradients by itself; an MXNet loss is no autograd graph of torch's). A module that imports
another deep-learning framework and nothing of PyTorch's (d2l's ``mxnet.py`` beside its
``torch.py``, a TensorFlow or JAX port of a model) is not linted by them (``torch_rule.TorchRule``).
A module that imports no framework at all (a helper given tensors by its callers) is PyTorch
code as far as anyone knows, and is linted.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torchlint.rule import Prescreen

# Top-level packages of other deep-learning frameworks.
OTHER_FRAMEWORKS = frozenset(
    {
        "mxnet", "tensorflow", "tf_keras", "keras", "jax", "jaxlib", "flax", "optax", "haiku", "paddle",
        "mindspore", "oneflow", "chainer", "theano", "cntk",
    }
)
# Top-level packages built on PyTorch, besides ``torch*`` (torchvision, torchaudio, ...): a
# module that imports one of them is PyTorch code whatever else it imports.
TORCH_LIBRARIES = frozenset(
    {
        "lightning", "pytorch_lightning", "lightning_fabric", "timm", "accelerate", "deepspeed", "fairseq",
        "detectron2", "mmcv", "mmengine", "ignite", "opacus", "peft", "trl", "torch_geometric", "captum",
    }
)


def imported_modules(module: Prescreen) -> list[str]:
    """Every module name the module imports (``from d2l import torch`` gives ``d2l`` and
    ``d2l.torch``), relative imports left out: from the prescreen's ``ast`` nodes
    (``SemanticModel.imported_modules`` reads the same from LibCST's tree)."""
    names = []
    for node in module.nodes(ast.Import, ast.ImportFrom):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif node.level == 0 and node.module:
            names += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return names


def _is_torch(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in TORCH_LIBRARIES or any(part.startswith("torch") for part in parts)


def other_framework(imported: list[str]) -> str | None:
    """The other framework a module that imports these modules is written for (``"mxnet"``),
    or None: it imports none, or something of PyTorch's too (``torch``, ``torchvision``,
    ``d2l.torch``, Lightning)."""
    if any(_is_torch(n) for n in imported):
        return None
    return next((top for top in (n.partition(".")[0] for n in imported) if top in OTHER_FRAMEWORKS), None)
