import libcst as cst

from torchlint.torch_rule import TorchRule


class StepBeforeBackward(TorchRule):
    """
    ## What it does
    Finds an unconditional `optimizer.step()` that comes before every `backward()` of its
    training iteration (a `step(closure)` is not such a step).

    ## Why is this bad?
    The step applies the gradients of the previous iteration (or none at all on the first),
    so every update lags one batch behind, and together with `zero_grad()` after the
    backward pass it updates with nothing.

    ## Example
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        optimizer.step()
        loss = criterion(model(x), y)
        loss.backward()
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
    There is no fix: the statements between the step and the backward pass may depend on the
    order.

    ## References
    - [Optimizing model parameters](https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html)
    """

    code = "TL102"
    name = "step-before-backward"
    required_words = (("backward", "manual_backward"), ("step", "optimizer_step"))
    message = "`step()` runs before `backward()` in the iteration: it applies the previous batch's gradients"

    def leave_Module(self, original_node: cst.Module) -> None:
        start = self.semantic.start_key
        for iteration in self.semantic.training.iterations:
            first_backward = min(start(b) for b in iteration.backward_calls)
            for step in iteration.steps:
                if start(step) < first_backward and not self._conditional(step, iteration.loop):
                    self.report(step)

    def _conditional(self, node: cst.CSTNode, loop: cst.CSTNode) -> bool:
        # A step under an `if` inside the loop is usually accumulation that steps for the
        # previous N batches at the top of the next one.
        for ancestor in self.semantic.ancestors(node):
            if ancestor is loop:
                return False
            if isinstance(ancestor, (cst.If, cst.Try)):
                return True
        return False
