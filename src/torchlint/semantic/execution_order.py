"""Names bound in execution order: whether a fix may write a name where it writes it.

A fix that writes ``torch.no_grad()`` or ``torch.amp.autocast(...)`` reads ``torch`` where it
lands; it must be bound there when that code runs. A notebook's code cells are one module
here (``notebook.py`` joins them, IPython syntax masked by ``pass`` lines), so the module's
order is the kernel's, cells run top to bottom; a script runs the same way. A binding counts
when it runs before the code on every path through the statements between them: earlier in
a sequence of statements that holds both (a module's, a block's, a line's small statements),
or as the target of a ``for`` or ``with`` whose body holds the code; a parameter of the
function that holds it. Code inside a function (or a class body, a lambda, a comprehension)
counts from its definition: a function may run as soon as it is defined, so a module-level
name bound only after the ``def`` may not exist yet when it does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

import libcst as cst
from libcst.metadata import Assignment, GlobalScope

from torchlint.text import is_cell_boundary

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

# The comment of a line of IPython syntax masked by ``pass`` (notebook.py's ``_MASK``).
_MASKED = "# __torchlint_masked_line_"
# Nodes that open a scope of their own: code inside counts from where they are.
_SCOPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
# Nodes whose children run one after the other, each to its end.
_SEQUENCES = (cst.Module, cst.IndentedBlock, cst.SimpleStatementLine, cst.SimpleStatementSuite)


def bound_before(model: SemanticModel, node: cst.CSTNode, name: str) -> bool:
    """Whether ``name``, as ``node`` sees it, is bound before ``node`` runs (see above)."""
    scope = model.scopes.get(node)
    if scope is None:
        return False
    for assignment in scope[name]:
        if not isinstance(assignment, Assignment):
            return True  # a builtin
        if _runs_before(model, assignment, node):
            return True
    return False


def bound_locally(model: SemanticModel, node: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` as ``node`` sees it is bound in a function (or class body, ...) that
    holds ``node``: a module-level import would not reach it."""
    scope = model.scopes.get(node)
    return scope is not None and any(
        isinstance(a, Assignment) and not isinstance(a.scope, GlobalScope) for a in scope[name]
    )


def bound_within(model: SemanticModel, node: cst.CSTNode, name: str, region: cst.CSTNode) -> bool:
    """Whether ``name``, as ``node`` sees it, is bound somewhere inside ``region`` (a loop's
    body: a name bound in each iteration does not exist before that binding in the first)."""
    scope = model.scopes.get(node)
    return scope is not None and any(
        isinstance(a, Assignment) and not isinstance(a.node, cst.Param) and region in model.ancestors(a.node) for a in scope[name]
    )


def import_of(model: SemanticModel, name: str) -> str | None:
    """The file's own module-level import that binds ``name``, as a statement that binds
    only it (``import torch as th``; ``import torch`` for ``import torch.nn``; ``from torch
    import no_grad``); None when no import of the module binds it."""
    scope = model.scopes.get(model.module)
    if scope is None:
        return None
    imports = [a.node for a in scope[name] if isinstance(a, Assignment) and isinstance(a.node, (cst.Import, cst.ImportFrom))]
    for statement in sorted(imports, key=model.start_key):
        if isinstance(statement.names, cst.ImportStar):
            continue
        for alias in statement.names:
            dotted = model.module.code_for_node(alias.name)
            if alias.asname is not None:
                if model.module.code_for_node(alias.asname.name) != name:
                    continue
                spelled = f"{dotted} as {name}"
            elif isinstance(statement, cst.Import):
                if dotted.split(".")[0] != name:
                    continue
                spelled = name
            elif dotted != name:
                continue
            else:
                spelled = name
            if isinstance(statement, cst.Import):
                return f"import {spelled}"
            module = model.module.code_for_node(statement.module) if statement.module is not None else ""
            return f"from {'.' * len(statement.relative)}{module} import {spelled}"
    return None


def with_import_first(
    model: SemanticModel, changes: Mapping[cst.CSTNode, object], name: str, written: Iterable[cst.CSTNode]
) -> dict | None:
    """A fix's ``changes``, which write ``name`` at the nodes ``written`` (of the original
    tree), made to run: as they are where ``name`` is bound before each of them; otherwise
    with the file's own import of ``name`` (``import_of``) put at the start of the notebook
    cell (of the module, in a script) that holds the first of them (``_cell_start``), the
    changes inside the statement it goes before folded into it (an outer change wins over
    the ones inside it). None where
    that cannot be: a function (or class) that holds one of them binds ``name`` itself, or
    no import of the file binds it."""
    written = list(written)
    missing = [n for n in written if not bound_before(model, n, name)]
    if not missing:
        return dict(changes)
    if any(bound_locally(model, n, name) for n in missing):
        return None
    spelled = import_of(model, name)
    top = model.top_statement(min(missing, key=model.start_key))
    if spelled is None or top is None:
        return None
    statement = _cell_start(model, top)
    rest = {}
    inside = {}
    for old, new in changes.items():
        (inside if old is not statement and model.top_statement(old) is statement else rest)[old] = new
    rewritten = rest.pop(statement, statement)
    if isinstance(rewritten, cst.RemovalSentinel):
        nodes = []  # (a statement the fix removes: the import takes its place)
    else:
        nodes = list(rewritten.nodes) if isinstance(rewritten, cst.FlattenSentinel) else [rewritten]
    if inside:
        nodes = [n.visit(_Replace(inside)) for n in nodes]
    rest[statement] = cst.FlattenSentinel([cst.parse_statement(spelled + "\n"), *nodes])
    return rest


def _cell_start(model: SemanticModel, top: cst.CSTNode) -> cst.CSTNode:
    """Where an import for the top-level statement ``top`` goes: before the first statement
    of its notebook cell (of the module, in a script) that is not a masked line of IPython
    syntax, the module's docstring or an import line (after the cell's own imports), or
    before ``top`` itself when that comes first. Every fix in a cell that needs the same
    import then changes the same statement: the engine applies one of them, and the others,
    linted again, find the name bound."""
    start = None
    for index, statement in enumerate(model.module.body):
        if is_cell_boundary(statement):
            start = None
            continue
        if start is None and not _preamble(statement, index):
            start = statement
        if statement is top:
            return start if start is not None else top
    return top


def _preamble(statement: cst.CSTNode, index: int) -> bool:
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    comment = statement.trailing_whitespace.comment
    if comment is not None and comment.value.startswith(_MASKED) and isinstance(statement.body[0], cst.Pass):
        return True
    first = statement.body[0]
    if index == 0 and isinstance(first, cst.Expr) and isinstance(first.value, (cst.SimpleString, cst.ConcatenatedString)):
        return True
    return all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)


def _runs_before(model: SemanticModel, assignment: Assignment, node: cst.CSTNode) -> bool:
    binding = assignment.node
    if isinstance(binding, cst.Param):
        return True  # a parameter of a function that holds ``node``
    scope_node = model.module if isinstance(assignment.scope, GlobalScope) else assignment.scope.node
    # Where ``node``'s code starts to exist in the binding's scope: the outermost definition
    # in that scope that holds it, or ``node`` itself.
    anchor = node
    for ancestor in model.ancestors(node):
        if ancestor is scope_node:
            break
        if isinstance(ancestor, _SCOPES):
            anchor = ancestor
    if model.start_key(binding) >= model.start_key(anchor):
        return False
    holding = {anchor, *model.ancestors(anchor)}
    child, common = binding, model.parent(binding)
    while common is not None and common not in holding:
        child, common = common, model.parent(common)
    if isinstance(common, _SEQUENCES):
        return True
    if isinstance(common, cst.For) and child is common.target:
        return model.inside(anchor, common.body)
    if isinstance(common, cst.With) and isinstance(child, cst.WithItem):
        return model.inside(anchor, common.body)
    return False


class _Replace(cst.CSTTransformer):
    """Replaces each node of ``changes`` (by identity, in one pass: a change inside another
    one's node is dropped with it, as the engine does)."""

    def __init__(self, changes: Mapping[cst.CSTNode, object]) -> None:
        super().__init__()
        self.changes = changes

    def on_leave(self, original_node, updated_node):
        return self.changes.get(original_node, updated_node)
