"""Positions of nodes, rendered one top-level statement at a time.

LibCST's ``PositionProvider`` renders the whole module, tracking the position of every node,
to answer for any one of them: a seventh of a run on a file with a single finding.
``Positions`` renders only the top-level statement that holds the node asked about, starting
at the line Python's own parser gave that statement (``statement_lines``, read off the
``ast`` tree the syntax check builds anyway). The statement's rendered start must land on
the line the parser gave it; if it does not (or the lines are unknown, or the node's
statement cannot be found), every answer comes from LibCST's ``PositionProvider``. The
positions are LibCST's own either way (``tests/test_positions.py`` compares them on every
fixture). In an editor, a ``LintMemo`` carries the positions of a document's statements
to the lint of its next version, which takes them, moved, for the statements left unchanged.

It knows nothing about PyTorch.
"""

from __future__ import annotations

import ast
from typing import Callable, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

# Per top-level ``ast`` statement: the line of its first token; for a decorated definition,
# the line of its first decorator (else the same line); and its last line.
StatementLines = Sequence[tuple[int, int, int]]


def statement_lines(tree: ast.Module) -> list[tuple[int, int, int]]:
    """What ``Positions`` (and the engine's parse in pieces) need of a module's ``ast`` tree."""
    lines = []
    for statement in tree.body:
        decorators = getattr(statement, "decorator_list", None)
        first = decorators[0].lineno if decorators else statement.lineno
        lines.append((statement.lineno, first, statement.end_lineno or statement.lineno))
    return lines


class LintMemo:
    """What one lint of a document made, by key, for the next lint of the same document (an
    editor's): ``engine.ParseCache`` keeps the parsed pieces and statements in them, so that a
    statement left unchanged is the same node object in the next version, and what was
    rendered for it. An entry the next lint does not use is dropped after it
    (``next_lint``)."""

    def __init__(self) -> None:
        self._last: dict = {}
        self._used: dict = {}

    def get(self, key):
        found = self._used.get(key)
        if found is None:
            found = self._last.get(key)
            if found is not None:
                self._used[key] = found
        return found

    def keep(self, key, value) -> None:
        self._used[key] = value

    def setdefault(self, key, make: Callable[[], object]):
        """The entry of ``key``, made (and kept) if there is none."""
        found = self.get(key)
        if found is None:
            found = make()
            self.keep(key, found)
        return found

    def next_lint(self) -> None:
        self._last, self._used = self._used, {}

    def stopped(self) -> None:
        """The lint stopped half-way (its document changed again): what it made is dropped (it
        was for a version already replaced), and what it used of the last lint stays, as it
        was, for the next (nothing piles up while each keystroke stops the lint before)."""
        self._used = {}

    def __len__(self) -> int:
        return len(self._last.keys() | self._used.keys())


class Positions:
    """``positions[node]``: the node's ``CodeRange`` as LibCST's ``PositionProvider`` gives it.

    ``top_statement(node)`` names the module's top-level statement holding ``node`` when it
    is known cheaply (else None: the whole module is rendered)."""

    def __init__(
        self,
        wrapper: MetadataWrapper,
        lines: StatementLines | None,
        top_statement: Callable[[cst.CSTNode], cst.CSTNode | None],
        memo: LintMemo | None = None,
    ) -> None:
        self._wrapper = wrapper
        self.module = wrapper.module
        self._top_statement = top_statement
        self._computed: dict[cst.CSTNode, CodeRange] = {}  # from the statements rendered
        self._full: object | None = None
        self._starts = self._statement_starts(wrapper.module, lines) if lines is not None else None
        self._rendered: set[cst.CSTNode] = set()
        self._memo = memo
        self._moved: dict[cst.CSTNode, tuple[dict, int]] = {}  # statement -> (positions, lines moved)

    @staticmethod
    def _statement_starts(module: cst.Module, lines: StatementLines) -> dict | None:
        """Per top-level statement: the line its rendering starts on (its leading lines
        included) and the line its own position must start on."""
        starts = {}
        index = 0
        for statement in module.body:
            if index >= len(lines):
                return None
            line, first, _end = lines[index]
            index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
            before = len(statement.leading_lines)
            decorators = getattr(statement, "decorators", ())
            if decorators:
                before += len(decorators[0].leading_lines)
            starts[statement] = (first - before, line)
        return starts if index == len(lines) else None

    def statement_start(self, node: cst.CSTNode) -> tuple[cst.CSTNode, int] | None:
        """The top-level statement holding ``node`` and the line its rendering starts on (its
        leading lines included), or None where they are not known."""
        if self._starts is None:
            return None
        statement = self._top_statement(node)
        start = self._starts.get(statement) if statement is not None else None
        return None if start is None else (statement, start[0])

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._computed.get(node)
        if found is not None:
            return found
        if self._full is None and self._starts is not None:
            statement = self._top_statement(node)
            if statement is not None and statement not in self._rendered and self._render(statement):
                found = self._computed.get(node)
                if found is not None:
                    return found
            moved = self._moved.get(statement) if statement is not None else None
            if moved is not None and node in moved[0]:
                found = self._computed[node] = _moved(moved[0][node], moved[1])
                return found
        if self._full is None:
            self._full = self._wrapper.resolve(PositionProvider)
        return self._full[node]

    def _render(self, statement: cst.CSTNode) -> bool:
        start = self._starts.get(statement)
        if start is None:
            return False
        key = (statement, self.module.default_indent, self.module.default_newline)
        kept = self._memo.get(key) if self._memo is not None else None
        if kept is not None:
            first, line, computed = kept
            if line - first == start[1] - start[0]:  # its own start as far below its leading lines
                self._moved[statement] = (computed, start[0] - first)
                self._rendered.add(statement)
                return True
        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=self.module.default_indent, default_newline=self.module.default_newline, provider=provider
        )
        state.line = start[0]
        statement._codegen(state)
        self._rendered.add(statement)
        if provider._computed[statement].start.line != start[1]:
            self._starts = None  # the lines do not match this tree: render the whole module
            return False
        self._computed.update(provider._computed)
        if self._memo is not None:
            self._memo.keep(key, (start[0], start[1], provider._computed))
        return True


def _moved(position: CodeRange, lines: int) -> CodeRange:
    if not lines:
        return position
    start, end = position.start, position.end
    return CodeRange(CodePosition(start.line + lines, start.column), CodePosition(end.line + lines, end.column))
