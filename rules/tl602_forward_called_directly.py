import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic import Kind
from torchlint.torch_rule import TorchRule


class ForwardCalledDirectly(TorchRule):
    """
    ## What it does
    Finds `m.forward(x)` where `m` is a known `nn.Module` (OpenCV's `net.forward()` and other
    objects of unknown type are left alone, and so is `super().forward(x)`). Inside a test
    function (`test_*`, as pytest and unittest name them, or a `_test_*` helper of a test class) calling `forward` is left alone: a
    test exercises `forward`'s own arguments on purpose.

    ## Why is this bad?
    Calling `forward` directly skips `Module.__call__`: forward pre-hooks and hooks do not
    run, so anything built on them (pruning, quantization observers, `torch.utils.hooks`,
    profilers, FSDP and DDP bookkeeping) silently does nothing.

    ## Example
    ```python
    logits = model.forward(x)
    ```

    ## Use instead
    ```python
    logits = model(x)
    ```

    ## Fix safety
    The fix calls the module instead and is unsafe: hooks that were skipped before now run,
    which is the point, but changes behaviour where hooks are registered.

    ## References
    - [`torch.nn.Module.__call__` and hooks](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_forward_hook)
    """

    code = "TL602"
    name = "forward-called-directly"
    required_words = (("forward",),)
    message = "`{module}.forward(...)` skips the module's hooks; call `{module}(...)`"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A call of ``X.forward(...)`` where ``X`` is not ``self``."""
        return super().candidate(module) and any(
            isinstance(n.func, ast.Attribute) and n.func.attr == "forward" and not _is_self(n.func.value)
            for n in module.nodes(ast.Call)
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "forward"):
            return
        receiver = func.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            return  # self.forward inside the class: the caller already went through __call__
        if self._in_test(node) or self.semantic.kind(receiver) is not Kind.MODULE:
            return
        name = self.context.module.code_for_node(receiver)
        fix = Fix(f"Call `{name}(...)`", {node: node.with_changes(func=receiver)}, Applicability.UNSAFE)
        self.report(node, self.message.format(module=name), fix=fix)

    def _in_test(self, node: cst.CSTNode) -> bool:
        function = self.semantic.enclosing_function(node)
        while function is not None:
            if function.name.value.lstrip("_").startswith("test"):
                return True
            function = self.semantic.enclosing_function(function)
        return False


def _is_self(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Name) and expr.id == "self"
