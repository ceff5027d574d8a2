"""Training facts: which loops are training iterations, what steps and clears gradients
there, and which expressions hold loss tensors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator

import libcst as cst

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

Loop = (cst.For, cst.While)
# Scopes whose bodies run at another time than the code around them.
SCOPE_BOUNDARIES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)

_FUNCTIONAL_LOSSES = re.compile(r"^torch\.nn\.functional\.(\w+_loss|cross_entropy|binary_cross_entropy\w*|nll_loss|kl_div|ctc_loss)$")
_SCHEDULER_NAME = re.compile(r"sched|lr_?policy|warmup", re.IGNORECASE)


def callee_name(call: cst.Call) -> str | None:
    """``step`` for ``opt.step()``, ``helper`` for ``helper()``."""
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    if isinstance(call.func, cst.Name):
        return call.func.value
    return None


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


@dataclass
class TrainingIteration:
    loop: cst.For | cst.While  # the innermost loop running both a backward pass and a step
    backward_calls: list[cst.Call] = field(default_factory=list)
    losses: list[cst.BaseExpression] = field(default_factory=list)  # what backward runs on
    steps: list[cst.Call] = field(default_factory=list)  # optimizer steps (not scheduler steps)
    clears: list[cst.CSTNode] = field(default_factory=list)  # zero_grad(), p.grad = None, helpers

    def stepped_optimizers(self) -> list[cst.BaseExpression]:
        """The optimizer expression of each step: ``opt`` in ``opt.step()`` and ``scaler.step(opt)``."""
        return [optimizer_of_step(step) for step in self.steps]


def optimizer_of_step(step: cst.Call) -> cst.BaseExpression:
    assert isinstance(step.func, cst.Attribute)
    if step.args and _is_scaler_like(step.func.value):
        return step.args[0].value
    return step.func.value


def _is_scaler_like(expr: cst.BaseExpression) -> bool:
    name = code(expr).lower()
    return "scaler" in name


class _Scan(cst.CSTVisitor):
    """Gathers loops, backward calls, step calls and gradient clears, each with its innermost
    enclosing loop (within the same function)."""

    def __init__(self, facts: TrainingFacts) -> None:
        super().__init__()
        self.facts = facts
        self.loops: list[cst.CSTNode | None] = [None]  # None marks a scope boundary

    def _enter_scope(self, node) -> None:
        self.loops.append(None)

    def _leave_scope(self, node) -> None:
        self.loops.pop()

    visit_FunctionDef = visit_Lambda = visit_ClassDef = _enter_scope
    leave_FunctionDef = leave_Lambda = leave_ClassDef = _leave_scope

    def visit_For(self, node: cst.For) -> None:
        self.loops.append(node)
        self.facts.loops.append(node)

    def visit_While(self, node: cst.While) -> None:
        self.loops.append(node)
        self.facts.loops.append(node)

    def leave_For(self, node: cst.For) -> None:
        self.loops.pop()

    leave_While = leave_For

    def visit_Call(self, node: cst.Call) -> None:
        loop = self.loops[-1]
        facts = self.facts
        loss = facts.backward_target(node)
        if loss is not None:
            facts.backward_calls[node] = loss
            facts.loop_of[node] = loop
        elif facts.is_optimizer_step(node):
            facts.step_calls.append(node)
            facts.loop_of[node] = loop
        elif facts.is_clear(node):
            facts.clear_nodes.append(node)
            facts.loop_of[node] = loop

    def visit_Assign(self, node: cst.Assign) -> None:
        # p.grad = None / param.grad = None
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and t.attr.value == "grad" and isinstance(node.value, cst.Name) and node.value.value == "None":
                self.facts.clear_nodes.append(node)
                self.facts.loop_of[node] = self.loops[-1]


class TrainingFacts:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.loops: list[cst.CSTNode] = []
        self.backward_calls: dict[cst.Call, cst.BaseExpression] = {}
        self.step_calls: list[cst.Call] = []
        self.clear_nodes: list[cst.CSTNode] = []
        self.loop_of: dict[cst.CSTNode, cst.CSTNode | None] = {}
        self._visiting: set[cst.CSTNode] = set()
        self._clearing_functions = self._functions_that_clear()
        model.module.visit(_Scan(self))
        self.iterations = self._iterations()

    # --- what calls are -----------------------------------------------------------------

    def backward_target(self, call: cst.Call) -> cst.BaseExpression | None:
        """What a backward call runs on, or None if ``call`` is not a backward pass."""
        func = call.func
        if self.model.qualified_name(func) == "torch.autograd.backward":
            return call.args[0].value if call.args else None
        if not (isinstance(func, cst.Attribute) and func.attr.value in ("backward", "manual_backward")):
            return None
        receiver = func.value
        if call.args and call.args[0].keyword is None and func.attr.value == "manual_backward" or (
            call.args and isinstance(receiver, (cst.Name, cst.Attribute)) and "accelerator" in code(receiver).lower()
        ):
            return call.args[0].value  # accelerator.backward(loss), self.manual_backward(loss)
        if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "scale" and receiver.args:
            return receiver.args[0].value  # scaler.scale(loss).backward()
        return receiver

    def is_optimizer_step(self, call: cst.Call) -> bool:
        """``opt.step()`` or ``scaler.step(opt)``; never a scheduler's step, a closure step, or
        an environment's ``env.step(action)``."""
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "step"):
            return False
        from torchlint.semantic import Kind

        receiver = call.func.value
        kind = self.model.kind(receiver)
        if kind is Kind.SCALER or (kind is None and _is_scaler_like(receiver)):
            return len(call.args) >= 1
        if kind is Kind.SCHEDULER or _SCHEDULER_NAME.search(code(receiver)):
            return False
        if call.args:  # step(closure) re-evaluates the loss itself; env.step(action) is no optimizer
            return False
        return kind is Kind.OPTIMIZER or (kind is None and "opt" in code(receiver).lower())

    def is_clear(self, call: cst.Call) -> bool:
        name = callee_name(call)
        if name == "zero_grad":
            return True
        if name in ("zero_", "detach_") and isinstance(call.func, cst.Attribute):
            # p.grad.zero_(), p.grad.data.zero_()
            return "grad" in code(call.func.value)
        return name in self._clearing_functions

    def _functions_that_clear(self) -> set[str]:
        """Same-file helpers (functions and methods) whose body clears gradients."""
        names = set()
        for name, functions in self.model.functions.items():
            for function in functions:
                if _mentions_clear(function):
                    names.add(name)
        return names

    # --- iterations ---------------------------------------------------------------------

    def enclosing_loops(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Loops around ``node``, innermost first, within its function."""
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, SCOPE_BOUNDARIES):
                return
            if isinstance(ancestor, Loop):
                yield ancestor

    def _iterations(self) -> list[TrainingIteration]:
        by_loop: dict[cst.CSTNode, TrainingIteration] = {}
        for step in self.step_calls:
            step_loops = list(self.enclosing_loops(step))
            for call, loss in self.backward_calls.items():
                # The iteration is the innermost loop holding both the backward and the step.
                shared = next((l for l in self.enclosing_loops(call) if l in step_loops), None)
                if shared is None:
                    continue
                iteration = by_loop.setdefault(shared, TrainingIteration(shared))
                if call not in iteration.backward_calls:
                    iteration.backward_calls.append(call)
                    iteration.losses.append(loss)
                if step not in iteration.steps:
                    iteration.steps.append(step)
        for iteration in by_loop.values():
            iteration.clears = [c for c in self.clear_nodes if self._inside(c, iteration.loop)]
        return sorted(by_loop.values(), key=lambda it: self.model.start_key(it.loop))

    def _inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return any(a is container for a in self.model.ancestors(node))

    def iteration_of(self, node: cst.CSTNode) -> TrainingIteration | None:
        for ancestor in self.model.ancestors(node):
            for iteration in self.iterations:
                if iteration.loop is ancestor:
                    return iteration
        return None

    def epoch_loop(self, iteration: TrainingIteration) -> cst.CSTNode | None:
        return next(self.enclosing_loops(iteration.loop), None)

    # --- losses -------------------------------------------------------------------------

    def is_loss_value(self, expr: cst.BaseExpression) -> bool:
        """An expression that computes a loss tensor: a loss module's or a functional loss's
        output, arithmetic on losses, or a name bound to one."""
        from torchlint.semantic import Kind

        if isinstance(expr, cst.Call):
            qname = self.model.qualified_name(expr.func)
            if qname and _FUNCTIONAL_LOSSES.match(qname):
                return True
            return self.model.kind(expr.func) is Kind.LOSS
        if isinstance(expr, cst.BinaryOperation):
            return self.is_loss_value(expr.left) or self.is_loss_value(expr.right)
        if isinstance(expr, cst.Name):
            return self.is_loss(expr)
        return False

    def is_loss(self, expr: cst.BaseExpression) -> bool:
        """A name holding a loss tensor: what a backward pass runs on (or an alias), or bound
        to a loss computation."""
        if not isinstance(expr, cst.Name):
            return False
        if expr.value in self._backward_names:
            return True
        if expr in self._visiting:  # loss = loss + aux
            return False
        self._visiting.add(expr)
        try:
            return any(self.is_loss_value(value) for value in self.model.values(expr))
        finally:
            self._visiting.discard(expr)

    @property
    def _backward_names(self) -> set[str]:
        if not hasattr(self, "_backward_name_cache"):
            self._backward_name_cache = {l.value for l in self.backward_calls.values() if isinstance(l, cst.Name)}
        return self._backward_name_cache


def _mentions_clear(function: cst.FunctionDef) -> bool:
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            if callee_name(node) == "zero_grad":
                found = True

        def visit_Assign(self, node: cst.Assign) -> None:
            nonlocal found
            if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in node.targets):
                found = True

    function.body.visit(Finder())
    return found
