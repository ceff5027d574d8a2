import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic.execution_order import with_import_first
from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import calls_one_of, is_one, single_argument, torch_function

EXP = frozenset({"torch.exp"})


class Expm1(TorchRule):
    """
    ## What it does
    Finds `torch.exp(x) - 1` (with `1` or `1.0`), however `torch.exp` is imported or
    referenced. NumPy's and `math`'s `exp` are other functions and are left alone.
    Replaces TorchFix's TOR107.

    ## Why is this bad?
    For small `x`, `exp(x)` is close to `1` and the subtraction cancels most of its
    significant digits (in float32, `torch.exp(x) - 1` is `0` for `x = 1e-8`);
    `torch.expm1(x)` computes the same function without the cancellation.

    ## Example
    ```python
    y = torch.exp(x) - 1
    ```

    ## Use instead
    ```python
    y = torch.expm1(x)
    ```

    ## Fix safety
    The fix writes `torch.expm1(x)` and is unsafe: it computes the same function, but its
    results differ from the old ones in the last bits (they are more accurate), which can
    change a test's expected values or a bit-for-bit reproduction. Where the name it writes
    (`torch`, or the file's alias) is bound only after that code runs (a notebook cell
    before the one that imports torch), the fix adds the file's own import of it at the
    start of that cell, after the cell's own imports, and offers nothing where a function
    there binds that name itself.

    ## References
    - [`torch.expm1`](https://pytorch.org/docs/stable/generated/torch.expm1.html)
    """

    code = "TL606"
    name = "expm1"
    required_words = (("exp",),)
    message = "`torch.exp(x) - 1` loses precision for small `x`; use `torch.expm1(x)`"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A call minus the literal 1."""
        return super().candidate(module) and any(
            isinstance(n.op, ast.Sub) and isinstance(n.left, ast.Call) and _is_one(n.right) for n in module.nodes(ast.BinOp)
        )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if not isinstance(node.operator, cst.Subtract) or not is_one(node.right) or not isinstance(node.left, cst.Call):
            return
        call = node.left
        if single_argument(call) is None or calls_one_of(self.semantic, call, EXP) is None:
            return
        fix = None
        func = torch_function(self.semantic, call.func, "expm1")
        if func is not None:
            new = call.with_changes(func=func, lpar=node.lpar, rpar=node.rpar)
            changes = with_import_first(self.semantic, {node: new}, func.value.value, [node])
            fix = Fix("Use `torch.expm1`", changes, Applicability.UNSAFE) if changes is not None else None
        self.report(node, fix=fix)


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1
