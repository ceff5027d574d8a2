import libcst as cst

from torchlint.semantic import torch_api
from torchlint.semantic.migration import COMMA, EQUAL, bind_arguments, literal_bool
from torchlint.torch_rule import ApiSymbolRule



class RemovedApi(ApiSymbolRule):
    """
    ## What it does
    Finds calls, references and imports of functions that PyTorch has removed:
    `torch.solve`, `torch.symeig` (removed in 2.0), `torch.eig`, `torch.lstsq` and
    `torch.matrix_rank` (removed in 1.13), however imported (`from torch import solve`,
    `import torch as th`, `f = torch.symeig`). Replaces TorchFix's TOR001 and TOR004.

    ## Why is this bad?
    From the version that removed it on, the call raises `RuntimeError` (torch keeps a stub
    that says what to use instead): the code fails on every current torch. The message says
    from which version on. Each has a `torch.linalg` replacement, with other conventions:
    `torch.linalg.solve(A, B)` takes its arguments in the other order and returns the
    solution alone; `torch.linalg.eigh` reads the lower triangle unless told `UPLO="U"`;
    `torch.linalg.eig` returns complex tensors; `torch.linalg.lstsq(A, B)` swaps the
    arguments too.

    ## Example
    ```python
    X = torch.solve(B, A)[0]
    values, vectors = torch.symeig(A, eigenvectors=True)
    ```

    ## Use instead
    ```python
    X = torch.linalg.solve(A, B)
    values, vectors = torch.linalg.eigh(A, UPLO="U")
    ```

    ## Fix safety
    Two shapes keep their meaning and are fixed: `torch.solve(B, A)[0]` and
    `torch.solve(B, A).solution` become `torch.linalg.solve(A, B)` (the old call returned a
    tuple of the solution and an LU factorisation; any other use of the tuple gets no fix),
    and `torch.symeig(A, eigenvectors=True, upper=...)` with literal flags becomes
    `torch.linalg.eigh(A, UPLO="U")` (or `"L"` for `upper=False`; `symeig` read the upper
    triangle by default), which returns the same named pair. `eigenvectors=False` (only the
    eigenvalues, and an empty tensor beside them), other arguments (`out=`), `*args`, and
    the other removed functions are reported only. A fix is written only where the call
    spells `torch.` through `import torch`. It is safe when the oldest torch the project
    supports (`target-torch`, or the requirement on torch it declares) has the replacement
    (`torch.linalg.solve` and `eigh`: 1.8); unknown, it is unsafe.

    A name bound in both branches of `try: ... except ImportError:` or `AttributeError`,
    uses under a torch-version check or `hasattr`, and a fallback beside its replacement are
    left alone: they support older versions.
    The fix writes no name the use does not already read: the new path starts from the name
    the old one spells (`torch`, or the file's alias), so it runs wherever the old code ran,
    in a notebook's cell order too.

    ## References
    - [torch.linalg](https://pytorch.org/docs/stable/linalg.html)
    - [PyTorch 1.13 and 2.0 release notes](https://github.com/pytorch/pytorch/releases)
    """

    code = "TL803"
    name = "removed-api"
    category = torch_api.REMOVED
    opt_in = True  # too few findings on real code to measure its precision (ecosystem/triage)
    message = "`{name}` was removed from torch: the code fails from torch {removed} on; use `{replacement}`"

    def message_for(self, symbol: torch_api.ApiSymbol) -> str:
        text = self.message.format(name=symbol.name, removed=symbol.removed, replacement=symbol.replacement)
        return f"{text} ({symbol.note})" if symbol.note else text

    def call_fix(self, call: cst.Call, symbol: torch_api.ApiSymbol, torch: str):
        args = call.args
        if any(a.star for a in args):
            return None
        if symbol.name == "torch.solve":
            # torch.solve(B, A) -> (solution, LU): only a use of the solution alone is kept.
            if len(args) != 2 or any(a.keyword is not None for a in args):
                return None
            parent = self.semantic.parent(call)
            solution_only = (
                isinstance(parent, cst.Subscript)
                and parent.value is call
                and len(parent.slice) == 1
                and isinstance(parent.slice[0].slice, cst.Index)
                and isinstance(parent.slice[0].slice.value, cst.Integer)
                and parent.slice[0].slice.value.evaluated_value == 0
            ) or (isinstance(parent, cst.Attribute) and parent.value is call and parent.attr.value == "solution")
            if not solution_only:
                return None
            b, a = args
            new = cst.Call(
                func=cst.parse_expression(f"{torch}.linalg.solve"),
                args=[cst.Arg(a.value, comma=COMMA), cst.Arg(b.value)],
            )
            return parent, new, symbol.since
        if symbol.name == "torch.symeig":
            bound = bind_arguments(args, ("input", "eigenvectors", "upper"))
            if bound is None or "input" not in bound or literal_bool(bound.get("eigenvectors")) is not True:
                return None
            upper = literal_bool(bound["upper"]) if "upper" in bound else True
            if upper is None:
                return None
            new_args = [cst.Arg(bound["input"])]
            if upper:
                new_args = [
                    cst.Arg(bound["input"], comma=COMMA),
                    cst.Arg(cst.SimpleString('"U"'), keyword=cst.Name("UPLO"), equal=EQUAL),
                ]
            return call, cst.Call(func=cst.parse_expression(f"{torch}.linalg.eigh"), args=new_args), symbol.since
        return None

