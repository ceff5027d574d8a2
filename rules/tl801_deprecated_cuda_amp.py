import libcst as cst

from torchlint.rule import Fix, Rule

DEPRECATED = {
    "torch.cuda.amp.autocast": "autocast",
    "torch.cuda.amp.GradScaler": "GradScaler",
    "torch.cuda.amp.autocast_mode.autocast": "autocast",
    "torch.cuda.amp.grad_scaler.GradScaler": "GradScaler",
}


class DeprecatedCudaAmp(Rule):
    """
    ## What it does
    Finds `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)`, however
    imported.

    ## Why is this bad?
    Both are deprecated since PyTorch 2.4 and warn at every use; the device-generic
    `torch.amp.autocast("cuda", ...)` and `torch.amp.GradScaler("cuda", ...)` replace them.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast():
        loss = model(x)
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda"):
        loss = model(x)
    ```

    ## Fix safety
    The fix is safe: the new calls are what the deprecated ones forward to. A name bound in
    both branches of `try: ... except ImportError:` or under a torch-version check is left
    alone, since it exists to support older versions.

    ## References
    - [Automatic mixed precision](https://pytorch.org/docs/stable/amp.html)
    """

    code = "TL801"
    name = "deprecated-cuda-amp"
    message = "`torch.cuda.amp.{name}` is deprecated; use `torch.amp.{name}(\"cuda\", ...)`"

    def visit_Call(self, node: cst.Call) -> None:
        qnames = self.semantic.qualified_names(node.func)
        # A name also bound to the new API (try/except ImportError) is compatibility code.
        if not qnames or not all(q in DEPRECATED for q in qnames) or self._guarded(node):
            return
        name = DEPRECATED[qnames[0]]
        torch = self.semantic.torch_alias
        fix = None
        if torch is not None and not any(a.keyword is not None and a.keyword.value == "device_type" for a in node.args):
            device = cst.Arg(cst.SimpleString('"cuda"'), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")) if node.args else cst.MaybeSentinel.DEFAULT)
            new = node.with_changes(func=cst.parse_expression(f"{torch}.amp.{name}"), args=[device, *node.args])
            fix = Fix(f'Use `torch.amp.{name}("cuda", ...)`', {node: new})
        self.report(node, self.message.format(name=name), fix=fix)

    def _guarded(self, node: cst.CSTNode) -> bool:
        # Compatibility code for old torch versions: try/except ImportError, version checks.
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, cst.Try) and any(
                h.type is not None and "ImportError" in self.context.module.code_for_node(h.type) for h in ancestor.handlers
            ):
                return True
            if isinstance(ancestor, (cst.If, cst.IfExp)) and "version" in self.context.module.code_for_node(ancestor.test):
                return True
        return False
