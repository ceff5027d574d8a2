"""Where a value came from, for TL103: provenance, never equality of values.

A training loss and a validation loss can be equal (both converge to 0.0, both stay at ln 2),
so the value that reaches `ReduceLROnPlateau.step()` is judged by the computation that made
it. The instrumentation gives each tensor an `Origin` (kept in its `grad_fn.metadata`, so it
lives with the graph, or, for a tensor detached from one, in a map by identity), marks the
origins of the loss a backward ran on as `trained`, and returns the Python numbers that the
user's `.item()` makes as `TracedFloat` / `TracedInt`: ordinary numbers that remember their
origins through Python arithmetic (`running += loss.item() * n; running / len(dataset)`).
What leaves Python arithmetic (`float()`, NumPy, `statistics`, `math`) loses the trail, and the
check then says it cannot tell.

This module does not import torch.
"""

from __future__ import annotations

import copy
import operator
from typing import Any


class Origin:
    """The computation a tensor came from: `graph` when it carried an autograd graph, and
    `trained` once a backward ran through it from the loss (it is that loss, or part of it)."""

    __slots__ = ("graph", "trained")

    def __init__(self, graph: bool) -> None:
        self.graph = graph
        self.trained = False


# A tensor computed without a graph and not detached from one: no backward ran on it.
NO_GRAPH = Origin(graph=False)


class TracedFloat(float):
    """A float from the user's `.item()`, with the origins of the tensors it was computed from.
    Made as `type(x)(value)` (as `statistics.mean` makes its result), it has none."""

    __slots__ = ("origins",)

    def __new__(cls, value: Any = 0.0, origins: frozenset[Origin] = frozenset()):
        self = super().__new__(cls, value)
        self.origins = origins
        return self

    def __reduce__(self):  # pickles (and copies) as the plain float
        return (float, (float(self),))


class TracedInt(int):
    """An int from the user's `.item()` (a count of correct predictions), with its origins."""

    def __new__(cls, value: Any = 0, origins: frozenset[Origin] = frozenset()):
        self = super().__new__(cls, value)
        self.origins = origins
        return self

    def __reduce__(self):
        return (int, (int(self),))


_TRACED = (TracedFloat, TracedInt)
# The operands arithmetic follows: Python's own numbers. Anything else (a NumPy scalar, a
# tensor, a Fraction) gets NotImplemented from us and answers as it would for a plain number.
_NUMBERS = frozenset((int, float, bool, TracedFloat, TracedInt))


def traced(value: Any, origins: frozenset[Origin]) -> Any:
    """`value` as a traced number, when it is a plain int or float."""
    kind = type(value)
    if kind is float:
        return TracedFloat(value, origins)
    if kind is int:
        return TracedInt(value, origins)
    return value


def origins_of(value: Any) -> frozenset[Origin] | None:
    """The origins a number carries, or None when it carries none (it cannot be traced)."""
    return (value.origins or None) if isinstance(value, _TRACED) else None


def _plain(value: Any) -> Any:
    if type(value) is TracedFloat:
        return float.__float__(value)
    if type(value) is TracedInt:
        return int.__int__(value)
    return value


def _origins(value: Any) -> frozenset[Origin]:
    return value.origins if isinstance(value, _TRACED) else frozenset()


def _binary(function, reflected: bool):
    def method(self, other, *modulo):
        if type(other) not in _NUMBERS:
            return NotImplemented
        left, right = (other, self) if reflected else (self, other)
        return traced(function(_plain(left), _plain(right), *modulo), self.origins | _origins(other))

    return method


def _unary(function):
    def method(self, *args):
        return traced(function(_plain(self), *args), self.origins)

    return method


for _name, _function in {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "truediv": operator.truediv,
    "floordiv": operator.floordiv,
    "mod": operator.mod,
    "pow": pow,
}.items():
    for _cls in _TRACED:
        setattr(_cls, f"__{_name}__", _binary(_function, reflected=False))
        setattr(_cls, f"__r{_name}__", _binary(_function, reflected=True))
for _name, _function in {"neg": operator.neg, "pos": operator.pos, "abs": abs, "round": round}.items():
    for _cls in _TRACED:
        setattr(_cls, f"__{_name}__", _unary(_function))


def untraced(value: Any, depth: int = 0) -> Any:
    """`value` with its traced numbers made plain, for saving: `torch.load(weights_only=True)`
    loads plain numbers only. Containers are copied only where they hold a traced number."""
    if isinstance(value, _TRACED):
        return _plain(value)
    if depth > 8:
        return value
    if isinstance(value, dict):
        changed = {key: untraced(item, depth + 1) for key, item in value.items()}
        if all(changed[key] is item for key, item in value.items()):
            return value
        result = copy.copy(value)
        result.update(changed)
        return result
    if isinstance(value, list):
        items = [untraced(item, depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value)):
            return value
        result = copy.copy(value)
        result[:] = items
        return result
    if isinstance(value, tuple):
        items = [untraced(item, depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value)):
            return value
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    return value


def register_with_yaml() -> None:
    """PyYAML's safe dumper knows exact floats and ints only: teach it the traced ones, so a
    script that writes its metrics to YAML runs as it does without the verifier."""
    try:
        from yaml.representer import Representer, SafeRepresenter
    except ImportError:
        return
    for representer in (SafeRepresenter, Representer):
        representer.add_representer(TracedFloat, SafeRepresenter.represent_float)
        representer.add_representer(TracedInt, SafeRepresenter.represent_int)


def describe(origins: frozenset[Origin] | None) -> str:
    """The source of a metric, from its origins: `training-loss` (every origin is a loss a
    backward ran on), `mixed` (some are), `untraced` (none known), else `other`."""
    if not origins:
        return "untraced"
    trained = [origin.trained for origin in origins]
    if all(trained):
        return "training-loss"
    if any(trained):
        return "mixed"
    return "other"


def kinds(origins: frozenset[Origin] | None) -> list[str]:
    """What the untrained origins were: computed with a graph no backward ran on, or without one."""
    found = {"graph" if origin.graph else "no-graph" for origin in origins or () if not origin.trained}
    return sorted(found)
