"""Evaluation facts: which code evaluates or predicts (functions named for it, loops over
validation or test loaders), which module it runs, and whether the model is in eval mode and
gradients are off there, following the same file's callers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from torchlint.semantic.training import Loop, SCOPE_BOUNDARIES

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

_EVAL_FUNCTION = re.compile(
    r"^_?(evaluate|evaluation|eval|validate|validation|valid|val|test|testing|predict|prediction|infer|inference|"
    r"run_eval|run_validation|run_test|run_inference)(_(epoch|one_epoch|model|loop|step|fn|batch|set|loader|all))?$"
    r"|^_?(evaluate|validate|predict|infer)_\w+$"
)
# Framework hooks that own the mode (Lightning).
_FRAMEWORK_HOOKS = re.compile(r"^(validation|test|predict)_(step|epoch_end|step_end)$|^on_")
_EVAL_LOADER = re.compile(r"(val|valid|validation|test|eval|dev)\w*(loader|_dl\b|dl\b|_data\b|_set\b|_iter\b|ds\b)", re.IGNORECASE)
MODEL_NAMES = re.compile(r"^(model|net|network|classifier|encoder|decoder|backbone|module|generator|discriminator)(_\w+)?$")
GRAD_OFF = ("torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad", "torch.autograd.grad_mode.inference_mode")


@dataclass
class EvalScope:
    node: cst.FunctionDef | cst.For | cst.While  # an evaluation function or loop
    forward: cst.Call  # the first forward pass through a module there
    model: cst.BaseExpression  # the module that forward runs


class EvaluationFacts:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.code = model.module.code_for_node
        self.scopes: list[EvalScope] = []
        self._calls_by_name: dict[str, list[cst.Call]] = {}
        self._mode_calls: list[cst.Call] = []  # x.eval(), x.train(...)
        self._scan()

    # --- collecting ---------------------------------------------------------------------

    def _scan(self) -> None:
        facts = self
        functions: list[cst.FunctionDef] = []
        loops: list[cst.CSTNode] = []

        class Scan(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                functions.append(node)

            def visit_For(self, node: cst.For) -> None:
                if _EVAL_LOADER.search(facts.code(node.iter)):
                    loops.append(node)

            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
                if name is not None:
                    facts._calls_by_name.setdefault(name, []).append(node)
                if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train"):
                    facts._mode_calls.append(node)

        self.model.module.visit(Scan())
        training = self.model.training
        backward_calls = list(training.backward_calls)
        for function in functions:
            if not _EVAL_FUNCTION.match(function.name.value) or _FRAMEWORK_HOOKS.match(function.name.value):
                continue
            if any(self._inside(b, function) for b in backward_calls):
                continue  # it trains
            forward = self._first_forward(function.body, function)
            if forward is not None:
                self.scopes.append(EvalScope(function, forward, forward.func))
        for loop in loops:
            if any(self._inside(b, loop) for b in backward_calls):
                continue
            function = self.model.enclosing_function(loop)
            if any(s.node is function for s in self.scopes):
                continue  # the function is the scope
            if function is not None and _FRAMEWORK_HOOKS.match(function.name.value):
                continue
            forward = self._first_forward(loop.body, function)
            if forward is not None:
                self.scopes.append(EvalScope(loop, forward, forward.func))

    def _inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return any(a is container for a in self.model.ancestors(node))

    def _first_forward(self, body: cst.CSTNode, function: cst.FunctionDef | None) -> cst.Call | None:
        """The first call of a known module in ``body`` (not in nested functions)."""
        found: list[cst.Call] = []
        facts = self

        class Forward(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return False

            def visit_Lambda(self, node: cst.Lambda) -> bool:
                return False

            def visit_Call(self, node: cst.Call) -> None:
                if not found and facts._is_module(node.func, function):
                    found.append(node)

        body.visit(Forward())
        return found[0] if found else None

    def _is_module(self, expr: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        from torchlint.semantic import Kind

        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return False
        if self.model.kind(expr) is Kind.MODULE:
            return True
        # An unannotated parameter named like a model: `def evaluate(model, loader)`.
        if isinstance(expr, cst.Name) and function is not None and MODEL_NAMES.match(expr.value):
            return any(p.name.value == expr.value for p in function.params.params)
        # self.model(x) in a method, where the model came from outside.
        return (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
            and bool(MODEL_NAMES.match(expr.attr.value))
        )

    # --- questions ----------------------------------------------------------------------

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call]:
        return [c for c in self._calls_by_name.get(function.name.value, []) if not self._inside(c, function)]

    def eval_mode_before(self, node: cst.CSTNode, model: cst.BaseExpression | None = None) -> bool:
        """Whether the last mode change before ``node`` in its function (or module) is
        ``eval()`` / ``train(False)``, for ``model`` when given."""
        scope = self.model.enclosing_function(node)
        position = self.model.start_key(node)
        wanted = self.code(model) if model is not None else None
        last = None
        for call in self._mode_calls:
            if self.model.enclosing_function(call) is not scope or self.model.start_key(call) >= position:
                continue
            if wanted is not None and self.code(call.func.value) != wanted:
                continue
            if last is None or self.model.start_key(call) > self.model.start_key(last):
                last = call
        return last is not None and _is_eval_call(last)

    def model_in_eval(self, scope: EvalScope) -> bool:
        if self.eval_mode_before(scope.forward, scope.model):
            return True
        if isinstance(scope.node, cst.FunctionDef):
            sites = self.call_sites(scope.node)
            return bool(sites) and all(self.eval_mode_before(site) for site in sites)
        return self._loop_in_eval_function_caller(scope)

    def _loop_in_eval_function_caller(self, scope: EvalScope) -> bool:
        # A loop inside a function every caller of which puts the model in eval mode first.
        function = self.model.enclosing_function(scope.node)
        if function is None:
            return False
        sites = self.call_sites(function)
        return bool(sites) and all(self.eval_mode_before(site) for site in sites)

    def grad_disabled(self, node: cst.CSTNode, follow_callers: bool = True) -> bool:
        """Whether ``node`` runs under ``no_grad`` / ``inference_mode`` /
        ``set_grad_enabled(False)``: a ``with`` around it, a decorator of an enclosing
        function, a ``torch.set_grad_enabled(False)`` earlier in its function, or, for code
        in a function, the same at every call site of that function in the file."""
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, cst.With) and any(self._grad_off(item.item) for item in ancestor.items):
                return True
            if isinstance(ancestor, cst.FunctionDef):
                if any(self._grad_off(d.decorator) for d in ancestor.decorators):
                    return True
        function = self.model.enclosing_function(node)
        if self._set_grad_false_before(node, function):
            return True
        if follow_callers and function is not None:
            sites = self.call_sites(function)
            return bool(sites) and all(self.grad_disabled(site, follow_callers=False) for site in sites)
        return False

    def _grad_off(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        qname = self.model.qualified_name(target)
        if qname in GRAD_OFF:
            return True
        if qname == "torch.set_grad_enabled" and isinstance(expr, cst.Call) and expr.args:
            return self.code(expr.args[0].value) == "False"
        return False

    def _set_grad_false_before(self, node: cst.CSTNode, function: cst.FunctionDef | None) -> bool:
        body = function.body.body if function is not None else self.model.module.body
        position = self.model.start_key(node)
        for statement in body:
            if self.model.start_key(statement) >= position:
                break
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) and self._grad_off(small.value):
                        return True
        return False

    def epoch_loops_without_train(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Loops around ``node`` (in its function) that also run a training pass, and never
        call ``.train()``: after evaluation there, the next training pass would run in eval
        mode."""
        training = self.model.training
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, SCOPE_BOUNDARIES):
                return
            if not isinstance(ancestor, Loop):
                continue
            trains = any(self._inside(it.loop, ancestor) for it in training.iterations) or any(
                self._inside(site, ancestor) for site in self._training_function_calls()
            )
            has_train_call = any(
                self._inside(c, ancestor) and not _is_eval_call(c) for c in self._mode_calls
            )
            if trains and not has_train_call:
                yield ancestor

    def _training_function_calls(self) -> list[cst.Call]:
        training = self.model.training
        names = set()
        for iteration in training.iterations:
            function = self.model.enclosing_function(iteration.loop)
            if function is not None:
                names.add(function.name.value)
        return [c for name in sorted(names) for c in self._calls_by_name.get(name, [])]


def _is_eval_call(call: cst.Call) -> bool:
    if call.func.attr.value == "eval":
        return True
    return bool(call.args) and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "False"
