import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic.execution_order import with_import_first
from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import calls_one_of, is_one, single_argument, torch_function

LOG = frozenset({"torch.log"})


class Log1p(TorchRule):
    """
    ## What it does
    Finds `torch.log(1 + x)` and `torch.log(x + 1)` (with `1` or `1.0`), however `torch.log`
    is imported or referenced. NumPy's and `math`'s `log` are other functions and are left
    alone. Replaces TorchFix's TOR106.

    Opt-in: on real code most `log(x + 1)` take the log of counts or distances (node
    degrees, integer positions), which are never small fractions, so `log1p` gains nothing
    there (2 of 5 findings on the ecosystem corpus were worth changing).

    ## Why is this bad?
    For small `x`, `1 + x` rounds away most of `x`'s digits before the logarithm is taken
    (in float32, `1 + 1e-8` is exactly `1`, so the result is `0`); `torch.log1p(x)` computes
    the same function without forming `1 + x` and keeps full precision.

    ## Example
    ```python
    y = torch.log(1 + x)
    ```

    ## Use instead
    ```python
    y = torch.log1p(x)
    ```

    ## Fix safety
    The fix writes `torch.log1p(x)` and is unsafe: it computes the same function, but its
    results differ from the old ones in the last bits (they are more accurate), which can
    change a test's expected values or a bit-for-bit reproduction. Where the name it writes
    (`torch`, or the file's alias) is bound only after that code runs (a notebook cell
    before the one that imports torch), the fix adds the file's own import of it at the
    start of that cell, after the cell's own imports, and offers nothing where a function
    there binds that name itself.

    ## References
    - [`torch.log1p`](https://pytorch.org/docs/stable/generated/torch.log1p.html)
    """

    code = "TL605"
    name = "log1p"
    opt_in = True
    required_words = (("log",),)
    message = "`torch.log(1 + x)` loses precision for small `x`; use `torch.log1p(x)`"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A call of one argument, a sum with the literal 1."""
        return super().candidate(module) and any(
            len(n.args) == 1 and not n.keywords and isinstance(n.args[0], ast.BinOp) and isinstance(n.args[0].op, ast.Add)
            and (_is_one(n.args[0].left) or _is_one(n.args[0].right))
            for n in module.nodes(ast.Call)
        )

    def visit_Call(self, node: cst.Call) -> None:
        value = single_argument(node)
        if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, cst.Add):
            return
        if is_one(value.left):
            x = value.right
        elif is_one(value.right):
            x = value.left
        else:
            return
        if calls_one_of(self.semantic, node, LOG) is None:
            return
        fix = None
        func = torch_function(self.semantic, node.func, "log1p")
        if func is not None:
            new = node.with_changes(func=func, args=[cst.Arg(x.with_changes(lpar=[], rpar=[]) if _bare(x) else x)])
            changes = with_import_first(self.semantic, {node: new}, func.value.value, [node])
            fix = Fix("Use `torch.log1p`", changes, Applicability.UNSAFE) if changes is not None else None
        self.report(node, fix=fix)


def _bare(expr: cst.BaseExpression) -> bool:
    """Whether ``expr``'s own parentheses can go once it stands alone as an argument."""
    return bool(getattr(expr, "lpar", None)) and not isinstance(expr, (cst.Tuple, cst.GeneratorExp, cst.Yield))


def _is_one(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value == 1
