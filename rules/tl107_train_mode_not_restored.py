from itertools import takewhile

import libcst as cst

from torchlint.rule import Fix
from torchlint.torch_rule import TorchRule


class TrainModeNotRestored(TorchRule):
    """
    ## What it does
    Finds `model.eval()` for validation inside an epoch loop whose training pass never calls
    `model.train()`, so from the second epoch on the model trains in eval mode.

    ## Why is this bad?
    In eval mode dropout is off and batch norm uses (and stops updating) its running
    statistics. Training silently continues without regularisation and with frozen
    statistics after the first validation.

    ## Example
    ```python
    for epoch in range(epochs):
        for x, y in train_loader:
            ...
            loss.backward()
            optimizer.step()
        model.eval()
        validate(model, val_loader)
    ```

    ## Use instead
    ```python
    for epoch in range(epochs):
        model.train()
        for x, y in train_loader:
            ...
        model.eval()
        validate(model, val_loader)
    ```

    ## Fix safety
    The fix inserts `model.train()` where it restores train mode before the next training
    step, and is safe: a model put in eval mode for validation is meant to train in train
    mode. That is the start of the epoch loop's body, or, when the `eval()` runs inside the
    batch loop itself (validation every N steps, after the step), the start of the batch
    loop's body: at the start of the epoch the steps after the first validation would still
    train in eval mode. Where the `eval()` comes before the training step in the batch
    loop's body (or in the same statement), there is no fix: where the validation ends is
    not known.

    ## References
    - [`torch.nn.Module.train`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.train)
    """

    code = "TL107"
    name = "train-mode-not-restored"
    required_words = (("backward", "manual_backward"), ("eval",))
    message = "`{model}.eval()` in the epoch loop is never undone: the next epoch trains in eval mode"

    def leave_Module(self, original_node: cst.Module) -> None:
        training = self.semantic.training
        done = set()
        for iteration in training.iterations:
            epoch = training.epoch_loop(iteration)
            if epoch is None or epoch in done:
                continue
            done.add(epoch)
            calls = self._mode_calls(epoch)
            restored = {model for model, method in calls if method == "train"}
            for (model, method), call in calls.items():
                if method == "eval" and model not in restored:
                    self.report(call, self.message.format(model=model), fix=self._fix(epoch, model, call))

    def _mode_calls(self, loop: cst.CSTNode) -> dict[tuple[str, str], cst.Call]:
        """The first ``m.eval()`` / ``m.train()`` call of each model in the loop's body, in
        source order (not those in functions defined there)."""
        found: dict[tuple[str, str], cst.Call] = {}
        model = self.semantic
        for node in model.calls_in(loop.body):
            # Module.eval() takes no argument: `evaluator.eval(input_dict)` is something else.
            method = node.func.attr.value if isinstance(node.func, cst.Attribute) else None
            if not (method == "eval" and not node.args or method == "train" and len(node.args) <= 1):
                continue
            if any(isinstance(a, cst.FunctionDef) for a in takewhile(lambda a: a is not loop.body, model.ancestors(node))):
                continue
            found.setdefault((self.context.module.code_for_node(node.func.value), method), node)
        return found

    def _fix(self, epoch: cst.For | cst.While, model: str, call: cst.Call) -> Fix | None:
        """``model.train()`` at the start of the loop whose next iteration trains after the
        ``eval()``: the batch loop that runs both the training step and the ``eval()`` (after
        the step), else the epoch loop."""
        loop, where = epoch, "epoch"
        for iteration in self.semantic.training.iterations:
            if self.semantic.training.epoch_loop(iteration) is not epoch or not self.semantic.inside(call, iteration.loop.body):
                continue
            if not isinstance(iteration.loop.body, cst.IndentedBlock):
                return None
            statements = list(iteration.loop.body.body)
            evaluated = _index_holding(statements, call, self.semantic)
            stepped = [_index_holding(statements, c, self.semantic) for c in iteration.backward_calls + iteration.steps]
            stepped = [i for i in stepped if i is not None]
            if evaluated is None or not stepped or evaluated <= min(stepped):
                return None  # eval() before the step: where its validation ends is not known
            loop, where = iteration.loop, "training step"
            break
        if not isinstance(loop.body, cst.IndentedBlock):
            return None
        first = loop.body.body[0]
        train = cst.parse_statement(f"{model}.train()\n")
        return Fix(f"Call `{model}.train()` at the start of each {where}", {first: cst.FlattenSentinel([train, first])})


def _index_holding(statements: list[cst.BaseStatement], node: cst.CSTNode, semantic) -> int | None:
    """The index of the statement of ``statements`` that holds ``node``, if one does."""
    return next((i for i, statement in enumerate(statements) if semantic.inside(node, statement)), None)
