"""What API-migration fixes share (TL801, TL803, TL804, TL805): the `from` import a name
comes from, with every read of it, so that a fix that rewrites every use of an imported
name to the new API also removes the import it would leave unused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

import libcst as cst
from libcst.metadata import ImportAssignment

if TYPE_CHECKING:
    from torchlint.rule import Replacement
    from torchlint.semantic import SemanticModel


@dataclass(frozen=True)
class FromImport:
    statement: cst.ImportFrom | cst.Import
    alias: cst.ImportAlias
    uses: tuple[cst.Name, ...]  # every read of the name it binds, in source order


def from_import(semantic: SemanticModel, name: cst.CSTNode) -> FromImport | None:
    """The ``from ... import`` (or ``import a.b as name``) that binds ``name`` (a read of it),
    when that is its only binding, with every read of that binding; None otherwise (a name also assigned
    elsewhere, in both branches of a ``try``, a parameter, ...)."""
    if not isinstance(name, cst.Name):
        return None
    scope = semantic.scopes.get(name)
    if scope is None:
        return None
    try:
        accesses = scope.accesses[name]
    except KeyError:
        return None
    referents = {r for access in accesses for r in access.referents}
    if len(referents) != 1:
        return None
    (binding,) = referents
    if not isinstance(binding, ImportAssignment) or not isinstance(binding.node, (cst.ImportFrom, cst.Import)):
        return None
    if len(scope[name.value]) != 1:  # bound elsewhere in the scope too
        return None
    statement = binding.node
    if isinstance(statement.names, cst.ImportStar):
        return None
    alias = next((a for a in statement.names if _bound_name(a) == name.value), None)
    if alias is None:
        return None
    uses = sorted((r.node for r in binding.references if isinstance(r.node, cst.Name)), key=semantic.start_key)
    if len(uses) != len(binding.references):
        return None  # a read that is not a plain name (a string annotation, `__all__`): keep the import
    return FromImport(statement, alias, tuple(uses))


def _bound_name(alias: cst.ImportAlias) -> str | None:
    if alias.asname is not None:
        target = alias.asname.name
        return target.value if isinstance(target, cst.Name) else None
    return alias.name.value if isinstance(alias.name, cst.Name) else None


def drop_aliases(semantic: SemanticModel, statement: cst.ImportFrom | cst.Import, aliases: Iterable[cst.ImportAlias]) -> dict[cst.CSTNode, Replacement]:
    """The change that removes ``aliases`` from the import: the statement's line when
    nothing is left of it (and it stands alone on it), the statement when it shares its
    line, else the import without them."""
    drop = set(aliases)
    assert not isinstance(statement.names, cst.ImportStar)
    kept = [a for a in statement.names if a not in drop]
    if kept:
        last = kept[-1]
        if getattr(statement, "rpar", None) is None or last is not statement.names[-1]:
            kept[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return {statement: statement.with_changes(names=kept)}
    line = semantic.parent(statement)
    if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1:
        return {line: cst.RemovalSentinel.REMOVE}
    return {statement: cst.RemovalSentinel.REMOVE}


def get_full_name_for_node(node: cst.CSTNode) -> str:
    from libcst.helpers import get_full_name_for_node as full

    return full(node) or ""


COMMA = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def bind_arguments(args, parameters: tuple[str, ...]) -> dict[str, cst.BaseExpression] | None:
    """The call's arguments by parameter; None when one does not fit ``parameters``."""
    bound: dict[str, cst.BaseExpression] = {}
    positional = [a for a in args if a.keyword is None]
    if len(positional) > len(parameters):
        return None
    for parameter, arg in zip(parameters, positional):
        bound[parameter] = arg.value
    for arg in args:
        if arg.keyword is not None:
            if arg.keyword.value not in parameters or arg.keyword.value in bound:
                return None
            bound[arg.keyword.value] = arg.value
    return bound


def literal_bool(value: cst.BaseExpression | None) -> bool | None:
    """True or False for the literal names; None for anything else."""
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return value.value == "True"
    return None
