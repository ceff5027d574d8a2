"""Forward passes: which calls run a module (a call of a module, of a method of a module
class that runs its submodules, of an object that holds modules), and what a value is a
module of (``ForwardPasses``, part of ``evaluation.EvaluationFacts``)."""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from functools import cached_property

import libcst as cst

from torchlint.semantic.model import call_argument
from torchlint.semantic.training import code
from torchlint.semantic.names import _EvalDataNames, _is_model_noun, words
from torchlint.semantic.vocabulary import (
    _PARAMETER_FREE, EVAL, Kind, MODULE_RETURNS_SELF, TRAIN,
)

# A CamelCase name: a class (`Model`, `ResNet18`), called to build an instance.
_CLASS_NAME = re.compile(r"[A-Z][a-z0-9]+[A-Za-z0-9]*")


_LOADS = frozenset({"torch.load", "torch.jit.load"})
_BACKWARDS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})

_MODULE_ONLY_METHODS = ("load_state_dict", "parameters", "named_parameters", "modules", "named_modules", "children", "buffers", "eval")


# Libraries whose `fit` trains no PyTorch model (scikit-learn's estimators and transformers,
# apart from its pipelines and searches, which may wrap one; gradient boosting; statistics).
_NOT_TORCH_ESTIMATORS = tuple(
    f"{m}." for m in (
        "sklearn.preprocessing", "sklearn.feature_extraction", "sklearn.decomposition", "sklearn.manifold",
        "sklearn.cluster", "sklearn.neighbors", "sklearn.linear_model", "sklearn.svm", "sklearn.ensemble",
        "sklearn.tree", "sklearn.naive_bayes", "sklearn.mixture", "sklearn.impute", "sklearn.random_projection",
        "sklearn.discriminant_analysis", "sklearn.kernel_ridge", "sklearn.gaussian_process", "sklearn.isotonic",
        "umap", "gensim", "statsmodels", "xgboost", "lightgbm", "catboost", "hmmlearn",
    )
)


def called_module(call: cst.Call) -> cst.BaseExpression:
    """The module a forward pass runs: ``model`` in ``model(x)`` and ``model.forward(x)``."""
    func = call.func
    return func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func


_code = code  # the rendering of a node, as the training facts have it


def _receiver(call: cst.Call) -> str | None:
    """``m`` in a method call ``m.f(...)``; None for a call by bare name (``train(model)``) or
    of any other expression."""
    return _code(call.func.value) if isinstance(call.func, cst.Attribute) else None


def _root(expr: cst.BaseExpression) -> cst.BaseExpression:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return expr


def _chain_root(expr: cst.BaseExpression) -> cst.BaseExpression:
    """The receiver a chain of method calls starts from: ``m`` in ``m.eval().to(device)``."""
    while isinstance(expr, (cst.Attribute, cst.Call)):
        expr = expr.func.value if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) else getattr(expr, "value", None)
        if expr is None:
            return cst.Name("_")
    return expr


class ForwardPasses:
    """What calls are: forward passes and the modules they run (a part of ``EvaluationFacts``)."""

    # --- what calls are -----------------------------------------------------------------

    def is_eval_data(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` reads validation or test data: ``val_loader``, ``testloader``,
        ``X_test``, ``dataloaders["val"]``, ``get_loader("test")``."""
        names = _EvalDataNames()
        expr.visit(names)
        return names.found

    def _mode_call(self, call: cst.Call) -> str | None:
        """EVAL for ``m.eval()`` / ``m.train(False)``, TRAIN for ``m.train()`` / ``m.train(True)``;
        None for anything else (``m.train(was_training)`` restores an unknown mode)."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in (EVAL, TRAIN) or self._same_file_callees(call):
            return None
        if func.attr.value == EVAL:
            return EVAL if not call.args else None
        if not call.args:
            return TRAIN
        arg = call.args[0]
        if len(call.args) == 1 and (arg.keyword is None or arg.keyword.value == "mode") and isinstance(arg.value, cst.Name):
            return {"True": TRAIN, "False": EVAL}.get(arg.value.value)
        return None

    def _same_file_callees(self, call: cst.Call) -> list[cst.FunctionDef]:
        """The functions of this file a call may run: ``helper()`` a function, ``x.helper()``
        a method. ``m.train()`` and ``m.eval()`` switch a module's mode unless they are
        ``self.train()`` in a class that defines ``train``."""
        func = call.func
        if isinstance(func, cst.Name):
            return [f for f in self.functions_by_name.get(func.value, ()) if not self._is_method(f)]
        if not isinstance(func, cst.Attribute):
            return []
        methods = [f for f in self.functions_by_name.get(func.attr.value, ()) if self._is_method(f)]
        if func.attr.value in (EVAL, TRAIN):
            if not (isinstance(func.value, cst.Name) and func.value.value == "self"):
                return []
            function = self.function_of.get(call)
            cls = self._class_of(function) if function is not None else None
            return [f for f in methods if self.model.parent(self.model.parent(f)) is cls]
        return methods

    def _callee_words(self, call: cst.Call) -> list[str]:
        func = call.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        return words(name)

    @cached_property
    def _backward_calls(self) -> list[cst.Call]:
        found = [c for name in ("backward", "manual_backward") for c in self.calls_by_name.get(name, ()) if isinstance(c.func, cst.Attribute)]
        found += [c for name in ("grad", "backward") for c in self.calls_by_name.get(name, ()) if self.model.qualified_name(c.func) in _BACKWARDS]
        return sorted(set(found), key=self._start)

    def _is_training_call(self, call: cst.Call) -> bool:
        """A backward pass, a same-file function that trains, or an unknown ``train...()`` /
        ``fit()`` (not a mode switch)."""
        if call in self._backward_set:
            return True
        if self._mode_call(call) is not None:
            return False
        callees = self._same_file_callees(call)
        if callees:
            return any(self._function_trains(f) for f in callees)
        ws = self._callee_words(call)
        restores_mode = isinstance(call.func, cst.Attribute) and call.func.attr.value == TRAIN and len(call.args) <= 1
        if not (bool(ws) and ws[0] in (TRAIN, "fit") and not restores_mode):
            return False
        return not (isinstance(call.func, cst.Attribute) and self._built_by_other_library(call.func.value))

    def _built_by_other_library(self, receiver: cst.BaseExpression) -> bool:
        """An object every binding of which a library that trains no PyTorch model builds
        (``LabelEncoder().fit_transform(...)``, a t-SNE's or a k-means' ``fit``)."""
        if not isinstance(receiver, (cst.Name, cst.Attribute)):
            return False
        values = self.model.values(receiver)
        return bool(values) and all(
            isinstance(v, cst.Call) and (self.model.qualified_name(v.func) or "").startswith(_NOT_TORCH_ESTIMATORS) for v in values
        )

    @cached_property
    def _backward_set(self) -> set[cst.Call]:
        return set(self._backward_calls)

    @cached_property
    def _backward_starts(self) -> list[float]:
        return [self._start(b) for b in self._backward_calls]

    def _backward_calls_in(self, region: cst.CSTNode | None) -> list[cst.Call]:
        """The backward calls inside ``region`` (None: the module), in source order: those
        starting within it, found by bisection (a call starting inside a statement is in it)."""
        calls = self._backward_calls
        if region is None:
            return calls
        starts = self._backward_starts
        low = bisect.bisect_left(starts, self._start(region))
        high = bisect.bisect_right(starts, self._end(region))
        return [b for b in calls[low:high] if self._inside(b, region)]

    def _function_trains(self, function: cst.FunctionDef) -> bool:
        if function not in self._trains:
            self._trains[function] = False  # recursion: assume not, until shown
            self._trains[function] = any(
                self._is_training_call(c) for f in self._with_nested(function) for c in self.calls_in.get(f, ())
            )
        return self._trains[function]

    def _with_nested(self, function: cst.FunctionDef) -> list[cst.FunctionDef]:
        """The function and the functions defined in it, at any depth, in ``functions``' order."""
        found, stack = [], [function]
        while stack:
            current = stack.pop()
            found.append(current)
            stack.extend(self._nested_functions.get(current, ()))
        return sorted(found, key=self._function_index.__getitem__)

    @cached_property
    def _nested_functions(self) -> dict[cst.FunctionDef, list[cst.FunctionDef]]:
        nested: dict[cst.FunctionDef, list[cst.FunctionDef]] = defaultdict(list)
        for f in self.functions:
            parent = self.function_of.get(f)
            if parent is not None:
                nested[parent].append(f)
        return nested

    @cached_property
    def _function_index(self) -> dict[cst.FunctionDef, int]:
        return {f: i for i, f in enumerate(self.functions)}

    def _training_points(self, function: cst.FunctionDef | None) -> list[cst.Call]:
        """Calls in a function's own body that train, in source order."""
        if function not in self._training_points_cache:
            self._training_points_cache[function] = [c for c in self.calls_in.get(function, ()) if self._is_training_call(c)]
        return self._training_points_cache[function]

    def _trains_in(self, region: cst.CSTNode, function: cst.FunctionDef | None) -> bool:
        return any(self._inside(c, region) for c in self._training_points(function))

    # --- modules ------------------------------------------------------------------------

    @cached_property
    def _module_receivers(self) -> set[str]:
        """Expressions that module-only methods are called on (``model.load_state_dict``),
        also at the end of a chain of methods a module gives itself back from
        (``detector.float().eval()``)."""
        found = set()
        for name in _MODULE_ONLY_METHODS:
            for c in self.calls_by_name.get(name, ()):
                if not isinstance(c.func, cst.Attribute) or (name == EVAL and c.args):
                    continue
                receiver = c.func.value
                found.add(_code(receiver))
                while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value in MODULE_RETURNS_SELF:
                    receiver = receiver.func.value
                    found.add(_code(receiver))
        return found

    def runs_module(
        self, expr: cst.BaseExpression, function: cst.FunctionDef | None, call: cst.Call | None = None, guess: bool = True
    ) -> bool:
        """Whether calling ``expr`` runs an ``nn.Module`` forward pass; ``call``, the call of it
        when known: one without arguments is not taken for a forward pass on the name alone
        (``solver.model()`` of z3 returns the solution found; a model is given its input).
        Without ``guess``, only what the file shows counts, never the name."""
        if not isinstance(expr, (cst.Name, cst.Attribute)):
            return False
        root = _root(expr)
        if isinstance(root, cst.Name):
            bindings = self.model.assignments(root)
            if any(isinstance(a.node, (cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom)) for a in bindings):
                return False  # a function, a class, or an imported module's attribute
        if isinstance(expr, cst.Name) and self._holds_function(expr, function, frozenset()):
            return False  # a plain function used as a model: `net = linreg`, `evaluate(net=softmax_regression)`
        if isinstance(expr, cst.Attribute) and self._holds_callable(expr, function):
            return False  # `self.generate_from_model(...)` a method; `self.model = model_fn` a function
        if self._parameter_free(expr):
            return False
        if call is not None and any(
            self.model.kind(a.value) is Kind.MODULE
            or (isinstance(a.value, (cst.Name, cst.Attribute)) and a.value is not expr and self.runs_module(a.value, function, guess=False))
            for a in call.args
        ):
            return False  # given a module: a helper that moves or wraps it (`self.model_to_device(net)`), no forward
        kind = self.model.kind(expr)
        if kind is not None:
            return kind is Kind.MODULE
        if _code(expr) in self._module_receivers:
            return True
        if isinstance(expr, cst.Name):
            if self._bound_to_load(expr) or self._param_given_module(expr, function):
                return True
        if not guess or (call is not None and not call.args):
            return False  # (what follows is the name's guess)
        # `Model = MODELS[name]; Model(dataset)` and `prj_model.Model(dims, args)` (of a module
        # imported by `importlib`) build a module: a CamelCase name is a class.
        name = expr.value if isinstance(expr, cst.Name) else expr.attr.value
        return _is_model_noun(name) and not _CLASS_NAME.fullmatch(name)

    def _parameter_free(self, expr: cst.Name | cst.Attribute) -> bool:
        """Whether ``expr`` holds a ``torch.nn`` module without parameters (``_PARAMETER_FREE``)
        wherever it is bound."""
        values = self.model.values(expr)
        return bool(values) and all(
            isinstance(v, cst.Call) and self.model.qualified_name(v.func) in _PARAMETER_FREE for v in values
        )

    def _holds_function(self, name: cst.Name, function: cst.FunctionDef | None, seen: frozenset) -> bool:
        """Whether a name may hold a plain function: it is bound to a ``def`` or a ``lambda``,
        to another such name, or is a parameter that a call in the file passes one to."""
        if name.value in seen:
            return False
        seen = seen | {name.value}
        for binding in self.model.assignments(name):
            if isinstance(binding.node, cst.FunctionDef):
                return True
            if isinstance(binding.node, cst.Param):
                for f in self._enclosing_functions(function):
                    if name.value in [p.name.value for p in f.params.params]:
                        arguments = [self._argument_for(site, f, name.value) for site in self.call_sites(f)]
                        return any(self._is_function_value(a, self.function_of[site], seen) for a, site in zip(arguments, self.call_sites(f)))
                return False
        return any(self._is_function_value(v, function, seen) for v in self.model.values(name))

    def _holds_callable(self, attribute: cst.Attribute, function: cst.FunctionDef | None) -> bool:
        """An attribute named like a method of the file (called on ``self``), or a ``self.``
        attribute given only names that hold functions or are not named for a model
        (``self.model = model_fn``)."""
        if isinstance(attribute.value, cst.Name) and attribute.value.value == "self":
            if any(self._is_method(f) for f in self.functions_by_name.get(attribute.attr.value, ())):
                return True
        values = self.model.values(attribute)
        return bool(values) and all(
            isinstance(v, cst.Name) and (not _is_model_noun(v.value) or self._holds_function(v, self.function_of.get(v) or self.model.enclosing_function(v), frozenset()))
            for v in values
        )

    def _is_function_value(self, expr: cst.BaseExpression | None, function, seen: frozenset) -> bool:
        if isinstance(expr, cst.Lambda):
            return True
        return isinstance(expr, cst.Name) and self._holds_function(expr, function, seen)

    def _bound_to_load(self, name: cst.Name) -> bool:
        return any(
            isinstance(v, cst.Call) and self.model.qualified_name(v.func) in _LOADS
            for a in self.model.assignments(name)
            for v in [self.model.bound_values.get(a.node)]
        )

    def _param_given_module(self, name: cst.Name, function: cst.FunctionDef | None) -> bool:
        """A parameter that some call in the file passes a known module to."""
        for f in self._enclosing_functions(function):
            params = [p.name.value for p in f.params.params]
            if name.value not in params:
                continue
            for site in self.call_sites(f):
                argument = self._argument_for(site, f, name.value)
                if argument is not None and self.model.kind(argument) is Kind.MODULE:
                    return True
            return False
        return False

    def _argument_for(self, site: cst.Call, function: cst.FunctionDef, param: str) -> cst.BaseExpression | None:
        """The expression a call passes for a parameter."""
        params = [p.name.value for p in function.params.params]
        index = params.index(param)
        if self._is_method(function) and isinstance(site.func, cst.Attribute) and params and params[0] in ("self", "cls"):
            index -= 1
        return call_argument(site, index, param)
