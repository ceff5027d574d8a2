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
    The fix inserts `model.train()` at the start of the epoch loop's body and is safe: a
    model put in eval mode for validation is meant to train in train mode.

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
                    self.report(call, self.message.format(model=model), fix=self._fix(epoch, model))

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

    def _fix(self, loop: cst.For | cst.While, model: str) -> Fix | None:
        if not isinstance(loop.body, cst.IndentedBlock):
            return None
        first = loop.body.body[0]
        train = cst.parse_statement(f"{model}.train()\n")
        return Fix(f"Call `{model}.train()` at the start of each epoch", {first: cst.FlattenSentinel([train, first])})
