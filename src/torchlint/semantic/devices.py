"""Device facts: hardcoded CUDA placements, whether they sit under an availability guard,
and which name already holds a device."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

_CUDA_STRING = re.compile(r"^cuda(:\d+)?$")
# Expressions that choose a device on purpose: an availability check or a user's flag.
_GUARD = re.compile(r"is_available|device_count|use_cuda|use_gpu|args\.cuda|args\.gpu|no_cuda|\bcuda\b\s*(and|or)|\.gpu\b")
# Calls whose "cuda" argument is a device type, not a placement.
DEVICE_TYPE_CALLS = frozenset(
    {"torch.autocast", "torch.amp.autocast", "torch.amp.GradScaler", "torch.cuda.amp.autocast", "torch.get_autocast_dtype",
     "torch.set_autocast_enabled", "torch.backends.cuda.matmul", "torch.amp.autocast_mode.autocast"}
)


def cuda_string(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.SimpleString) and bool(_CUDA_STRING.match(str(expr.evaluated_value)))


class DeviceFacts:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    def code(self, node: cst.CSTNode) -> str:
        return self.model.module.code_for_node(node)

    def guarded(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` only runs, or only picks CUDA, when the code chose it on purpose:
        inside an ``if`` or conditional expression that tests availability or a flag, after
        an early exit on unavailability, or in a function whose name says it is for CUDA."""
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and self._is_guard(ancestor.test):
                return True
            if isinstance(ancestor, cst.BooleanOperation) and self._is_guard(ancestor):
                return True
            if isinstance(ancestor, cst.FunctionDef) and "cuda" in ancestor.name.value.lower():
                return True
        return self._after_early_exit(node)

    def _is_guard(self, test: cst.BaseExpression) -> bool:
        text = self.code(test)
        if _GUARD.search(text):
            return True
        # A name bound to a guard: use_cuda = torch.cuda.is_available() and not args.no_cuda
        for name in _names(test):
            if any(_GUARD.search(self.code(v)) for v in self.model.values(name)):
                return True
        return False

    def _after_early_exit(self, node: cst.CSTNode) -> bool:
        # if not torch.cuda.is_available(): raise / sys.exit / return   (or assert available)
        function = self.model.enclosing_function(node)
        body = function.body.body if function is not None else self.model.module.body
        position = self.model.start_key(node)
        for statement in body:
            if self.model.start_key(statement) >= position:
                break
            text = self.code(statement)
            if "is_available" in text and (isinstance(statement, cst.If) or text.lstrip().startswith("assert")):
                return True
        return False

    def device_variable(self, node: cst.CSTNode) -> str | None:
        """A name in scope at ``node`` that already holds a device: a ``device`` parameter or
        variable, ``self.device`` set in the class, or a module-level ``device``."""
        function = self.model.enclosing_function(node)
        at_top_level = function is None
        while function is not None:
            names = [p.name.value for p in function.params.params + function.params.kwonly_params]
            for candidate in ("device", "dev"):
                if candidate in names:
                    return candidate
            if self._binds(function.body, "device", before=node):
                return "device"
            info = self.model.enclosing_class(function)
            if info is not None and names and names[0] == "self" and "device" in info.attribute_values:
                return "self.device"
            function = self.model.enclosing_function(function)
        # At top level the variable must already exist; a function runs after the module.
        if self._binds(self.model.module, "device", before=node if at_top_level else None):
            return "device"
        return None

    def _binds(self, body: cst.CSTNode, name: str, before: cst.CSTNode | None = None) -> bool:
        statements = body.body if isinstance(body, (cst.Module, cst.IndentedBlock)) else ()
        limit = self.model.start_key(before) if before is not None else None
        for statement in statements:
            if limit is not None and self.model.start_key(statement) >= limit:
                break
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, (cst.Assign, cst.AnnAssign)):
                        targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
                        if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                            return True
        return False

    def import_anchor(self) -> cst.SimpleStatementLine | None:
        """The last statement of the top-level import block, after which a device
        definition goes."""
        anchor = None
        for statement in self.model.module.body:
            if isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
            ):
                anchor = statement
            elif anchor is not None:
                break
        return anchor


def _names(expr: cst.BaseExpression) -> list[cst.Name]:
    found = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

    expr.visit(Names())
    return found
