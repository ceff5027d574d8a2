"""What a callee refers to, through imports, aliases and plain references.

``SemanticModel.qualified_names`` resolves imports (``from torch import log as ln``) and
attribute chains (``th.log``). A name the code binds to a reference of its own
(``f = torch.log`` then ``f(1 + x)``) is followed here too, when exactly one binding of it
reaches the use and that binding's value is itself a name or an attribute: one look-up of
the bindings the semantic model already holds, no walk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel


def callee_names(model: SemanticModel, func: cst.BaseExpression, depth: int = 2) -> list[str]:
    """The qualified names of ``func``, or, for a name bound once to another name or attribute
    (``f = torch.log``), of what it was bound to (followed ``depth`` times at most)."""
    if isinstance(func, cst.Name) and depth > 0:
        values = model.values(func)
        if len(values) == 1 and isinstance(values[0], (cst.Name, cst.Attribute)) and values[0] is not func:
            return callee_names(model, values[0], depth - 1)
    return model.qualified_names(func)


def calls_one_of(model: SemanticModel, call: cst.CSTNode, names: frozenset[str] | set[str]) -> str | None:
    """The one of ``names`` that ``call`` calls (every qualified name of its callee in
    ``names``), or None."""
    if not isinstance(call, cst.Call):
        return None
    found = callee_names(model, call.func)
    if found and all(name in names for name in found):
        return found[0]
    return None


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    """The argument passed to ``call`` as ``name=...``, or None."""
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)


def positional(call: cst.Call) -> list[cst.Arg]:
    """The positional arguments of ``call`` (``*args`` counts as one)."""
    return [arg for arg in call.args if arg.keyword is None and arg.star != "**"]


def has_star(call: cst.Call, star: str = "**") -> bool:
    return any(arg.star == star for arg in call.args)


def append_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``name=value`` added after its last argument, its trailing comma kept."""
    equal = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    new = cst.Arg(keyword=cst.Name(name), value=value, equal=equal)
    if not call.args:
        return call.with_changes(args=[new])
    last = call.args[-1]
    separator: cst.BaseParenthesizableWhitespace = cst.SimpleWhitespace(" ")
    if isinstance(last.comma, cst.Comma):
        new = new.with_changes(comma=last.comma)
        # One argument a line: the new one goes on a line of its own, indented as the others.
        if isinstance(last.comma.whitespace_after, cst.ParenthesizedWhitespace):
            before = call.args[-2].comma.whitespace_after if len(call.args) > 1 and isinstance(call.args[-2].comma, cst.Comma) else call.whitespace_before_args
            if isinstance(before, cst.ParenthesizedWhitespace):
                separator = before
    args = [*call.args[:-1], last.with_changes(comma=cst.Comma(whitespace_after=separator))]
    return call.with_changes(args=[*args, new])


def is_literal(expr: cst.BaseExpression, *values: str) -> bool:
    """Whether ``expr`` is one of these literals, as written (``True``, ``0``, ``1.0``)."""
    return isinstance(expr, (cst.Name, cst.Integer, cst.Float)) and expr.value in values


def torch_function(model: SemanticModel, func: cst.BaseExpression, name: str) -> cst.BaseExpression | None:
    """An expression for ``torch.<name>`` written the way ``func`` (a torch function) is:
    ``th.log`` gives ``th.<name>``; a bare name (``from torch import log``, ``f = torch.log``)
    gives ``<torch alias>.<name>``. None when the file does not import ``torch`` itself."""
    if isinstance(func, cst.Attribute) and model.qualified_names(func.value) == ["torch"]:
        return cst.Attribute(value=func.value, attr=cst.Name(name))
    alias = model.torch_alias
    if alias is None:
        return None
    return cst.Attribute(value=cst.Name(alias), attr=cst.Name(name))


def is_one(expr: cst.BaseExpression) -> bool:
    """Whether ``expr`` is the literal ``1`` or ``1.0`` (``1.``)."""
    if isinstance(expr, cst.Integer):
        return expr.value == "1"
    return isinstance(expr, cst.Float) and expr.value in ("1.0", "1.")


def single_argument(call: cst.Call) -> cst.BaseExpression | None:
    """The one argument of ``call`` when it takes exactly one, positional and plain."""
    if len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star:
        return call.args[0].value
    return None
