import ast

import libcst as cst

from torchlint.rule import Fix, Prescreen
from torchlint.semantic import Kind
from torchlint.torch_rule import TorchRule

# nn.Module methods that need the registries `nn.Module.__init__` creates.
_REGISTRY_METHODS = frozenset({"register_buffer", "register_parameter", "register_module", "add_module"})
# Calls given `self` that cannot run an `__init__`: builtins and nn.Module's own methods.
_NEVER_INIT = _REGISTRY_METHODS | {
    "apply", "to", "cuda", "cpu", "float", "half", "double", "train", "eval", "reset_parameters",
    "isinstance", "getattr", "setattr", "hasattr", "print", "id", "type", "vars", "str", "repr",
}


class MissingSuperInit(TorchRule):
    """
    ## What it does
    Finds an `nn.Module` subclass whose `__init__` never calls `super().__init__()` (nor
    `nn.Module.__init__(self)`, `Base.__init__(self)`, or a helper of the file that does, such
    as a base class's method it calls with `super()._init(...)`), or assigns a submodule or
    an `nn.Parameter` (or registers a buffer) before calling it. A method of a base class
    defined in another file, called on `self` or `super()`, may call `__init__`: such a
    class is left alone, and so is an `__init__` that always raises (an abstract base whose
    subclasses build themselves through another method).

    ## Why is this bad?
    `nn.Module.__init__` creates the registries for parameters, buffers and submodules.
    Without it, the first `self.layer = nn.Linear(...)` raises `AttributeError: cannot assign
    module before Module.__init__() call`, and a module that assigns nothing fails as soon as
    it is called or moved (`'Net' object has no attribute '_backward_hooks'`). Assigning a
    plain value (`self.size = 4`) before the call is harmless and not reported.

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
    statement of `__init__` (after its docstring; a one-line `def __init__(self): ...` is
    split into a block), which is safe: the class cannot be used without it. When the call
    comes too late there is no fix: moving it may change what the arguments mean.

    ## References
    - [`torch.nn.Module`](https://pytorch.org/docs/stable/generated/torch.nn.Module.html)
    """

    code = "TL603"
    name = "missing-super-init"
    required_words = (("__init__",),)
    message = "`{cls}.__init__` never calls `super().__init__()`"
    late_message = "`{cls}.__init__` assigns `self.{attr}` before calling `super().__init__()`"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A class with a base class and an ``__init__`` that calls no ``__init__``, or that
        gives ``self`` an attribute (or calls a ``register_*`` method) before the first
        statement that calls one: otherwise the call is neither missing nor late."""
        return super().candidate(module) and any(
            node.bases and any(map(_may_miss_init, node.body)) for node in module.nodes(ast.ClassDef)
        )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        info = self.semantic.classes.get(node)
        if info is None or self.semantic.class_kind(info) not in (Kind.MODULE, Kind.LOSS):
            return
        init = _init_method(node)
        if init is None:
            return
        statements = list(init.body.body)
        if any(_raises(s) for s in statements):
            return  # it never returns an instance
        for index, statement in enumerate(statements):
            if self._calls_init(statement, node):
                self._check_early_assignments(node, statements[:index])
                return
        if any(self._may_call_init_elsewhere(s, node) for s in statements):
            return
        if self._defines_forward(info) or any(self._registry_use(s) for s in statements):
            self._report_missing(node, init)

    def _defines_forward(self, info) -> bool:
        """Whether the class, a base class of this file or a ``torch.nn`` base defines
        ``forward``: a module with no ``forward`` and no submodules (a test double holding a
        ``config``) is never called or moved, so it never needs the registries."""
        if any(isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in _class_body(info.node)):
            return True
        if any(base.startswith("torch.nn.") and base.rpartition(".")[2] != "Module" for base in info.base_names):
            return True  # nn.Linear, nn.Sequential, ... define forward
        return any(self._defines_forward(base) for base in self.semantic.local_bases(info))

    def _calls_init(self, statement: cst.CSTNode, cls: cst.ClassDef) -> bool:
        """Whether ``statement`` calls an ``__init__`` (``super().__init__()``,
        ``nn.Module.__init__(self)``, ``Base.__init__(self)``), directly or through a method of
        the class, a method of a base class of the file called on ``super()``, or a function
        of the file whose body does."""
        return _has_init_call(statement) or any(_has_init_call(f) for f in self._helpers_called(statement, cls))

    def _may_call_init_elsewhere(self, statement: cst.CSTNode, cls: cst.ClassDef) -> bool:
        """``self`` handed to something this file does not define (``init_module(self)``,
        ``self.setup()`` or ``super()._init(...)`` of a base class defined elsewhere): it may
        call ``__init__``."""
        finder = _SelfCalls()
        statement.visit(finder)
        methods = {s.name.value for s in _class_body(cls) if isinstance(s, cst.FunctionDef)}
        if any(name not in methods and name not in _NEVER_INIT for name in finder.self_methods):
            return True
        if any(name not in _NEVER_INIT and self._base_methods(cls, name) is None for name in finder.super_methods):
            return True
        for func in finder.self_passed_to:
            known = isinstance(func, cst.Name) and (func.value in self.semantic.functions or func.value in _NEVER_INIT)
            if not known:
                return True
        return False

    def _helpers_called(self, statement: cst.CSTNode, cls: cst.ClassDef) -> list[cst.FunctionDef]:
        finder = _SelfCalls()
        statement.visit(finder)
        helpers = [s for s in _class_body(cls) if isinstance(s, cst.FunctionDef) and s.name.value in finder.self_methods]
        for name in finder.super_methods:
            helpers.extend(self._base_methods(cls, name) or ())
        for func in finder.self_passed_to:
            if isinstance(func, cst.Name):
                helpers.extend(self.semantic.functions.get(func.value, ()))
        return helpers

    def _base_methods(self, cls: cst.ClassDef, name: str) -> list[cst.FunctionDef] | None:
        """The methods called ``name`` of the base classes of ``cls`` that this file defines
        (and of theirs); where none is, None if a base class defined elsewhere, not one of
        ``torch.nn`` (whose methods never call ``__init__``), may define it."""
        info = self.semantic.classes.get(cls)
        if info is None:
            return None
        found: list[cst.FunctionDef] = []
        elsewhere = False
        seen = {id(info)}
        stack = [info]
        while stack:
            current = stack.pop()
            local = self.semantic.local_bases(current)
            for base in local:
                if id(base) not in seen:
                    seen.add(id(base))
                    found.extend(s for s in _class_body(base.node) if isinstance(s, cst.FunctionDef) and s.name.value == name)
                    stack.append(base)
            local_names = {b.node.name.value for b in local}
            for arg in current.node.bases:
                if not (isinstance(arg.value, cst.Name) and arg.value.value in local_names):
                    elsewhere = elsewhere or not (self.semantic.qualified_name(arg.value) or "").startswith("torch.nn.")
        return found if found or not elsewhere else None

    def _check_early_assignments(self, node: cst.ClassDef, before: list[cst.BaseStatement]) -> None:
        for statement in before:
            attr = self._registry_use(statement)
            if attr is not None:
                self.report(statement, self.late_message.format(cls=node.name.value, attr=attr))
                return

    def _registry_use(self, statement: cst.BaseStatement) -> str | None:
        """The attribute a statement gives to ``self`` that needs the registries: a submodule,
        an ``nn.Parameter``, or a ``register_buffer``-like call."""
        if not isinstance(statement, cst.SimpleStatementLine):
            return None
        for small in statement.body:
            if isinstance(small, cst.Assign):
                pairs = [(t.target, small.value) for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                pairs = [(small.target, small.value)]
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                func = small.value.func
                if isinstance(func, cst.Attribute) and _is_self(func.value) and func.attr.value in _REGISTRY_METHODS:
                    return func.attr.value
                continue
            else:
                continue
            for target, value in pairs:
                if isinstance(target, cst.Attribute) and _is_self(target.value) and self._needs_registry(value):
                    return target.attr.value
        return None

    def _needs_registry(self, value: cst.BaseExpression) -> bool:
        if self.semantic.kind(value) in (Kind.MODULE, Kind.LOSS):
            return True
        return isinstance(value, cst.Call) and self.semantic.qualified_name(value.func) in (
            "torch.nn.Parameter",
            "torch.nn.parameter.Parameter",
        )

    def _report_missing(self, node: cst.ClassDef, init: cst.FunctionDef) -> None:
        call = cst.parse_statement("super().__init__()\n")
        body = init.body
        if isinstance(body, cst.SimpleStatementSuite):  # def __init__(self): pass
            kept = [s for s in body.body if not isinstance(s, cst.Pass)]
            lines = [call] + [cst.SimpleStatementLine(body=[s.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)]) for s in kept]
            new_body = cst.IndentedBlock(body=lines, header=body.trailing_whitespace)
            fix = Fix("Call `super().__init__()` first", {body: new_body})
        else:
            statements = body.body
            first = statements[1] if len(statements) > 1 and _is_docstring(statements[0]) else statements[0]
            if len(statements) == 1 and _is_docstring(first):
                fix = Fix("Call `super().__init__()` first", {first: cst.FlattenSentinel([first, call])})
            else:
                fix = Fix("Call `super().__init__()` first", {first: cst.FlattenSentinel([call, first])})
        self.report(init.name, self.message.format(cls=node.name.value), fix=fix)


class _SelfCalls(cst.CSTVisitor):
    """``self.<method>(...)`` calls, ``super().<method>(...)`` calls (but ``__init__``) and
    the functions ``self`` is passed to, in a statement."""

    def __init__(self) -> None:
        self.self_methods: set[str] = set()
        self.super_methods: set[str] = set()
        self.self_passed_to: list[cst.BaseExpression] = []

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and _is_self(node.func.value):
            self.self_methods.add(node.func.attr.value)
        elif isinstance(node.func, cst.Attribute) and _is_super(node.func.value) and node.func.attr.value != "__init__":
            self.super_methods.add(node.func.attr.value)
        if any(_is_self(a.value) for a in node.args):
            self.self_passed_to.append(node.func)


def _has_init_call(node: cst.CSTNode) -> bool:
    """A call of some ``__init__``: ``super().__init__()``, ``super(Cls, self).__init__()``,
    ``nn.Module.__init__(self)``, ``Base.__init__(self)``."""
    finder = _InitCalls()
    node.visit(finder)
    return finder.found


class _InitCalls(cst.CSTVisitor):
    """Whether any call in a tree calls an attribute named ``__init__``."""

    def __init__(self) -> None:
        super().__init__()
        self.found = False

    def visit_Call(self, node: cst.Call) -> bool:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "__init__":
            self.found = True
        return not self.found


def _may_miss_init(statement: ast.stmt) -> bool:
    """Whether ``statement`` is an ``__init__`` that calls no attribute named ``__init__``, or
    that gives ``self`` an attribute (or registers one) before its first statement that does."""
    if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) or statement.name != "__init__":
        return False
    for inner in statement.body:
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__init__" for n in ast.walk(inner)):
            return False
        if _gives_self_attribute(inner):
            return True
    return True


def _gives_self_attribute(statement: ast.stmt) -> bool:
    """``self.x = ...``, ``self.x: T = ...`` or ``self.register_buffer(...)``."""
    if isinstance(statement, ast.Assign):
        return any(_is_self_attribute(t) for t in statement.targets)
    if isinstance(statement, ast.AnnAssign):
        return statement.value is not None and _is_self_attribute(statement.target)
    call = statement.value if isinstance(statement, ast.Expr) else None
    return isinstance(call, ast.Call) and _is_self_attribute(call.func) and call.func.attr in _REGISTRY_METHODS


def _is_self_attribute(expr: ast.expr) -> bool:
    return isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self"


def _init_method(node: cst.ClassDef) -> cst.FunctionDef | None:
    """The ``__init__`` that takes effect: the last one, not an ``@overload`` stub."""
    inits = [
        s
        for s in _class_body(node)
        if isinstance(s, cst.FunctionDef)
        and s.name.value == "__init__"
        and not any(_decorator_name(d.decorator) == "overload" for d in s.decorators)
    ]
    return inits[-1] if inits else None


def _class_body(node: cst.ClassDef) -> list[cst.BaseStatement]:
    return list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []


def _decorator_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def _is_self(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "self"


def _raises(statement: cst.BaseStatement) -> bool:
    """A ``raise`` statement (one that runs whenever the body reaches it)."""
    return isinstance(statement, cst.SimpleStatementLine) and any(isinstance(s, cst.Raise) for s in statement.body)


def _is_super(expr: cst.BaseExpression) -> bool:
    """``super()`` or ``super(Cls, self)``."""
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "super"


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )
