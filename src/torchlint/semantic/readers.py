"""What the readers of a value need of it: whether every place a tensor kept in a name goes
would work as well with a Python number there (``.item()`` may replace it), needs it to stay
a tensor (``.detach()`` keeps one), or leaves the code torchlint follows (returned, stored in
an attribute, given to a function it does not know), so that not every reader is known.

The value is followed from each read of the name through the expressions it is part of
(``total / n``, ``[a, b]``, ``sum(losses)``), the names those are bound to, the containers
they are put in and the loops over them, a few steps deep. A *level* says how deep in
containers the tensor is: 0 the tensor itself (``total``), 1 the elements of a list
(``losses``), 2 those of a dict of lists (``log["loss"]``); ``METER`` an object keeping a
running sum of what it is given (``meter.update(loss, n)``), whose ``avg``, ``sum`` and
``val`` are the value again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

TENSOR, UNKNOWN = "tensor", "unknown"
METER = -1
_MAX_DEPTH = 4  # names followed one from another

# What a Python number has as well as a tensor.
_NUMBER_ATTRIBUTES = frozenset({"real", "imag", "conjugate", "is_integer", "hex", "as_integer_ratio", "__format__", "__round__"})
# Methods of a list, deque, set or dict that give back none of what it holds.
_KEEPING_METHODS = frozenset(
    {"append", "extend", "insert", "appendleft", "extendleft", "add", "clear", "remove", "discard", "reverse", "sort", "count", "index", "keys"}
)
_ELEMENT_METHODS = frozenset({"pop", "popleft", "get"})  # give back one of its elements
_SAME_LEVEL_METHODS = frozenset({"values", "copy"})  # give back its elements
_STORING_METHODS = frozenset({"append", "appendleft", "add", "insert"})  # keep what they are given in their container
_METER_VALUES = frozenset({"avg", "sum", "val", "mean"})
_METER_METHODS = frozenset({"update", "reset"})
_METER_COUNTS = frozenset({"count", "n", "name", "fmt"})
# Builtins that take a number as well as a tensor, and give back nothing of it.
_TAKING_BUILTINS = frozenset(
    f"builtins.{name}" for name in ("print", "len", "float", "int", "bool", "str", "repr", "format", "isinstance", "type", "id", "hash", "callable")
)
_SAME_LEVEL_BUILTINS = frozenset(f"builtins.{name}" for name in ("abs", "round", "sorted", "list", "tuple", "reversed", "iter", "set"))
_ELEMENT_BUILTINS = frozenset(f"builtins.{name}" for name in ("sum", "min", "max"))
# Libraries that take numbers as they take tensors (a list of floats as a list of CPU tensors).
_TAKING_MODULES = ("numpy.", "math.", "statistics.", "matplotlib.", "logging.", "json.", "wandb.", "mlflow.")
# Methods of loggers, progress bars, summary writers and strings that take numbers.
_REPORTING_METHODS = frozenset(
    {"info", "debug", "warning", "warn", "error", "critical", "exception", "log", "add_scalar", "add_scalars", "set_postfix",
     "set_postfix_str", "set_description", "log_metric", "log_metrics", "format"}
)
# torch functions that build a new tensor from numbers as well as from tensors.
_TORCH_BUILDERS = frozenset({"torch.tensor", "torch.as_tensor", "torch.Tensor", "torch.FloatTensor", "torch.DoubleTensor"})


def readers_need(model: SemanticModel, holder: cst.BaseExpression, level: int) -> set[str]:
    """What the readers of ``holder`` (a name, or an entry of one: ``log["loss"]``) need of
    the tensor it keeps at ``level``: ``TENSOR`` where one needs a tensor, ``UNKNOWN`` where
    one is not known (an attribute holder, ``self.losses``, is read anywhere: unknown); empty
    where a Python number serves every reader."""
    while isinstance(holder, cst.Subscript):
        holder, level = holder.value, level + 1
    if not isinstance(holder, cst.Name):
        return {UNKNOWN}
    return _Readers(model).name(holder, level, binding=False, depth=0, seen=frozenset())


class _Readers:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    def name(self, name: cst.Name, level: int, binding: bool, depth: int, seen: frozenset) -> set[str]:
        """What the reads of ``name`` need: of the binding ``name`` is the target of
        (``binding``), or of every binding of the name in its scope."""
        if depth > _MAX_DEPTH:
            return {UNKNOWN}
        reads = self.model.binding_reads(name) if binding else self._all_reads(name)
        if reads is None:
            return {UNKNOWN}
        needs: set[str] = set()
        for read in reads:
            needs |= self.read(read, level, depth, seen | {name.value})
            if UNKNOWN in needs and TENSOR in needs:
                break
        return needs

    def _all_reads(self, name: cst.Name) -> list[cst.CSTNode] | None:
        """Every read of the name in the scope that owns it: its function's, or the module's
        for a name declared ``global`` there or read from it (reads in nested functions too)."""
        scope = self.model.scopes.get(name)
        if scope is None:
            return None
        owners = {id(a.scope): a.scope for a in scope[name.value]} or {id(scope): scope}
        reads: dict[int, cst.CSTNode] = {}
        for owner in owners.values():
            for access in owner.accesses[name.value]:
                reads[id(access.node)] = access.node
            for assignment in owner.assignments[name.value]:
                for access in assignment.references:
                    reads[id(access.node)] = access.node
        return list(reads.values())

    def read(self, node: cst.CSTNode, level: int, depth: int, seen: frozenset) -> set[str]:
        """What the expression ``node`` (the kept value at ``level``, or an expression of it)
        needs of it, from where it goes."""
        model = self.model
        parent = model.parent(node)
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation)):
            return self.read(parent, level, depth, seen)
        if isinstance(parent, cst.IfExp):
            return set() if node is parent.test else self.read(parent, level, depth, seen)
        if isinstance(parent, (cst.Comparison, cst.ComparisonTarget, cst.FormattedStringExpression, cst.Expr, cst.Del, cst.Assert)):
            return set()
        if isinstance(parent, (cst.If, cst.While)):
            return set()  # its test
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return self._attribute(parent, level, depth, seen)
        if isinstance(parent, cst.Subscript) and parent.value is node:
            if level == 0:
                return {TENSOR}
            if level < 0:
                return {UNKNOWN}
            sliced = any(isinstance(element.slice, cst.Slice) for element in parent.slice)
            return self.read(parent, level if sliced else level - 1, depth, seen)  # losses[-10:], losses[-1]
        if isinstance(parent, cst.Arg) and parent.value is node:
            call = model.parent(parent)
            if parent.star or not isinstance(call, cst.Call):
                return {UNKNOWN}
            return self._argument(call, level, depth, seen)
        if isinstance(parent, cst.Element) and level >= 0:
            container = model.parent(parent)
            if isinstance(container, (cst.List, cst.Tuple, cst.Set)):
                return self.read(container, level + 1, depth, seen)
            return {UNKNOWN}
        if isinstance(parent, cst.DictElement) and node is parent.value and level >= 0:
            return self.read(model.parent(parent), level + 1, depth, seen)
        if isinstance(parent, (cst.ListComp, cst.SetComp, cst.GeneratorExp)) and node is parent.elt and level >= 0:
            return self.read(parent, level + 1, depth, seen)
        if isinstance(parent, cst.DictComp) and node is parent.value and level >= 0:
            return self.read(parent, level + 1, depth, seen)
        if isinstance(parent, cst.AugAssign):
            if node is parent.target:
                return set()  # the holder keeps adding to itself
            return self._bound(parent.target, level, depth, seen)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and node is parent.value:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            needs: set[str] = set()
            for target in targets:
                needs |= self._bound(target, level, depth, seen)
            return needs
        if isinstance(parent, (cst.For, cst.CompFor)) and node is parent.iter:
            if level < 1:
                return {UNKNOWN}
            return self._bound(parent.target, level - 1, depth, seen)
        return {UNKNOWN}  # returned, yielded, awaited, in a lambda, a walrus, an index...

    def _bound(self, target: cst.BaseExpression, level: int, depth: int, seen: frozenset) -> set[str]:
        """The value bound to ``target``: followed through a plain name's reads."""
        if not isinstance(target, cst.Name):
            return {UNKNOWN}  # an attribute (self.total = ...), an entry, a tuple
        if target.value in seen:
            return set()  # total = total + x: followed already
        return self.name(target, level, binding=True, depth=depth + 1, seen=seen)

    def _attribute(self, attribute: cst.Attribute, level: int, depth: int, seen: frozenset) -> set[str]:
        """``value.attr`` (or ``value.attr(...)``)."""
        attr = attribute.attr.value
        call = self.model.parent(attribute)
        called = isinstance(call, cst.Call) and call.func is attribute
        if level == METER:
            if attr in _METER_VALUES and not called:
                return self.read(attribute, 0, depth, seen)
            return set() if (attr in _METER_METHODS and called) or (attr in _METER_COUNTS and not called) else {UNKNOWN}
        if level == 0:
            return set() if attr in _NUMBER_ATTRIBUTES else {TENSOR}
        if not called:
            return {UNKNOWN}
        if attr in _KEEPING_METHODS:
            return set()
        if attr in _ELEMENT_METHODS:
            return self.read(call, level - 1, depth, seen)
        if attr in _SAME_LEVEL_METHODS:
            return self.read(call, level, depth, seen)
        return {UNKNOWN}

    def _argument(self, call: cst.Call, level: int, depth: int, seen: frozenset) -> set[str]:
        """The value given to ``call``."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _STORING_METHODS | {"extend"}:
            # other.append(total): followed in the other container
            return self._stored_in(func.value, level + (func.attr.value != "extend"), depth, seen)
        qnames = self.model.qualified_names(func)
        qname = qnames[0] if len(qnames) == 1 else None
        if qname in _TAKING_BUILTINS:
            return set()
        if qname in _SAME_LEVEL_BUILTINS:
            return self.read(call, level, depth, seen)
        if qname in _ELEMENT_BUILTINS:
            return self.read(call, max(level - 1, 0), depth, seen)
        if qname is not None and qname.startswith("torch."):
            if qname in _TORCH_BUILDERS:
                return set()
            if qname.startswith(("torch.autograd.", "torch.save", "torch.jit.", "torch.distributed.")):
                return {UNKNOWN}
            return {TENSOR}
        if qname is not None and qname.startswith(_TAKING_MODULES):
            return set()
        if isinstance(func, cst.Attribute) and func.attr.value in _REPORTING_METHODS:
            return set()
        return {UNKNOWN}  # a function of the file, of another library, a parameter

    def _stored_in(self, container: cst.BaseExpression, level: int, depth: int, seen: frozenset) -> set[str]:
        while isinstance(container, cst.Subscript):
            container, level = container.value, level + 1
        if not isinstance(container, cst.Name):
            return {UNKNOWN}
        if container.value in seen:
            return set()
        return self.name(container, level, binding=False, depth=depth + 1, seen=seen)
