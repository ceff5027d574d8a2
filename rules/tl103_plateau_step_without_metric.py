import re

import libcst as cst

from torchlint.rule import Applicability, Fix, Rule

PLATEAU = ("torch.optim.lr_scheduler.ReduceLROnPlateau",)
VALIDATION_NAME = re.compile(r"^(val|valid|validation|eval|test|dev)_?(loss|acc|accuracy|metric|score|f1|error|err|auc|map|mae|mse|rmse|ppl|perplexity)\w*$|^(loss|acc|accuracy|metric|score)_?(val|valid|validation|eval|dev)$")
VALIDATION_CALL = re.compile(r"^_?(evaluate|validate|validation|eval|test|run_eval|run_validation|val)\w*$")


class PlateauStepWithoutMetric(Rule):
    """
    ## What it does
    Finds `ReduceLROnPlateau.step()` called with no metric, or with the training loss while
    a validation metric is computed in the same scope.

    ## Why is this bad?
    `ReduceLROnPlateau` lowers the learning rate when the metric it is given stops
    improving. Without a metric, `step()` raises a `TypeError`; with the training loss,
    which keeps falling while the model overfits, the learning rate is lowered at the wrong
    time or never, and the validation metric computed next to it goes unused.

    ## Example
    ```python
    for epoch in range(epochs):
        train_loss = train(model, train_loader)
        val_loss = evaluate(model, val_loader)
        scheduler.step(train_loss)
    ```

    ## Use instead
    ```python
    for epoch in range(epochs):
        train_loss = train(model, train_loader)
        val_loss = evaluate(model, val_loader)
        scheduler.step(val_loss)
    ```

    ## Fix safety
    When exactly one validation metric is in scope (a name like `val_loss` or `val_acc`, or
    the result of an `evaluate(...)`/`validate(...)` call; among several, the only one that is
    a loss, since the scheduler's default mode is `"min"`) the fix passes it, and it is
    unsafe: for an accuracy-like metric the scheduler must be built with `mode="max"`, which
    the fix cannot check. Otherwise there is no fix.

    ## References
    - [`ReduceLROnPlateau`](https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.ReduceLROnPlateau.html)
    """

    code = "TL103"
    name = "plateau-step-without-metric"
    message = "`{scheduler}.step()` of a `ReduceLROnPlateau` without a metric"
    train_message = "`{scheduler}.step({metric})` of a `ReduceLROnPlateau` gets the training loss while a validation metric exists"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step"):
            return
        values = self.semantic.values(func.value)
        if not values or not all(self.semantic.is_call_to(v, *PLATEAU) for v in values):
            return
        scheduler = self.context.module.code_for_node(func.value)
        candidates = self._validation_metrics(node)
        fix = None
        # The scheduler's default mode is "min": among several metrics prefer the one loss.
        chosen = candidates if len(candidates) == 1 else [c for c in candidates if "loss" in c]
        if len(chosen) == 1:
            metric = cst.Name(chosen[0])
            change = {node.args[0].value: metric} if node.args else {node: node.with_changes(args=[cst.Arg(metric)])}
            fix = Fix(f"Pass `{chosen[0]}`", change, Applicability.UNSAFE)
        if not node.args:
            self.report(node, self.message.format(scheduler=scheduler), fix=fix)
            return
        argument = node.args[0].value
        if candidates and argument is not None and self._is_training_loss(argument):
            self.report(node, self.train_message.format(scheduler=scheduler, metric=self.context.module.code_for_node(argument)), fix=fix)

    def _is_training_loss(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "item":
            expr = expr.func.value
        if not isinstance(expr, cst.Name):
            return False
        if VALIDATION_NAME.match(expr.value):
            return False
        return "train" in expr.value.lower() or self.semantic.training.is_loss(expr) or expr.value in ("loss", "epoch_loss", "running_loss", "total_loss", "avg_loss")

    def _validation_metrics(self, node: cst.CSTNode) -> list[str]:
        """Names in the step's function (or module) bound before it to a validation metric."""
        function = self.semantic.enclosing_function(node)
        position = self.semantic.start_key(node)
        found: set[str] = set()
        for target, value in self.semantic.bound_values.items():
            if self.semantic.enclosing_function(target) is not function or self.semantic.start_key(target) >= position:
                continue
            call = value.func if isinstance(value, cst.Call) else None
            callee = call.attr.value if isinstance(call, cst.Attribute) else call.value if isinstance(call, cst.Name) else ""
            if VALIDATION_NAME.match(target.value) or VALIDATION_CALL.match(callee):
                found.add(target.value)
        return sorted(found)
