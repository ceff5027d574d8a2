import libcst as cst

from torchlint.torch_rule import TorchRule
from torchlint.semantic.training import code


class ZeroGradBeforeStep(TorchRule):
    """
    ## What it does
    Finds gradients cleared (`zero_grad()`, `p.grad = None`) between `backward()` and the
    optimizer's `step()` in a training iteration: the stepped optimizer's own `zero_grad()`,
    or a clear that names no optimizer (`model.zero_grad()`, `p.grad = None`) in an
    iteration that steps one optimizer. Where several are stepped (a reference model trained
    beside the one tested, bf16 copies whose gradients were handed to fp32 weights), such a
    clear may be another model's, and is left alone, as is `p.grad = None` under a condition
    that picks some parameters in the loop over them (freezing a layer for a few iterations,
    as SwAV does with its prototypes); `if p.grad is not None:` picks every one that has a
    gradient, and is reported.

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
            steps = [(start(s), code(o)) for s, o in zip(iteration.steps, iteration.stepped_optimizers())]
            stepped = {optimizer for _, optimizer in steps}
            for clear in iteration.clears:
                at = start(clear)
                # A backward before the clear, a step after it, and no backward in between:
                # the clear's own optimizer's step, or, where the clear names no optimizer
                # stepped here (`model.zero_grad()`, `p.grad = None`), the one optimizer
                # stepped in the iteration. With several, the clear may be another model's
                # (a reference model's, bf16 copies after their gradients went to fp32 ones).
                later = {o for s, o in steps if s > at and not any(at < b < s for b in backwards)}
                if not later or not any(b < at for b in backwards):
                    continue
                if self._selective(clear):
                    continue
                cleared = _cleared(clear)
                if cleared in later or (cleared not in stepped and len(stepped) == 1):
                    self.report(clear)

    def _selective(self, clear: cst.CSTNode) -> bool:
        """A ``p.grad = None`` (or ``del``, ``*= 0``) under an ``if`` inside the loop over the
        parameters: only the parameters it picks lose their gradient (SwAV freezes its
        prototypes for the first iterations so), on purpose."""
        if isinstance(clear, cst.Call):
            return False
        for ancestor in self.semantic.ancestors(clear):
            if isinstance(ancestor, (cst.If, cst.IfExp)):
                # (`if p.grad is not None:` picks every parameter that has one)
                return ".grad" not in self.context.module.code_for_node(ancestor.test)
            if isinstance(ancestor, (cst.For, cst.While, cst.FunctionDef)):
                return False
        return False


def _cleared(clear: cst.CSTNode) -> str | None:
    """``optimizer`` for ``optimizer.zero_grad()``; None for a clear that is no method call
    (``p.grad = None``, a helper)."""
    if isinstance(clear, cst.Call) and isinstance(clear.func, cst.Attribute):
        return code(clear.func.value)
    return None
