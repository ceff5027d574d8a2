"""Training facts: which loops are training iterations, what steps and clears gradients there,
which expressions hold loss tensors, and whether gradient flows from the model into a value.

One scan (of the nodes the semantic model's collecting pass recorded) gathers backward
passes, optimizer steps, gradient clears and calls with the loops around each (within its own
function: a nested ``def`` runs at another time). Everything else is derived from those lists. Unknown stays silent: a ``.step()`` is
an optimizer step only next to a backward pass, and never on something known or named to be
a scheduler; a clear that might be for any optimizer counts for all of them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Iterator

import libcst as cst
from torchlint.semantic.vocabulary import _FRAMEWORK_PACKAGES, Kind, TRAINING_STEP_HOOKS

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

Loop = (cst.For, cst.While)
# Scopes whose bodies run at another time than the code around them.
SCOPE_BOUNDARIES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)

FUNCTIONAL_LOSS = re.compile(
    r"^torch\.nn\.functional\.(\w+_loss|cross_entropy|binary_cross_entropy\w*|nll_loss|kl_div|ctc_loss|triplet_margin\w*)$"
)
# Receivers of `.step()` that are no optimizer: schedulers, profilers, progress bars, RL
# environments, DeepSpeed engines (whose step clears the gradients itself), EMA helpers.
_NOT_AN_OPTIMIZER = re.compile(
    r"sched|warmup|lr_?policy|decay|anneal|swa|plateau|prof|timer|env|engine|pbar|progress|ema|sampler|meter|logger|writer|callback",
    re.IGNORECASE,
)
# Objects with a `.step()` of their own, unless the name also says optimizer (`model_opt`).
_STEPPING_OWNER = re.compile(r"agent|trainer|runner|world|simulat|counter|clock|tracker|manager|model", re.IGNORECASE)
# Names that say an object is an optimizer: `optimizer`, `opt_g`, `optG`, `self.optim`.
OPTIMIZER_NAME = re.compile(r"(?i:optim)|(^|_)(?i:opt)([_\dA-Z]|$)")
# Receivers of `X.backward(loss)` that run the backward pass for a framework.
_FRAMEWORK_BACKWARD = re.compile(r"^(\w*accelerator|\w*fabric|\w*engine|deepspeed|trainer|strategy|booster|model|ds)$", re.IGNORECASE)
# Same-file or imported helpers whose name says they clear gradients.
_CLEARING_NAME = re.compile(r"zero_?grad|(clear|reset|zero)_?(the_)?grad", re.IGNORECASE)
# Callees whose result is a loss tensor: `criterion(out, y)`, `self.loss_fn(...)`, `compute_loss(...)`.
_LOSS_CALLEE = re.compile(r"criterion|loss|^crit$|_crit$", re.IGNORECASE)
# Callees whose result is a model output: known modules, and names that say so.
MODEL_CALLEE = re.compile(
    r"^((\w+_)?(model|net|network|encoder|decoder|generator|discriminator|critic|actor|policy|predictor|regressor"
    r"|classifier|backbone|head|mlp|cnn|rnn|lstm|gru|transformer|autoencoder|vae|unet|resnet)(_\w+|\d+)?"
    r"|g|d|netg|netd|gen|disc|forward)$",
    re.IGNORECASE,
)
# Parameter names that hold model outputs when a function is given them.
_OUTPUT_NAME = re.compile(r"^(pred|preds|prediction|predictions|output|outputs|out|logits|y_?hat|y_?pred|recon\w*|x_?hat)$", re.IGNORECASE)
# Tensor methods whose result keeps the autograd graph of the receiver.
GRAPH_KEEPING = frozenset(
    {"mean", "sum", "squeeze", "unsqueeze", "view", "reshape", "float", "double", "half", "to", "cuda", "cpu", "clone",
     "abs", "sqrt", "exp", "log", "pow", "mul", "div", "add", "sub", "neg", "contiguous", "flatten", "norm", "max", "min",
     "type_as", "expand", "expand_as", "masked_select", "masked_fill", "clamp", "log_softmax", "softmax", "sigmoid", "tanh"}
)
# Methods and attributes that leave the autograd graph.
DETACHING_METHODS = frozenset({"item", "detach", "numpy", "tolist", "detach_"})
_NOT_LOSS_LIBRARIES = ("torch.", "numpy.", "builtins.", "math.", "statistics.", "sklearn.", "scipy.", "torchmetrics.")
# Attributes of a tensor or module that are no tensor computed from it.
_METADATA = frozenset({"shape", "device", "dtype", "ndim", "training", "is_cuda"})
_NUMBER_BUILTINS = frozenset({"float", "int", "round", "bool", "len"})
_TENSOR_WRAPPERS = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.FloatTensor",
                    "torch.autograd.Variable", "torch.autograd.variable.Variable", "torch.DoubleTensor")


def callee_name(call: cst.Call) -> str | None:
    """``step`` for ``opt.step()``, ``helper`` for ``helper()``."""
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    if isinstance(call.func, cst.Name):
        return call.func.value
    return None


def last_name(expr: cst.BaseExpression) -> str:
    """``optimizer`` for ``self.optimizer``, ``opt`` for ``opts[0]``... the name that says what it is."""
    while isinstance(expr, (cst.Subscript, cst.Call)):
        expr = expr.value if isinstance(expr, cst.Subscript) else expr.func
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else ""


def code(node: cst.CSTNode) -> str:
    if type(node) is cst.Name and not node.lpar:
        return node.value  # what rendering it gives, without a code generator
    return cst.Module(body=[]).code_for_node(node)


def is_grad_attribute(expr: cst.BaseExpression) -> bool:
    """``p.grad``, ``p.grad.data``, ``p.grad[0]``."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Attribute) and expr.attr.value == "grad":
            return True
        expr = expr.value
    return False


@dataclass
class TrainingIteration:
    loop: cst.For | cst.While  # the loop whose body runs the backward pass (and the step, when one runs in a loop around it)
    backward_calls: list[cst.Call] = field(default_factory=list)
    losses: list[cst.BaseExpression] = field(default_factory=list)  # what each backward call runs on
    steps: list[cst.Call] = field(default_factory=list)  # optimizer steps (not scheduler or closure steps)
    clears: list[cst.CSTNode] = field(default_factory=list)  # zero_grad(), p.grad = None, clearing helpers

    def stepped_optimizers(self) -> list[cst.BaseExpression]:
        """The optimizer of each step: ``opt`` in ``opt.step()`` and ``scaler.step(opt)``."""
        return [optimizer_of_step(step) for step in self.steps]


@dataclass
class StepFunction:
    """A function that runs one training step with no loop of its own (``train_step(batch)``),
    called from loops of the same file."""

    function: cst.FunctionDef
    backward_calls: list[cst.Call]
    steps: list[cst.Call]
    call_sites: list[cst.Call]


def optimizer_of_step(step: cst.Call) -> cst.BaseExpression:
    """``opt`` in ``opt.step()``; the first argument of ``scaler.step(opt)`` and ``xm.optimizer_step(opt)``."""
    if isinstance(step.func, cst.Attribute) and step.func.attr.value == "step" and not step.args:
        return step.func.value
    return step.args[0].value


@dataclass
class _Site:
    """Where a node of interest sits: its function and the loops around it there, outermost first."""

    function: cst.FunctionDef | None
    loops: tuple[cst.CSTNode, ...]


class _Scan:
    """The one scan (of the nodes the collecting pass recorded, see ``SemanticModel.replay``):
    backward passes, steps, clears and calls, each with its site."""

    def __init__(self, facts: TrainingFacts) -> None:
        self.facts = facts
        self.functions: list[cst.FunctionDef | None] = [None]
        self.loops: list[list[cst.CSTNode]] = [[]]

    def _site(self) -> _Site:
        return _Site(self.functions[-1], tuple(self.loops[-1]))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)
        self.loops.append([])

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()
        self.loops.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self.loops.append([])

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self.loops.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.functions.append(None)
        self.loops.append([])

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.functions.pop()
        self.loops.pop()

    def visit_For(self, node: cst.For) -> None:
        self.loops[-1].append(node)

    def leave_For(self, original_node: cst.For) -> None:
        self.loops[-1].pop()

    def visit_While(self, node: cst.While) -> None:
        self.loops[-1].append(node)

    def leave_While(self, original_node: cst.While) -> None:
        self.loops[-1].pop()

    def visit_Call(self, node: cst.Call) -> None:
        facts = self.facts
        site = self._site()
        name = callee_name(node)
        if name in ("backward", "manual_backward"):
            loss = facts._backward_target(node)
            if loss is not None:
                facts.backward_calls[node] = loss
                facts.sites[node] = site
        elif name in ("step", "optimizer_step"):
            facts._step_candidates.append(node)
            facts.sites[node] = site
        elif name == "zero_grad" or _clears_grad_in_place(node):
            facts._add_clear(node, site)
        elif name is not None:
            facts._calls.append((node, name))
            facts.sites[node] = site
            facts._called_names[site.function].add(name)

    def _grad_target(self, node: cst.CSTNode, targets: list[cst.BaseExpression]) -> None:
        if any(is_grad_attribute(t) for t in targets):  # p.grad = None, del p.grad, p.grad *= 0
            self.facts._add_clear(node, self._site())

    def visit_Assign(self, node: cst.Assign) -> None:
        # `p.grad = None` or `= torch.zeros_like(p)` clears; `p.grad = p.grad / n` rescales.
        if _is_zero(node.value):
            self._grad_target(node, [t.target for t in node.targets])

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, cst.MultiplyAssign) and _is_zero(node.value):
            self._grad_target(node, [node.target])

    def visit_Del(self, node: cst.Del) -> None:
        targets = node.target.elements if isinstance(node.target, cst.Tuple) else [node.target]
        self._grad_target(node, [t.value if isinstance(t, cst.Element) else t for t in targets])


class TrainingFacts:
    """Training iterations of one file, and the loss tensors in it."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self.backward_calls: dict[cst.Call, cst.BaseExpression] = {}  # every backward pass -> what it runs on
        self.sites: dict[cst.CSTNode, _Site] = {}
        self._framework_receivers: set[str] = set()  # `engine` in `engine.backward(loss)`
        self._step_candidates: list[cst.Call] = []
        self._stepping_an_optimizer: set | None = None  # (``_optimizer_stepped_beside``)
        self._clears: list[cst.CSTNode] = []
        self._calls: list[tuple[cst.Call, str]] = []
        self._called_names: dict[cst.FunctionDef | None, set[str]] = defaultdict(set)
        self._clearing_functions_direct: set[cst.FunctionDef | None] = set()
        model.replay(_Scan(self))
        self._engine_backward_targets()

        self.steps: list[cst.Call] = [s for s in self._step_candidates if self._is_optimizer_step(s)]
        clearing = self._clearing_function_names()
        self.clears: list[cst.CSTNode] = sorted(
            self._clears + [call for call, name in self._calls if _CLEARING_NAME.search(name) or (name in clearing and _is_local_call(call))],
            key=model.start_key,
        )
        self.iterations: list[TrainingIteration] = self._iterations()
        self._iteration_by_loop = {it.loop: it for it in self.iterations}
        self._loss_names_cache: dict[cst.FunctionDef | None, set[str]] | None = None
        self._visiting: set[cst.CSTNode] = set()
        self._flow_cache: dict[tuple[str, cst.CSTNode], bool] = {}
        self._returns_cache: dict[cst.FunctionDef, list[cst.BaseExpression]] = {}

    # --- what calls are -----------------------------------------------------------------

    def _backward_target(self, call: cst.Call) -> cst.BaseExpression | None:
        """What a backward call runs on, or None if ``call`` is not a backward pass."""
        func = call.func
        positional = call.args[0].value if call.args and call.args[0].keyword is None and not call.args[0].star else None
        if self.model.qualified_name(func) == "torch.autograd.backward":
            return positional
        if not isinstance(func, cst.Attribute):
            return None
        receiver = func.value
        if func.attr.value == "manual_backward":  # Lightning manual optimization
            return positional
        if func.attr.value != "backward" or (isinstance(receiver, cst.Name) and receiver.value in ("self", "cls")):
            return None
        if positional is not None and isinstance(receiver, (cst.Name, cst.Attribute)) and _FRAMEWORK_BACKWARD.search(last_name(receiver)):
            self._framework_receivers.add(code(receiver))
            return positional  # accelerator.backward(loss), model_engine.backward(loss)
        if isinstance(receiver, cst.Call) and callee_name(receiver) == "scale" and receiver.args:
            return receiver.args[0].value  # scaler.scale(loss).backward()
        return receiver

    def _engine_backward_targets(self) -> None:
        """``X.backward(loss)`` on an object that also steps (``rm_model.backward(loss)``,
        ``rm_model.step()``): a DeepSpeed-style engine, whose backward runs on its argument
        and whose step clears the gradients itself."""
        stepping = {code(s.func.value) for s in self._step_candidates if isinstance(s.func, cst.Attribute)}
        for call in self.backward_calls:
            func, args = call.func, call.args
            if (
                isinstance(func, cst.Attribute) and func.attr.value == "backward" and code(func.value) in stepping
                and args and args[0].keyword is None and not args[0].star
            ):
                self._framework_receivers.add(code(func.value))
                self.backward_calls[call] = args[0].value

    def _is_optimizer_step(self, call: cst.Call) -> bool:
        """``opt.step()``, ``scaler.step(opt)`` or ``xm.optimizer_step(opt)``; never a
        scheduler's, profiler's or environment's step, nor ``opt.step(closure)``, which
        re-evaluates the loss itself."""
        if callee_name(call) == "optimizer_step":
            return bool(call.args) and self.model.qualified_name(call.func) == "torch_xla.core.xla_model.optimizer_step"
        if not isinstance(call.func, cst.Attribute):
            return False
        receiver = call.func.value
        kind = self.model.kind(receiver)
        if kind is Kind.SCALER or (kind is None and "scaler" in last_name(receiver).lower()):
            return bool(call.args) and call.args[0].keyword is None
        if call.args or kind in (Kind.SCHEDULER, Kind.MODULE, Kind.LOSS):
            return False
        if isinstance(receiver, cst.Name) and receiver.value in ("self", "cls"):
            return False
        if code(receiver) in self._framework_receivers:
            return False  # DeepSpeed: engine.backward(loss); engine.step() clears gradients itself
        if kind is Kind.OPTIMIZER:
            return True
        name = last_name(receiver)
        if _NOT_AN_OPTIMIZER.search(name) or (_STEPPING_OWNER.search(name) and not OPTIMIZER_NAME.search(name)):
            return False
        if not OPTIMIZER_NAME.search(name) and self._optimizer_stepped_beside(call):
            return False  # `self._optimizer.step()` in the loop: `self._curriculum.step()` is another object's
        return not self._instance_of_plain_class(receiver)

    def _optimizer_stepped_beside(self, call: cst.Call) -> bool:
        """Whether the innermost loop around ``call`` also steps a receiver known to be an
        optimizer, by its kind or its name: the loop's optimizer is known, and ``call`` steps
        another object."""
        if self._stepping_an_optimizer is None:
            self._stepping_an_optimizer = {
                next(self.enclosing_loops(other), None)
                for other in self._step_candidates
                if isinstance(other.func, cst.Attribute) and not other.args
                and (self.model.kind(other.func.value) is Kind.OPTIMIZER or OPTIMIZER_NAME.search(last_name(other.func.value)))
            }
        loop = next(self.enclosing_loops(call), None)
        return loop is not None and loop in self._stepping_an_optimizer

    def _instance_of_plain_class(self, receiver: cst.BaseExpression) -> bool:
        """Whether ``receiver`` holds an instance of a class of this file with no base class
        (an agent, a simulation, a custom trainer with its own ``step``): no optimizer."""
        values = self.model.values(receiver) if isinstance(receiver, (cst.Name, cst.Attribute)) else []
        classes = [
            assignment.node
            for value in values
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
            for assignment in self.model.assignments(value.func)
            if isinstance(assignment.node, cst.ClassDef)
        ]
        return bool(values) and len(classes) == len(values) and all(
            not c.bases or all(isinstance(b.value, cst.Name) and b.value.value == "object" for b in c.bases) for c in classes
        )

    def _add_clear(self, node: cst.CSTNode, site: _Site) -> None:
        self._clears.append(node)
        self.sites[node] = site
        self._clearing_functions_direct.add(site.function)

    def _clearing_function_names(self) -> set[str]:
        """Names of same-file functions and methods that clear gradients, directly or through
        another such helper."""
        names = {f.name.value for f in self._clearing_functions_direct if f is not None}
        changed = True
        while changed:
            changed = False
            for function, called in self._called_names.items():
                if function is not None and function.name.value not in names and called & names:
                    names.add(function.name.value)
                    changed = True
        return names

    def framework_step(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        """The method around ``node`` that a framework calls once per training batch
        (``TRAINING_STEP_HOOKS``, of a class deriving from a framework's: a LightningModule's
        ``training_step``, a Callback's ``on_train_batch_end``): each of its calls is an
        iteration of the framework's training loop, which the file does not show."""
        function = self.model.enclosing_function(node)
        if function is None or function.name.value not in TRAINING_STEP_HOOKS:
            return None
        info = self.model.enclosing_class(function)
        if info is None or not any(base.startswith(_FRAMEWORK_PACKAGES) for base in info.base_names):
            return None
        return function

    # --- tests ------------------------------------------------------------------------------

    def in_test(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` runs in a pytest or unittest test: a ``test_*`` function that no
        code of the file calls, or a fixture, in a ``Test*`` class or a file that imports a
        test framework. A test's few training steps only need the weights to change."""
        for ancestor in self.model.ancestors(node):
            if not isinstance(ancestor, cst.FunctionDef):
                continue
            test = ancestor.name.value.startswith("test_") and not self.calls_of(ancestor)
            fixture = any("fixture" in code(d.decorator) for d in ancestor.decorators)
            if test or fixture:
                cls = self.model.enclosing_class(ancestor)
                return (cls is not None and cls.node.name.value.startswith("Test")) or self._imports_test_framework
        return False

    @cached_property
    def _imports_test_framework(self) -> bool:
        for statement in self.model.module.body:
            for small in statement.body if isinstance(statement, cst.SimpleStatementLine) else ():
                names = []
                if isinstance(small, cst.Import):
                    names = [code(alias.name) for alias in small.names]
                elif isinstance(small, cst.ImportFrom) and small.module is not None:
                    names = [code(small.module)]
                if any(name.split(".")[0] in ("pytest", "unittest") for name in names):
                    return True
        return False

    # --- optimizers -----------------------------------------------------------------------

    def is_known_optimizer(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` certainly holds an optimizer: built from a ``torch.optim`` class (or
        a subclass of this file), or a parameter that every call of its function in this file
        gives such an optimizer."""
        if self.model.kind(expr) is Kind.OPTIMIZER:
            return True
        arguments = self._arguments_for_parameter(expr)
        return bool(arguments) and all(a is not None and self.model.kind(a) is Kind.OPTIMIZER for a in arguments)

    def _arguments_for_parameter(self, expr: cst.BaseExpression) -> list[cst.BaseExpression | None]:
        """What each call of its function in this file passes for the parameter ``expr`` reads
        (None where a call passes nothing recognisable); empty when ``expr`` is no parameter
        or its function is never called here."""
        if not isinstance(expr, cst.Name):
            return []
        params = [a.node for a in self.model.assignments(expr) if isinstance(a.node, cst.Param)]
        function = self.model.enclosing_function(params[0]) if len(params) == 1 else None
        if function is None or len(self.model.functions.get(function.name.value, ())) != 1:
            return []
        param = params[0]
        positional = list(function.params.params)
        is_method = isinstance(self.model.parent(self.model.parent(function)), cst.ClassDef)
        found: list[cst.BaseExpression | None] = []
        for call in self.calls_of(function):
            index = positional.index(param) - (1 if is_method else 0) if param in positional else -1
            keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == param.name.value), None)
            plain = [a.value for a in call.args if a.keyword is None and not a.star]
            if any(a.star for a in call.args):
                found.append(None)
            else:
                found.append(keyword if keyword is not None else plain[index] if 0 <= index < len(plain) else None)
        return found

    def parameter_holders(self, optimizer: cst.BaseExpression) -> set[str] | None:
        """The modules whose parameters an optimizer holds, as written (``{"netG"}`` for
        ``Adam(netG.parameters())``) in the function that steps it (or, for ``self.opt``,
        its class); None when that is not known for every value it may have."""
        values = self.model.values(optimizer)
        if not values:
            return None
        holders: set[str] = set()
        function = self.model.enclosing_function(optimizer)
        for value in values:
            if not (isinstance(value, cst.Call) and self.model.kind(value) is Kind.OPTIMIZER and value.args):
                return None
            if self.model.enclosing_function(value) is not function and not isinstance(optimizer, cst.Attribute):
                return None  # the names it holds were written in another scope
            params = next((a.value for a in value.args if a.keyword is not None and a.keyword.value == "params"), None)
            if params is None and value.args[0].keyword is None:
                params = value.args[0].value
            found = self._holders(params, depth=0) if params is not None else None
            if not found:
                return None
            holders |= found
        if isinstance(optimizer, cst.Attribute) and not all(h.startswith("self.") for h in holders):
            return None  # `self.opt = Adam(model.parameters())`: `model` is a name of `__init__`
        return holders

    def _holders(self, expr: cst.BaseExpression, depth: int) -> set[str] | None:
        """``m`` in ``m.parameters()``, ``list(m.parameters())``, ``[p for p in m.parameters()]``,
        ``a.parameters() + b.parameters()``, param groups, and names bound to those."""
        parts: list[cst.BaseExpression]
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in ("parameters", "named_parameters"):
            return {code(expr.func.value)}
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "filter", "iter") and expr.args:
            parts = [expr.args[-1].value]
        elif isinstance(expr, (cst.List, cst.Tuple)) and expr.elements:
            parts = [e.value for e in expr.elements]
        elif isinstance(expr, cst.Dict):
            parts = [
                e.value for e in expr.elements
                if isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) and e.key.evaluated_value == "params"
            ]
        elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)) and expr.for_in.inner_for_in is None:
            parts = [expr.for_in.iter]
        elif isinstance(expr, cst.BinaryOperation):
            parts = [expr.left, expr.right]
        elif isinstance(expr, cst.Name) and depth < 3:
            parts = self.model.values(expr)
        else:
            return None
        holders: set[str] = set()
        for part in parts:
            found = self._holders(part, depth + 1)
            if not found:
                return None
            holders |= found
        return holders

    # --- iterations ---------------------------------------------------------------------

    def _iterations(self) -> list[TrainingIteration]:
        # Steps and clears by each loop around them: a look-up per loop, not a scan of every
        # step of the file per backward pass (quadratic in file size).
        steps_in: dict[cst.CSTNode, list[cst.Call]] = defaultdict(list)
        for step in self.steps:
            for l in self.sites[step].loops:
                steps_in[l].append(step)
        clears_in: dict[cst.CSTNode, list[cst.CSTNode]] = defaultdict(list)
        for clear in self.clears:
            for l in self.sites[clear].loops:
                clears_in[l].append(clear)
        by_loop: dict[cst.CSTNode, TrainingIteration] = {}
        for call, loss in self.backward_calls.items():
            site = self.sites[call]
            if not site.loops:
                continue
            loop = next(
                (l for l in reversed(site.loops) if any(self._runs_in(step, l, site.function) for step in steps_in[l])),
                site.loops[-1],
            )
            iteration = by_loop.setdefault(loop, TrainingIteration(loop))
            iteration.backward_calls.append(call)
            iteration.losses.append(loss)
        for loop, iteration in by_loop.items():
            function = self.sites[iteration.backward_calls[0]].function
            # A step belongs to the innermost iteration around it.
            iteration.steps = [
                s for s in steps_in[loop]
                if self._runs_in(s, loop, function) and not any(
                    l in by_loop for l in self.sites[s].loops[self.sites[s].loops.index(loop) + 1:]
                )
            ]
            iteration.clears = [c for c in clears_in[loop] if self._runs_in(c, loop, function)]
        return sorted(by_loop.values(), key=lambda it: self.model.start_key(it.loop))

    def _runs_in(self, node: cst.CSTNode, loop: cst.CSTNode, function: cst.FunctionDef | None) -> bool:
        site = self.sites[node]
        return site.function is function and loop in site.loops

    def iteration_of(self, node: cst.CSTNode) -> TrainingIteration | None:
        """The innermost training iteration whose loop runs ``node`` (in the same function)."""
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, SCOPE_BOUNDARIES):
                return None
            if ancestor in self._iteration_by_loop:
                return self._iteration_by_loop[ancestor]
        return None

    def enclosing_loops(self, node: cst.CSTNode) -> Iterator[cst.For | cst.While]:
        """Loops around ``node``, innermost first, within its function."""
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, SCOPE_BOUNDARIES):
                return
            if isinstance(ancestor, Loop):
                yield ancestor

    def epoch_loop(self, iteration: TrainingIteration) -> cst.For | cst.While | None:
        """The loop around the iteration's loop (the epoch loop around a batch loop), if any."""
        return next(self.enclosing_loops(iteration.loop), None)

    def step_functions(self) -> list[StepFunction]:
        """Functions that run backward and step outside any loop of their own, every call of
        which (in this file; there is at least one) sits in a loop."""
        found = []
        by_function: dict[cst.FunctionDef, tuple[list, list]] = {}
        for call in self.backward_calls:
            site = self.sites[call]
            if site.function is not None and not site.loops:
                by_function.setdefault(site.function, ([], []))[0].append(call)
        for step in self.steps:
            site = self.sites[step]
            if site.function in by_function and not site.loops:
                by_function[site.function][1].append(step)
        for function, (backwards, steps) in by_function.items():
            name = function.name.value
            if not steps or len(self.model.functions.get(name, ())) != 1:
                continue
            call_sites = self.calls_of(function)
            if call_sites and all(self.sites[c].loops for c in call_sites):
                found.append(StepFunction(function, backwards, steps, call_sites))
        return found

    def calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        """The calls of a function of this file (``f(...)``, or ``self.f(...)`` for a method),
        when its name is defined once here."""
        name = function.name.value
        if len(self.model.functions.get(name, ())) != 1:
            return []
        return [call for call in self._calls_by_name.get(name, ()) if self._calls_function(call, function)]

    @cached_property
    def _calls_by_name(self) -> dict[str, list[cst.Call]]:
        calls: dict[str, list[cst.Call]] = {}
        for call, called in self._calls:
            calls.setdefault(called, []).append(call)
        return calls

    def _calls_function(self, call: cst.Call, function: cst.FunctionDef) -> bool:
        # helper(...) for a function, self.helper(...) for a method of the caller's class.
        is_method = isinstance(self.model.parent(self.model.parent(function)), cst.ClassDef)
        if isinstance(call.func, cst.Name):
            return not is_method
        return is_method and isinstance(call.func.value, cst.Name) and call.func.value.value == "self"

    # --- losses -------------------------------------------------------------------------

    def is_loss(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` holds a loss tensor: what a backward pass in the same function runs
        on (or a term summed into it), a name bound to a loss, or a loss computation."""
        if isinstance(expr, cst.Name):
            if expr.value in self._loss_names(self.model.enclosing_function(expr)):
                return True
            if expr in self._visiting:  # loss = loss + aux
                return False
            self._visiting.add(expr)
            try:
                return any(self.is_loss_value(value) for value in self.model.values(expr))
            finally:
                self._visiting.discard(expr)
        if isinstance(expr, (cst.Attribute, cst.Subscript)) and code(expr) in self._loss_names(self.model.enclosing_function(expr)):
            return True
        return self.is_loss_value(expr)

    def is_loss_value(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` computes a loss tensor: a loss module's or loss function's output
        (``criterion(out, y)``, ``F.cross_entropy(...)``, ``outputs.loss``), arithmetic on a
        loss, a graph-keeping method of one (``loss.mean()``), or a name bound to one."""
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in GRAPH_KEEPING:
                return self.is_loss(expr.func.value)
            qname = self.model.qualified_name(expr.func)
            if qname is not None and FUNCTIONAL_LOSS.match(qname):
                return True
            if qname is not None and qname.startswith(_NOT_LOSS_LIBRARIES):
                return False  # torch.mean(x), sklearn.metrics.log_loss(...): no loss tensor of ours
            name = last_name(expr.func)
            # `loss_scaler(loss, optimizer)` (timm, Swin) returns the gradient norm.
            return self.model.kind(expr.func) is Kind.LOSS or bool(_LOSS_CALLEE.search(name) and "scal" not in name.lower())
        if isinstance(expr, cst.BinaryOperation):
            return self.is_loss_value(expr.left) or self.is_loss_value(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_loss_value(expr.expression)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "loss"  # outputs.loss (Hugging Face)
        if isinstance(expr, cst.Subscript):
            return _string_index(expr) == "loss"  # outputs["loss"]
        if isinstance(expr, cst.Name):
            return self.is_loss(expr)
        return False

    def _loss_names(self, function: cst.FunctionDef | None) -> set[str]:
        """Per function, what its backward passes run on and the terms summed into that."""
        if self._loss_names_cache is None:
            self._loss_names_cache = defaultdict(set)
            for call, loss in self.backward_calls.items():
                self._collect_terms(loss, self._loss_names_cache[self.sites[call].function], depth=3)
        return self._loss_names_cache.get(function, set())

    def _collect_terms(self, expr: cst.BaseExpression, names: set[str], depth: int) -> None:
        if isinstance(expr, cst.Name):
            if expr.value in names:
                return
            names.add(expr.value)
            if depth > 0:
                for value in self.model.values(expr):
                    self._collect_terms(value, names, depth - 1)
        elif isinstance(expr, (cst.Attribute, cst.Subscript)):
            names.add(code(expr))
        elif isinstance(expr, cst.BinaryOperation):
            for side, other in ((expr.left, expr.right), (expr.right, expr.left)):
                # loss = ce + 0.1 * aux + beta * kl_loss: ce, aux and kl_loss are losses, beta a weight.
                if (
                    isinstance(expr.operator, (cst.Add, cst.Subtract))
                    or isinstance(other, (cst.Integer, cst.Float))
                    or self.is_loss_value(side)
                    or "loss" in code(side).lower()
                ):
                    self._collect_terms(side, names, depth)
        elif isinstance(expr, cst.UnaryOperation):
            self._collect_terms(expr.expression, names, depth)
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in GRAPH_KEEPING:
            self._collect_terms(expr.func.value, names, depth)  # loss.mean().backward()
        elif isinstance(expr, (cst.List, cst.Tuple)):  # torch.autograd.backward([l1, l2])
            for element in expr.elements:
                self._collect_terms(element.value, names, depth)

    def detached(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` certainly holds no autograd graph: ``loss.item()``, ``loss.detach()``,
        ``loss.data``, ``float(loss)``, a number, or arithmetic on those alone."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "data"
        if isinstance(expr, cst.BinaryOperation):
            return self.detached(expr.left) and self.detached(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.detached(expr.expression)
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute):
                method = expr.func.attr.value
                return method in DETACHING_METHODS or (method in GRAPH_KEEPING and self.detached(expr.func.value))
            if isinstance(expr.func, cst.Name) and expr.func.value in _NUMBER_BUILTINS:
                return True
            return (self.model.qualified_name(expr.func) or "").startswith(("numpy.", "math."))
        return False

    # --- gradient flow --------------------------------------------------------------------

    def from_model(self, expr: cst.BaseExpression) -> bool:
        """Whether ``expr`` is computed from a model's output or parameters, whatever happened
        to it on the way (``.detach()``, NumPy)."""
        return self._flows("from_model", expr)

    def carries_grad(self, expr: cst.BaseExpression) -> bool:
        """Whether gradient can flow from ``expr`` back into a model: computed from a model's
        output through tensor operations only, never through ``.detach()``, ``.item()``,
        ``.data``, NumPy, or a fresh tensor built from values (``torch.tensor(...)``)."""
        return self._flows("grad", expr)

    def _flows(self, mode: str, expr: cst.BaseExpression) -> bool:
        key = (mode, expr)
        if key in self._flow_cache:
            return self._flow_cache[key]
        self._flow_cache[key] = False  # a cycle (x = x + 1) adds nothing
        result = self._flows_uncached(mode, expr)
        self._flow_cache[key] = result
        return result

    def _flows_uncached(self, mode: str, expr: cst.BaseExpression) -> bool:
        flows = lambda e: self._flows(mode, e)  # noqa: E731
        grad = mode == "grad"
        if isinstance(expr, cst.Name):
            return self._name_flows(mode, expr)
        if isinstance(expr, cst.Attribute):
            if (grad and expr.attr.value == "data") or expr.attr.value in _METADATA:
                return False
            return flows(expr.value) or MODEL_CALLEE.match(last_name(expr.value)) is not None
        if isinstance(expr, cst.Subscript):
            return flows(expr.value)
        if isinstance(expr, cst.BinaryOperation):
            return flows(expr.left) or flows(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return flows(expr.expression)
        if isinstance(expr, cst.IfExp):
            return flows(expr.body) or flows(expr.orelse)
        if isinstance(expr, (cst.List, cst.Tuple)):
            return any(flows(e.value) for e in expr.elements)
        if isinstance(expr, cst.Call):
            return self._call_flows(mode, expr)
        return False

    def _call_flows(self, mode: str, call: cst.Call) -> bool:
        flows = lambda e: self._flows(mode, e)  # noqa: E731
        grad = mode == "grad"
        func = call.func
        qname = (self.model.qualified_name(func) or "") if dotted(func) else ""
        args = [a.value for a in call.args]
        if isinstance(func, cst.Attribute) and not qname.startswith(("torch.", "numpy.")):
            method = func.attr.value
            if grad and method in DETACHING_METHODS:
                return False
            if method in ("requires_grad_", "backward", "size", "dim", "numel"):
                return False if grad or method != "requires_grad_" else flows(func.value)
            if self.model.kind(func.value) in (Kind.MODULE, Kind.LOSS):
                return any(map(flows, args)) or self.model.kind(func.value) is Kind.MODULE
        if grad and (qname.startswith("numpy.") or qname in _TENSOR_WRAPPERS or callee_name(call) == "Variable"):
            return False  # NumPy has no graph; torch.tensor(...) is a new leaf
        returns = self.local_callee_returns(call)
        if returns:
            return any(map(flows, returns)) or (not grad and any(map(flows, args)))
        if self.model.kind(func) is Kind.MODULE or (not qname.startswith(("torch.", "numpy.", "builtins.")) and MODEL_CALLEE.match(last_name(func))):
            return True  # model(x), self.net(x), self(x)
        if isinstance(func, cst.Name) and func.value == "self":
            return True
        receiver = [func.value] if isinstance(func, cst.Attribute) and not qname.startswith(("torch.", "numpy.")) else []
        return any(map(flows, receiver + args))

    def _name_flows(self, mode: str, name: cst.Name) -> bool:
        values = self.model.values(name)
        if values:
            return any(self._flows(mode, v) for v in values)
        # A parameter may carry gradient (unknown: assume so); it comes from the model when
        # named like a model or its output (`def loss_fn(pred, target)`).
        return any(
            mode == "grad" or _OUTPUT_NAME.match(a.name) is not None or MODEL_CALLEE.match(a.name) is not None
            for a in self.model.assignments(name)
            if isinstance(a.node, cst.Param) and a.name not in ("self", "cls")
        )

    def local_callee_returns(self, call: cst.Call) -> list[cst.BaseExpression]:
        """What the same-file code a call runs returns: ``f(...)`` of a function of this file,
        ``self.f(...)`` of a method of the caller's class, ``criterion(...)`` of an instance of a
        loss class of this file (its ``forward``). Empty when the callee is not known."""
        function = self.local_callee(call.func)
        if function is None:
            return []
        if function not in self._returns_cache:
            finder = _Returns()
            function.body.visit(finder)
            self._returns_cache[function] = finder.values
        return self._returns_cache[function]

    def local_callee(self, func: cst.BaseExpression) -> cst.FunctionDef | None:
        """The same-file function a call of ``func`` runs (see ``local_callee_returns``)."""
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            info = self.model.enclosing_class(func)
            method = _method(info.node, func.attr.value) if info is not None else None
            if method is not None:
                return method
        if isinstance(func, cst.Name):
            for assignment in self.model.assignments(func):
                if isinstance(assignment.node, cst.FunctionDef):
                    return assignment.node
        # An instance of a loss class of this file: `criterion = NumpyLoss()`, or of any module
        # class of it when the instance is named as a loss (`crit = Smooth()`).
        loss_named = isinstance(func, (cst.Name, cst.Attribute)) and _LOSS_CALLEE.search(last_name(func)) is not None
        for value in self.model.values(func) if isinstance(func, (cst.Name, cst.Attribute)) else ():
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                for assignment in self.model.assignments(value.func):
                    node = assignment.node
                    if isinstance(node, cst.ClassDef) and (
                        _LOSS_CALLEE.search(node.name.value) or (loss_named and node in self.model.classes and self.model.class_kind(self.model.classes[node]) is not None)
                    ):
                        return _method(node, "forward") or _method(node, "__call__")
        return None


class _Returns(cst.CSTVisitor):
    """The values a function returns (not those of functions nested in it)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: list[cst.BaseExpression] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.values.append(node.value)


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next(
        (s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name),
        None,
    ) if isinstance(cls.body, cst.IndentedBlock) else None


def dotted(expr: cst.BaseExpression) -> bool:
    """``np.mean`` or ``torch.nn.functional.mse_loss``: a name that may be a library function
    (``np.mean(x).sum`` is a method of a result)."""
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name)


def _clears_grad_in_place(call: cst.Call) -> bool:
    """``p.grad.zero_()``, ``p.grad.fill_(0)``, ``p.grad.mul_(0)``; not ``p.grad.mul_(scale)``
    or ``p.grad.clamp_(-1, 1)``, which keep the gradient."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and is_grad_attribute(func.value)):
        return False
    if func.attr.value == "zero_":
        return True
    return func.attr.value in ("fill_", "mul_") and len(call.args) == 1 and _is_zero(call.args[0].value)


def _is_zero(expr: cst.BaseExpression) -> bool:
    """``None``, ``0``, ``0.0`` or a fresh tensor of zeros: what a cleared gradient holds."""
    if isinstance(expr, cst.Name):
        return expr.value == "None"
    if isinstance(expr, (cst.Integer, cst.Float)):
        return float(expr.evaluated_value) == 0
    return isinstance(expr, cst.Call) and callee_name(expr) in ("zeros_like", "zeros", "new_zeros")


def _is_local_call(call: cst.Call) -> bool:
    """``helper(...)`` or ``self.helper(...)``: a call that can reach a function of this file by
    its name (``model.train()`` is not the file's ``def train``)."""
    func = call.func
    return isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self")


def _string_index(subscript: cst.Subscript) -> str | None:
    if len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index):
        value = subscript.slice[0].slice.value
        if isinstance(value, cst.SimpleString):
            return value.evaluated_value
    return None
