import libcst as cst

from torchlint.semantic import torch_api
from torchlint.semantic.migration import COMMA, EQUAL, bind_arguments, literal_bool
from torchlint.torch_rule import ApiSymbolRule

# `.mH` (the conjugate transpose the fix of `cholesky(A, upper=True)` writes) came with 1.11.
_MH_SINCE = "1.11"


class DeprecatedApi(ApiSymbolRule):
    """
    ## What it does
    Finds calls, references and imports of deprecated torch functions that have a
    replacement: `torch.chain_matmul`, `torch.cholesky`, `torch.qr`, `torch.range`,
    `torch.lu`, `torch.lu_solve`, `torch.triangular_solve`,
    `torch.testing.assert_allclose`, `torch.nn.utils.weight_norm`,
    `torch.backends.cuda.sdp_kernel`, `torch.utils._pytree._register_pytree_node`,
    `torch.cpu.amp.autocast` and `functorch`'s transforms (now `torch.func`), however
    imported (`from torch import chain_matmul`, `f = torch.chain_matmul; f(a, b)`).
    Replaces TorchFix's TOR101 and TOR103 (`torch.cuda.amp` is TL801's). Functions
    deprecated in the documentation only, which torch runs without a warning and plans no
    removal of (`torch.norm`, `torch.svd`, `torch.ger`, `nn.UpsamplingNearest2d` /
    `UpsamplingBilinear2d`), are not reported: on real code they are everywhere, and
    rewriting them is a matter of style.

    ## Why is this bad?
    Deprecated functions warn (most of them) and are removed in a later release, as
    `torch.solve` and `torch.symeig` were (TL803). The replacements are maintained, and some
    fix the old functions' traps: `torch.range` includes its end point, unlike Python's
    `range` and `torch.arange`.

    ## Example
    ```python
    P = torch.chain_matmul(a, b, c)
    U = torch.cholesky(A, upper=True)
    idx = torch.range(0, 9)
    ```

    ## Use instead
    ```python
    P = torch.linalg.multi_dot([a, b, c])
    U = torch.linalg.cholesky(A).mH
    idx = torch.arange(0, 10, dtype=torch.get_default_dtype())
    ```

    ## Fix safety
    Calls whose meaning the replacement keeps are fixed: `torch.chain_matmul(a, b, ...)`
    (two matrices or more) -> `torch.linalg.multi_dot([a, b, ...])`; `torch.cholesky(A)` ->
    `torch.linalg.cholesky(A)`, and with a literal `upper=True` -> `torch.linalg.cholesky(A).mH`;
    `torch.qr(A)` -> `torch.linalg.qr(A)`, and with a literal `some=False` ->
    `torch.linalg.qr(A, mode="complete")`; `torch.range(a, b)` with integer literal bounds
    and no step (or a step of 1) -> `torch.arange(a, b + 1, dtype=torch.get_default_dtype())`
    (`torch.range` returns the default floating dtype, `arange` an integer one for integer
    bounds; an explicit `dtype=` is kept instead); and
    `from functorch import vmap` -> `from torch.func import vmap` when every name imported
    has its `torch.func` twin. Other arguments (`out=`, a flag that is not a literal,
    `*args`), other functions (their replacements take other arguments or return other
    things) and uses of a name imported with `from torch import ...` are reported only; a
    fix is written only where the use spells the path from `torch`, so no import is left
    unused.

    A fix is safe when the oldest torch the project supports (`target-torch`, or the
    requirement on torch it declares) has the replacement (`multi_dot`: 1.9, `.mH`: 1.11,
    `torch.func`: 2.0, ...); unknown, it is unsafe. A name bound in both branches of
    `try: ... except ImportError:`, uses under a torch-version check or `hasattr`, and a
    fallback beside its replacement are left alone.
    The fix writes no name the use does not already read: the new path starts from the name
    the old one spells (`torch`, or the file's alias), so it runs wherever the old code ran,
    in a notebook's cell order too.

    ## References
    - [torch.linalg](https://pytorch.org/docs/stable/linalg.html)
    - [torch.func (was functorch)](https://pytorch.org/docs/stable/func.migrating.html)
    """

    code = "TL804"
    name = "deprecated-api"
    category = torch_api.DEPRECATED
    message = "`{name}` is deprecated (since torch {deprecated}); use `{replacement}`"

    @classmethod
    def reports(cls, symbol: torch_api.ApiSymbol) -> bool:
        """Not the functions deprecated in the documentation only (torch emits no warning and
        plans no removal: `torch.norm`, `torch.svd`, ...): rewriting them is a matter of style."""
        return symbol.warns != torch_api.NO_WARNING

    def message_for(self, symbol: torch_api.ApiSymbol) -> str:
        text = self.message.format(name=symbol.name, deprecated=symbol.deprecated, replacement=symbol.replacement)
        return f"{text} ({symbol.note})" if symbol.note else text

    def call_fix(self, call: cst.Call, symbol: torch_api.ApiSymbol, torch: str):
        args = call.args
        if any(a.star for a in args):
            return None
        name = symbol.name
        if name == "torch.chain_matmul":
            if len(args) < 2 or any(a.keyword is not None for a in args):
                return None
            elements = [cst.Element(a.value, comma=a.comma) for a in args]
            elements[-1] = elements[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
            new = call.with_changes(func=_path(torch, "linalg.multi_dot"), args=[cst.Arg(cst.List(elements))])
            return call, new, symbol.since
        if name == "torch.cholesky":
            bound = bind_arguments(args, ("input", "upper"))
            if bound is None or "input" not in bound:
                return None
            upper = literal_bool(bound["upper"]) if "upper" in bound else False
            if upper is None:
                return None
            new = cst.Call(func=_path(torch, "linalg.cholesky"), args=[cst.Arg(bound["input"])])
            if upper:
                return call, cst.Attribute(value=new, attr=cst.Name("mH")), max(symbol.since, _MH_SINCE, key=torch_api.version)
            return call, new, symbol.since
        if name == "torch.qr":
            bound = bind_arguments(args, ("input", "some"))
            if bound is None or "input" not in bound:
                return None
            some = literal_bool(bound["some"]) if "some" in bound else True
            if some is None:
                return None
            new_args = [cst.Arg(bound["input"])]
            if not some:
                new_args = [
                    cst.Arg(bound["input"], comma=COMMA),
                    cst.Arg(cst.SimpleString('"complete"'), keyword=cst.Name("mode"), equal=EQUAL),
                ]
            return call, cst.Call(func=_path(torch, "linalg.qr"), args=new_args), symbol.since
        if name == "torch.range":
            return self._range_fix(call, symbol, torch)
        return None

    def _range_fix(self, call: cst.Call, symbol: torch_api.ApiSymbol, torch: str):
        positional = [a for a in call.args if a.keyword is None]
        keywords = {a.keyword.value: a for a in call.args if a.keyword is not None}
        if not 1 <= len(positional) <= 3 or set(keywords) - {"dtype", "device", "requires_grad"}:
            return None
        bounds = [_integer(a.value) for a in positional]
        if any(b is None for b in bounds):
            return None
        if len(bounds) == 3:
            if bounds[2] != 1:
                return None
            bounds = bounds[:2]
        *start, end = bounds
        new_args = [cst.Arg(cst.Integer(str(v)) if v >= 0 else cst.parse_expression(str(v)), comma=COMMA) for v in [*start, end + 1]]
        rest = list(keywords.values())
        if "dtype" not in keywords:
            rest.insert(0, cst.Arg(cst.parse_expression(f"{torch}.get_default_dtype()"), keyword=cst.Name("dtype"), equal=EQUAL))
        rest = [a.with_changes(comma=COMMA) for a in rest]
        args = [*new_args, *rest]
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return call, call.with_changes(func=_path(torch, "arange"), args=args), symbol.since


def _path(torch: str, rest: str) -> cst.BaseExpression:
    return cst.parse_expression(f"{torch}.{rest}")


def _integer(value: cst.BaseExpression) -> int | None:
    """The value of an integer literal (``3``, ``-2``); None for anything else."""
    if isinstance(value, cst.Integer):
        return int(value.evaluated_value)
    if isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Minus) and isinstance(value.expression, cst.Integer):
        return -int(value.expression.evaluated_value)
    return None
