"""The semantic layer: what PyTorch objects the names of a file hold, and the facts the rules
share about them, each in the module named for it:

- ``model.py``: names, qualified names, kinds (module, optimizer, ...), scopes, order;
- ``training.py``: training iterations, optimizer steps, gradient clearing, loss tensors;
- ``gradflow.py``: whether a forward pass's outputs can reach ``backward()``;
- ``forward.py``, ``modes.py``, ``evaluation.py``: forward passes, train/eval modes and the
  layers they change, evaluation scopes;
- ``devices.py``: device choices; ``frameworks.py``: another framework's modules;
- ``execution_order.py``: whether a name is bound where a fix writes it (notebooks in cell order);
- ``readers.py``: what the readers of a kept value need of it (a tensor, a number, unknown);
- ``summary.py``, ``index.py``, ``view.py``: the project index (one file's summary, the
  index of the project's summaries, what one file's lint sees of it);
- ``torch_api.py``, ``supported_torch.py``, ``migration.py``, ``references.py``: the torch
  API as data and the torch versions a project supports.

``SemanticModel`` is the file model with those facts, each built on first use, so a run whose
rules never ask for one never pays for it. Nothing here imports the engine, the rule layer,
the cache or files: the project index's files are read by ``torchlint.project``.
"""

from __future__ import annotations

from functools import cached_property

import libcst as cst

from torchlint.semantic.devices import DeviceFacts
from torchlint.semantic.evaluation import EvaluationFacts
from torchlint.semantic.execution_order import bound_before, bound_locally
from torchlint.semantic.frameworks import other_framework
from torchlint.semantic.gradflow import GradientFlow
from torchlint.semantic.model import (
    GRAD_OFF,
    MODULE_RETURNS_SELF,
    MODULE_WRAPPED_ATTRS,
    FileModel,
    Kind,
    call_argument,
)
from torchlint.semantic.training import TrainingFacts

__all__ = ["GRAD_OFF", "MODULE_RETURNS_SELF", "MODULE_WRAPPED_ATTRS", "FileModel", "Kind", "SemanticModel", "call_argument"]


class SemanticModel(FileModel):
    """Facts about one file's PyTorch objects, built once per file (``torch_rule.TorchRule.semantic``)."""

    @cached_property
    def training(self) -> TrainingFacts:
        """Training iterations, optimizer steps, gradient clearing, loss tensors."""
        self.checkpoint()
        return TrainingFacts(self)

    @cached_property
    def gradient_flow(self) -> GradientFlow:
        """Whether a forward pass's output can reach a backward pass."""
        return GradientFlow(self)

    @cached_property
    def evaluation(self) -> EvaluationFacts:
        """Evaluation scopes and whether the model is in eval mode / grad is off there."""
        self.checkpoint()
        return EvaluationFacts(self)

    @cached_property
    def devices(self) -> DeviceFacts:
        """Device choices: hardcoded CUDA strings and calls, availability guards, `device` names."""
        self.checkpoint()
        return DeviceFacts(self)

    @cached_property
    def other_framework(self) -> str | None:
        """The other deep-learning framework the file is written for (``"mxnet"``), with
        nothing of PyTorch's imported; None otherwise (``frameworks.other_framework``)."""
        return other_framework(self.imported_modules)

    def bound_before(self, node: cst.CSTNode, name: str) -> bool:
        """Whether ``name`` is bound before ``node`` runs, in execution order: a notebook's
        cells top to bottom, a script's statements, code in a function from its definition
        (``execution_order``)."""
        return bound_before(self, node, name)

    def bound_locally(self, node: cst.CSTNode, name: str) -> bool:
        """Whether a function (or class body) that holds ``node`` binds ``name`` itself."""
        return bound_locally(self, node, name)
