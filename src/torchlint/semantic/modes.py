"""Train and eval modes: where a module is switched to either, who owns its mode, and which
modules hold layers that the mode changes (``ModeFacts``, part of
``evaluation.EvaluationFacts``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from torchlint.semantic.forward import _code, _receiver, _root
from torchlint.semantic.names import words
from torchlint.semantic.vocabulary import (
    _BUILDING_BUILTINS, _FRAMEWORK_HOOKS, _FRAMEWORK_PACKAGES, _LOADING, _MODE_FUNCTIONS, _MODE_LAYERS, _PLAIN_METHODS, _TORCHVISION_MODE_MODELS, EVAL, Kind, MODULE_RETURNS_SELF, TRAIN,
)

if TYPE_CHECKING:
    from torchlint.semantic.evaluation import EvalScope

_TEST_FRAMEWORKS = frozenset({"pytest", "unittest"})


# Modules that hold the modules given to them: mode-free only when what they hold is
# (`nn.DataParallel(Net())` is in the mode its `Net` is).
_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict", "DataParallel", "DistributedDataParallel"})


@dataclass(frozen=True)
class _ModeEvent:
    position: float
    node: cst.Call
    mode: str  # EVAL or TRAIN
    explicit: bool  # a .eval()/.train() call or a same-file function known to make one


class ModeFacts:
    """Modes: switches, owners and mode-dependent layers (a part of ``EvaluationFacts``)."""

    # --- modes --------------------------------------------------------------------------

    def _mode_events(self, function: cst.FunctionDef | None) -> list[_ModeEvent]:
        """Mode changes in a function's own body, in source order: ``.eval()`` / ``.train()``,
        calls of same-file functions that end in one, and unknown helpers named for one
        (``set_eval_mode(model)``, ``train_one_epoch(...)``)."""
        if function in self._mode_events_cache:
            return self._mode_events_cache[function]
        events = self._mode_events_cache[function] = []
        for call in self.calls_in.get(function, ()):
            mode, explicit = self._mode_call(call), True
            if mode is None:
                callees = [f for f in self._same_file_callees(call) if f is not function]
                if callees:
                    effects = {self._effect(f) for f in callees}
                    mode = effects.pop() if len(effects) == 1 else None
                else:
                    mode = self.model.project_mode_effect(call.func)  # a function of another project file
                    if mode is None:
                        ws = self._callee_words(call)
                        mode = EVAL if EVAL in ws else TRAIN if ws and ws[0] in (TRAIN, "fit") else None
                        explicit = False
            if mode is not None:
                events.append(_ModeEvent(self._start(call), call, mode, explicit))
        return events

    def _effect(self, function: cst.FunctionDef) -> str | None:
        """The mode a same-file function leaves modules in: its last mode change."""
        if function not in self._effects:
            self._effects[function] = None
            events = self._mode_events(function)
            self._effects[function] = events[-1].mode if events else None
        return self._effects[function]

    def in_eval_mode(self, scope: EvalScope) -> bool:
        """Whether the module is (or is deliberately not) in eval mode when the scope's first
        forward pass runs: an ``.eval()`` before it in its function; an explicit ``.train()``
        inside the evaluation code itself (Monte Carlo dropout); a module only ever put in eval
        mode in this file; or the same at every call of the function in the file."""
        return self._eval_at(scope.forwards[0], scope.function, scope.node, scope.model, frozenset())

    def _eval_at(self, node, function, region, model, seen) -> bool:
        before = [e for e in self._mode_events(function) if e.position < self._start(node)]
        if before:
            last = before[-1]
            return last.mode == EVAL or (region is not None and self._inside(last.node, region))
        if self._always_in_eval(model, function):
            return True
        return self._callers_all(function, seen, lambda site, seen: self._eval_at(site, self.function_of[site], None, model, seen), EVAL)

    def _callers_all(self, function, seen, check, fact: str) -> bool:
        """Whether ``check`` holds at every call of ``function`` in the file, and ``fact``
        (``"eval"``) at its calls in the project's other files (the project index). Unknown
        callers (the function passed around by name, a framework hook) count as holding; a
        function with no callers at all does not. (Gradients at the callers are asked once for
        all the functions involved: ``EvaluationFacts._grad_off_at_callers``.)"""
        if function is None:
            return False
        if function in seen or self._framework_owned(function) or self._referenced(function):
            return True
        elsewhere = self.model.project_callers_hold(function, fact)
        if elsewhere is False:
            return False
        sites = self.call_sites(function)
        if not sites:
            return elsewhere is True
        return all(check(site, seen | {function}) for site in sites)

    def _always_in_eval(self, model: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """``self.model`` put in eval mode somewhere in its class and never back in train
        mode; likewise a module-level model anywhere in the file (an inference service that
        calls ``model.eval()`` once at load time), and a model built by ``from_pretrained``
        (Hugging Face returns it in eval mode)."""
        text = _code(model)
        if isinstance(model, cst.Name) and self._from_pretrained(model):
            return not any(self._mode_call(c) == TRAIN for c in self.calls_by_name.get(TRAIN, ()) if _receiver(c) == text)
        if text.startswith("self.") and function is not None:
            cls = self._class_of(function)
            if cls is None:
                return False
            calls = [c for name in (EVAL, TRAIN) for c in self.calls_by_name.get(name, ()) if self._inside(c, cls)]
        elif isinstance(_root(model), cst.Name) and self._is_global(_root(model)):
            calls = [c for name in (EVAL, TRAIN) for c in self.calls_by_name.get(name, ())]
        else:
            return False
        modes = {self._mode_call(c) for c in calls if _receiver(c) == text}
        return EVAL in modes and TRAIN not in modes

    def _from_pretrained(self, name: cst.Name) -> bool:
        values = self.model.values(name)
        return bool(values) and all(
            isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "from_pretrained" for v in values
        )

    def _is_global(self, name: cst.Name) -> bool:
        from libcst.metadata import GlobalScope

        assignments = self.model.assignments(name)
        return bool(assignments) and all(isinstance(a.scope, GlobalScope) for a in assignments)

    # --- who owns the mode --------------------------------------------------------------

    def _framework_owned(self, function: cst.FunctionDef) -> bool:
        """Code whose mode and gradients someone else sets: Lightning hooks, methods of
        framework classes (Lightning, Hugging Face ``Trainer``, Ignite) and of ``nn.Module``
        subclasses (the caller puts a module in eval mode), and tests."""
        if function not in self._owned_cache:
            self._owned_cache[function] = self._owner(function)
        return self._owned_cache[function] is not None

    def _grad_owned(self, function: cst.FunctionDef) -> bool:
        """Code whose gradients someone else sets: as ``_framework_owned``, but a method of an
        ``nn.Module`` subclass sets its own (``@torch.no_grad()`` on a model's ``predict``)."""
        self._framework_owned(function)
        return self._owned_cache[function] not in (None, "module")

    def module_method(self, function: cst.FunctionDef) -> bool:
        """A method (or a function in one) of an ``nn.Module`` subclass, owned by nothing else."""
        self._framework_owned(function)
        return self._owned_cache[function] == "module"

    def _owner(self, function: cst.FunctionDef) -> str | None:
        """Who sets the mode of ``function``'s code: ``"framework"`` (a hook, a framework's
        class, a test), ``"module"`` (a method of an ``nn.Module`` subclass), or None."""
        for f in self._enclosing_functions(function):
            if self._is_method(f) and _FRAMEWORK_HOOKS.match(f.name.value):
                return "framework"
            if self._is_pytest_test(f):
                return "framework"
        owner = None
        cls = self._class_of(function)
        while cls is not None:
            found = self._class_owner(cls, frozenset())
            if found == "framework":
                return found
            owner = owner or found
            enclosing = self.model.enclosing_function(cls)
            cls = self._class_of(enclosing) if enclosing is not None else None
        return owner

    def _class_owner(self, cls: cst.ClassDef, seen: frozenset) -> str | None:
        info = self.model.classes.get(cls)
        if info is None or cls in seen:
            return None
        if cls.name.value.startswith("Test") or cls.name.value.endswith("TestCase") or any(b.endswith("TestCase") for b in info.base_names):
            return "framework"
        if any(base.startswith(_FRAMEWORK_PACKAGES) for base in info.base_names):
            return "framework"
        owner = None
        for arg in cls.bases:
            if isinstance(arg.value, cst.Name):
                for assignment in self.model.assignments(arg.value):
                    if isinstance(assignment.node, cst.ClassDef):
                        owner = owner or self._class_owner(assignment.node, seen | {cls})
                        if owner == "framework":
                            return owner
        if owner is not None:
            return owner
        if self.model.class_kind(info) is Kind.MODULE:
            return "module"
        if any(isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in cls.body.body):
            return "module"  # a module whose base class lives in another file
        if cls.bases and self._holds_layers(info):
            return "module"  # the same, building its layers in __init__
        return None

    def _holds_layers(self, info) -> bool:
        """A class that builds ``torch.nn`` layers into its attributes (``self.fc =
        nn.Linear(...)``), wrappers such as ``DataParallel`` aside, or registers buffers."""
        for values in info.attribute_values.values():
            for value in values:
                qname = self.model.qualified_name(value.func) if isinstance(value, cst.Call) else None
                if qname and qname.startswith("torch.nn.") and not qname.startswith("torch.nn.parallel.") and qname[9:10].isupper():
                    return True
        return any(self._inside(c, info.node) and _receiver(c) == "self" for c in self.calls_by_name.get("register_buffer", ()))

    def _is_pytest_test(self, function: cst.FunctionDef) -> bool:
        """``test_*`` functions that no code in the file calls, in a file that imports a test
        framework, taking no parameters, or running no loop: tests, not evaluation. A
        ``test_<what>()`` taking no parameters is a test even when the file runs it itself
        (``if __name__ == "__main__": test_layer_norm()``), outside any loop."""
        ws = words(function.name.value)
        if not ws or ws[0] != "test":
            return False
        params = [p for p in function.params.params if p.name.value != "self"]
        sites = self.call_sites(function)
        if sites:
            return len(ws) > 1 and not params and all(
                self.function_of[s] is None and not any(isinstance(a, (cst.For, cst.While)) for a in self.model.ancestors(s)) for s in sites
            )
        has_loop = any(self._inside(loop, function) for loop in self.loops)
        return not params or bool(self.imported & _TEST_FRAMEWORKS) or (len(ws) > 1 and not has_loop)

    # --- layers that train mode changes ------------------------------------------------

    def known_mode_free(self, model: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """Whether the module is known to hold no layer that train mode changes (dropout,
        batch norm, ``RReLU``, transformer layers, a recurrent layer with dropout, code reading
        ``self.training``): every value it can hold is built in this file, from ``torch.nn``
        layers and local ``nn.Module`` classes whose layers are all visible."""
        values = self._module_values(model, function, frozenset())
        return bool(values) and all(self._built_mode_free(v, frozenset()) for v in values)

    def known_mode_dependent(self, model: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """Whether the module is known to hold a layer that train mode changes: one of the
        calls that build it is such a layer, or holds one among its arguments or, for a local
        class, anywhere in the class."""
        values = self._module_values(model, function, frozenset())
        if values is None:
            return self._given_mode_layers_elsewhere(model, function)
        return any(self._builds_mode_layer(v, frozenset()) for v in values)

    def _given_mode_layers_elsewhere(self, model: cst.BaseExpression, function) -> bool:
        """A parameter of a top-level function that no code of this file calls, to which a
        call in another file of the project passes a module known to hold a layer that train
        mode changes (a model built and loaded in ``test.py``, evaluated by ``utils.evaluate``)."""
        project, root = self.model.project, model
        if project is None or not isinstance(root, cst.Name):
            return False
        for f in self._enclosing_functions(function):
            params = [p.name.value for p in f.params.params]
            if root.value not in params:
                continue
            if self.function_of.get(f) is not None or self.call_sites(f) or self._referenced(f):
                return False
            answers = project.argument_mode_layers(f.name.value, params.index(root.value), root.value)
            return bool(answers) and any(a is True for a in answers)
        return False

    def parameter_free(self, model: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """Whether the module is known to hold no parameters: every call that builds it is a
        parameter-free ``torch.nn`` layer (``nn.ReLU()``) or a class of the file that builds
        nothing (``SemanticModel.parameter_free_class``). Gradients on change nothing there."""
        values = self._module_values(model, function, frozenset())
        return bool(values) and all(self._builds_nothing(v) for v in values)

    def _builds_nothing(self, call: cst.Call) -> bool:
        if self.model.devices.holds_no_tensors(call):
            return True
        cls = self._local_definition(call.func, cst.ClassDef)
        return cls is not None and self.model.parameter_free_class(cls)

    def known_mode_layers(self, model: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
        """As ``known_mode_dependent``, but a class that only reads ``self.training`` does not
        count: a noisy network acts in training mode on purpose (exploration), which a pass
        that no name marks as evaluation may well want."""
        values = self._module_values(model, function, frozenset()) or []
        return any(self._builds_mode_layer(v, frozenset(), reads=False) for v in values)

    def _builds_mode_layer(self, call: cst.Call, seen: frozenset, reads: bool = True) -> bool:
        found = False
        # (The calls of its subtree from the collecting pass's record: no walk, and no
        # visitor class made per question, which would leave cycles for the collector.)
        for node in self.model.calls_in(call):
            if found:
                break
            qname = self.model.qualified_name(node.func) or ""
            last = qname.rpartition(".")[2]
            if qname.startswith("torch.nn.functional."):
                found = bool(_MODE_FUNCTIONS.search(last))
            elif qname.startswith("torch.nn.") and last[:1].isupper():
                found = not self._layer_mode_free(node)
            elif qname.startswith("torchvision.models."):
                found = bool(_TORCHVISION_MODE_MODELS.match(last))
            else:
                cls = self._local_definition(node.func, cst.ClassDef)
                if cls is not None and cls not in seen:
                    found = self._builds_mode_layer_in(cls, seen | {cls}, reads)
                elif cls is None:  # a class or factory of another project file
                    found = self.model.project_mode_layers(node.func) is True
        if found or call in seen or len(seen) > 8:
            return found
        # A module handed to the one built (`Classifier(backbone)`, `nn.DataParallel(net)`):
        # its layers are the new module's too.
        for arg in call.args:
            if isinstance(arg.value, (cst.Name, cst.Attribute)):
                values = self._module_values(arg.value, self.function_of.get(call), frozenset()) or []
                if any(self._builds_mode_layer(v, seen | {call}, reads) for v in values):
                    return True
        return False

    def _builds_mode_layer_in(self, cls: cst.ClassDef, seen: frozenset, reads: bool = True) -> bool:
        if reads and any(self._inside(t, cls) for t in self.training_reads):
            return True
        return any(self._builds_mode_layer(c, seen, reads) for f in self.functions if self._inside(f, cls) for c in self.calls_in.get(f, ()))

    def _module_values(self, expr: cst.BaseExpression, function, seen: frozenset) -> list[cst.Call] | None:
        """The calls that build the module ``expr`` holds; None when one of them is unknown."""
        if expr in seen:
            return None
        seen = seen | {expr}
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in MODULE_RETURNS_SELF:
                return self._module_values(func.value, function, seen)  # model.to(device)
            return [expr]
        if isinstance(expr, cst.Attribute):
            values = self.model.values(expr) if isinstance(expr.value, cst.Name) and expr.value.value == "self" else []
        elif isinstance(expr, cst.Name):
            bindings = self.model.assignments(expr)
            if any(isinstance(b.node, cst.Param) for b in bindings):
                return self._argument_values(expr, function, seen)
            if not all(b.node in self.model.bound_values for b in bindings):
                return None  # a binding with no known value: a loop target, a ``with ... as``
            values = self.model.values(expr)
        else:
            return None
        found: list[cst.Call] = []
        for value in values:
            built = self._module_values(value, function, seen)
            if built is None:
                return None
            found.extend(built)
        return found or None

    def _argument_values(self, name: cst.Name, function, seen: frozenset) -> list[cst.Call] | None:
        """What every call of the function in the file passes for its parameter ``name``."""
        for f in self._enclosing_functions(function):
            if name.value not in [p.name.value for p in f.params.params]:
                continue
            sites = self.call_sites(f)
            if not sites or self._referenced(f):
                return None
            found: list[cst.Call] = []
            for site in sites:
                argument = self._argument_for(site, f, name.value)
                built = self._module_values(argument, self.function_of[site], seen) if argument is not None else None
                if built is None:
                    return None
                found.extend(built)
            return found
        return None

    def _built_mode_free(self, call: cst.Call, seen: frozenset) -> bool:
        qname = self.model.qualified_name(call.func) or ""
        if qname.startswith("torch.nn.") and qname.rpartition(".")[2][:1].isupper():
            layer = qname.rpartition(".")[2]
            if layer in _CONTAINERS:
                return self._layer_mode_free(call) and all(self._contents_mode_free(a, seen) for a in call.args)
            return self._layer_mode_free(call)
        cls = self._local_definition(call.func, cst.ClassDef)
        if cls is None:  # a class or factory of another project file
            return self.model.project_mode_layers(call.func) is False
        return self._class_mode_free(cls, seen)

    def _contents_mode_free(self, arg: cst.Arg, seen: frozenset) -> bool:
        """An argument of ``nn.Sequential``/``ModuleList``/``ModuleDict`` built at the call:
        layers, or lists, tuples and dicts of them."""
        value = arg.value
        if arg.star or isinstance(value, (cst.Name, cst.Attribute)):
            return False
        if isinstance(value, cst.Call):
            return self._built_mode_free(value, seen)
        if isinstance(value, (cst.List, cst.Tuple)):
            return all(self._contents_mode_free(cst.Arg(e.value), seen) for e in value.elements if isinstance(e, cst.Element))
        if isinstance(value, cst.Dict):
            return all(isinstance(e, cst.DictElement) and self._contents_mode_free(cst.Arg(e.value), seen) for e in value.elements)
        return False

    def _layer_mode_free(self, call: cst.Call) -> bool:
        """A ``torch.nn`` layer that train mode does not change: not dropout, batch norm,
        ``RReLU`` or a transformer layer, and no ``dropout=`` (recurrent layers, attention)."""
        layer = (self.model.qualified_name(call.func) or "").rpartition(".")[2]
        if _MODE_LAYERS.search(layer):
            return False
        # A recurrent layer's dropout runs between its layers: none in a one-layer RNN
        # (PyTorch warns that it does nothing there).
        recurrent = layer in ("RNN", "LSTM", "GRU")
        positional = [a for a in call.args if a.keyword is None]
        layers = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "num_layers"), positional[2].value if len(positional) > 2 else None)
        one_layer = recurrent and (layers is None or isinstance(layers, cst.Integer) and layers.value == "1")
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "dropout" and not one_layer:
                if not (isinstance(arg.value, (cst.Integer, cst.Float)) and float(arg.value.value) == 0):
                    return False
        return not (recurrent and len(positional) >= 6 and not one_layer)

    def _local_definition(self, func: cst.BaseExpression, kind: type) -> cst.CSTNode | None:
        if not isinstance(func, cst.Name):
            return None
        bindings = self.model.assignments(func)
        if len(bindings) == 1 and isinstance(bindings[0].node, kind):
            return bindings[0].node
        return None

    def _class_mode_free(self, cls: cst.ClassDef, seen: frozenset) -> bool:
        """A local ``nn.Module`` subclass (of ``nn.Module`` or of such local classes) whose
        every call builds or runs only layers that train mode does not change, and that never
        reads ``self.training``."""
        if cls in seen:
            return True
        if cls in self._mode_free_classes:
            return self._mode_free_classes[cls]
        seen = seen | {cls}
        info = self.model.classes.get(cls)
        free = info is not None and self.model.class_kind(info) is Kind.MODULE
        free = free and not any(self._inside(t, cls) for t in self.training_reads)
        for arg in cls.bases if free else ():
            base = self._local_definition(arg.value, cst.ClassDef)
            if base is not None:
                free = free and self._class_mode_free(base, seen)
            else:
                free = free and (
                    self.model.qualified_name(arg.value) in ("torch.nn.Module", "torch.nn.modules.module.Module")
                    or self.model.project_mode_layers(arg.value) is False
                )
        methods = [f for f in self.functions if self._inside(f, cls)]
        free = free and all(self._calls_mode_free(f, seen) for f in methods)
        if len(seen) == 1:
            self._mode_free_classes[cls] = free
        return free

    def _calls_mode_free(self, function: cst.FunctionDef, seen: frozenset) -> bool:
        """Every call in a method (or in a local helper it calls) builds or runs only layers
        that train mode does not change. In ``__init__`` and helpers, which build layers, a
        call of an argument (``norm_layer(dim)``) or of an unknown method is unknown."""
        if function in seen:
            return True
        seen = seen | {function}
        builds = function.name.value == "__init__" or not self._is_method(function)
        for call in self.calls_in.get(function, ()):
            func = call.func
            if not isinstance(func, (cst.Name, cst.Attribute)):
                return False
            qname = self.model.qualified_name(func) or ""
            root = _root(func)
            if qname.startswith("torch.nn.functional."):
                if _MODE_FUNCTIONS.search(qname.rpartition(".")[2]):
                    return False
            elif qname.startswith("torch.nn.") and qname.rpartition(".")[2][:1].isupper():
                if not self._layer_mode_free(call):
                    return False
            elif qname.startswith("torch."):
                if qname in _LOADING:
                    return False
            elif qname.startswith("builtins."):
                if qname.rpartition(".")[2] in _BUILDING_BUILTINS:
                    return False
            elif isinstance(root, cst.Name) and any(isinstance(b.node, (cst.Import, cst.ImportFrom)) for b in self.model.assignments(root)):
                if self.model.project_mode_layers(func) is not False:
                    return False  # a layer from another package, or from a project file that shows one
            elif isinstance(func, cst.Name):
                defined = self._local_definition(func, (cst.ClassDef, cst.FunctionDef))
                if isinstance(defined, cst.ClassDef):
                    if self.model.class_kind(self.model.classes[defined]) is not None and not self._class_mode_free(defined, seen):
                        return False
                elif isinstance(defined, cst.FunctionDef):
                    if not self._calls_mode_free(defined, seen):
                        return False
                elif builds:
                    return False
            elif builds and not (isinstance(root, cst.Name) and root.value == "self") and func.attr.value not in _PLAIN_METHODS:
                return False
        return True
