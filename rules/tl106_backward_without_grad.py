import libcst as cst

from torchlint.torch_rule import TorchRule


class BackwardWithoutGrad(TorchRule):
    """
    ## What it does
    Finds `backward()` called inside `torch.no_grad()` or `torch.inference_mode()`, as a
    `with` block or a decorator of the enclosing function, on a loss computed there too. A
    loss computed before the block (d2l's `with torch.no_grad(): loss.backward()` followed by
    the clipping and the step) or given by the caller has its graph: its backward works.

    ## Why is this bad?
    Under `no_grad` no autograd graph is recorded, so the loss has no `grad_fn` and
    `backward()` raises `RuntimeError: element 0 of tensors does not require grad`; under
    `inference_mode` the tensors cannot even be used in autograd later.

    ## Example
    ```python
    with torch.no_grad():
        loss = criterion(model(x), y)
        loss.backward()
    ```

    ## Use instead
    ```python
    loss = criterion(model(x), y)
    loss.backward()
    ```

    ## Fix safety
    There is no fix: which statements were meant to run without gradients is for the author
    to decide.

    ## References
    - [Locally disabling gradient computation](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    code = "TL106"
    name = "backward-without-grad"
    required_words = (("backward",), ("no_grad", "inference_mode"))
    message = "`backward()` inside `{context}`: no graph is recorded there, so there is nothing to differentiate"

    def visit_Call(self, node: cst.Call) -> None:
        if not (isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward"):
            return
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, cst.With):
                if any(self._enables_grad(item.item) for item in ancestor.items):
                    return  # `with torch.enable_grad():` inside the no_grad block
                for item in ancestor.items:
                    context = self.semantic.grad_off_context(item.item)
                    if context:
                        if self._built_inside(node.func.value, ancestor):
                            self.report(node, self.message.format(context=context))
                        return
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                for decorator in getattr(ancestor, "decorators", ()):
                    context = self.semantic.grad_off_context(decorator.decorator)
                    if context:
                        if self._built_inside(node.func.value, ancestor):
                            self.report(node, self.message.format(context=context))
                        return
                return

    def _built_inside(self, loss: cst.BaseExpression, region: cst.CSTNode) -> bool:
        """Whether the tensor ``backward()`` is called on is computed in ``region`` (the
        gradient-free block or function): an expression there, or a name whose every value
        that reaches the call is assigned there. A name bound elsewhere (before the block, a
        parameter) has the graph of where it was computed."""
        if not isinstance(loss, (cst.Name, cst.Attribute)):
            return True  # `criterion(model(x), y).backward()`
        values = self.semantic.values(loss)
        return bool(values) and all(self.semantic.inside(v, region) for v in values)

    def _enables_grad(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        name = self.semantic.qualified_name(target)
        return name == "torch.enable_grad" or (name == "torch.set_grad_enabled" and "True" in self.context.module.code_for_node(expr))
