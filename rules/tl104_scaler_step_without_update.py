import libcst as cst

from torchlint.rule import Fix
from torchlint.semantic import Kind
from torchlint.torch_rule import TorchRule


class ScalerStepWithoutUpdate(TorchRule):
    """
    ## What it does
    Finds `scaler.step(optimizer)` on a `GradScaler` with no `scaler.update()` after it in
    the same loop (or function).

    ## Why is this bad?
    `update()` adjusts the loss scale: it lowers it after a step with inf/NaN gradients and
    raises it again after a run of good steps. Without it the scale never changes, so a
    scale that overflows once makes every later step skip, and the model stops learning.

    ## Example
    ```python
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    ```

    ## Use instead
    ```python
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    ```

    ## Fix safety
    The fix inserts `scaler.update()` right after the step and is safe: that is where the
    AMP recipe calls it, once per iteration.

    ## References
    - [Automatic mixed precision recipe](https://pytorch.org/tutorials/recipes/recipes/amp_recipe.html)
    """

    code = "TL104"
    name = "scaler-step-without-update"
    required_words = (("step",), ("GradScaler",))
    message = "`{scaler}.step(...)` without `{scaler}.update()` afterwards: the loss scale never adapts"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "step" and node.args):
            return
        if self.semantic.kind(func.value) is not Kind.SCALER:
            return
        scaler = self.context.module.code_for_node(func.value)
        scope = next(
            (a for a in self.semantic.ancestors(node) if isinstance(a, (cst.For, cst.While, cst.FunctionDef, cst.Module))), None
        )
        if scope is None or f"{scaler}.update(" in self.context.module.code_for_node(scope):
            return
        statement = next((a for a in self.semantic.ancestors(node) if isinstance(a, cst.SimpleStatementLine)), None)
        fix = None
        if statement is not None:
            update = cst.parse_statement(f"{scaler}.update()\n")
            fix = Fix(f"Call `{scaler}.update()` after the step", {statement: cst.FlattenSentinel([statement, update])})
        self.report(node, self.message.format(scaler=scaler), fix=fix)
