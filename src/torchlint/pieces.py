"""Linting a large file in pieces (issue 12: the 100,000-line file's memory).

A file's lint holds its whole LibCST tree, its scopes and its facts at once, and Python's
``ast`` tree of it before that: about 8 KB and 4 KB a line. A file of ``MIN_LINES`` lines
or more is linted instead in pieces of about ``PIECE_LINES`` lines, and nothing holds a tree
of the whole file:

- ``chunks`` parses the file's top-level statements with Python's parser a chunk of about
  ``CHUNK_LINES`` lines at a time, cut only before a line that starts a definition
  (``def``, ``class``, a decorator) at column 0; a cut inside a string or brackets leaves the
  chunk before it unparsable, and the chunk then grows to the next cut. The statements and
  their line numbers are the whole file's parse's (``tests/test_pieces.py`` compares them).
- ``outline`` reads from those chunks what the plan needs: each top-level definition's rows,
  the names it uses and defines, and what the semantic layer says of it (``Hooks``).
- ``plan`` cuts the definitions into runs of about ``PIECE_LINES`` lines, and gives each run
  its *context*: the definitions whose facts its own can depend on (``sized_plan``: runs
  twice as long where the contexts, linted again in each piece, would add more than
  ``SMALL_CONTEXT`` to the lines linted). A piece is the file's
  rows without those of every other definition (columns stay; ``piece_source`` maps rows
  back), its findings in its own definitions' rows are kept, and those of the module-level
  statements (imports, assignments, ``if __name__`` blocks: in every piece) come from the
  first piece.

The context of a run, from the names the ``ast`` tree holds (definition E *uses* D when E
names D, a function or class defined inside D (a method: ``x.fit()``), or a global name D
declares): the closure of what the run uses, of the definitions that use the run's and
the context's functions and methods (their callers: a caller's state reaches a function),
but for the functions the semantic layer says cannot depend on their callers, of what the
module-level statements use, and of the definitions that hold a fact of the whole file (the
semantic layer's ``shared``: a CUDA-only signal, say). Where a piece's context, the
module-level statements counted in (every piece holds them), is more than half the file, the
file is not cut: the pieces would each hold most of it, and lint it again (torch's
``common_methods_invocations.py``: 17,800 of its 27,800 rows are module-level statements;
cut in two, each piece was the whole file).

The pieces' union equals the whole file's lint only as far as the context is right:
``tools/piece_experiment.py`` compares the two on every file of a corpus, every definition
a piece of its own. This module knows nothing about PyTorch.

(Not the engine's parse of a large module in pieces, ``engine.PIECE_LINES``: that puts one
LibCST tree of the whole module together from pieces parsed apart.)
"""

from __future__ import annotations

import ast
import bisect
import re
import warnings
from dataclasses import dataclass, field
from typing import Callable, Iterator, Protocol

from torchlint.text import source_rows

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
MIN_LINES = 20_000
PIECE_LINES = 2_500
# The share of the file's lines (its definitions' and its module-level statements') that the
# pieces' contexts, all together, may add at ``PIECE_LINES`` (``sized_plan``); each piece's
# module-level statements count.
SMALL_CONTEXT = 0.05
CHUNK_LINES = 2_000
_STARTS = re.compile(rb"^(?:def |class |async def |@)", re.MULTILINE)
_NAMED = re.compile(rb"^(?:(class)|(?:async[ \t]+)?def)[ \t]+([^\s(:\[]+)", re.MULTILINE)


def chunks(text: str, starts: list[int], chunk_lines: int = CHUNK_LINES) -> Iterator[list[ast.stmt]]:
    """The top-level statements of ``text`` (a module's source), a chunk at a time, with the
    line numbers of the whole; ``starts`` are the rows (1-based) of the lines that may start
    a definition at column 0 (``definition_rows``). Raises ``SyntaxError`` where the text
    does not parse (the last chunk cannot)."""
    lines = source_rows(text)  # cut where Python's parser counts a line, not at \f or \u2028
    begin = 0  # 0-based row of the chunk's first line
    cuts = [row - 1 for row in starts if row > 1] + [len(lines)]
    index = 0
    while begin < len(lines):
        # The first cut at least ``chunk_lines`` below ``begin``.
        index = bisect.bisect_left(cuts, begin + chunk_lines, index)
        while True:
            end = cuts[min(index, len(cuts) - 1)]
            try:
                with warnings.catch_warnings():  # the user's invalid escapes are not ours to print
                    warnings.simplefilter("ignore")
                    tree = compile("\n" * begin + "".join(lines[begin:end]), "<file>", "exec", ast.PyCF_ONLY_AST)
                break
            except SyntaxError:
                if end >= len(lines):
                    raise
                index += 1  # a cut inside a string or brackets: the chunk grows to the next
        yield tree.body
        begin = end


def reader(source: bytes, chunk_lines: int = CHUNK_LINES) -> Callable[[], Iterator[list[ast.stmt]]] | None:
    """A file's top-level statements a chunk at a time (``chunks``), read again at each
    call; None where its text cannot be had (an encoding it does not decode in, a line that
    ends in a lone carriage return): its whole parse says why."""
    import io
    import tokenize

    try:
        text = source.decode(tokenize.detect_encoding(io.BytesIO(source).readline)[0])
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None
    if source.count(b"\r") != source.count(b"\r\n"):
        return None
    starts = definition_rows(source)
    return lambda: chunks(text, starts, chunk_lines)


def definition_rows(source: bytes) -> list[int]:
    """The rows (1-based) of the lines that start with ``def``, ``class``, ``async def`` or
    a decorator at column 0: where a top-level definition may start."""
    rows = []
    row = 1
    position = 0
    for match in _STARTS.finditer(source):
        row += source.count(b"\n", position, match.start())
        position = match.start()
        rows.append(row)
    return rows


def definition_names(source: bytes) -> tuple[set[str], set[str]]:
    """The names that lines at column 0 define (``def``, ``class``, ``async def``), and those
    of them that ``def`` defines: a guess at the file's top-level definitions (a line of a
    string can look like one; a name after a line continuation, or not in UTF-8, is missed)."""
    names: set[str] = set()
    functions: set[str] = set()
    for match in _NAMED.finditer(source):
        name = match.group(2).decode("utf-8", "replace")
        names.add(name)
        if match.group(1) is None:
            functions.add(name)
    return names, functions


@dataclass
class Definition:
    first: int  # its first row (its first decorator's), 1-based
    last: int
    name: str
    is_class: bool
    used: set[str]  # names and attribute names it reads, writes or declares
    defined: set[str]  # its own name, and those of the functions and classes inside it
    declared: set[str]  # the global names it declares
    facts: object = None  # what ``Hooks.definition`` said of it

    @property
    def lines(self) -> int:
        """How many rows it spans."""
        return self.last - self.first + 1


class Hooks(Protocol):
    """What the semantic layer says of a file's definitions, read chunk by chunk: it sees
    each module-level statement (``statement``) and each top-level definition
    (``definition``, with every node in it, ``walk``'s, and the names they use; its answer
    is kept), then ``finish`` gives the indices of the
    definitions every piece must hold (``shared``: a fact of the whole file) and of the
    functions whose lint cannot depend on their callers (``independent``)."""

    def statement(self, node: ast.stmt) -> None: ...

    def definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, nodes: list[ast.AST], used: set[str]) -> object: ...

    def finish(self, definitions: list[Definition]) -> tuple[set[int], set[int]]: ...


@dataclass
class Outline:
    definitions: list[Definition] = field(default_factory=list)
    prelude: set[str] = field(default_factory=set)  # the names module-level statements use
    prelude_lines: int = 0  # the rows of the module-level statements (in every piece)
    shared: set[int] = field(default_factory=set)
    independent: set[int] = field(default_factory=set)

    @property
    def lines(self) -> int:
        """The rows its definitions and its module-level statements span."""
        return sum(d.lines for d in self.definitions) + self.prelude_lines


def outline(statements: Iterator[list[ast.stmt]], hooks: Hooks | None = None, finish: bool = True) -> Outline:
    """What ``plan`` needs of a file, from its top-level statements (``chunks``); ``finish``
    False leaves ``hooks.finish`` to the caller (``shared`` and ``independent`` unset)."""
    found = Outline()
    for chunk in statements:
        for node in chunk:
            nodes = walk(node)
            used, defined, declared = names(nodes)
            if isinstance(node, DEFINITIONS):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                facts = hooks.definition(node, nodes, used) if hooks is not None else None
                found.definitions.append(
                    Definition(first, node.end_lineno or node.lineno, node.name, isinstance(node, ast.ClassDef),
                               used, defined, declared, facts)
                )
            else:
                found.prelude |= used
                found.prelude_lines += (node.end_lineno or node.lineno) - node.lineno + 1
                if hooks is not None:
                    hooks.statement(node)
    if hooks is not None and finish:
        found.shared, found.independent = hooks.finish(found.definitions)
    return found


def walk(node: ast.AST) -> list[ast.AST]:
    """Every node in ``node``, itself included, but expression contexts and operators
    (``ast.walk``'s nodes, those aside, in another order, at a third of its cost)."""
    found = []
    stack = [node]
    fields = CHILD_FIELDS
    while stack:
        node = stack.pop()
        found.append(node)
        kind = type(node)
        for name in fields[kind] if kind in fields else child_fields(kind):
            value = getattr(node, name, None)
            if type(value) is list:
                stack.extend(item for item in value if isinstance(item, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)
    return found


# Fields that hold nothing a walk here looks at: the expression context of a name, attribute,
# subscript, starred, list or tuple (``Load()``, ``Store()``), and operators (a third of a
# training file's nodes).
_LEAF_FIELDS = frozenset({"ctx", "op", "ops"})
CHILD_FIELDS: dict[type, tuple[str, ...]] = {}  # ``child_fields``, by node type


def child_fields(kind: type) -> tuple[str, ...]:
    """The fields of an ``ast`` node type that may hold the nodes of a walk: all but its
    expression context and operators."""
    if kind not in CHILD_FIELDS:
        CHILD_FIELDS[kind] = tuple(name for name in kind._fields if name not in _LEAF_FIELDS)
    return CHILD_FIELDS[kind]


def names(nodes: list[ast.AST]) -> tuple[set[str], set[str], set[str]]:
    """What a statement's nodes use (names and attribute names, read or written), the names
    of the functions and classes they define (its own and those inside it), and the names
    they declare global."""
    used: set[str] = set()
    defined: set[str] = set()
    declared: set[str] = set()
    for child in nodes:
        if isinstance(child, ast.Name):
            used.add(child.id)
        elif isinstance(child, ast.Attribute):
            used.add(child.attr)
        elif isinstance(child, DEFINITIONS):
            defined.add(child.name)
        elif isinstance(child, ast.Global):
            declared.update(child.names)
            used.update(child.names)
    return used, defined, declared


@dataclass
class Piece:
    own: list[int]  # indices of the definitions whose findings this piece reports
    context: set[int]  # other definitions linted with them, not reported
    prelude: bool = False  # whether it reports the module-level statements' findings


def plan(found: Outline, piece_lines: int = PIECE_LINES, max_context: float = 0.5) -> list[Piece] | None:
    """The file's pieces, or None where it is not worth cutting (fewer than two pieces, or a
    piece's context more than ``max_context`` of the lines: the context's definitions and the
    module-level statements, which every piece holds, of the definitions' and the
    module-level statements' lines)."""
    defs = found.definitions
    if len(defs) < 2:
        return None
    by_name: dict[str, set[int]] = {}
    callable_by_name: dict[str, set[int]] = {}
    for index, d in enumerate(defs):
        for name in d.defined | d.declared:
            by_name.setdefault(name, set()).add(index)
            # (A class is named to build it: no call of a method of it.)
            if (name != d.name or not d.is_class) and index not in found.independent:
                callable_by_name.setdefault(name, set()).add(index)
    edges: list[set[int]] = [set() for _ in defs]
    for index, d in enumerate(defs):
        for name in d.used:
            edges[index] |= by_name.get(name, set())  # what it uses
            for target in callable_by_name.get(name, ()):
                edges[target].add(index)  # its callers
    for index, targets in enumerate(edges):
        targets.discard(index)
    base = {i for name in found.prelude for i in by_name.get(name, ())} | found.shared
    base = _closure(base, edges)
    sizes = [d.lines for d in defs]
    total = found.lines
    runs: list[list[int]] = [[]]
    lines = 0
    for index, size in enumerate(sizes):
        if runs[-1] and lines + size > piece_lines:
            runs.append([])
            lines = 0
        runs[-1].append(index)
        lines += size
    if len(runs) < 2:
        return None
    pieces = []
    for number, run in enumerate(runs):
        own = set(run)
        context = (_closure(own, edges) | base) - own
        if sum(sizes[i] for i in context) + found.prelude_lines > max_context * total:
            return None
        pieces.append(Piece(run, context, prelude=number == 0))
    return pieces


def sized_plan(found: Outline, max_context: float = 0.5) -> list[Piece] | None:
    """``plan`` in runs of ``PIECE_LINES`` lines where their contexts add little (all
    together, the module-level statements of each piece counted in, ``SMALL_CONTEXT`` of
    the file's lines or less), else in runs twice as
    long. Smaller pieces hold less at once: on the generated 100,000-line training file,
    pieces of 2,500 lines (context: 0.4% more lines) took 6% less CPU time than pieces of
    5,000 with two jobs side by side (whose memory and caches they share), and their
    workers 129 MB against 185 at their peak. The context of a piece is linted again in
    each piece, so the smaller pieces pay only where it is small (where every function uses
    a large class, say)."""
    cuts = plan(found, PIECE_LINES, max_context)
    if cuts is not None:
        defs = found.definitions
        added = sum(defs[i].lines for piece in cuts for i in piece.context) + len(cuts) * found.prelude_lines
        if added <= SMALL_CONTEXT * found.lines:
            return cuts
    return plan(found, 2 * PIECE_LINES, max_context)


def _closure(start: set[int], edges: list[set[int]]) -> set[int]:
    seen = set(start)
    stack = list(start)
    while stack:
        for target in edges[stack.pop()]:
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def piece_source(rows: list[bytes], defs: list[Definition], keep: set[int]) -> tuple[bytes, list[int]]:
    """The file's rows without those of the definitions outside ``keep`` (and the blank rows
    after each: between statements, they hold nothing, and a piece's parse would take each
    for a node), and the file's row of each row left (1-based; columns stay, as whole rows
    are left out)."""
    dropped = bytearray(len(rows))
    for index, d in enumerate(defs):
        if index not in keep:
            end = d.last
            while end < len(rows) and not rows[end].strip():
                end += 1
            dropped[d.first - 1:end] = b"\x01" * (end - d.first + 1)
    kept = [row for row in range(len(rows)) if not dropped[row]]
    return b"".join(rows[row] for row in kept), [row + 1 for row in kept]


def own_rows(defs: list[Definition], piece: Piece):
    """Whether a finding's (file) row is one this piece reports: a row of its own
    definitions, or (the first piece's) a row outside every definition."""
    starts = [d.first for d in defs]
    own = set(piece.own)

    def owns(row: int) -> bool:
        index = bisect.bisect_right(starts, row) - 1
        if index >= 0 and row <= defs[index].last:
            return index in own
        return piece.prelude

    return owns
