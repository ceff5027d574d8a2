import ast

import libcst as cst

from torchlint.rule import Prescreen
from torchlint.semantic import Kind
from torchlint.semantic.devices import cuda_string
from torchlint.torch_rule import TorchRule


class DeviceMoveInForward(TorchRule):
    """
    ## What it does
    Finds inputs moved to a fixed GPU inside an `nn.Module`'s `forward`: `.cuda()`,
    `.to("cuda")`, `.to(torch.device("cuda"))`, or `.to(device)` with a module-level
    `device`. Moving to where another tensor already is (`.to(x.device)`, `.type_as(x)`) and
    dtype conversions (`.to(torch.float16)`) are fine.

    Moves to the CPU are left alone: every machine has one, and APIs require them (the
    lengths of `pack_padded_sequence`, NumPy and SciPy post-processing such as a Hungarian
    matcher). So is deliberate model parallelism: a module that places its own layers on
    fixed devices (`self.stage1.to("cuda:0")`), or whose `forward` moves between two or
    more fixed devices, picks its devices on purpose. A move under a device test
    (`if x.is_cuda and not self.alpha.is_cuda:`) follows the input's device. A module known
    to hold no parameters (its `__init__`, and its bases' in this file or the project's
    others, store plain values only) has no parameters' device to follow: its hardcoded
    device is TL201's alone.

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
    required_words = (("forward",), ("cuda", "to"), ("cuda", "device"))
    message = "`{call}` in `forward` moves inputs to a fixed device; follow the parameters' device instead"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A function named ``forward`` holding a call of ``.cuda(...)`` or ``.to(...)``."""
        return super().candidate(module) and any(
            function.name == "forward" and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("cuda", "to")
                for n in ast.walk(function)
            )
            for function in module.nodes(ast.FunctionDef, ast.AsyncFunctionDef)
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in ("cuda", "to"):
            return
        function = self.semantic.enclosing_function(node)
        if function is None or function.name.value != "forward":
            return
        info = self.semantic.enclosing_class(function)
        if info is None or self.semantic.class_kind(info) is not Kind.MODULE:
            return
        if func.attr.value == "to" and not (node.args and self._fixed_device(node.args[0])):
            return
        if self._model_parallel(info.node) or self.semantic.devices.chosen_here(node):
            return  # `if x.is_cuda and not self.alpha.is_cuda:` follows the input's device
        if self.semantic.parameter_free_class(info.node):
            return  # no parameters whose device it could follow (a hardcoded device is TL201's)
        self.report(node, self.message.format(call=self.context.module.code_for_node(node)))

    def _fixed_device(self, arg: cst.Arg) -> bool:
        value = arg.value
        if arg.keyword is not None and arg.keyword.value != "device":
            return False
        if isinstance(value, cst.SimpleString):
            return cuda_string(value)
        if self.semantic.is_call_to(value, "torch.device"):
            return bool(value.args) and cuda_string(value.args[0].value)
        if isinstance(value, cst.Name):
            # A global `device = torch.device(...)`; a parameter or local is the caller's choice.
            scope = self.semantic.scopes.get(value)
            values = self.semantic.values(value)
            return bool(values) and all(self.semantic.is_call_to(v, "torch.device") for v in values) and not any(
                a.scope is scope for a in self.semantic.assignments(value)
            )
        return False

    def _model_parallel(self, cls: cst.ClassDef) -> bool:
        """Whether the class places work on fixed GPUs on purpose: it moves something to a
        fixed GPU outside ``forward`` (its layers, in ``__init__``), or to two different GPUs."""
        devices = set()
        code = self.context.module.code_for_node

        class Moves(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                if not isinstance(func, cst.Attribute):
                    return
                if func.attr.value == "to" and node.args and cuda_string(node.args[0].value):
                    devices.add(str(node.args[0].value.evaluated_value))
                elif func.attr.value == "cuda" and node.args and isinstance(node.args[0].value, cst.Integer):
                    devices.add(f"cuda:{node.args[0].value.value}")

        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value != "forward":
                before = len(devices)
                statement.visit(Moves())
                if len(devices) > before:
                    return True
        cls.visit(Moves())
        return len(devices) >= 2
