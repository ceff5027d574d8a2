import libcst as cst

from torchlint.rule import Fix, Rule


class InferenceWithGrad(Rule):
    """
    ## What it does
    Finds evaluation or inference code (the same scopes as TL401) that runs a model with
    gradients enabled: no `torch.no_grad()`, `torch.inference_mode()` or
    `torch.set_grad_enabled(False)` around it, as a `with` block or a decorator, there or at
    every call of the evaluation function in the file. Lightning's evaluation hooks are left
    alone.

    ## Why is this bad?
    With gradients on, every forward pass records its autograd graph and keeps all
    activations for a backward pass that never comes: evaluation uses several times the
    memory it needs (often the cause of out-of-memory errors at validation time) and runs
    slower. Any output that is kept also keeps its graph alive.

    ## Example
    ```python
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(1) for x, _ in loader]
    ```

    ## Use instead
    ```python
    @torch.no_grad()
    def evaluate(model, loader):
        model.eval()
        return [model(x).argmax(1) for x, _ in loader]
    ```

    ## Fix safety
    The fix decorates an evaluation function with `@torch.no_grad()`, or wraps an evaluation
    loop in `with torch.no_grad():`, using the file's own name for `torch`. It is safe: the
    code computes no gradients there, so only the recorded graphs go. There is no fix where
    `torch` itself is not imported.

    ## References
    - [`torch.no_grad`](https://pytorch.org/docs/stable/generated/torch.no_grad.html)
    - [`torch.inference_mode`](https://pytorch.org/docs/stable/generated/torch.autograd.grad_mode.inference_mode.html)
    """

    code = "TL402"
    name = "inference-with-grad"
    message = "evaluation runs `{model}` with gradients enabled; use `torch.no_grad()` or `torch.inference_mode()`"

    def leave_Module(self, original_node: cst.Module) -> None:
        evaluation = self.semantic.evaluation
        for scope in evaluation.scopes:
            if evaluation.grad_disabled(scope.forward):
                continue
            model = self.context.module.code_for_node(scope.model)
            self.report(scope.forward, self.message.format(model=model), fix=self._fix(scope.node))

    def _fix(self, node) -> Fix | None:
        torch = self.semantic.torch_alias
        if torch is None:
            return None
        if isinstance(node, cst.FunctionDef):
            decorator = cst.Decorator(cst.parse_expression(f"{torch}.no_grad()"))
            return Fix(f"Decorate with `@{torch}.no_grad()`", {node: node.with_changes(decorators=[*node.decorators, decorator])})
        block = cst.With(
            items=[cst.WithItem(cst.parse_expression(f"{torch}.no_grad()"))],
            body=cst.IndentedBlock(body=[node.with_changes(leading_lines=[])]),
            leading_lines=node.leading_lines,
        )
        return Fix(f"Wrap the loop in `with {torch}.no_grad():`", {node: block})
