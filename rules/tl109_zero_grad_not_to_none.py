import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic import Kind
from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import is_literal, keyword, positional


class ZeroGradNotToNone(TorchRule):
    """
    ## What it does
    Finds `zero_grad(set_to_none=False)` on an optimizer or a module: any receiver given the
    keyword (`set_to_none` is torch's own parameter name), and `zero_grad(False)` on a
    known optimizer or `nn.Module`. Replaces TorchFix's TOR402.

    Opt-in: on public code, 5 of 17 such calls needed the zeros (CUDA-graph capture, which
    replays into gradient buffers allocated beforehand; a test of zero_grad's own behaviour;
    code that passes the user's choice on), and nothing in the call tells them apart
    (`ecosystem/torchfix.md`, precision on real code).

    ## Why is this bad?
    Filling every gradient with zeros costs a kernel launch and a full pass over the
    gradient memory per parameter at every step, and keeps that memory allocated between
    steps. Setting them to `None` (the default since PyTorch 2.0) costs nothing, and the
    next backward pass allocates fresh gradients; optimizers skip parameters whose
    gradient is `None`.

    ## Example
    ```python
    optimizer.zero_grad(set_to_none=False)
    ```

    ## Use instead
    ```python
    optimizer.zero_grad()
    ```

    ## Fix safety
    The fix removes the argument and is unsafe: gradients become `None` instead of zero
    tensors, so code that reads `p.grad` between `zero_grad()` and the next backward pass
    (gradient norms, logging, `p.grad.add_(...)`), or a parameter that the next backward
    pass does not reach, then sees `None` (and an optimizer skips that parameter, where with
    zeros its momentum and weight decay still applied).

    ## References
    - [`torch.optim.Optimizer.zero_grad`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    - [Performance tuning guide](https://pytorch.org/tutorials/recipes/recipes/tuning_guide.html)
    """

    code = "TL109"
    opt_in = True
    name = "zero-grad-not-to-none"
    required_words = (("zero_grad",),)
    message = "`zero_grad(set_to_none=False)` writes zeros into every gradient; let it set them to `None`"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A call of ``X.zero_grad`` with one argument."""
        return super().candidate(module) and any(
            isinstance(n.func, ast.Attribute) and n.func.attr == "zero_grad" and len(n.args) + len(n.keywords) == 1
            for n in module.nodes(ast.Call)
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "zero_grad") or len(node.args) != 1:
            return
        arg = keyword(node, "set_to_none")
        if arg is None:
            given = positional(node)
            if len(given) != 1 or given[0].star or self.semantic.kind(func.value) not in (Kind.OPTIMIZER, Kind.MODULE):
                return
            arg = given[0]
        if not is_literal(arg.value, "False"):
            return
        fix = Fix("Remove `set_to_none=False`", {node: node.with_changes(args=[])}, Applicability.UNSAFE)
        self.report(node, fix=fix)
