import libcst as cst

from torchlint.rule import Applicability, Fix, Rule

# NumPy functions with a torch function of the same meaning and call shape.
TORCH_EQUIVALENT = {
    "mean": "mean", "sum": "sum", "abs": "abs", "sqrt": "sqrt", "exp": "exp", "log": "log", "square": "square",
    "maximum": "maximum", "minimum": "minimum", "clip": "clamp", "power": "pow", "tanh": "tanh", "log1p": "log1p",
    "sigmoid": "sigmoid", "max": "amax", "min": "amin", "dot": "dot", "matmul": "matmul",
}
# Methods that leave the autograd graph on the way to NumPy.
DETACHING = ("numpy", "detach", "cpu")
WRAPPERS = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.FloatTensor")


class NumpyInLoss(Rule):
    """
    ## What it does
    Finds a loss that a backward pass runs on but that was computed through NumPy:
    `.numpy()` or `np.*` calls on model outputs, usually re-wrapped with
    `torch.tensor(..., requires_grad=True)` so that `backward()` does not complain. NumPy used
    for metrics and logging on detached values is left alone.

    ## Why is this bad?
    NumPy arrays have no autograd graph. The loss is a new leaf tensor: `backward()` runs,
    but no gradient reaches the model's parameters, so the optimizer steps with zero or
    stale gradients and the model never learns.

    ## Example
    ```python
    pred = model(x)
    loss = torch.tensor(np.mean((pred.detach().numpy() - y.numpy()) ** 2), requires_grad=True)
    loss.backward()
    ```

    ## Use instead
    ```python
    pred = model(x)
    loss = torch.mean((pred - y) ** 2)
    loss.backward()
    ```

    ## Fix safety
    When every NumPy call on the path has a torch equivalent (`np.mean` → `torch.mean`,
    `np.clip` → `torch.clamp`, ...) the fix rewrites the loss in torch: the `np.` calls
    become `torch.` calls, `.numpy()`, `.detach()` and `.cpu()` on the path are removed, and a
    `torch.tensor(..., requires_grad=True)` re-wrap is dropped. It is unsafe: NumPy and torch
    differ in dtype promotion and some keyword names (`axis` / `dim`), so the numbers can
    change slightly. Otherwise it reports only.

    ## References
    - [Autograd mechanics](https://pytorch.org/docs/stable/notes/autograd.html)
    """

    code = "TL601"
    name = "numpy-in-loss"
    message = "loss `{loss}` is computed through NumPy: no gradient reaches the model"

    def leave_Module(self, original_node: cst.Module) -> None:
        training = self.semantic.training
        seen = set()
        for call, loss in training.backward_calls.items():
            if not isinstance(loss, cst.Name) or loss.value in seen:
                continue
            for value in self.semantic.values(loss):
                if self._through_numpy(value):
                    seen.add(loss.value)
                    self.report(value, self.message.format(loss=loss.value), fix=self._fix(value))
                    break

    def _through_numpy(self, expr: cst.CSTNode) -> bool:
        found = False
        semantic = self.semantic

        class Find(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                nonlocal found
                func = node.func
                qname = semantic.qualified_name(func) or ""
                if qname.startswith("numpy.") or (isinstance(func, cst.Attribute) and func.attr.value == "numpy"):
                    found = True

        expr.visit(Find())
        return found

    def _fix(self, value: cst.BaseExpression) -> Fix | None:
        torch = self.semantic.torch_alias
        if torch is None:
            return None
        rewriter = _ToTorch(self.semantic, torch)
        new = value.visit(rewriter)
        if rewriter.unmapped:
            return None
        return Fix("Compute the loss with torch operations", {value: new}, Applicability.UNSAFE)


class _ToTorch(cst.CSTTransformer):
    def __init__(self, semantic, torch: str) -> None:
        super().__init__()
        self.semantic = semantic
        self.torch = torch
        self.unmapped = False

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        qname = self.semantic.qualified_name(func) or ""
        if isinstance(func, cst.Attribute) and func.attr.value in DETACHING and not original_node.args:
            return updated_node.func.value  # x.detach().numpy() -> x
        if qname.startswith("numpy."):
            name = qname.split(".", 1)[1]
            if name not in TORCH_EQUIVALENT or any(a.keyword is not None for a in original_node.args):
                self.unmapped = True
                return updated_node
            return updated_node.with_changes(func=cst.parse_expression(f"{self.torch}.{TORCH_EQUIVALENT[name]}"))
        if qname in WRAPPERS and updated_node.args:
            keywords = [a for a in updated_node.args[1:] if a.keyword is None or a.keyword.value not in ("requires_grad", "dtype", "device")]
            if not keywords:
                return updated_node.args[0].value  # torch.tensor(x, requires_grad=True) -> x
        return updated_node
