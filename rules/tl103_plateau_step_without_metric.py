from __future__ import annotations

from collections import defaultdict

import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic.names import words
from torchlint.torch_rule import TorchRule

PLATEAU = "torch.optim.lr_scheduler.ReduceLROnPlateau"
VALIDATION_WORDS = frozenset(
    {"val", "valid", "validate", "validation", "eval", "evaluate", "evaluation", "test", "dev", "holdout", "vloss", "vacc"}
)
TRAINING_WORDS = frozenset({"train", "training", "tr", "trn"})
LOWER_IS_BETTER = frozenset({"loss", "error", "err", "ppl", "perplexity", "nll", "mae", "mse", "rmse", "wer", "cer", "vloss"})
HIGHER_IS_BETTER = frozenset({"acc", "accuracy", "f1", "auc", "map", "score", "top1", "top5", "bleu", "dice", "iou", "miou", "psnr", "ssim", "r2", "vacc"})
METRIC_WORDS = LOWER_IS_BETTER | HIGHER_IS_BETTER | {"metric"}
EPOCH_WORDS = frozenset({"epoch", "ep", "iteration"})
DATA_WORDS = frozenset({"loader", "dataloader", "data", "dataset", "iter", "batches", "set", "dl", "ds", "x", "samples", "gen", "generator"})
RESULT_WORDS = frozenset({"metrics", "results", "result", "stats", "logs", "scores", "summary", "res"})
# Not this epoch's value: the best so far, a history of every epoch, a sum still to average.
NOT_THIS_EPOCH = frozenset(
    {"best", "min", "max", "prev", "previous", "last", "lowest", "highest", "history", "losses", "accs", "scores", "metrics",
     "running", "total", "sum", "cum"}
)
# Wrappers that keep what a value is: `loss.item()`, `float(loss)`, `np.mean(losses)`.
PASS_THROUGH_CALLS = frozenset({"item", "float", "mean", "sum", "detach", "cpu", "tensor", "numpy", "tolist", "round", "average"})
# Average meters: `losses.avg` is what `losses` is.
PASS_THROUGH_ATTRIBUTES = frozenset({"avg", "val", "mean", "average", "value", "global_avg"})
Scope = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


class PlateauStepWithoutMetric(TorchRule):
    """
    ## What it does
    Finds `ReduceLROnPlateau.step()` called with no metric or with the epoch number (left
    over from a `StepLR`), or with the training loss while a validation metric is computed
    in the same epoch. A validation metric is a name such as `val_loss` or `valid_acc`, or
    what a validation helper returns: a call named so (`evaluate(...)`), a call given the
    validation data (`accuracy(model, val_loader)`), or a function of the file that puts the
    model in eval mode or turns gradients off, loops over data and runs no backward pass.

    The scheduler is known to be a `ReduceLROnPlateau` when it is built from that class (or
    a subclass) through any import alias, assigned to a name or to `self.scheduler`,
    returned by a function of the file, annotated as one, or passed to the function that
    steps it from every call in the file. A scheduler whose type is unknown, other
    schedulers, and `step()` in the branch of `if isinstance(s, ReduceLROnPlateau)` that
    handles the others are left alone.

    ## Why is this bad?
    `ReduceLROnPlateau` lowers the learning rate when the metric it is given stops
    improving. Without a metric, `step()` raises `TypeError: ReduceLROnPlateau.step()
    missing 1 required positional argument: 'metrics'`. Given the epoch number, which only
    grows, it lowers the learning rate every `patience` epochs. Given the training loss,
    which keeps falling while the model overfits, it lowers the learning rate late or
    never, and the validation metric computed next to it goes unused.

    ## Example
    ```python
    scheduler = ReduceLROnPlateau(optimizer, mode="min", patience=5)
    for epoch in range(epochs):
        train_loss = train(model, train_loader, optimizer)
        val_loss = evaluate(model, val_loader)
        scheduler.step(train_loss)
    ```

    ## Use instead
    ```python
    scheduler = ReduceLROnPlateau(optimizer, mode="min", patience=5)
    for epoch in range(epochs):
        train_loss = train(model, train_loader, optimizer)
        val_loss = evaluate(model, val_loader)
        scheduler.step(val_loss)
    ```

    ## Fix safety
    The fix passes the validation metric when exactly one fits: a name computed earlier in
    the same epoch, on every path to the step, called like `val_loss`, `valid_acc` or
    `avg_vloss`, or holding the result of an `evaluate(...)` / `validate(...)` call. Among
    several, it takes the one that matches the scheduler's `mode` (a loss or error for
    `"min"`, the default; an accuracy or score for `"max"`); a metric whose direction
    contradicts the mode is never passed. Otherwise the finding has no fix.

    The fix is unsafe: it changes when the learning rate drops, which changes training,
    and the name it picks is a judgement from names, not a proof of meaning.

    ## References
    - [`ReduceLROnPlateau`](https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.ReduceLROnPlateau.html)
    """

    code = "TL103"
    name = "plateau-step-without-metric"
    required_words = (("step",), ("ReduceLROnPlateau",))
    message = "`{scheduler}.step()` of a `ReduceLROnPlateau` without a metric: it raises a `TypeError`"
    epoch_message = "`{scheduler}.step({metric})` of a `ReduceLROnPlateau` gets the epoch number, not a metric"
    train_message = "`{scheduler}.step({metric})` of a `ReduceLROnPlateau` gets the training loss while a validation metric is computed"

    def __init__(self, context) -> None:
        super().__init__(context)
        self.steps: list[cst.Call] = []
        self.calls_by_name: dict[str, list[cst.Call]] = defaultdict(list)
        self.bindings: dict[str, list[tuple[cst.Name, cst.BaseExpression]]] = defaultdict(list)
        self.accumulations: dict[str, list[cst.AugAssign]] = defaultdict(list)

    # --- collecting -----------------------------------------------------------------------

    def visit_Call(self, node: cst.Call) -> None:
        name = _callee(node)
        if name is not None:
            self.calls_by_name[name].append(node)
        if name == "step" and isinstance(node.func, cst.Attribute):
            self.steps.append(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            for name in _target_names(target.target):
                self.bindings[name.value].append((name, node.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and isinstance(node.target, cst.Name):
            self.bindings[node.target.value].append((node.target, node.value))

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.target, cst.Name):
            self.accumulations[node.target.value].append(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        for step in self.steps:
            self._check(step)

    # --- the check -----------------------------------------------------------------------------

    def _check(self, step: cst.Call) -> None:
        scheduler = step.func.value
        if any(a.star for a in step.args) or self._handles_other_schedulers(step):
            return
        construction = self._plateau(scheduler, depth=0)
        if construction is None:
            return
        metric = next((a for a in step.args if a.keyword is None or a.keyword.value == "metrics"), None)
        epoch_number = metric is not None and self._is_epoch_number(metric.value, step)
        if metric is not None and not epoch_number and not self._is_training_loss(metric.value, depth=0):
            return
        epoch = self._epoch_of(step)
        earlier, later = self._validation_metrics(step, epoch)
        name = self._code(scheduler)
        if metric is None:
            message = self.message.format(scheduler=name)
        elif epoch_number:  # left over from a StepLR: `scheduler.step(epoch)`
            message = self.epoch_message.format(scheduler=name, metric=self._code(metric.value))
        elif earlier or later:
            given = self._code(metric.value) if metric.keyword is None else f"metrics={self._code(metric.value)}"
            message = self.train_message.format(scheduler=name, metric=given)
        else:
            return
        self.report(step, message, fix=self._fix(step, metric, earlier, _mode(construction)))

    def _fix(self, step: cst.Call, metric: cst.Arg | None, candidates: list[str], mode: str | None) -> Fix | None:
        chosen = _choose(candidates, mode)
        if chosen is None:
            return None
        value = cst.Name(chosen)
        change = {metric.value: value} if metric is not None else {step: step.with_changes(args=[cst.Arg(value), *step.args])}
        return Fix(f"Pass `{chosen}`", change, Applicability.UNSAFE)

    def _handles_other_schedulers(self, step: cst.Call) -> bool:
        """``step()`` in the branch of ``if isinstance(s, ReduceLROnPlateau)`` that is not for
        it (the ``else``, or the body of ``if not isinstance(...)``)."""
        child = step
        for ancestor in self.semantic.ancestors(step):
            if isinstance(ancestor, cst.If) and "plateau" in self._code(ancestor.test).lower():
                negated = isinstance(ancestor.test, cst.UnaryOperation)
                if (child is ancestor.body) == negated:
                    return True
            child = ancestor
        return False

    # --- is it a ReduceLROnPlateau? --------------------------------------------------------------

    def _plateau(self, expr: cst.BaseExpression, depth: int) -> cst.Call | None:
        """The ``ReduceLROnPlateau(...)`` call that ``expr`` holds, if every value it can
        have is one (``None`` placeholders aside)."""
        if depth > 3:
            return None
        if isinstance(expr, cst.Call):
            return self._plateau_call(expr, depth)
        values = [v for v in self.semantic.values(expr) if not (isinstance(v, cst.Name) and v.value == "None")]
        if values:
            found = [self._plateau(v, depth + 1) for v in values]
            return found[0] if all(found) else None
        if isinstance(expr, cst.Name):
            return self._plateau_parameter(expr, depth)
        return None

    def _plateau_call(self, call: cst.Call, depth: int) -> cst.Call | None:
        qname = self.semantic.qualified_name(call.func)
        if qname == PLATEAU or self._plateau_subclass(call.func):
            return call
        if isinstance(call.func, cst.Name):  # scheduler = build_scheduler(optimizer)
            for function in self.semantic.functions.get(call.func.value, ()):
                returns = _returns(function)
                found = [self._plateau(r, depth + 1) for r in returns]
                if returns and all(found):
                    return found[0]
        return None

    def _plateau_subclass(self, func: cst.BaseExpression) -> bool:
        """A class of this file built on ``ReduceLROnPlateau``."""
        if not isinstance(func, cst.Name):
            return False
        classes = [self.semantic.classes.get(a.node) for a in self.semantic.assignments(func)]
        return any(info is not None and PLATEAU in info.base_names for info in classes)

    def _plateau_parameter(self, name: cst.Name, depth: int) -> cst.Call | None:
        """A parameter annotated as a ``ReduceLROnPlateau``, or given one by every call of its
        function in the file."""
        params = [a.node for a in self.semantic.assignments(name) if isinstance(a.node, cst.Param)]
        if len(params) != 1:
            return None
        param = params[0]
        if param.annotation is not None and self.semantic.qualified_name(param.annotation.annotation) == PLATEAU:
            return cst.Call(func=param.annotation.annotation)
        function = self.semantic.enclosing_function(param)
        if function is None:
            return None
        positional = list(function.params.params)
        is_method = bool(positional) and positional[0].name.value in ("self", "cls")
        arguments = []
        for call in self.calls_by_name.get(function.name.value, ()):
            offset = 1 if is_method and isinstance(call.func, cst.Attribute) else 0
            arguments.append(_argument_for(call, param, positional, offset))
        found = [self._plateau(a, depth + 1) if a is not None else None for a in arguments]
        return found[0] if found and all(found) else None

    # --- what the step is given -------------------------------------------------------------------

    def _is_epoch_number(self, expr: cst.BaseExpression, step: cst.Call) -> bool:
        """``epoch`` or the counter of a ``for ... in range(...)`` around the step."""
        if not isinstance(expr, cst.Name):
            return False
        if set(words(expr.value)) & EPOCH_WORDS and not set(words(expr.value)) & METRIC_WORDS:
            return True
        return any(
            isinstance(a, cst.For) and isinstance(a.target, cst.Name) and a.target.value == expr.value
            and isinstance(a.iter, cst.Call) and _callee(a.iter) in ("range", "trange")
            for a in self.semantic.ancestors(step)
        )

    def _is_training_loss(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Whether ``expr`` is the training loss: what backward runs on (or an alias), a
        running sum of it, a name that says so (``train_loss``), or what a training function
        returns."""
        if depth > 4:
            return False
        if isinstance(expr, cst.Call):
            if _callee(expr) in PASS_THROUGH_CALLS:
                # `loss.mean(0)`: the receiver; `np.mean(losses)`, `float(loss)`: the argument.
                library = (self.semantic.qualified_name(expr.func) or "").startswith(("numpy.", "torch.", "statistics.", "math."))
                if isinstance(expr.func, cst.Attribute) and not library:
                    inner = expr.func.value
                else:
                    inner = expr.args[0].value if expr.args else None
                return inner is not None and self._is_training_loss(inner, depth + 1)
            return False
        if isinstance(expr, cst.BinaryOperation):
            return self._is_training_loss(expr.left, depth + 1)
        if isinstance(expr, cst.Subscript):  # logs["train_loss"], train_metrics["loss"]
            key = expr.slice[0].slice.value if len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index) else None
            if not isinstance(key, cst.SimpleString):
                return False
            key_words = set(words(str(key.evaluated_value)))
            container = self._code(expr.value)
            return _training_name(str(key.evaluated_value)) or bool(
                key_words & METRIC_WORDS and set(words(container)) & TRAINING_WORDS and not _validation_name(container)
            )
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in PASS_THROUGH_ATTRIBUTES:
                return self._is_training_loss(expr.value, depth + 1)
            return _training_name(expr.attr.value)
        if not isinstance(expr, cst.Name) or _validation_name(expr.value):
            return False
        if _training_name(expr.value):
            return True
        training = self.semantic.training
        if any(training.iteration_of(a) is not None and self._accumulates_loss(a) for a in self.accumulations.get(expr.value, ())):
            return True
        if any(self._collects_loss(call, expr.value) for call in self.calls_by_name.get("append", ())):
            return True
        for value in self.semantic.values(expr):
            if training.iteration_of(value) is not None and (training.is_loss_value(value) or self._mentions_loss(value)):
                return True
            if isinstance(value, cst.Call) and self._trains(value):
                return True
            if not isinstance(value, cst.Call) and self._is_training_loss(value, depth + 1):
                return True
        # `train_loss, train_acc = ...` and results unpacked from a training function
        return any(
            isinstance(value, cst.Call) and self._trains(value)
            for target, value in self.bindings.get(expr.value, ())
            if self.semantic.enclosing_function(target) is self.semantic.enclosing_function(expr)
        )

    def _accumulates_loss(self, node: cst.AugAssign) -> bool:
        return isinstance(node.operator, cst.AddAssign) and self._mentions_loss(node.value)

    def _collects_loss(self, call: cst.Call, name: str) -> bool:
        """``losses.append(loss.item())`` in a training iteration."""
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
        return (
            isinstance(receiver, cst.Name) and receiver.value == name and len(call.args) == 1
            and self.semantic.training.iteration_of(call) is not None and self._mentions_loss(call.args[0].value)
        )

    def _mentions_loss(self, expr: cst.BaseExpression) -> bool:
        training = self.semantic.training
        for name in _names_in(expr):
            if training.is_loss(name):
                return True
        return False

    def _trains(self, call: cst.Call) -> bool:
        """A call that runs training: ``train(...)``, ``self.train_epoch()``, or one given
        the optimizer or the training data."""
        if TRAINING_WORDS & set(words(_callee(call) or "")):
            return True
        from torchlint.semantic import Kind

        return any(self.semantic.kind(a.value) is Kind.OPTIMIZER or (isinstance(a.value, cst.Name) and _training_data(a.value.value)) for a in call.args)

    # --- validation metrics of the epoch ---------------------------------------------------------

    def _epoch_of(self, step: cst.Call) -> cst.CSTNode:
        """The body the step runs in once per epoch: its loop (the epoch loop when it steps
        inside a training iteration), else its function or the module."""
        training = self.semantic.training
        iteration = training.iteration_of(step)
        if iteration is not None:
            epoch = training.epoch_loop(iteration)
            if epoch is not None:
                return epoch
        for ancestor in self.semantic.ancestors(step):
            if isinstance(ancestor, (cst.For, cst.While, *Scope)):
                return ancestor
        return self.context.module

    def _validation_metrics(self, step: cst.Call, epoch: cst.CSTNode) -> tuple[list[str], list[str]]:
        """Names of validation metrics computed in ``epoch``: those bound before the step on
        every path to it, and the others."""
        function = self.semantic.enclosing_function(step)
        position = self.semantic.start_key(step)
        earlier, later = set(), set()
        for name, bindings in self.bindings.items():
            for target, value in bindings:
                if self.semantic.enclosing_function(target) is not function or not self._inside(target, epoch):
                    continue
                if self._is_validation_metric(target, value):
                    before = self.semantic.start_key(target) < position and self._reaches(target, step, epoch)
                    (earlier if before else later).add(name)
                elif self._is_validation_result(target, value):
                    later.add(name)  # computed, but no value to pass as it is
        for callee, calls in self.calls_by_name.items():
            for call in calls:  # `validate(model, val_loader)` that prints its metrics
                bare = isinstance(self.semantic.parent(call), cst.Expr) and call.args
                if bare and VALIDATION_WORDS & _callee_words(call) and self._inside(call, epoch) and self.semantic.enclosing_function(call) is function:
                    later.add(f"{callee}()")
        return sorted(earlier), sorted(later - earlier)

    def _is_validation_metric(self, target: cst.Name, value: cst.BaseExpression) -> bool:
        name_words = set(words(target.value))
        if name_words & NOT_THIS_EPOCH:
            return False
        if _validation_name(target.value):
            return True
        return self._evaluates(value) and bool(name_words & METRIC_WORDS)

    def _is_validation_result(self, target: cst.Name, value: cst.BaseExpression) -> bool:
        """What validation returns, as a whole: ``val_metrics = validate(...)``."""
        name_words = set(words(target.value))
        return self._evaluates(value) or bool(name_words & VALIDATION_WORDS and name_words & (RESULT_WORDS | METRIC_WORDS))

    def _evaluates(self, value: cst.BaseExpression) -> bool:
        """A call that runs validation and returns its result: ``validate(...)``, a call given
        the validation data (``accuracy(model, val_loader)``), or a helper of this file that
        puts the model in eval mode or turns gradients off and runs no backward pass."""
        if not isinstance(value, cst.Call):
            return False
        if VALIDATION_WORDS & _callee_words(value):
            return True
        if any(_validation_data(_code_name(a.value)) for a in value.args):
            return True
        helper = self.semantic.training.local_callee(value.func)
        return helper is not None and _evaluation_helper(self.semantic, helper)

    def _reaches(self, target: cst.CSTNode, step: cst.Call, epoch: cst.CSTNode) -> bool:
        """Whether the binding runs on every path to the step: no ``if`` between it and the
        epoch that does not also hold the step."""
        step_ancestors = set(map(id, self.semantic.ancestors(step)))
        for ancestor in self.semantic.ancestors(target):
            if ancestor is epoch:
                return True
            if isinstance(ancestor, (cst.If, cst.While, cst.Try)) and id(ancestor) not in step_ancestors:
                return False
        return True

    def _inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return container is self.context.module or any(a is container for a in self.semantic.ancestors(node))

    def _code(self, node: cst.CSTNode) -> str:
        return self.context.module.code_for_node(node)


def _choose(candidates: list[str], mode: str | None) -> str | None:
    """The one candidate to pass: the only one whose direction does not contradict the
    scheduler's mode, preferring one that matches it."""
    if mode is None:  # `mode=args.mode`: nothing to prefer
        return candidates[0] if len(candidates) == 1 else None
    wanted, contrary = (HIGHER_IS_BETTER, LOWER_IS_BETTER) if mode == "max" else (LOWER_IS_BETTER, HIGHER_IS_BETTER)
    fitting = [c for c in candidates if not (set(words(c)) & contrary and not set(words(c)) & wanted)]
    matching = [c for c in fitting if set(words(c)) & wanted]
    for group in (fitting, matching):
        if len(group) == 1:
            return group[0]
    return None


def _mode(construction: cst.Call) -> str | None:
    """``"min"`` or ``"max"`` as written in ``ReduceLROnPlateau(optimizer, mode=...)``."""
    for index, arg in enumerate(construction.args):
        if (arg.keyword is not None and arg.keyword.value == "mode") or (arg.keyword is None and index == 1):
            return str(arg.value.evaluated_value) if isinstance(arg.value, cst.SimpleString) else None
    return "min"


def _validation_name(name: str) -> bool:
    name_words = set(words(name))
    return bool(name_words & VALIDATION_WORDS) and bool(name_words & (METRIC_WORDS | {"vloss", "vacc"}))


def _training_name(name: str) -> bool:
    name_words = set(words(name))
    return bool(name_words & TRAINING_WORDS) and bool(name_words & METRIC_WORDS)


def _training_data(name: str) -> bool:
    name_words = set(words(name))
    return bool(name_words & TRAINING_WORDS) and bool(name_words & {"loader", "dataloader", "data", "dataset", "iter", "batches"})


def _validation_data(name: str) -> bool:
    name_words = set(words(name))
    return bool(name_words & VALIDATION_WORDS) and bool(name_words & DATA_WORDS)


def _code_name(expr: cst.BaseExpression) -> str:
    """``val_loader`` for ``val_loader`` and ``self.val_loader``; empty for anything else."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else ""


def _evaluation_helper(semantic, function: cst.FunctionDef) -> bool:
    """A function that calls ``.eval()`` or runs under ``no_grad()``/``inference_mode()``
    (as a decorator or a ``with``), loops (over the data), returns a value, and runs no
    backward pass or step."""
    found = {"eval": False, "backward": False, "loop": False}

    class Scan(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            found["loop"] = True

        def visit_Call(self, node: cst.Call) -> None:
            name = _callee(node)
            if name in ("backward", "step"):
                found["backward"] = True
            elif name == "eval" and not node.args:
                found["eval"] = True

        def visit_WithItem(self, node: cst.WithItem) -> None:
            if semantic.grad_off_context(node.item):
                found["eval"] = True

    function.body.visit(Scan())
    decorated = any(semantic.grad_off_context(d.decorator) for d in function.decorators)
    passes = (found["eval"] or decorated) and found["loop"]
    return passes and not found["backward"] and bool(_returns(function))


def _callee(call: cst.Call) -> str | None:
    if isinstance(call.func, cst.Attribute):
        return call.func.attr.value
    if isinstance(call.func, cst.Name):
        return call.func.value
    return None


def _callee_words(call: cst.Call) -> set[str]:
    return set(words(_callee(call) or ""))


def _target_names(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _target_names(e.value)]
    return []


def _names_in(expr: cst.BaseExpression) -> list[cst.Name]:
    found = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

    expr.visit(Names())
    return found


def _returns(function: cst.FunctionDef) -> list[cst.BaseExpression]:
    found = []

    class Returns(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is function

        def visit_Return(self, node: cst.Return) -> None:
            if node.value is not None:
                found.append(node.value)

    function.visit(Returns())
    return found


def _argument_for(call: cst.Call, param: cst.Param, positional: list[cst.Param], offset: int) -> cst.BaseExpression | None:
    """What ``call`` passes for ``param``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == param.name.value:
            return arg.value
    if param in positional:
        index = positional.index(param) - offset
        plain = [a for a in call.args if a.keyword is None and not a.star]
        if 0 <= index < len(plain):
            return plain[index].value
    return None
