import libcst as cst

from torchlint.rule import Rule
from torchlint.semantic import Kind


class DeviceMoveInForward(Rule):
    """
    ## What it does
    Finds inputs moved to a fixed device inside an `nn.Module`'s `forward`: `.cuda()`,
    `.cpu()`, `.to("cuda")`, `.to(torch.device(...))`, or `.to(device)` with a module-level
    `device`. Moving to where another tensor already is (`.to(x.device)`, `.type_as(x)`) and
    dtype conversions (`.to(torch.float16)`) are fine.

    ## Why is this bad?
    A module's device is wherever its parameters are: the caller decides it with
    `model.to(device)`. A fixed device inside `forward` breaks that: the model fails on a
    CPU-only machine, under `DataParallel` every replica copies to the same GPU, and every
    call pays a host-device copy.

    ## Example
    ```python
    def forward(self, x):
        x = x.cuda()
        return self.fc(x)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        x = x.to(self.fc.weight.device)
        return self.fc(x)
    ```

    ## Fix safety
    There is no fix: the right device expression depends on the module.

    ## References
    - [`torch.nn.Module.to`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to)
    """

    code = "TL202"
    name = "device-move-in-forward"
    message = "`{call}` in `forward` moves inputs to a fixed device; follow the parameters' device instead"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "cpu", "to"):
            return
        function = self.semantic.enclosing_function(node)
        if function is None or function.name.value != "forward":
            return
        info = self.semantic.enclosing_class(function)
        if info is None or self.semantic.class_kind(info) is not Kind.MODULE:
            return
        if func.attr.value == "to" and not (node.args and self._fixed_device(node.args[0])):
            return
        self.report(node, self.message.format(call=self.context.module.code_for_node(node)))

    def _fixed_device(self, arg: cst.Arg) -> bool:
        value = arg.value
        if arg.keyword is not None and arg.keyword.value != "device":
            return False
        if isinstance(value, cst.SimpleString):
            return True
        if self.semantic.is_call_to(value, "torch.device"):
            return True
        if isinstance(value, cst.Name):
            # A global `device = torch.device(...)`; a parameter or local is the caller's choice.
            scope = self.semantic.scopes.get(value)
            values = self.semantic.values(value)
            return bool(values) and all(self.semantic.is_call_to(v, "torch.device") for v in values) and not any(
                a.scope is scope for a in self.semantic.assignments(value)
            )
        return False
