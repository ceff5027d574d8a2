import libcst as cst

from torchlint.rule import Fix, Rule
from torchlint.semantic import Kind

MOVES = ("to", "cuda", "cpu")
# Factories whose result is a tensor.
TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
        "arange", "linspace", "eye", "stack", "cat", "zeros_like", "ones_like", "randn_like", "rand_like", "Tensor",
        "FloatTensor", "LongTensor",
    )
)


class TensorMoveDiscarded(Rule):
    """
    ## What it does
    Finds `x.to(device)`, `x.cuda()` or `x.cpu()` on a tensor as a bare statement, its result
    thrown away.

    ## Why is this bad?
    Unlike `Module.to`, which moves a module's parameters in place, `Tensor.to` returns a new
    tensor and leaves `x` where it was. The statement does nothing, and the next line that
    mixes `x` with tensors on the GPU fails with a device mismatch.

    ## Example
    ```python
    for x, y in loader:
        x.to(device)
        y.to(device)
    ```

    ## Use instead
    ```python
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
    ```

    ## Fix safety
    The fix assigns the result back (`x = x.to(device)`) and is safe: the bare statement had
    no effect, so the only change is the one that was meant. It applies to names known to
    hold tensors (built by a torch factory, or taken from a data loader); modules and objects
    of unknown type are left alone.

    ## References
    - [`torch.Tensor.to`](https://pytorch.org/docs/stable/generated/torch.Tensor.to.html)
    """

    code = "TL203"
    name = "tensor-move-discarded"
    message = "`{call}` returns a moved copy, which is thrown away: tensors do not move in place"

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in MOVES):
            return
        receiver = call.func.value
        if not isinstance(receiver, cst.Name) or not self._is_tensor(receiver):
            return
        assign = cst.Assign(targets=[cst.AssignTarget(receiver)], value=call)
        self.report(
            call,
            self.message.format(call=self.context.module.code_for_node(call)),
            fix=Fix(f"Assign the result back to `{receiver.value}`", {node: assign}),
        )

    def _is_tensor(self, name: cst.Name) -> bool:
        if self.semantic.kind(name) is not None:
            return False
        values = self.semantic.values(name)
        if values:
            return all(isinstance(v, cst.Call) and self.semantic.qualified_name(v.func) in TENSOR_FACTORIES for v in values)
        return self._from_loader(name)

    def _from_loader(self, name: cst.Name) -> bool:
        # for x, y in train_loader: / for batch in dataloader:
        for ancestor in self.semantic.ancestors(name):
            if isinstance(ancestor, cst.For) and "loader" in self.context.module.code_for_node(ancestor.iter).lower():
                targets = ancestor.target.elements if isinstance(ancestor.target, (cst.Tuple, cst.List)) else [ancestor.target]
                if any(isinstance(getattr(t, "value", t), cst.Name) and getattr(t, "value", t).value == name.value for t in targets):
                    return True
        return False
