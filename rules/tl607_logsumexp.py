import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic.execution_order import with_import_first
from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import calls_one_of, keyword, positional, single_argument, torch_function

LOG = frozenset({"torch.log"})
SUM = frozenset({"torch.sum"})
EXP = frozenset({"torch.exp"})


class Logsumexp(TorchRule):
    """
    ## What it does
    Finds `torch.log(torch.sum(torch.exp(x), dim))` and `torch.log(torch.exp(x).sum(dim))`,
    however the functions are imported or referenced, when the sum runs over given
    dimensions (`torch.logsumexp` needs them: a sum over every element, or `dim=None`, is
    left alone, as TorchFix does), and not where the exponent is a difference
    (`torch.exp(x - x_max)`: stabilized by hand, the usual way), written in place or bound
    to the name the exponent reads (`shifted = x - x_max; torch.exp(shifted)`: TorchFix
    reports that one). Replaces TorchFix's TOR108.

    ## Why is this bad?
    `exp` overflows to `inf` for inputs above about 88 in float32 (11 in float16), and
    underflows to `0` for very negative ones, so the result becomes `inf` or `-inf` where
    the true value is finite. `torch.logsumexp` subtracts the maximum first and stays
    finite.

    ## Example
    ```python
    lse = torch.log(torch.sum(torch.exp(logits), dim=1))
    ```

    ## Use instead
    ```python
    lse = torch.logsumexp(logits, dim=1)
    ```

    ## Fix safety
    The fix writes `torch.logsumexp(x, dim[, keepdim])` and is unsafe: where the old
    expression was finite the results differ only in the last bits, but where it overflowed
    they now are finite, which changes results (for the better) and a test's expected
    values. A sum given `dtype=` or `out=` gets no fix. Where the name it writes (`torch`,
    or the file's alias) is bound only after that code runs (a notebook cell before the one
    that imports torch), the fix adds the file's own import of it at the start of that cell,
    after the cell's own imports, and offers nothing where a function there binds that name
    itself.

    ## References
    - [`torch.logsumexp`](https://pytorch.org/docs/stable/generated/torch.logsumexp.html)
    """

    code = "TL607"
    name = "logsumexp"
    required_words = (("log",), ("sum",), ("exp",))
    message = "`torch.log(torch.sum(torch.exp(x), dim))` overflows; use `torch.logsumexp(x, dim)`"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A call whose one argument is a call."""
        return super().candidate(module) and any(
            len(n.args) == 1 and not n.keywords and isinstance(n.args[0], ast.Call) for n in module.nodes(ast.Call)
        )

    def visit_Call(self, node: cst.Call) -> None:
        total = single_argument(node)
        if not isinstance(total, cst.Call):
            return
        func = total.func
        if isinstance(func, cst.Attribute) and func.attr.value == "sum" and isinstance(func.value, cst.Call):
            exp, rest = func.value, list(total.args)  # torch.exp(x).sum(dim, keepdim)
        elif total.args and total.args[0].keyword is None and isinstance(total.args[0].value, cst.Call):
            exp, rest = total.args[0].value, list(total.args[1:])  # torch.sum(torch.exp(x), dim, keepdim)
            if calls_one_of(self.semantic, total, SUM) is None:
                return
        else:
            return
        x = single_argument(exp)
        if x is None or calls_one_of(self.semantic, exp, EXP) is None:
            return
        if self._stabilized(x):
            return  # `exp(x - x_max)`: stabilized by hand, nothing overflows
        if any(a.star for a in rest):
            return
        given = positional(cst.Call(func=func, args=rest))
        dim = given[0] if given else keyword(total, "dim")
        if dim is None or (isinstance(dim.value, cst.Name) and dim.value.value == "None"):
            return
        if calls_one_of(self.semantic, node, LOG) is None:
            return
        fix = None
        new_func = torch_function(self.semantic, node.func, "logsumexp")
        if new_func is not None and all(a.keyword is None or a.keyword.value in ("dim", "keepdim") for a in rest) and len(given) <= 2:
            last = cst.Arg(x, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if rest else cst.MaybeSentinel.DEFAULT)
            args = [last, *[a.with_changes(comma=cst.MaybeSentinel.DEFAULT) if i == len(rest) - 1 else a for i, a in enumerate(rest)]]
            changes = with_import_first(self.semantic, {node: node.with_changes(func=new_func, args=args)}, new_func.value.value, [node])
            fix = Fix("Use `torch.logsumexp`", changes, Applicability.UNSAFE) if changes is not None else None
        self.report(node, fix=fix)

    def _stabilized(self, x: cst.BaseExpression) -> bool:
        """Whether the exponent is a difference (``x - x_max``), written in place or bound
        to the name read there (``shifted = x - x_max; ... torch.exp(shifted)``; every
        binding that reaches the read is one)."""
        if isinstance(x, cst.Name):
            values = self.semantic.values(x)
            return bool(values) and all(_difference(v) for v in values)
        return _difference(x)


def _difference(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Subtract)
