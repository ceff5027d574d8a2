import libcst as cst

from torchlint.rule import Fix, Rule


class InferenceInTrainMode(Rule):
    """
    ## What it does
    Finds evaluation or inference code (functions named for validation, testing or
    prediction, loops over validation or test loaders) that runs a model with no
    `model.eval()` on the path: not earlier in the same scope, and not before every call of
    the evaluation function in the file. Lightning's `validation_step`, `test_step` and
    `predict_step` are left alone: the framework sets the mode.

    ## Why is this bad?
    In training mode dropout drops activations at random and batch norm normalises with the
    statistics of the current batch (and updates its running averages with evaluation data).
    Metrics come out noisy and wrong, predictions change from run to run, and the model's
    statistics are polluted by the evaluation set.

    ## Example
    ```python
    def evaluate(model, loader):
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## Use instead
    ```python
    def evaluate(model, loader):
        model.eval()
        correct = 0
        with torch.no_grad():
            for x, y in loader:
                correct += (model(x).argmax(1) == y).sum().item()
        return correct
    ```

    ## Fix safety
    The fix inserts `model.eval()` at the start of the evaluation function, or before the
    evaluation loop. Where that evaluation runs inside an epoch loop that also trains and
    never calls `model.train()`, the fix also inserts `model.train()` at the start of that
    loop, so the next training pass is not left in eval mode. It is safe.

    ## References
    - [`torch.nn.Module.eval`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.eval)
    """

    code = "TL401"
    name = "inference-in-train-mode"
    message = "`{model}` runs for evaluation without `{model}.eval()`: dropout and batch norm stay in training mode"

    def leave_Module(self, original_node: cst.Module) -> None:
        evaluation = self.semantic.evaluation
        for scope in evaluation.scopes:
            if evaluation.model_in_eval(scope):
                continue
            model = self.context.module.code_for_node(scope.model)
            self.report(scope.forward, self.message.format(model=model), fix=self._fix(scope, model))

    def _fix(self, scope, model: str) -> Fix | None:
        evaluation = self.semantic.evaluation
        call = cst.parse_statement(f"{model}.eval()\n")
        changes = {}
        if isinstance(scope.node, cst.FunctionDef):
            body = scope.node.body
            if not isinstance(body, cst.IndentedBlock):
                return None
            statements = list(body.body)
            first = 1 if statements and _is_docstring(statements[0]) and len(statements) > 1 else 0
            changes[statements[first]] = cst.FlattenSentinel([call, statements[first]])
            params = [p.name.value for p in scope.node.params.params]
            for site in evaluation.call_sites(scope.node):
                loops = list(evaluation.epoch_loops_without_train(site))
                if not loops:
                    continue
                argument = _argument(site, params, model)
                if argument is None:
                    return None  # cannot tell which model to put back in train mode
                if not self._restore(loops[0], argument, changes):
                    return None
        else:
            statement = scope.node
            changes[statement] = cst.FlattenSentinel([call, statement])
            for loop in evaluation.epoch_loops_without_train(scope.node):
                if not self._restore(loop, model, changes):
                    return None
                break
        return Fix(f"Call `{model}.eval()` before evaluating", changes)

    def _restore(self, loop, model: str, changes: dict) -> bool:
        if not isinstance(loop.body, cst.IndentedBlock):
            return False
        first = loop.body.body[0]
        if first in changes:
            return True
        changes[first] = cst.FlattenSentinel([cst.parse_statement(f"{model}.train()\n"), first])
        return True


def _argument(site: cst.Call, params: list[str], model: str) -> str | None:
    """The caller's expression for the evaluation function's model parameter."""
    module = cst.Module(body=[])
    if model not in params:
        return model if "." in model else None  # self.model: the same object at the call site
    index = params.index(model)
    if params and params[0] == "self" and isinstance(site.func, cst.Attribute):
        index -= 1
    for position, arg in enumerate(site.args):
        if arg.keyword is not None and arg.keyword.value == model:
            return module.code_for_node(arg.value)
        if arg.keyword is None and position == index and arg.star == "":
            value = arg.value
            return module.code_for_node(value) if isinstance(value, (cst.Name, cst.Attribute)) else None
    return None


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
