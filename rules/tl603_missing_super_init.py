import libcst as cst

from torchlint.rule import Fix, Rule
from torchlint.semantic import Kind


class MissingSuperInit(Rule):
    """
    ## What it does
    Finds an `nn.Module` subclass whose `__init__` never calls `super().__init__()`, or
    assigns attributes before calling it.

    ## Why is this bad?
    `nn.Module.__init__` creates the registries for parameters, buffers and submodules.
    Without it, the first `self.layer = nn.Linear(...)` raises `AttributeError: cannot assign
    module before Module.__init__() call`; assigning before the call fails the same way.

    ## Example
    ```python
    class Net(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(4, 2)
    ```

    ## Use instead
    ```python
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
    ```

    ## Fix safety
    When the call is missing altogether the fix inserts `super().__init__()` as the first
    statement of `__init__`, which is safe: the class cannot be instantiated without it. When
    the call comes too late there is no fix: moving it may change what the arguments mean.

    ## References
    - [`torch.nn.Module`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html)
    """

    code = "TL603"
    name = "missing-super-init"
    message = "`{cls}.__init__` never calls `super().__init__()`"
    late_message = "`{cls}.__init__` assigns `self.{attr}` before calling `super().__init__()`"

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        info = self.semantic.classes.get(node)
        if info is None or self.semantic.class_kind(info) not in (Kind.MODULE, Kind.LOSS):
            return
        init = next(
            (s for s in node.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None
        ) if isinstance(node.body, cst.IndentedBlock) else None
        if init is None or not isinstance(init.body, cst.IndentedBlock):
            return
        for index, statement in enumerate(init.body.body):
            code = self.context.module.code_for_node(statement)
            if "__init__(" in code:  # super().__init__(), nn.Module.__init__(self), Base.__init__(self)
                return
            attr = _self_assignment(statement)
            if attr is not None:
                if _calls_init_later(init.body.body[index:], self.context.module):
                    self.report(statement, self.late_message.format(cls=node.name.value, attr=attr))
                else:
                    self._report_missing(node, init)
                return
        self._report_missing(node, init)

    def _report_missing(self, node: cst.ClassDef, init: cst.FunctionDef) -> None:
        first = init.body.body[0]
        call = cst.parse_statement("super().__init__()\n")
        fix = Fix("Call `super().__init__()` first", {first: cst.FlattenSentinel([call, first])})
        self.report(init.name, self.message.format(cls=node.name.value), fix=fix)


def _self_assignment(statement: cst.BaseStatement) -> str | None:
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target] if isinstance(small, cst.AnnAssign) else []
            for target in targets:
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == "self":
                    return target.attr.value
    return None


def _calls_init_later(statements, module: cst.Module) -> bool:
    return any("__init__(" in module.code_for_node(s) for s in statements)
