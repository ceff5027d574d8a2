import libcst as cst

from torchlint.rule import Fix
from torchlint.torch_rule import TorchRule

AUTOCAST = (
    "torch.autocast",
    "torch.amp.autocast",
    "torch.cuda.amp.autocast",
    "torch.cpu.amp.autocast",
    "torch.amp.autocast_mode.autocast",
)


class BackwardInAutocast(TorchRule):
    """
    ## What it does
    Finds `backward()` or `scaler.step(...)` inside an `autocast` block.

    ## Why is this bad?
    Autocast is meant for the forward pass and the loss only. The backward pass already runs
    each op in the dtype its forward op chose; running it under autocast as well is not
    recommended by PyTorch and can cast gradients needlessly, and the optimizer step must
    see full-precision parameters and gradients.

    ## Example
    ```python
    with torch.autocast("cuda"):
        loss = criterion(model(x), y)
        scaler.scale(loss).backward()
    ```

    ## Use instead
    ```python
    with torch.autocast("cuda"):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    ```

    ## Fix safety
    The fix moves the statement holding the backward pass, and every statement after it in
    the block, out of the `with` (dedents them). It is safe: those statements only lose the
    autocast context, which is what the AMP recipe prescribes. When the backward pass is the
    block's first statement there is no fix.

    ## References
    - [Automatic mixed precision: autocast](https://pytorch.org/docs/stable/amp.html#autocasting)
    """

    code = "TL105"
    name = "backward-in-autocast"
    required_words = (("backward", "step"), ("autocast",))
    message = "`{call}` inside an `autocast` block; autocast should cover only the forward pass and the loss"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("backward", "step"):
            return
        if func.attr.value == "step" and "scaler" not in self.context.module.code_for_node(func.value).lower():
            return
        block = None
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return
            if isinstance(ancestor, cst.With) and any(self._is_autocast(item.item) for item in ancestor.items):
                block = ancestor
                break
        if block is None:
            return
        label = "backward()" if func.attr.value == "backward" else "scaler.step(...)"
        self.report(node, self.message.format(call=label), fix=self._fix(block, node))

    def _is_autocast(self, expr: cst.BaseExpression) -> bool:
        return isinstance(expr, cst.Call) and self.semantic.qualified_name(expr.func) in AUTOCAST

    def _fix(self, block: cst.With, node: cst.CSTNode) -> Fix | None:
        if not isinstance(block.body, cst.IndentedBlock):
            return None
        statements = list(block.body.body)
        ancestors = set(map(id, self.semantic.ancestors(node)))
        index = next((i for i, s in enumerate(statements) if id(s) in ancestors), None)
        if not index:  # not found, or the first statement: the block would be empty
            return None
        kept = block.with_changes(body=block.body.with_changes(body=statements[:index]))
        return Fix("Move the backward pass out of the `autocast` block", {block: cst.FlattenSentinel([kept, *statements[index:]])})
