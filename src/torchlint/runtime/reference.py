"""The reference trainer: a correct training loop for checking a model and loss in isolation.

`torchlint verify --reference module:factory` imports `factory` from `module` (the current
directory is on the import path) and calls it with no arguments. It returns
`(model, loss_fn, optimizer, batch)` — or a mapping with those keys — where `batch` is
`(inputs, targets)`; `inputs` is a tensor, a tuple of tensors (passed as positional arguments)
or a dict (keyword arguments). With no batch (`None`, or only three items) a synthetic one is
made from the model's first layer (`Linear`, `Conv1d/2d/3d`, `Embedding`) and the loss
(class indices for `CrossEntropyLoss`/`NLLLoss`, 0/1 for the BCE losses, noise otherwise); to
learn the output's shape the model runs once in eval mode under `no_grad`.

The trainer runs under the same instrumentation as a script, and adds three checks:
- overfit: a model and loss that can learn fit a single batch: the loss falls to a tenth;
- eval-determinism: two eval-mode passes give the same output and leave the state unchanged;
- state-dict: the trained weights survive `torch.save(state_dict)` → `torch.load(weights_only=True)`
  → `load_state_dict(strict=True)` into a fresh model from the factory, with the same outputs.
"""

from __future__ import annotations

import importlib
import io
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

OVERFIT_STEPS = 200
OVERFIT_TARGET = 0.1  # the loss must fall to this fraction of its first value
SYNTHETIC_BATCH = 16


class FactoryError(Exception):
    """The factory could not be imported or called, or returned something unusable."""


def load_factory(spec: str) -> Callable[[], Any]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise FactoryError(f"--reference {spec!r}: expected MODULE:FACTORY, e.g. mymodels:make_classifier")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise FactoryError(f"--reference {spec!r}: cannot import {module_name!r}: {error}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise FactoryError(f"--reference {spec!r}: {module_name!r} has no callable {attr!r}")
    return factory


def unpack(result: Any, spec: str) -> tuple[nn.Module, Callable, torch.optim.Optimizer, Any]:
    if isinstance(result, Mapping):
        result = (result.get("model"), result.get("loss_fn", result.get("loss")), result.get("optimizer"), result.get("batch"))
    if not isinstance(result, (tuple, list)) or len(result) not in (3, 4):
        raise FactoryError(f"--reference {spec!r}: the factory must return (model, loss_fn, optimizer[, batch])")
    model, loss_fn, optimizer, batch = (*result, None) if len(result) == 3 else result
    if not isinstance(model, nn.Module):
        raise FactoryError(f"--reference {spec!r}: the model is a {type(model).__name__}, not an nn.Module")
    if not callable(loss_fn):
        raise FactoryError(f"--reference {spec!r}: the loss function is not callable")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise FactoryError(f"--reference {spec!r}: the optimizer is a {type(optimizer).__name__}, not a torch optimizer")
    return model, loss_fn, optimizer, batch


def forward(model: nn.Module, inputs: Any) -> Any:
    if isinstance(inputs, Mapping):
        return model(**inputs)
    if isinstance(inputs, (tuple, list)):
        return model(*inputs)
    return model(inputs)


def to_device(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, Mapping):
        return {k: to_device(v, device) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    return value


def synthetic_batch(model: nn.Module, loss_fn: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    first = next((m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding))), None)
    if isinstance(first, nn.Linear):
        inputs = torch.randn(SYNTHETIC_BATCH, first.in_features, generator=generator)
    elif isinstance(first, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        spatial = (16,) * (first.weight.dim() - 2)
        inputs = torch.randn(SYNTHETIC_BATCH, first.in_channels, *spatial, generator=generator)
    elif isinstance(first, nn.Embedding):
        inputs = torch.randint(0, first.num_embeddings, (SYNTHETIC_BATCH, 8), generator=generator)
    else:
        raise FactoryError("cannot make a synthetic batch for this model: return (inputs, targets) from the factory")
    parameter = next(model.parameters())
    inputs = inputs.to(parameter.device, parameter.dtype) if inputs.is_floating_point() else inputs.to(parameter.device)
    # The model runs once to learn its output's shape: in eval mode (not counted as the
    # user's inference in training mode, batch-norm statistics untouched), then back.
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            output = model(inputs)
    finally:
        model.train(training)
    if isinstance(loss_fn, (nn.CrossEntropyLoss, nn.NLLLoss)):
        shape = (output.shape[0], *output.shape[2:])
        targets = torch.randint(0, output.shape[1], shape, generator=generator).to(output.device)
    elif isinstance(loss_fn, (nn.BCELoss, nn.BCEWithLogitsLoss)):
        targets = torch.randint(0, 2, output.shape, generator=generator).to(output)
    else:
        targets = torch.randn(output.shape, generator=generator).to(output)
    return inputs, targets


def run_reference(spec: str, *, cuda: bool, user) -> tuple[dict, dict]:
    """Train the factory's model; return the reference checks and the run's outcome."""
    factory = load_factory(spec)
    try:
        made = factory()
    except Exception as error:  # noqa: BLE001 - a broken factory is a setup error, not a crash
        raise FactoryError(f"--reference {spec!r}: the factory raised {type(error).__name__}: {error}") from None
    model, loss_fn, optimizer, batch = unpack(made, spec)
    device = torch.device("cuda" if cuda else "cpu")
    model.to(device)
    try:
        if batch is None:
            batch = synthetic_batch(model, loss_fn)
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            raise FactoryError(f"--reference {spec!r}: the batch must be (inputs, targets)")
        inputs, targets = to_device(batch, device)
        checks = {"overfit": overfit(model, loss_fn, optimizer, inputs, targets)}
        checks["eval-determinism"] = eval_determinism(model, inputs)
        compare = checks["eval-determinism"]["status"] == "PASS"
        fresh = lambda: unpack(factory(), spec)[0].to(device)  # noqa: E731
        checks["state-dict"] = state_dict_round_trip(model, fresh, inputs, compare_outputs=compare)
    except FactoryError:
        raise
    except Exception as error:  # noqa: BLE001 - the model or loss failing is the finding
        where = user.in_traceback(error.__traceback__)
        return {}, {"status": "error", "message": f"{type(error).__name__}: {error}".splitlines()[0][:500], "location": where}
    return checks, {"status": "ok"}


def overfit(model: nn.Module, loss_fn: Callable, optimizer: torch.optim.Optimizer, inputs, targets) -> dict:
    model.train()
    losses: list[float] = []
    for _ in range(OVERFIT_STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(forward(model, inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if not math.isfinite(losses[-1]) or losses[-1] <= OVERFIT_TARGET * losses[0]:
            break
    first, last = losses[0], losses[-1]
    evidence = {"steps": len(losses), "first": first, "last": last}
    if not math.isfinite(last):
        return _result("FAIL", f"the loss became {last} after {len(losses)} steps on one batch", evidence)
    if last <= OVERFIT_TARGET * first or last < 1e-6:
        return _result("PASS", f"fit one batch: loss {first:.4g} → {last:.4g} in {len(losses)} steps", evidence)
    if last < first:
        return _result(
            "WARN",
            f"loss {first:.4g} → {last:.4g} in {len(losses)} steps: falls, but not to a tenth (learning rate too low?)",
            evidence,
        )
    return _result("FAIL", f"cannot fit one batch: loss {first:.4g} → {last:.4g} in {len(losses)} steps", evidence)


def eval_determinism(model: nn.Module, inputs) -> dict:
    model.eval()
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        first, second = _tensor(forward(model, inputs)), _tensor(forward(model, inputs))
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    if changed:
        return _result("FAIL", f"an eval-mode pass changed the state: {', '.join(changed[:5])}", {"changed": changed[:20]})
    if not torch.allclose(first, second, rtol=1e-5, atol=1e-7, equal_nan=True):
        difference = (first - second).abs().max().item()
        return _result(
            "FAIL",
            f"two eval-mode passes differ (max {difference:.3g}): randomness such as F.dropout(training=True) in eval",
            {"max_difference": difference},
        )
    return _result("PASS", "two eval-mode passes give the same output and leave the state unchanged", {})


def state_dict_round_trip(model: nn.Module, fresh_model: Callable[[], nn.Module], inputs, *, compare_outputs: bool = True) -> dict:
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    try:
        state = torch.load(buffer, weights_only=True)
        restored = fresh_model()
        restored.load_state_dict(state, strict=True)
    except Exception as error:  # noqa: BLE001
        reason = " ".join(f"{type(error).__name__}: {error}".split())[:500]
        return _result("FAIL", f"the state dict does not load back: {reason}", {})
    if not compare_outputs:  # eval passes differ from run to run: outputs say nothing
        return _result("PASS", f"{len(state)} entries load back (weights_only=True, strict=True); outputs not compared", {})
    model.eval()
    restored.eval()
    with torch.no_grad():
        same = torch.allclose(_tensor(forward(model, inputs)), _tensor(forward(restored, inputs)), rtol=1e-5, atol=1e-7)
    if not same:
        return _result("FAIL", "a fresh model with the loaded state dict computes different outputs", {})
    return _result("PASS", f"{len(state)} entries round-trip (weights_only=True, strict=True) with the same outputs", {})


def _tensor(output: Any) -> torch.Tensor:
    """The first tensor of a model's output, for comparisons."""
    if isinstance(output, torch.Tensor):
        return output.detach()
    values = output.values() if isinstance(output, Mapping) else output
    return next(_tensor(v) for v in values if isinstance(v, (torch.Tensor, Mapping, tuple, list)))


def _result(status: str, message: str, evidence: dict) -> dict:
    return {"status": status, "message": message, "evidence": evidence}
