import libcst as cst

from torchlint.rule import Fix, Rule
from torchlint.semantic.training import code


class MissingZeroGrad(Rule):
    """
    ## What it does
    Finds a training loop that runs `backward()` and `optimizer.step()` but never clears the
    gradients: no `optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None` or same-file
    helper that does it, anywhere in the iteration.

    ## Why is this bad?
    `backward()` adds to `.grad`; it does not overwrite it. Without clearing, every step uses
    the sum of all gradients so far, so updates grow without bound and training diverges or
    stalls. Gradient accumulation clears every N steps and is fine; so is clearing at the end
    of the iteration, or a framework that owns the loop (Lightning's `training_step`).

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    The fix inserts `<optimizer>.zero_grad()` as the first statement of the iteration, for
    the optimizer that steps there. It is safe: a loop that never clears gradients is never
    what was meant, and clearing before the forward pass cannot drop a gradient that a later
    step of the same iteration uses.

    ## References
    - [`torch.optim.Optimizer.zero_grad`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    - [Zeroing out gradients in PyTorch](https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html)
    """

    code = "TL101"
    name = "missing-zero-grad"
    message = "`{optimizer}.step()` in a loop that never clears gradients; they accumulate across iterations"

    def leave_Module(self, original_node: cst.Module) -> None:
        for iteration in self.semantic.training.iterations:
            cleared = {code(c.func.value) for c in iteration.clears if isinstance(c, cst.Call) and isinstance(c.func, cst.Attribute)}
            clears_everything = any(
                not isinstance(c, cst.Call) or not isinstance(c.func, cst.Attribute) or self._clears_all(c) for c in iteration.clears
            )
            if clears_everything:
                continue
            reported = set()
            for step, optimizer in zip(iteration.steps, iteration.stepped_optimizers()):
                name = code(optimizer)
                if name in cleared or name in reported:
                    continue
                reported.add(name)
                self.report(step, self.message.format(optimizer=name), fix=self._fix(iteration.loop, optimizer))

    def _clears_all(self, call: cst.Call) -> bool:
        # model.zero_grad() (a module, or anything not known to be an optimizer) and helpers
        # clear whatever the optimizer holds; an optimizer's zero_grad() only its own.
        from torchlint.semantic import Kind

        if call.func.attr.value != "zero_grad":
            return True
        return self.semantic.kind(call.func.value) is not Kind.OPTIMIZER and "opt" not in code(call.func.value).lower()

    def _fix(self, loop: cst.For | cst.While, optimizer: cst.BaseExpression) -> Fix | None:
        if not isinstance(loop.body, cst.IndentedBlock) or not loop.body.body:
            return None
        first = loop.body.body[0]
        clear = cst.parse_statement(f"{code(optimizer)}.zero_grad()\n")
        return Fix(f"Call `{code(optimizer)}.zero_grad()` at the start of the iteration", {first: cst.FlattenSentinel([clear, first])})
