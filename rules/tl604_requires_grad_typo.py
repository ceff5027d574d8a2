import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic import Kind
from torchlint.torch_rule import TorchRule

TYPO = "require_grad"


class RequiresGradTypo(TorchRule):
    """
    ## What it does
    Finds assignments to `.require_grad` (`p.require_grad = False`), the common misspelling
    of `requires_grad`. A file that also reads `.require_grad` somewhere is left alone: there
    the attribute is the code's own, set and read on purpose. Replaces TorchFix's TOR002.

    ## Why is this bad?
    Python lets any attribute be set on a tensor or a module, so the typo raises nothing:
    it creates a new attribute nobody reads, and the parameters meant to be frozen keep
    training (or those meant to train stay frozen).

    ## Example
    ```python
    for p in model.backbone.parameters():
        p.require_grad = False
    ```

    ## Use instead
    ```python
    for p in model.backbone.parameters():
        p.requires_grad = False
    ```

    ## Fix safety
    The fix is unsafe: it changes what trains, which is the point but changes the results,
    and setting `requires_grad` on a tensor that is not a leaf of the autograd graph raises
    a `RuntimeError` where the typo did nothing. On a known `nn.Module`, where
    `module.requires_grad = False` would be the same no-op under the right name, the fix
    calls `module.requires_grad_(value)`, which sets the flag on every parameter.

    ## References
    - [Excluding subgraphs from backward](https://pytorch.org/docs/stable/notes/autograd.html#locally-disabling-gradient-computation)
    """

    code = "TL604"
    name = "requires-grad-typo"
    required_words = ((TYPO,),)
    message = "`.require_grad` is a typo of `.requires_grad`: the flag is not set"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """An assignment to ``X.require_grad``, and no read of it."""
        stores = loads = 0
        for node in module.nodes(ast.Attribute):
            if node.attr == TYPO:
                if isinstance(node.ctx, ast.Store):
                    stores += 1
                else:
                    loads += 1
        return super().candidate(module) and stores > 0 and loads == 0

    def __init__(self, context) -> None:
        super().__init__(context)
        self._assigned: list[tuple[cst.Assign, cst.Attribute]] = []
        self._read = False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Attribute) and target.target.attr.value == TYPO:
                self._assigned.append((node, target.target))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == TYPO and not isinstance(self.semantic.parent(node), (cst.AssignTarget, cst.Del)):
            self._read = True

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._read:
            return
        for assign, target in self._assigned:
            if len(assign.targets) == 1 and self.semantic.kind(target.value) is Kind.MODULE:
                call = cst.Call(
                    func=target.with_changes(attr=cst.Name("requires_grad_")), args=[cst.Arg(assign.value)]
                )
                fix = Fix("Call `requires_grad_(...)` on the module", {assign: cst.Expr(call)}, Applicability.UNSAFE)
            else:
                fix = Fix("Assign `.requires_grad`", {target.attr: cst.Name("requires_grad")}, Applicability.UNSAFE)
            self.report(target, fix=fix)
