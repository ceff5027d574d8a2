"""Evaluation facts: which code evaluates or predicts, which module it runs, and whether that
module is in eval mode and gradients are off there, following the same file's callers.

Evaluation code is found three ways:

- functions named for it (``evaluate``, ``validate``, ``test``, ``predict``, ``infer``,
  ``val_epoch``, ``check_accuracy``...) that run a module and never train;
- loops over validation or test data (``for x, y in val_loader``, ``testloader``,
  ``dataloaders["val"]``, ``zip(X_test, y_test)``) that run a module and never train;
- statements that run a module for inference: after its weights are loaded
  (``model.load_state_dict(...)``, ``model = torch.load(...)``) with no training after that,
  on validation or test data (``model(X_test)``), or after the same function put it in eval
  mode (``model.eval()``) with no training after that (a validation forward pass at the end of
  a ``train(epoch)`` function).

A module is what the semantic model says (``Kind.MODULE``); where the type is unknown, a name
that reads like a model (``model``, ``net``, ``encoder``, ``best_model``...), a receiver of
module-only methods (``load_state_dict``, ``parameters``, ``eval``), or a parameter that a
call in the file passes a known module to, in a file that imports torch. Code owned by a
framework (Lightning and Hugging Face classes, Lightning hooks), the methods of an ``nn.Module``
subclass (its caller owns the mode), and pytest or unittest tests are never evaluation code;
a module's own method other than ``forward`` owns its gradients, though: one whose passes
through the module end within it (``.data``, NumPy) is an inference scope (``_flow_scopes``).

Everything comes from one scan of the nodes the semantic model's collecting pass recorded;
the rest is asked of the recorded calls, assignments and loops, by their order in the source.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterable, Iterator

import libcst as cst

from torchlint.semantic.gradflow import NEVER
from torchlint.semantic.forward import _LOADS, ForwardPasses, _chain_root, _code, _root, called_module
from torchlint.semantic.modes import ModeFacts, _ModeEvent
from torchlint.semantic.names import _EVAL_FUNCTION_WORDS, _GENERATION_WORDS, _is_eval_data_name, _maybe_eval_data, words
from torchlint.semantic.vocabulary import (
    _GRAD_CONTEXT_TEXT, _GRAD_CONTEXTS, EVAL, Kind, MODULE_RETURNS_SELF, TRAIN,
)

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

_RANDOM_TENSORS = frozenset(
    f"torch.{name}" for name in ("rand", "randn", "randint", "ones", "zeros", "empty", "full", "arange", "rand_like", "randn_like", "ones_like", "zeros_like")
)
# What a shape check reads of a model's output.
_SHAPE_READS = frozenset({"shape", "size", "dim", "ndim"})


_EXITS = (cst.Return, cst.Raise, cst.Break, cst.Continue)


@dataclass
class EvalScope:
    """Code that evaluates or predicts."""

    kind: str  # "function", "loop", "statement" or "untrained"
    # the evaluation function, the loop, the first statement that runs the model, or (for a
    # module the training loop around it does not train) the outermost loop around the pass
    node: cst.CSTNode
    function: cst.FunctionDef | None  # the function the forward passes run in (None: module level)
    forwards: list[cst.Call]  # forward passes through the module there, in source order
    # Found by name or data (evaluation functions and loops, inference statements); not a
    # generation function or a helper reached from evaluation, which need more evidence.
    core: bool = True
    # Forward passes in the same function or region whose output may reach a backward pass
    # (``GradientFlow``): a fix that turns gradients off for the whole function would change them.
    beside_training: bool = False
    # Found only as evidence of the module's mode (TL401): passes with gradients already off,
    # or of a module the training loop around them does not train (``_mode_scopes``). Their
    # gradients are no question (TL402 leaves them alone).
    mode_only: bool = False
    # Found by the gradient flow alone (``_flow_scopes``: an agent's action selection): a
    # network that only reads ``self.training`` (noisy exploration) acts in training mode on
    # purpose there.
    flow: bool = False
    # Found by the gradient flow alone inside a training iteration (a second pass whose output
    # never reaches the backward pass: a validation forward on data no name marks): evidence
    # for gradients (TL402), not for the mode (a training-accuracy pass may want train mode).
    grad_only: bool = False

    @property
    def model(self) -> cst.BaseExpression:
        return called_module(self.forwards[0])


class _Scan:
    """The one scan (``SemanticModel.replay``): calls, loops, assignments and functions, each
    with the function it runs in, and which names and attributes are used other than by
    calling them."""

    def __init__(self, facts: EvaluationFacts) -> None:
        self.facts = facts
        self.functions: list[cst.FunctionDef | None] = [None]
        self.not_references: set[cst.CSTNode] = set()

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            self.facts.imported.add(_code(alias.name).split(".")[0])
        self._bound_by_import(node.names)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            self.facts.imported.add(_code(node.module).split(".")[0])
        if not isinstance(node.names, cst.ImportStar):
            self._bound_by_import(node.names)

    def _bound_by_import(self, aliases) -> None:
        """An import binds its names; it does not pass a function around (a notebook's later
        ``from utils import evaluate`` beside a cell's own ``def evaluate``)."""
        for alias in aliases:
            for part in (alias.name, alias.asname.name if alias.asname is not None else None):
                while isinstance(part, cst.Attribute):
                    self.not_references.add(part.attr)
                    part = part.value
                if isinstance(part, cst.Name):
                    self.not_references.add(part)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.facts.functions.append(node)
        self.facts.function_of[node] = self.functions[-1]
        self.facts.functions_by_name[node.name.value].append(node)
        self.not_references.add(node.name)
        self.functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.not_references.add(node.name)

    def _loop(self, node: cst.For | cst.While) -> None:
        self.facts.function_of[node] = self.functions[-1]
        self.facts.loops.append(node)

    visit_For = visit_While = _loop

    def visit_CompFor(self, node: cst.CompFor) -> None:
        if self.facts.is_eval_data(node.iter):
            self.facts.eval_comprehensions.append(node)

    def _assignment(self, node: cst.Assign | cst.AugAssign | cst.AnnAssign) -> None:
        self.facts.function_of[node] = self.functions[-1]
        self.facts.assignments_in[self.functions[-1]].append(node)

    visit_Assign = visit_AugAssign = visit_AnnAssign = _assignment

    def visit_Call(self, node: cst.Call) -> None:
        facts = self.facts
        facts.function_of[node] = self.functions[-1]
        facts.calls_in[self.functions[-1]].append(node)
        self.not_references.add(node.func)
        if isinstance(node.func, cst.Attribute):
            self.not_references.add(node.func.attr)
            facts.calls_by_name[node.func.attr.value].append(node)
        elif isinstance(node.func, cst.Name):
            facts.calls_by_name[node.func.value].append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.not_references.add(node.attr)
        if node.attr.value == "training":
            self.facts.training_reads.append(node)
        if node not in self.not_references:
            self.facts.attribute_references[node.attr.value] += 1

    def visit_Param(self, node: cst.Param) -> None:
        self.not_references.add(node.name)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.not_references.add(node.keyword)

    def visit_Name(self, node: cst.Name) -> None:
        if node not in self.not_references:
            self.facts.name_references[node.value] += 1
        if _maybe_eval_data(node.value) and _is_eval_data_name(node.value):
            self.facts.eval_data_names.append(node)


class EvaluationFacts(ForwardPasses, ModeFacts):
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.imported: set[str] = set()
        self.functions: list[cst.FunctionDef] = []
        self.functions_by_name: dict[str, list[cst.FunctionDef]] = defaultdict(list)
        self.function_of: dict[cst.CSTNode, cst.FunctionDef | None] = {}
        self.loops: list[cst.For | cst.While] = []
        self.eval_comprehensions: list[cst.CompFor] = []
        self.assignments_in: dict[cst.FunctionDef | None, list[cst.CSTNode]] = defaultdict(list)
        self.calls_in: dict[cst.FunctionDef | None, list[cst.Call]] = defaultdict(list)
        self.calls_by_name: dict[str, list[cst.Call]] = defaultdict(list)
        self.name_references: Counter[str] = Counter()
        self.attribute_references: Counter[str] = Counter()
        self.eval_data_names: list[cst.Name] = []
        self.training_reads: list[cst.Attribute] = []
        self._mode_free_classes: dict[cst.ClassDef, bool] = {}
        self._effects: dict[cst.FunctionDef, str | None] = {}
        self._mode_events_cache: dict[cst.FunctionDef | None, list[_ModeEvent]] = {}
        self._eval_switches_cache: dict[cst.FunctionDef | None, tuple[list[_ModeEvent], list[float]]] = {}
        self._training_points_cache: dict[cst.FunctionDef | None, list[cst.Call]] = {}
        self._owned_cache: dict[cst.FunctionDef, str | None] = {}
        self._grad_off_callers: dict[cst.FunctionDef, bool] = {}  # ``_grad_off_at_callers``
        self._trains: dict[cst.FunctionDef, bool] = {}
        model.replay(_Scan(self))
        self.torch_file = bool(self.imported & {"torch", "torchvision", "pytorch_lightning", "lightning", "timm"}) or model.star_imports_torch()
        self.scopes: list[EvalScope] = self._find_scopes() if self.torch_file else []

    # --- order in the source (semantic/__init__.py, `start_key`) --------------------------

    def _start(self, node: cst.CSTNode) -> float:
        return self.model.start_key(node)

    def _end(self, node: cst.CSTNode) -> float:
        return self.model.end_key(node)

    def _inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return self.model.inside(node, container)

    def _statement_of(self, node: cst.CSTNode) -> cst.BaseStatement:
        if isinstance(node, cst.BaseStatement):
            return node
        return next(a for a in self.model.ancestors(node) if isinstance(a, cst.BaseStatement))

    def _enclosing_functions(self, function: cst.FunctionDef | None) -> Iterator[cst.FunctionDef]:
        while function is not None:
            yield function
            function = self.function_of.get(function)



    # --- gradients ----------------------------------------------------------------------

    def grad_disabled(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` runs with gradients off (or deliberately on): inside a ``with`` of
        ``no_grad`` / ``inference_mode`` / ``set_grad_enabled`` / ``enable_grad``, in a
        function decorated with one, after ``torch.set_grad_enabled(False)`` in its function or
        at module level, or the same at every call of its function in the file (and, through
        the project index, in the project's other files)."""
        here = self._grad_off_here(node)
        if here is not None:
            return here
        function = self.function_of.get(node) if not isinstance(node, cst.FunctionDef) else node
        return self._grad_off_at_callers(function)

    def _grad_off_here(self, node: cst.CSTNode) -> bool | None:
        """What the code around ``node`` says of gradients there; None: its callers decide."""
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, cst.With) and any(self._grad_context(item.item) for item in ancestor.items):
                return True
            if isinstance(ancestor, cst.FunctionDef) and any(self._grad_context(d.decorator) for d in ancestor.decorators):
                return ancestor.asynchronous is None  # a decorator does not cover a coroutine's body
        function = self.function_of.get(node) if not isinstance(node, cst.FunctionDef) else node
        if self._grad_switched_off(function, node) or (function is not None and self._grad_switched_off(None, None)):
            return True
        return None

    def _grad_off_at_callers(self, function: cst.FunctionDef | None) -> bool:
        """Whether gradients are off at every call of ``function`` (``_callers_all``'s rule),
        its callers' callers asked the same way: the greatest answer that holds over the
        calls among the functions involved (a chain that comes back to a function counts as
        holding there), computed once for all of them."""
        if function is None:
            return False
        known = self._grad_off_callers
        if function in known:
            return known[function]
        involved, stack = [], [function]
        while stack:
            current = stack.pop()
            if current is None or current in known or current in involved:
                continue
            involved.append(current)
            if self._callers_unasked(current) is None:
                stack.extend(self.function_of[site] for site in self.call_sites(current) if self._grad_off_here(site) is None)
        holds = dict.fromkeys(involved, True)
        changed = True
        while changed:
            changed = False
            for current in involved:
                if holds[current] and not self._callers_hold_grad_off(current, holds):
                    holds[current], changed = False, True
        known.update(holds)
        return known[function]

    def _callers_unasked(self, function: cst.FunctionDef) -> bool | None:
        """What decides ``function``'s callers without asking about the file's own calls: its
        owner sets gradients (a hook, a test), it is passed around, another file calls it
        with gradients on, or nothing calls it; None: the file's calls decide."""
        if self._grad_owned(function) or self._referenced(function):
            return True
        elsewhere = self.model.project_callers_hold(function, "grad")
        if elsewhere is False:
            return False
        if not self.call_sites(function):
            return elsewhere is True
        return None

    def _callers_hold_grad_off(self, function: cst.FunctionDef, holds: dict) -> bool:
        unasked = self._callers_unasked(function)
        if unasked is not None:
            return unasked
        for site in self.call_sites(function):
            here = self._grad_off_here(site)
            if here is None:
                caller = self.function_of[site]
                here = caller is not None and self._grad_off_callers.get(caller, holds.get(caller, False))
            if not here:
                return False
        return True

    def _grad_context(self, expr: cst.BaseExpression, seen: frozenset = frozenset()) -> bool:
        """A ``with`` item (or decorator) that sets the gradient mode: a grad context, an
        expression naming one (``torch.enable_grad() if train else torch.no_grad()``), or a
        name bound to either (``ctx = ...; with ctx:``)."""
        target = expr.func if isinstance(expr, cst.Call) else expr
        if self.model.qualified_name(target) in _GRAD_CONTEXTS:
            return not self._turns_grad_on(expr)
        if isinstance(expr, cst.Name) and expr.value not in seen:
            if any(self._grad_context(v, seen | {expr.value}) for v in self.model.values(expr)):
                return True
        return any(text in _code(expr) for text in _GRAD_CONTEXT_TEXT)

    def _turns_grad_on(self, expr: cst.BaseExpression) -> bool:
        """``set_grad_enabled(True)`` or ``inference_mode(False)``: a context that changes nothing."""
        if not (isinstance(expr, cst.Call) and expr.args):
            return False
        value = expr.args[0].value
        name = self.model.qualified_name(expr.func) or ""
        literal = value.value if isinstance(value, cst.Name) else None
        return (name.endswith("set_grad_enabled") and literal == "True") or (name.endswith("inference_mode") and literal == "False")

    def _grad_switched_off(self, function: cst.FunctionDef | None, before: cst.CSTNode | None) -> bool:
        """The last ``torch.set_grad_enabled(...)`` statement in a function's own body (before
        ``before`` when given) switches gradients off."""
        last = None
        for call in self.calls_by_name.get("set_grad_enabled", ()):
            if self.function_of[call] is not function or (before is not None and self._start(call) >= self._start(before)):
                continue
            if isinstance(self.model.parent(call), cst.Expr):
                last = call
        return last is not None and not self._turns_grad_on(last) and self.model.qualified_name(last.func) in _GRAD_CONTEXTS

    # --- callers ------------------------------------------------------------------------

    def _is_method(self, function: cst.FunctionDef) -> bool:
        return isinstance(self.model.parent(self.model.parent(function)), cst.ClassDef)

    def _class_of(self, function: cst.FunctionDef) -> cst.ClassDef | None:
        for f in self._enclosing_functions(function):
            if self._is_method(f):
                return self.model.parent(self.model.parent(f))
        return None

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call]:
        """Calls of ``function`` in the file: ``name(...)`` for a function, ``x.name(...)``
        for a method; not its own recursive calls."""
        method = self._is_method(function)
        return [
            c
            for c in self.calls_by_name.get(function.name.value, ())
            if isinstance(c.func, cst.Attribute if method else cst.Name) and not self._inside(c, function)
        ]

    def _referenced(self, function: cst.FunctionDef) -> bool:
        """Used other than by calling it (passed as a callback): its callers are unknown."""
        references = self.attribute_references if self._is_method(function) else self.name_references
        return references[function.name.value] > 0




    # --- finding the scopes -------------------------------------------------------------

    def _find_scopes(self) -> list[EvalScope]:
        evaluation_functions = [f for f in self.functions if self._is_evaluation_function(f)]
        scopes = [s for s in map(self._function_scope, evaluation_functions) if s is not None]
        functions = {s.node for s in scopes}
        evaluation_loops = []
        for loop in self.loops:
            function = self.function_of[loop]
            if not isinstance(loop, cst.For) or not self.is_eval_data(loop.iter):
                continue
            if (function is not None and self._framework_owned(function)) or self._trains_in(loop, function):
                continue
            evaluation_loops.append(loop)
            if functions.intersection(self._enclosing_functions(function)) or any(self._inside(loop, s.node) for s in scopes):
                continue
            forwards, beside = self._inference(self._forwards(loop, function))
            if forwards:
                scopes.append(EvalScope("loop", loop, function, forwards, beside_training=beside))
        scopes.extend(self._helper_scopes(scopes, [*evaluation_functions, *evaluation_loops]))
        functions = {s.node for s in scopes}
        scopes.extend(self._statement_scopes(scopes, functions))
        scopes.extend(self._flow_scopes(scopes))
        scopes.extend(self._mode_scopes(scopes))
        return sorted(scopes, key=lambda s: self._start(s.forwards[0]))

    def _flow_scopes(self, scopes: list[EvalScope]) -> list[EvalScope]:
        """Functions that no name marks as evaluation, whose forward passes through modules
        known by their type (``self.actor = Actor(...)``), or through a method of one that
        runs its submodules (``self.policy.sample(state)``, ``lm.log_prob(x)``), provably
        never reach a backward pass: an agent's ``select_action``, a prediction helper. A
        function that trains, a framework's hook, a module's own method and a test are left
        alone, as everywhere."""
        covered = self._covering(s.node for s in scopes if s.kind != "statement")
        taken = {f for s in scopes if s.kind == "statement" for f in s.forwards}
        found = []
        for function in self.functions:
            own = self._own_module_passes(function)
            if (own is None and self._framework_owned(function)) or self._function_trains(function) or self._backward_calls_in(function):
                continue
            passes = [f for s in scopes if s.function is function for f in s.forwards]
            forwards = [
                c for c in self.calls_in.get(function, ())
                if c not in taken and not covered(c) and not self._in_lambda(c)
                and (self.known_forward(c) if own is None else own(c))
                and not self._applied_to_outputs(c, passes)
                # (a shape check, a demo on made-up tensors: predicts nothing)
                and not self._shape_read_only(c) and not self._on_random_input(c)
            ]
            forwards, _ = self._inference(forwards)
            if forwards:
                # Any other pass there (of a module of another file) whose output may be
                # backpropagated keeps a decorator off the whole function.
                others = [c for c in self._forwards(function, function) if c not in forwards]
                beside = any(not self.is_inference(c) for c in others)
                found.append(EvalScope("function", function, function, forwards, core=False, beside_training=beside, flow=True))
        return found

    def _mode_scopes(self, scopes: list[EvalScope]) -> list[EvalScope]:
        """Passes whose mode matters though no name marks them as evaluation:

        - passes with gradients off (``with torch.no_grad():``) outside any training
          iteration, in code that trains nothing there: an accuracy loop over the training
          data at the end of an epoch (``no_grad`` is not ``eval``);
        - passes of a module the training iteration around them does not train: none of its
          parameters is held by an optimizer of the file, nothing updates them (an EMA or
          momentum copy, a target network synced by ``load_state_dict``), and nothing sets its
          mode on purpose (a frozen distillation teacher, a pretrained feature network).

        One scope per function, module and region; mode evidence only (``mode_only``)."""
        taken = {f for s in scopes for f in s.forwards}
        covered = self._covering(s.node for s in scopes if s.kind != "statement")
        training = self.model.training
        holders = self._all_parameter_holders(training)
        groups: dict[tuple, EvalScope] = {}
        for function, calls in self.calls_in.items():
            if function is not None and self._framework_owned(function):
                continue
            step_function = function is not None and any(
                training.iteration_of(b) is None for b in self._backward_calls_in(function) if self.function_of.get(b) is function
            )
            for call in calls:
                if call in taken or covered(call) or self._in_lambda(call) or not self.known_forward(call):
                    continue
                model = called_module(call)
                if not isinstance(model, (cst.Name, cst.Attribute)):
                    continue
                iteration = training.iteration_of(call)
                if iteration is None:
                    if step_function or self._grad_off_here(call) is not True or self._shape_read_only(call) or self._on_random_input(call):
                        continue
                    region = self.anchor(call, model, function)
                    if self._trains_in(region, function) or self._trained_on_purpose(call, model, function):
                        continue
                elif (
                    not holders or not iteration.steps or self._on_random_input(call)
                    or not self._untrained(model, holders)
                ):
                    continue  # (a loop that steps no optimizer trains nothing known: a smoke test)
                else:  # the outermost loop around it: the module is put in eval mode once, before it
                    region = list(training.enclosing_loops(call))[-1]
                if not self.known_mode_layers(model, function):
                    continue
                key = (function, _code(model), region)
                if key in groups:
                    groups[key].forwards.append(call)
                else:
                    kind = "statement" if iteration is None else "untrained"
                    groups[key] = EvalScope(kind, region, function, [call], core=False, mode_only=True)
        return list(groups.values())

    def _trained_on_purpose(self, call: cst.Call, model: cst.BaseExpression, function) -> bool:
        """An explicit ``model.train()`` before the pass with no training between them: the
        pass wants training mode (recomputing batch-norm statistics, Monte Carlo dropout)."""
        name, start = _code(model), self._start(call)
        switches = [
            e for e in self._mode_events(function)
            if e.explicit and e.position < start and isinstance(e.node.func, cst.Attribute) and _code(e.node.func.value) == name
        ]
        if not switches or switches[-1].mode != TRAIN:
            return False
        return not any(switches[-1].position < self._start(t) < start for t in self._training_points(function))

    def _trains_through_another_pass(self, call: cst.Call, model: cst.BaseExpression, loop: cst.CSTNode, function) -> bool:
        """Whether the loop runs another pass of the same module whose output may reach the
        backward pass: then ``call`` is a second pass, beside the training one."""
        from torchlint.semantic.gradflow import REACHES

        name = _code(model)
        return any(
            c is not call and self.function_of.get(c) is function and _code(called_module(c)) == name
            and self.is_forward(c, function) and self.model.gradient_flow.of(c) == REACHES
            for c in self.model.calls_in(loop)
        )

    def _trained_by(self, model: cst.BaseExpression, iteration) -> bool:
        """Whether an optimizer the iteration steps holds the module's parameters (as written:
        ``model`` for ``Adam(model.parameters())``)."""
        name = _code(model)
        for optimizer in iteration.stepped_optimizers():
            held = self.model.training.parameter_holders(optimizer)
            if held and any(h == name or name.startswith(h + ".") for h in held):
                return True
        return False

    def _all_parameter_holders(self, training) -> set[str] | None:
        """The modules whose parameters the file's stepped optimizers hold (as written), or
        None when one of them is unknown."""
        found: set[str] = set()
        for iteration in training.iterations:
            for optimizer in iteration.stepped_optimizers():
                held = training.parameter_holders(optimizer)
                if held is None:
                    return None
                found |= held
        return found

    def _untrained(self, model: cst.BaseExpression, holders: set[str]) -> bool:
        """A module no optimizer of the file trains, whose parameters nothing else updates
        and whose mode nothing sets: neither it nor a part or owner of it is held, it is
        never handed to a call (``ema.update(teacher)``, ``soft_update(target, net)``), its
        parameters are iterated only to freeze them, it is loaded inside no loop, and no
        ``.train()`` / ``.eval()`` is called on it."""
        name = _code(model)
        if any(h == name or h.startswith(name + ".") or name.startswith(h + ".") for h in holders):
            return False
        for call in self.calls_in_file:
            if any(_code(a.value) == name or _code(a.value).startswith(name + ".") for a in call.args):
                return False
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if receiver is None or not (_code(receiver) == name or name.startswith(_code(receiver) + ".")):
                continue
            method = call.func.attr.value
            if method in (EVAL, TRAIN) or (method == TRAIN and name.startswith(_code(receiver) + ".")) or (method == "load_state_dict" and any(True for _ in self.model.training.enclosing_loops(call))):
                return False
        for loop in self.loops:
            if isinstance(loop, cst.For) and name + "." in _code(loop.iter) and "requires_grad" not in _code(loop.body):
                return False
        return True

    @cached_property
    def calls_in_file(self) -> list[cst.Call]:
        return [c for calls in self.calls_in.values() for c in calls]

    def _own_module_passes(self, function: cst.FunctionDef) -> Callable[[cst.Call], bool] | None:
        """For a method of an ``nn.Module`` subclass that runs the module itself or its
        submodules outside ``forward`` (a model's ``predict``, ``tile_predict``, ``encode``
        helper): which calls there are such passes (``self(x)``, ``self.forward(x)``,
        ``self.net(x)``). None for any other function, and for the methods the module runs as
        part of its own forward pass: ``forward``, special methods, and a method named by a
        hook (whose callers are a framework's)."""
        if not self.module_method(function):
            return None
        method = next((f for f in self._enclosing_functions(function) if self._is_method(f)), None)
        if method is None or not method.params.params or method.name.value == "forward" or method.name.value.startswith("__"):
            return None
        if any(isinstance(d.decorator, cst.Name) and d.decorator.value in ("classmethod", "staticmethod") for d in method.decorators):
            return None  # its first parameter is the class, or not the module at all
        owner = method.params.params[0].name.value

        def own(call: cst.Call) -> bool:
            # What it returns is its callers' to turn gradients off for (each caller's pass
            # is reported where it is inference): only what the method itself ends counts.
            root = _chain_root(called_module(call))
            return (
                isinstance(root, cst.Name)
                and root.value == owner
                and self.is_forward(call, function)
                and not self.model.gradient_flow.returned(call)
            )

        return own

    def is_forward(self, call: cst.Call, function: cst.FunctionDef | None) -> bool:
        """A forward pass: a call of a module (``runs_module``), or of a method of a module
        known by its class that runs its submodules (``model.inference(x)``: ``known_forward``)."""
        if self.runs_module(called_module(call), function, call):
            return True
        func = call.func
        return isinstance(func, cst.Attribute) and func.attr.value != "forward" and self.known_forward(call)

    def known_forward(self, call: cst.Call) -> bool:
        """A call of a module known by its type, or of a method of one that runs a submodule or
        the module itself, with gradients as the caller has them: its class (of this file or,
        through the project index, of another file of the project) shows it. A library's
        class may turn gradients off in its own ``forward`` or ``generate`` (YOLO's AutoShape,
        Hugging Face's ``generate``), which the project does not show."""
        func = call.func
        if not call.args or not isinstance(func, (cst.Name, cst.Attribute)):
            return False
        if self.model.kind(func) is Kind.MODULE:
            return self._runs_forward(func, "__call__")
        if not isinstance(func, cst.Attribute) or self.model.kind(func.value) is not Kind.MODULE:
            return False
        return self._runs_forward(func.value, func.attr.value)

    def _runs_forward(self, expr: cst.BaseExpression, method: str) -> bool:
        """Whether calling ``method`` of what ``expr`` holds (``"__call__"``: calling it) runs
        its submodules: every value bound to ``expr`` is built by a class of this file or of
        the project whose method does."""
        values = self.model.values(expr)
        if not values:
            return False
        for value in values:
            # `Actor(...).to(device)`: the methods that return the module itself
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MODULE_RETURNS_SELF:
                value = value.func.value
            if not isinstance(value, cst.Call):
                return False
            info = self.model._local_class(value.func)
            if info is not None:
                if method != "__call__" and not any(self._runs_submodules(m) for m in self._methods_of(info, method)):
                    return False
            elif self.model.project_runs_forward(value.func, method) is not True:
                return False
        return True

    def _methods_of(self, info, name: str) -> list[cst.FunctionDef]:
        """The methods named ``name`` of a class of this file and of its bases in the file."""
        found = []
        for cls in [info, *self.model.local_bases(info)]:
            found += [f for f in self.model.functions.get(name, ()) if self.model.parent(self.model.parent(f)) is cls.node]
        return found

    def _runs_submodules(self, method: cst.FunctionDef) -> bool:
        """Whether a method calls ``self(...)``, ``self.forward(...)`` or ``self.<attribute>(...)``,
        and leaves gradients as its caller has them (no ``no_grad`` of its own, no decorator)."""
        params = method.params.params
        if not params or method.decorators:
            return False  # a decorator may set gradients itself (`@smart_inference_mode()`)
        owner = params[0].name.value
        runs = False
        for call in self.model.calls_in(method):
            func = call.func
            if self.model.qualified_name(func) in _GRAD_CONTEXTS:
                return False  # it sets gradients itself
            if isinstance(func, cst.Name) and func.value == owner:
                runs = True
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == owner:
                if not any(self._is_method(f) for f in self.functions_by_name.get(func.attr.value, ())) or func.attr.value == "forward":
                    runs = True
        return runs

    def _is_evaluation_function(self, function: cst.FunctionDef) -> bool:
        """Named for evaluation (``evaluate``, ``predict``...), or for generation (``generate``,
        ``sample``, ``decode``) and called in the file, never inside a training loop; neither
        owned by a framework nor training."""
        name = set(words(function.name.value))
        if not _EVAL_FUNCTION_WORDS & name:
            if not _GENERATION_WORDS & name:
                return False
            sites = self.call_sites(function)
            if not sites or self._referenced(function):
                return False
            for site in sites:
                caller = self.function_of[site]
                if self._training_loop(site, caller) is not None or (caller is not None and self._framework_owned(caller)):
                    return False
        if self._framework_owned(function):
            return False
        return not (self._function_trains(function) or self._backward_calls_in(function))

    def _helper_scopes(self, scopes: list[EvalScope], regions: list[cst.CSTNode]) -> list[EvalScope]:
        """Helpers (decoders, samplers) called only from evaluation code that runs no model
        itself: ``evaluate`` calling ``greedy_decode(model, src)``."""
        found = []
        for function in self.functions:
            sites = self.call_sites(function)
            if function in regions or not sites or self._referenced(function) or self._framework_owned(function):
                continue
            if not all(any(self._inside(site, r) for r in regions) for site in sites):
                continue
            if any(self._inside(site, s.node) for site in sites for s in scopes) or self._function_trains(function):
                continue
            forwards, beside = self._inference(self._forwards(function, function))
            if forwards and not self._backward_calls_in(function):
                found.append(EvalScope("function", function, function, forwards, core=False, beside_training=beside))
        return found

    def _function_scope(self, function: cst.FunctionDef) -> EvalScope | None:
        # A `predict(model, x)` whose output a training step backpropagates through is part of
        # the training forward pass (``_inference``).
        forwards, beside = self._inference(self._forwards(function, function))
        if not forwards:
            return None
        # A `test()` that runs the model on made-up tensors and reads only the output's shape
        # (`print(net(torch.randn(1, 3, 32, 32)).size())` in a model file's main block)
        # predicts nothing.
        if all(self._on_random_input(f) and self._shape_read_only(f) for f in forwards):
            return None
        core = bool(_EVAL_FUNCTION_WORDS.intersection(words(function.name.value)))
        return EvalScope("function", function, function, forwards, core=core, beside_training=beside)

    def _forwards(self, region: cst.CSTNode, function: cst.FunctionDef | None) -> list[cst.Call]:
        return [
            c
            for c in self.calls_in.get(function, ())
            if self._inside(c, region) and not self._in_lambda(c) and self.is_forward(c, function)
        ]

    def _inference(self, forwards: list[cst.Call]) -> tuple[list[cst.Call], bool]:
        """The forward passes whose output provably never reaches a backward pass
        (``GradientFlow``), and whether any of the others is left beside them."""
        found = [c for c in forwards if self.is_inference(c)]
        return found, len(found) < len(forwards)

    def is_inference(self, call: cst.Call) -> bool:
        return self.model.gradient_flow.of(call) == NEVER

    def _in_lambda(self, call: cst.Call) -> bool:
        """Inside a ``lambda`` (``model_fn=lambda model, x: model(x)``): it runs later, when
        and where it is called, with the model it is given."""
        return any(isinstance(a, cst.Lambda) for a in self.model.ancestors(call))

    def _statement_scopes(self, scopes: list[EvalScope], functions: set) -> list[EvalScope]:
        """Forward passes for inference outside evaluation functions and loops, grouped by
        function, model and training loop: one scope per group."""
        groups: dict[tuple, EvalScope] = {}
        covered = self._covering(s.node for s in scopes)
        for function, calls in self.calls_in.items():
            self.model.checkpoint()  # (the longest part of the facts: an editor's lint may stop here)
            if function is not None and (functions.intersection(self._enclosing_functions(function)) or self._framework_owned(function)):
                continue
            loads = self._loads(function)
            for call in calls:
                model = called_module(call)
                if not isinstance(model, (cst.Name, cst.Attribute)) or covered(call):
                    continue
                in_iteration = False
                if not (self._on_eval_data(call) or (
                    self._after_load(call, loads, function) or self._after_eval_switch(call, function)
                ) and not self._on_random_input(call)):
                    after = self._after_training(call, model, function)
                    if after is not None:
                        # (Between epochs, a sample in training mode may be the algorithm's
                        # (the DCGAN tutorial's): its gradients alone are wasted; with them off,
                        # the mode facts judge it.)
                        if after == "between" and self.grad_disabled(call):
                            continue
                        in_iteration = after == "between"
                    else:
                        # A pass of a module the training iteration around it trains, whose output
                        # provably never reaches a backward pass: it predicts, beside the training.
                        iteration = self.model.training.iteration_of(call)
                        if iteration is None or not self._trained_by(model, iteration) or self._on_random_input(call):
                            continue
                        if not self._trains_through_another_pass(call, model, iteration.loop, function):
                            continue  # its only pass: a training pass whose graph is lost (TL601's)
                        in_iteration = True
                if not self.is_forward(call, function) or not self.is_inference(call) or self._shape_read_only(call):
                    continue  # (a forward whose output is read for its shape predicts nothing)
                anchor = self.anchor(call, model, function)
                if self._trains_in(anchor, function):
                    continue
                if self._applied_to_outputs(call, [f for g in groups.values() if g.function is function for f in g.forwards]):
                    continue  # a loss or metric module on the predictions: part of that pass's evaluation
                key = (function, _code(_root(model)), self._training_loop(call, function), in_iteration)
                if key in groups:
                    groups[key].forwards.append(call)
                else:
                    groups[key] = EvalScope("statement", anchor, function, [call], grad_only=in_iteration)
        return list(groups.values())

    def _applied_to_outputs(self, call: cst.Call, forwards: list[cst.Call]) -> bool:
        """Whether an argument of ``call`` is a name assigned the output of one of these
        forward passes (``outputs, attns = model(src)``; ``loss = criterion(outputs, tgt)``)."""
        if not forwards:
            return False
        for arg in call.args:
            root = _root(arg.value)
            if not isinstance(root, cst.Name):
                continue
            for assignment in self.model.assignments(root):
                statement = next((a for a in self.model.ancestors(assignment.node) if isinstance(a, (cst.Assign, cst.AnnAssign))), None)
                if statement is not None and statement.value is not None and any(self._inside(f, statement.value) for f in forwards):
                    return True
        return False

    def _covering(self, regions: Iterable[cst.CSTNode]) -> Callable[[cst.CSTNode], bool]:
        """Whether a node is inside any of ``regions`` (``_inside`` of each), in a bisection:
        a node is inside a region that starts at or before it and ends at or after it, and
        among the regions that start at or before it the latest end tells."""
        spans = sorted((self._start(r), self._end(r)) for r in regions)
        starts = [start for start, _ in spans]
        latest_ends = list(itertools.accumulate((end for _, end in spans), max))

        def covered(node: cst.CSTNode) -> bool:
            index = bisect.bisect_right(starts, self._start(node)) - 1
            return index >= 0 and latest_ends[index] >= self._end(node)

        return covered

    def _on_random_input(self, call: cst.Call) -> bool:
        """A forward pass on made-up tensors only (``net(torch.rand(2, 20))``): a shape demo or
        a check that the weights loaded, not inference."""
        values = [a.value for a in call.args]
        return bool(values) and all(self._random_tensor(v, frozenset()) for v in values)

    def _shape_read_only(self, call: cst.Call) -> bool:
        """A forward pass whose output is read for its shape alone: ``net(x).shape``, or
        ``y = net(x)`` (``y, h = rnn(x, None)``) with every read of ``y`` (and ``h``) a
        ``y.size()``, ``y.shape`` (at least one)."""
        reads = self._output_reads(call)
        return bool(reads) and all(self._reads_shape(read) for read in reads)

    def _after_training(self, call: cst.Call, model: cst.BaseExpression, function: cst.FunctionDef | None) -> str | None:
        """A pass of a module after a training loop of the same function (or of the top
        level) that trains it, outside any training iteration: a sample or a prediction of
        the trained model (a GAN's generator on noise too: no shape check, the module was
        just trained). "after": once training is over (after every loop around the training
        loop); "between": between epochs, inside a loop around it; None: neither."""
        training = self.model.training
        if not training.iterations or training.iteration_of(call) is not None:
            return None
        start, found = self._start(call), None
        for iteration in training.iterations:
            loop = iteration.loop
            if self.function_of.get(loop) is not function or self._end(loop) >= start or not self._trained_by(model, iteration):
                continue
            if not any(self._inside(call, outer) for outer in training.enclosing_loops(loop)):
                return "after"
            found = "between"
        return found

    def _reads_shape(self, read: cst.CSTNode) -> bool:
        """``y.shape``, ``y.size()``, or a shape further down its attributes and items
        (``intermediates.attn_pooled_tokens.shape``, ``bert(ids)[1].shape[-1]``)."""
        node = read
        while isinstance(parent := self.model.parent(node), (cst.Attribute, cst.Subscript)) and parent.value is node:
            if isinstance(parent, cst.Attribute) and parent.attr.value in _SHAPE_READS:
                return True
            node = parent
        return False

    def _output_reads(self, call: cst.Call) -> list[cst.CSTNode]:
        """Where a forward pass's output is read (``SemanticModel.reads_of``), and, where it is
        unpacked into names (``out, hidden = rnn(x, h)``), each read of each of them."""
        parent = self.model.parent(call)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Tuple)):
            return self.model.reads_of(call)
        reads: list[cst.CSTNode] = []
        for element in parent.targets[0].target.elements:
            found = self.model.binding_reads(element.value) if isinstance(element.value, cst.Name) else None
            if found is None:
                return [call]  # (a starred or nested target: read as a whole)
            reads += found
        return reads

    def _random_tensor(self, expr: cst.BaseExpression, seen: frozenset) -> bool:
        if isinstance(expr, cst.Call):
            return self.model.qualified_name(expr.func) in _RANDOM_TENSORS
        if isinstance(expr, cst.Name) and expr.value not in seen:
            values = self.model.values(expr)
            return bool(values) and all(self._random_tensor(v, seen | {expr.value}) for v in values)
        return False

    def _loads(self, function: cst.FunctionDef | None) -> list[tuple[cst.CSTNode, str]]:
        """Weights loaded in a function's own body: ``m.load_state_dict(...)``, ``m = torch.load(...)``,
        ``m = Model.from_pretrained(...)`` (a pretrained checkpoint's weights, also followed
        by methods a module gives itself back from: ``.to(device)``, ``.eval()``)."""
        found = [
            (c, _code(c.func.value))
            for c in self.calls_by_name.get("load_state_dict", ())
            if isinstance(c.func, cst.Attribute) and self.function_of[c] is function
        ]
        for node in self.assignments_in.get(function, ()):
            if not isinstance(node, cst.Assign) or not isinstance(node.value, cst.Call):
                continue
            value = node.value
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MODULE_RETURNS_SELF:
                value = value.func.value
            pretrained = isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "from_pretrained"
            if self.model.qualified_name(node.value.func) in _LOADS or pretrained:
                found.extend((node, _code(t.target)) for t in node.targets)
        return found

    def _after_load(self, call: cst.Call, loads, function) -> bool:
        """Inference after loading weights: the module's weights are loaded earlier in the same
        function, and nothing trains there after the load."""
        if not loads:
            return False
        text = _code(called_module(call))
        for load, target in loads:
            if self._start(load) < self._start(call) and (text == target or text.startswith(target + ".")):
                return not any(self._start(t) > self._start(load) for t in self._training_points(function))
        return False

    def _after_eval_switch(self, call: cst.Call, function: cst.FunctionDef | None) -> bool:
        """Inference after an explicit ``model.eval()`` of the same module earlier in the same
        function (the last mode change before the call), with nothing training after it there."""
        events, positions = self._eval_switches(function)
        if not events:
            return False
        # (the events are in source order: those before the call are a prefix)
        before = events[: bisect.bisect_left(positions, self._start(call))]
        if not before or not before[-1].explicit or before[-1].mode != EVAL:
            return False
        switched = before[-1].node.func
        root = _code(_root(called_module(call)))
        if not isinstance(switched, cst.Attribute) or self._switched_module(before[-1].node) != root:
            return False
        if any(self._freezes(c, root) for c in self.calls_in.get(function, ()) if self._start(c) < self._start(call)):
            return False  # `m.eval().requires_grad_(False)`: no graph is recorded
        if any(isinstance(a, cst.Return) for a in self.model.ancestors(call)):
            return False  # the caller gets the output, and may differentiate it (an attack, an explainer)
        statement = self._statement_of(call)
        if isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(s, cst.Expr) and s.value is call
            or isinstance(s, cst.Assign) and s.value is call and all(_code(t.target) == "_" for t in s.targets)
            for s in statement.body
        ):
            return False  # the output is thrown away: run for its side effects (hooks, counters)
        # Nothing trains between the switch and the pass (also in a loop around the pass alone:
        # its next iteration); training after it (a notebook's later cell) uses other outputs.
        switch, start = before[-1], self._start(call)
        loops = [
            a for a in self.model.ancestors(call)
            if isinstance(a, (cst.For, cst.While)) and not self._inside(switch.node, a) and self.function_of.get(a) is function
        ]
        return not any(
            switch.position < self._start(t) < start or any(self._inside(t, loop) for loop in loops)
            for t in self._training_points(function)
        )

    def _switched_module(self, switch: cst.Call) -> str:
        """The module a ``.eval()`` call switches: its receiver's root (``model`` in
        ``model.module.eval()``), or the name a construction switched on the spot is bound
        to (``resnet`` in ``resnet = Net(pretrained=True).eval().to(device)``)."""
        receiver = switch.func.value
        base = receiver  # `model.float().eval()`: model; `Net(...).eval()`: the construction
        while isinstance(base, cst.Attribute) or (isinstance(base, cst.Call) and isinstance(base.func, cst.Attribute)):
            base = base.func.value if isinstance(base, cst.Call) else base.value
        if not isinstance(base, cst.Call):
            return _code(base)
        if isinstance(receiver, cst.Call):
            node: cst.CSTNode = switch
            parent = self.model.parent(node)
            while isinstance(parent, (cst.Attribute, cst.Call)) and (
                parent.value is node if isinstance(parent, cst.Attribute) else parent.func is node
            ):
                node, parent = parent, self.model.parent(parent)
            if isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
                target = parent.targets[0].target
                if isinstance(target, (cst.Name, cst.Attribute)):
                    return _code(_root(target))
        return _code(_root(receiver))

    def _eval_switches(self, function: cst.FunctionDef | None) -> tuple[list[_ModeEvent], list[float]]:
        """A function's mode events and their positions, when one of them is an eval switch
        (else nothing): asked for at each of its calls."""
        found = self._eval_switches_cache.get(function)
        if found is None:
            events = self._mode_events(function)
            if not any(e.mode == EVAL for e in events):
                events = []
            found = self._eval_switches_cache[function] = (events, [e.position for e in events])
        return found

    def _freezes(self, call: cst.Call, root: str) -> bool:
        """``root.requires_grad_(False)`` (also at the end of a chain: ``m.eval().requires_grad_(False)``)."""
        func = call.func
        return (
            isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and _code(_chain_root(func.value)) == root
            and len(call.args) == 1 and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "False"
        )

    @cached_property
    def _eval_data_starts(self) -> list[float]:
        return [self._start(name) for name in self.eval_data_names]

    def _on_eval_data(self, call: cst.Call) -> bool:
        """A forward pass on validation or test data: ``model(X_test)``, or inside a
        comprehension over a test loader."""
        for arg in call.args:
            if arg.keyword is None and not arg.star and self.eval_data_names:
                # The eval-data names are in source order: find the first at or after the argument.
                index = bisect.bisect_left(self._eval_data_starts, self._start(arg.value))
                if index < len(self._eval_data_starts) and self._eval_data_starts[index] <= self._end(arg.value):
                    return True
        return any(self._inside(call, self.model.parent(comp)) for comp in self.eval_comprehensions)

    def _training_loop(self, node: cst.CSTNode, function: cst.FunctionDef | None) -> cst.CSTNode | None:
        """The innermost loop around ``node`` in its function that trains."""
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
                return None
            if isinstance(ancestor, (cst.For, cst.While)) and self._trains_in(ancestor, function):
                return ancestor
        return None

    # --- where fixes go -----------------------------------------------------------------

    def anchor(self, node: cst.CSTNode, model: cst.BaseExpression, function: cst.FunctionDef | None) -> cst.BaseStatement:
        """The statement a fix wraps or precedes: the statement holding ``node``, widened to
        the ``with`` blocks and loops around it that neither train, nor rebind the model, nor
        switch its mode."""
        statement = self._statement_of(node)
        root = _code(_root(model))
        while True:
            block = self.model.parent(statement)
            outer = self.model.parent(block)
            if not isinstance(block, cst.IndentedBlock) or not isinstance(outer, (cst.With, cst.For, cst.While)):
                return statement
            if self._trains_in(outer, function) or self._binds(outer, root, function) or self._switches_mode(outer):
                return statement
            if self._runs_differentiated_pass(outer, function):
                return statement  # (a GAN's discriminator passes beside the generator's)
            if isinstance(outer, cst.With) and any(self._turns_grad_on(i.item) or "enable_grad" in _code(i.item) for i in outer.items):
                return statement
            statement = outer

    def binds_in(self, region: cst.CSTNode, model: cst.BaseExpression, function) -> bool:
        """Whether ``region`` binds the root name of ``model`` (a fix before it would switch
        an object the region then replaces)."""
        return self._binds(region, _code(_root(model)), function)

    def _runs_differentiated_pass(self, region: cst.CSTNode, function) -> bool:
        """Whether ``region`` runs a forward pass whose output may reach a backward pass (one
        the gradient flow does not prove inference): turning gradients off around the region
        would stop it training."""
        return any(
            self.function_of.get(c) is function and self.is_forward(c, function) and not self.is_inference(c)
            for c in self.model.calls_in(region)
        )

    def _binds(self, region: cst.CSTNode, root: str, function) -> bool:
        if isinstance(region, cst.For) and root in _assigned_names_of_target(region.target):
            return True
        if isinstance(region, cst.With) and any(i.asname is not None and root in _assigned_names_of_target(i.asname.name) for i in region.items):
            return True
        return any(self._inside(a, region) and root in _assigned_names(a) for a in self.assignments_in.get(function, ()))

    def _switches_mode(self, region: cst.With | cst.For | cst.While) -> bool:
        # (The block's calls by the collecting pass's bisection; a block opens with its keyword,
        # so they are those ``_inside`` finds. A scan of every `train()` of the module was
        # quadratic in large files.)
        return any(self._mode_call(c) == TRAIN for c in self.model.calls_in(region))

    def eval_insertion(self, scope: EvalScope) -> cst.BaseStatement | None:
        """The statement to put ``model.eval()`` before: the start of an evaluation function
        (after its docstring) when the model comes from outside it, else the anchor of the
        first forward pass."""
        if scope.kind == "loop":
            return self.anchor(scope.node, scope.model, scope.function)
        if scope.kind == "statement":
            return scope.node
        if self.bound_inside(scope):
            return self.anchor(scope.forwards[0], scope.model, scope.function)
        body = scope.node.body
        if not isinstance(body, cst.IndentedBlock):
            return None
        statements = list(body.body)
        index = 1 if len(statements) > 1 and _is_docstring(statements[0]) else 0
        while index < len(statements) - 1 and _is_global_statement(statements[index]):
            index += 1
        return statements[index]

    def callers_unknown(self, function: cst.FunctionDef) -> bool:
        """No call of the function in the file, or it is passed around by name: what runs
        after it returns is unknown."""
        return not self.call_sites(function) or self._referenced(function)

    def reached_from_callback(self, function: cst.FunctionDef, seen: frozenset = frozenset()) -> bool:
        """Whether the function is passed around by name, or called (directly or through
        other functions) from one that is: a forward function handed to an attribution method
        (``IntegratedGradients(forward_func)``), whose output that method differentiates."""
        reached, stack = set(seen), [function]
        while stack:  # every function that calls it, directly or through others
            current = stack.pop()
            if current in reached:
                continue
            if self._referenced(current):
                return True
            reached.add(current)
            stack.extend({self.function_of[site] for site in self.call_sites(current)} - {None} - reached)
        return False

    def bound_inside(self, scope: EvalScope) -> bool:
        """The scope's model is created inside the evaluation function (not a parameter)."""
        root = _root(scope.model)
        if not isinstance(root, cst.Name) or root.value in [p.name.value for p in scope.node.params.params]:
            return False
        return any(root.value in _assigned_names(a) for a in self.assignments_in.get(scope.node, ()))

    def train_restores(self, scope: EvalScope) -> list[tuple[cst.BaseStatement, str]] | None:
        """Where ``model.train()`` must follow once the scope puts the model in eval mode, so
        that a training pass after it does not run in eval mode: pairs of (statement to put it
        after, model expression there). None when that cannot be written."""
        model = _code(scope.model)
        if scope.kind != "function":
            anchor = self.anchor(scope.node if scope.kind == "loop" else scope.forwards[0], scope.model, scope.function)
            return [(anchor, model)] if self._leaks_into_training(anchor, scope.function, frozenset()) else []
        if self.bound_inside(scope):
            return []
        restores = []
        for site in self.call_sites(scope.node):
            if not self._leaks_into_training(site, self.function_of[site], frozenset()):
                continue
            argument = self._caller_expression(site, scope.node, model)
            statement = self._statement_of(site)
            if argument is None or isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], _EXITS):
                return None
            if not isinstance(self.model.parent(statement), (cst.IndentedBlock, cst.Module)):
                return None
            restores.append((statement, argument))
        return restores

    def eval_carries_over(self, earlier: EvalScope, scope: EvalScope) -> bool:
        """Whether putting the model in eval mode for ``earlier`` also covers ``scope``: the same
        model later in the same function, with no switch back to train mode in between (and
        none to be inserted)."""
        if earlier.function is not scope.function or _code(earlier.model) != _code(scope.model) or earlier.kind == "function":
            return False
        start, end = self._start(earlier.forwards[0]), self._start(scope.forwards[0])
        switches = [e for e in self._mode_events(scope.function) if e.mode == TRAIN and start < e.position < end]
        return start < end and not switches and self.train_restores(earlier) == []

    def _leaks_into_training(self, point: cst.CSTNode, function, seen: frozenset) -> bool:
        """Whether a training pass can follow ``point`` with no ``.train()`` in between: in a
        loop around it that trains (and never switches back to train mode), later in its
        function, or, through the function's callers, after it returns."""
        loop = self._training_loop(point, function)
        restores = [e for e in self._mode_events(function) if e.mode == TRAIN and e.explicit]
        if loop is not None:
            return not any(self._inside(e.node, loop) for e in restores)
        later = [t for t in self._training_points(function) if self._start(t) > self._start(point)]
        if later:
            first = self._start(later[0])
            return not any(self._start(point) < e.position <= first for e in restores)
        if function is None or function in seen or any(self._start(point) < e.position for e in restores):
            return False
        return any(self._leaks_into_training(site, self.function_of[site], seen | {function}) for site in self.call_sites(function))

    def _caller_expression(self, site: cst.Call, function: cst.FunctionDef, model: str) -> str | None:
        """``model`` (as the evaluation function names it) as the caller names it."""
        root, dot, rest = model.partition(".")
        if root in [p.name.value for p in function.params.params] and root not in ("self", "cls"):
            argument = self._argument_for(site, function, root)
            return _code(argument) + dot + rest if isinstance(argument, (cst.Name, cst.Attribute)) else None
        if root == "self":
            return _code(site.func.value) + dot + rest if isinstance(site.func, cst.Attribute) else None
        return model  # a module-level model: the same name everywhere

    @cached_property
    def no_grad_call(self) -> tuple[str, bool]:
        """How this file writes ``torch.no_grad()`` (``th.no_grad()`` after ``import torch as
        th``, ``no_grad()`` after ``from torch import no_grad``), and whether ``import torch``
        must be added for it."""
        for statement in self.model.module.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        name = _code(alias.name)
                        if alias.asname is None and name.split(".")[0] == "torch":
                            return "torch.no_grad()", False
                        if alias.asname is not None and name == "torch":
                            return f"{_code(alias.asname.name)}.no_grad()", False
                if isinstance(small, cst.ImportFrom) and small.module is not None and _code(small.module) == "torch" and not isinstance(small.names, cst.ImportStar):
                    for alias in small.names:
                        if _code(alias.name) == "no_grad":
                            return f"{_code(alias.asname.name) if alias.asname else 'no_grad'}()", False
        return "torch.no_grad()", True

    def import_insertion(self) -> cst.BaseStatement | None:
        """The top-level statement to put ``import torch`` before: the first after the
        docstring and ``__future__`` imports."""
        for index, statement in enumerate(self.model.module.body):
            if index == 0 and _is_docstring(statement):
                continue
            if isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], cst.ImportFrom):
                module = statement.body[0].module
                if module is not None and _code(module) == "__future__":
                    continue
            return statement
        return None


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _is_global_statement(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Global, cst.Nonlocal))


def _assigned_names_of_target(target: cst.BaseExpression) -> set[str]:
    if isinstance(target, cst.Name):
        return {target.value}
    if isinstance(target, (cst.Tuple, cst.List)):
        return set().union(*(_assigned_names_of_target(e.value) for e in target.elements))
    if isinstance(target, cst.StarredElement):
        return _assigned_names_of_target(target.value)
    return set()


def _assigned_names(node: cst.CSTNode) -> set[str]:
    """Names an assignment (or each assignment of a simple statement line) binds."""
    if isinstance(node, cst.SimpleStatementLine):
        return set().union(*(_assigned_names(small) for small in node.body))
    if isinstance(node, cst.Assign):
        return set().union(*(_assigned_names_of_target(t.target) for t in node.targets))
    if isinstance(node, (cst.AugAssign, cst.AnnAssign)):
        return _assigned_names_of_target(node.target)
    return set()


