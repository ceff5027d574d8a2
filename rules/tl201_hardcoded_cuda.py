import libcst as cst

from torchlint.rule import Fix, Rule
from torchlint.semantic.devices import DEVICE_TYPE_CALLS, cuda_string


class HardcodedCuda(Rule):
    """
    ## What it does
    Finds placements hardcoded to CUDA: `.cuda()`, `.to("cuda")`, `torch.device("cuda:0")`,
    `device="cuda"`. A choice guarded by an availability check or a flag
    (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`, code under
    `if torch.cuda.is_available():` or `if args.cuda:`) is left alone, and so are device
    *types* such as `torch.autocast("cuda")`.

    ## Why is this bad?
    The script then fails on every machine without a GPU (a laptop, a CPU CI runner, a
    colleague's Mac) with `AssertionError: Torch not compiled with CUDA enabled` or
    `RuntimeError: No CUDA GPUs are available`, and cannot be pointed at another device
    without editing it.

    ## Example
    ```python
    model = Net().cuda()
    for x, y in loader:
        x, y = x.to("cuda"), y.to("cuda")
    ```

    ## Use instead
    ```python
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```

    ## Fix safety
    The fix rewrites the placement to `.to(device)` / `device=device`, reusing a `device`
    already in scope (a parameter, a variable, `self.device`, a module-level `device`), and
    otherwise defines `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")`
    once, after the imports. `torch.device("cuda...")` becomes that guarded expression. It is
    safe: on a machine with CUDA the code runs on the same device as before. `.cuda(index)`
    has no fix, since the index is a deliberate choice.

    ## References
    - [CUDA semantics: device-agnostic code](https://pytorch.org/docs/stable/notes/cuda.html#device-agnostic-code)
    """

    code = "TL201"
    name = "hardcoded-cuda"
    message = "`{code}` hardcodes CUDA: the code fails on machines without a GPU"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qname = self.semantic.qualified_name(func)
        if qname is not None and qname.startswith("torch.cuda"):
            return
        if qname == "torch.device":
            if node.args and cuda_string(node.args[0].value) and not self._guarded(node):
                self._report_device_constructor(node)
            return
        if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            if not self._guarded(node):
                self._report_cuda_call(node)
            return
        if qname in DEVICE_TYPE_CALLS:
            return
        for index, arg in enumerate(node.args):
            is_to_target = isinstance(func, cst.Attribute) and func.attr.value == "to" and index == 0 and arg.keyword is None
            is_device_keyword = arg.keyword is not None and arg.keyword.value == "device"
            if (is_to_target or is_device_keyword) and cuda_string(arg.value) and not self._guarded(node):
                self._report_argument(node, arg)

    def _guarded(self, node: cst.CSTNode) -> bool:
        return self.semantic.devices.guarded(node)

    def _code(self, node: cst.CSTNode) -> str:
        return self.context.module.code_for_node(node)

    def _device(self, node: cst.CSTNode) -> tuple[str, dict] | None:
        """The device expression to use at ``node`` and the extra changes that define it."""
        existing = self.semantic.devices.device_variable(node)
        if existing is not None:
            return existing, {}
        torch = self.semantic.torch_alias
        anchor = self.semantic.devices.import_anchor()
        if torch is None or anchor is None:
            return None
        definition = cst.parse_statement(f'device = {torch}.device("cuda" if {torch}.cuda.is_available() else "cpu")\n')
        return "device", {anchor: cst.FlattenSentinel([anchor, definition])}

    def _report_cuda_call(self, node: cst.Call) -> None:
        fix = None
        positional = [a for a in node.args if a.keyword is None]
        device = self._device(node) if not positional else None
        if device is not None:
            name, extra = device
            args = [cst.Arg(cst.parse_expression(name)), *node.args]
            if len(args) > 1:
                args[0] = args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            new = node.with_changes(func=node.func.with_changes(attr=cst.Name("to")), args=args)
            fix = Fix(f"Use `.to({name})`", {node: new, **extra})
        self.report(node, self.message.format(code=self._code(node)), fix=fix)

    def _report_argument(self, node: cst.Call, arg: cst.Arg) -> None:
        fix = None
        device = self._device(node)
        if device is not None:
            name, extra = device
            fix = Fix(f"Use `{name}`", {arg.value: cst.parse_expression(name), **extra})
        self.report(arg.value, self.message.format(code=self._code(node)), fix=fix)

    def _report_device_constructor(self, node: cst.Call) -> None:
        torch = self.semantic.torch_alias
        fix = None
        if torch is not None:
            literal = self._code(node.args[0].value)
            guarded = cst.parse_expression(f'{literal} if {torch}.cuda.is_available() else "cpu"')
            fix = Fix("Fall back to the CPU when CUDA is unavailable", {node.args[0].value: guarded})
        self.report(node, self.message.format(code=self._code(node)), fix=fix)
