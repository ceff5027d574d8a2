import libcst as cst

from torchlint.semantic.frameworks import TorchRule


class ZeroGradBeforeStep(TorchRule):
    """
    ## What it does
    Finds gradients cleared (`zero_grad()`, `p.grad = None`) between `backward()` and the
    optimizer's `step()` in a training iteration.

    ## Why is this bad?
    The step then sees no gradients (or zeros): nothing is ever updated, and the loss stays
    where it started while everything appears to run.

    ## Example
    ```python
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    ```

    ## Use instead
    ```python
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    ```

    ## Fix safety
    There is no fix: moving the clear is right in most loops, but where it belongs depends on
    the accumulation the author intended.

    ## References
    - [Zeroing out gradients in PyTorch](https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html)
    """

    code = "TL108"
    name = "zero-grad-before-step"
    required_words = (("backward", "manual_backward"), ("step", "optimizer_step"), ("~grad",))
    message = "gradients are cleared after `backward()` and before `step()`: the step sees no gradients"

    def leave_Module(self, original_node: cst.Module) -> None:
        start = self.semantic.start_key
        for iteration in self.semantic.training.iterations:
            backwards = sorted(start(b) for b in iteration.backward_calls)
            steps = sorted(start(s) for s in iteration.steps)
            for clear in iteration.clears:
                at = start(clear)
                # A backward before the clear, a step after it, and no backward in between.
                if any(b < at for b in backwards) and any(
                    s > at and not any(at < b < s for b in backwards) for s in steps
                ):
                    self.report(clear)
