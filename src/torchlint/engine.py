"""The lint engine: parse once, run every selected rule in one traversal, suppress, fix.

It knows nothing about PyTorch: rules and the semantic model bring that.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import functools
import io
import os
import re
import tokenize
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper

from torchlint import pieces
from torchlint._startup import cyclic_gc_paused
from torchlint.positions import LintMemo, Positions, StatementLines, statement_lines
from torchlint.rule import Applicability, Edit, Finding, Fix, Location, Prescreen, Rule, RuleContext, visits
from torchlint.text import source_rows, syntax_tree, undecodable_at
from torchlint.traversal import STATEMENTS, fast_walks, visit_batched

INVALID_FILE = "TL000"
# A fix can enable another (or be deferred by an overlapping one): re-lint until stable.
MAX_FIX_PASSES = 10


class FixMode:
    NONE: frozenset[Applicability] = frozenset()
    SAFE = frozenset({Applicability.SAFE})
    UNSAFE = frozenset({Applicability.SAFE, Applicability.UNSAFE})


@dataclass
class SourceResult:
    findings: list[Finding]
    source: bytes
    fixed_source: bytes  # equal to ``source`` when nothing was fixed
    fixed_count: int = 0
    failures: list[RuleFailure] = field(default_factory=list)  # rules that raised on this file
    fixed_codes: dict[str, int] = field(default_factory=dict)  # the fixes applied, per rule code


def _error(message: str, row: int = 1, col: int = 1) -> Finding:
    return Finding(INVALID_FILE, message, Location(row, col), Location(row, col))


def check_syntax(source: bytes | str) -> None:
    """Raise what Python's own parser finds wrong with the source."""
    syntax_tree(source)


def parse(source: bytes | str) -> cst.Module:
    """Parse with LibCST, after Python's own parser has accepted the source: it names the
    position and reason of a syntax error best, and it refuses nesting so deep that LibCST's
    native parser would overflow its stack and crash the process."""
    check_syntax(source)
    return _parse_checked(source)


# LibCST's parse grows faster than the file above about 30,000 lines (2.6 CPU-s at 30,000
# lines, 11.4 at 100,000): a larger module is parsed in pieces of about this many lines.
PIECE_LINES = 10_000
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=]")


class ParseCache:
    """The pieces of a document's last parse, by their text, for its next version: an editor
    lints a document again after each change, and a change touches a piece or two. The
    document is parsed in pieces of about ``piece_lines`` lines (``_parse_in_pieces``), and
    a piece whose text is unchanged is not parsed again. Only the last parse's pieces are
    kept. Node objects are immutable and nothing keeps facts about them between lints, so a
    piece's statements can stand in the next version's tree, and keep the positions they were
    given and the layouts of their fixes, moved by the lines added or removed above them.
    Each is a ``positions.LintMemo``: what a lint does not use is dropped after it, and what a
    lint that stopped half-way made (``stopped``) at once."""

    def __init__(self, piece_lines: int = 40) -> None:
        self.piece_lines = piece_lines
        self.pieces = LintMemo()  # parsed pieces, by their text
        # A piece's first statement, given the blank lines and comments before it, by the
        # texts of the piece before and its own.
        self.firsts = LintMemo()
        self.positions = LintMemo()  # the positions rendered for statements
        self.layouts = LintMemo()  # and their fixes' layouts (``EditRenderer``)

    def _memos(self) -> tuple[LintMemo, ...]:
        return self.pieces, self.firsts, self.positions, self.layouts

    def next_lint(self) -> None:
        for memo in self._memos():
            memo.next_lint()

    def stopped(self) -> None:
        for memo in self._memos():
            memo.stopped()


def _parse_checked(
    source: bytes | str,
    lines: StatementLines | None = None,
    piece_lines: int = PIECE_LINES,
    cache: ParseCache | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> cst.Module:
    """``parse`` of a source Python's parser has accepted; ``lines`` (its top-level
    statements' lines, from that parser) lets a large one be parsed in pieces, and any one
    in the pieces of ``cache`` (``cancelled`` asked before each piece)."""
    if cache is not None:
        piece_lines = cache.piece_lines
    module = _parse_in_pieces(source, lines, piece_lines, cache, cancelled) if lines else None
    if module is None:
        module = cst.parse_module(source)
    if not module.has_trailing_newline and source.endswith(b"\r" if isinstance(source, bytes) else "\r"):
        # LibCST sees a final newline only in "\n": a file with "\r" line endings would
        # lose its last one whenever it is fixed.
        module = module.with_changes(has_trailing_newline=True)
    return module


def _parse_in_pieces(
    source: bytes | str,
    lines: StatementLines,
    piece_lines: int,
    cache: ParseCache | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> cst.Module | None:
    """The module as ``cst.parse_module`` gives it, parsed in pieces cut before top-level
    statements that start on a line of their own, about ``piece_lines`` apart; None for a
    smaller source, or one whose pieces would not all be UTF-8 (a BOM or a coding cookie).

    Each piece is a module of its own: its statements are the module's. What LibCST gives a
    statement of the lines before it (blank lines and comments at its level) ends a piece as
    its footer: it is handed back to the next piece's first statement. Comments indented
    into the block before stay that block's, as in a whole parse (``tests/test_engine.py``
    compares the two on every fixture with pieces of a few lines)."""
    if isinstance(source, bytes):
        if source.startswith(b"\xef\xbb\xbf") or any(_CODING.match(line) for line in source.split(b"\n", 2)[:2]):
            return None
    rows = source_rows(source)
    if len(rows) < 2 * piece_lines:
        return None
    cuts, last, previous_end = [], 1, 0
    for _line, first, end in lines:
        if first > previous_end and first - last >= piece_lines:
            cuts.append(first)
            last = first
        previous_end = max(previous_end, end)
    if not cuts:
        return None
    bounds = [1, *cuts, len(rows) + 1]
    empty = source[:0]
    texts = [empty.join(rows[a - 1 : b - 1]) for a, b in zip(bounds, bounds[1:])]
    if cache is None:
        pieces = [cst.parse_module(text) for text in texts]
    else:
        pieces = []
        for text in texts:
            _check(cancelled)
            pieces.append(cache.pieces.setdefault(text, functools.partial(cst.parse_module, text)))
    body: list[cst.BaseStatement] = []
    for index, (before, piece) in enumerate(zip([None, *pieces], pieces)):
        statements = list(piece.body)
        if not statements:
            return None
        owned = [*(before.footer if before is not None else ()), *(piece.header if before is not None else ())]
        if owned:
            # (With a cache, the same texts give the same node: the statements of an
            # unchanged piece are the last version's, and so are their positions.)
            given = functools.partial(statements[0].with_changes, leading_lines=[*owned, *statements[0].leading_lines])
            key = (texts[index - 1] if index else None, texts[index])
            statements[0] = given() if cache is None else cache.firsts.setdefault(key, given)
        body.extend(statements)
    # A newline or an indentation equal to the module's default is left implicit in the tree:
    # the pieces must agree on them (a file mixing line endings or indentations is parsed whole).
    indented = [p for p in pieces if any(isinstance(getattr(s, "body", None), cst.IndentedBlock) for s in p.body)]
    if len({p.default_newline for p in pieces}) > 1 or len({p.default_indent for p in indented}) > 1:
        return None
    return cst.Module(
        body=body,
        header=pieces[0].header,
        footer=pieces[-1].footer,
        encoding=pieces[0].encoding,
        default_indent=(indented or pieces)[0].default_indent,
        default_newline=pieces[0].default_newline,
        has_trailing_newline=pieces[-1].has_trailing_newline,
    )


def parse_error_finding(error: Exception, source: bytes | str | None = None) -> Finding:
    """TL000 for source that cannot be decoded or parsed. With the file's bytes, a decoding
    error is reported at the byte that cannot be decoded (the parsers' positions count from
    the start of a string literal, or from nowhere)."""
    if isinstance(error, (UnicodeDecodeError, LookupError)):
        return _error(f"cannot decode file: {_decode_reason(str(error))}", *_undecodable(source, 1, (1, 1)))
    if isinstance(error, SyntaxError):
        row, col = error.lineno or 1, max(error.offset or 1, 1)
        if error.msg.startswith("(unicode error)"):
            reason = _decode_reason(error.msg.removeprefix("(unicode error)").strip())
            return _error(f"cannot decode file: {reason}", *_undecodable(source, row, (row, col)))
        if _CODEC_ERROR.fullmatch(error.msg):  # text that its coding cookie's codec cannot read
            return _error(f"cannot decode file: {_decode_reason(error.msg)}", *_undecodable(source, row, (row, col)))
        if error.msg.startswith(("unknown encoding", "encoding problem")):  # a coding cookie
            return _error(f"cannot decode file: {error.msg}", row, col)
        if "null bytes" in error.msg and isinstance(source, bytes) and b"\x00" in source:
            # (Python names no position: the first NUL byte's.)
            before = source[: source.index(b"\x00")]
            row = len(source_rows(before + b"x"))
            col = len(source_rows(before + b"x")[-1].decode("utf-8", errors="replace"))
        reason = error.msg.replace("source code string cannot contain null bytes", "the file contains null bytes")
        return _error(f"SyntaxError: {reason}", row, col)
    if isinstance(error, cst.ParserSyntaxError):
        return _error(f"SyntaxError: {error.message}", error.raw_line, error.raw_column + 1)
    if isinstance(error, (RecursionError, MemoryError)):
        return _error("the file is nested too deeply to parse")
    return _error(f"cannot parse file: {type(error).__name__}: {error}")


def _undecodable(source: bytes | str | None, from_row: int, otherwise: tuple[int, int]) -> tuple[int, int]:
    """Where the source's first undecodable byte lies, on ``from_row`` or after (the row its
    parser names, which counts comments' bytes out); ``otherwise`` where not known."""
    if not isinstance(source, bytes):
        return otherwise
    return undecodable_at(source, from_row) or undecodable_at(source) or otherwise


_CODEC_ERROR = re.compile(r"'(?P<codec>[^']+)' codec can't decode (?P<what>bytes? (?:0x[0-9a-f]+|in position [0-9-]+)).*?: (?P<reason>.+)")


def _decode_reason(message: str) -> str:
    """A codec's error said once: Python's "'utf-8' codec can't decode byte 0xff in position
    0: invalid start byte" (after "cannot decode file", and with a position that counts from
    the start of a string literal, not of the file) becomes "byte 0xff is not valid utf-8
    (invalid start byte)"."""
    match = _CODEC_ERROR.fullmatch(message)
    if match is None:
        return message
    what = match["what"].split()[1]
    byte = f"byte {what}" if what.startswith("0x") else "the bytes"
    return f"{byte} is not valid {match['codec']} ({match['reason']})"


# --- suppression (``suppression.py``) ----------------------------------------------------

from torchlint.suppression import Suppressions, find_suppressions  # noqa: E402


# --- running rules ----------------------------------------------------------------------


@dataclass(frozen=True)
class RuleFailure:
    """A rule that raised on a file (in its own code, the facts it asked for, or its fix):
    its findings and fixes for that file are dropped, the other rules' are kept."""

    code: str
    error: str  # the exception, with the place it was raised

    @classmethod
    def from_exception(cls, code: str, error: BaseException) -> RuleFailure:
        import traceback

        place = ""
        frames = traceback.extract_tb(error.__traceback__)
        if frames:
            place = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})"
        return cls(code, f"{type(error).__name__}: {error}{place}")

    def describe(self) -> str:
        return f"internal error in rule {self.code}: {self.error}"


def run_rules(
    module: cst.Module,
    rules: Sequence[type[Rule]],
    failures: dict[str, BaseException] | None = None,
    project: object = None,
    statement_lines: StatementLines | None = None,
    position_memo: LintMemo | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[list[Finding], Positions]:
    """One traversal of ``module`` running every rule in ``rules``. A rule that raises is
    skipped for the rest of the traversal, its findings are dropped, and its exception is
    added to ``failures`` (by code). ``project`` is handed to the rules' semantic model as it
    is (the project index's view of this file); ``statement_lines`` (Python's parser's lines
    of the module's top-level statements, when they are those of ``module``) lets positions
    be rendered one statement at a time, and ``position_memo`` (an editor's) those rendered for
    the statements of the document's last version. ``cancelled`` is asked at each statement
    the traversal enters and between the long stages of the facts the rules share
    (``RuleContext.checkpoint``): once true, ``Cancelled`` is raised there. Returns the
    findings (with TL001's, when it is among ``rules``: the ``noqa`` comments that suppress
    none of them) and the module's positions."""
    context = _rule_pass(module, rules, failures, project, statement_lines, position_memo, cancelled)
    if any(r.code == "TL001" for r in rules):  # (unused-noqa, the engine's: after the others)
        text = module.code
        own: dict[str, BaseException] = {**context.failures, **(failures or {})}
        context.findings += _unused_noqa(text, module, context.positions, context.findings, find_suppressions(text), rules, [], own)
        if failures is not None:
            failures.update(own)
    return context.findings, context.positions


def _rule_pass(module, rules, failures, project, statement_lines, position_memo, cancelled, progress=None, unit="") -> RuleContext:
    """``run_rules``'s pass: the context it ran in, whose ``findings`` are those of the rules
    that did not fail (release it when done with its positions: ``RuleContext.release``)."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    checkpoint = None if cancelled is None else functools.partial(_check, cancelled)
    context = RuleContext(wrapper, project, statement_lines, position_memo, checkpoint)
    if rules:
        visitors: list[cst.BatchableCSTVisitor] = [rule(context) for rule in rules]
        if cancelled is not None:
            visitors.append(_CancelPoints(cancelled))
        if progress is not None:
            visitors.append(_ProgressPoints(module, progress, unit))
        visit_batched(wrapper, visitors)
    if context.failures and failures is not None:
        failures.update(context.failures)
    context.findings = [f for f in context.findings if f.code not in context.failures]
    return context


class Cancelled(BaseException):
    """The lint's caller no longer wants its result (an editor's document changed again): it
    stopped at the next statement without one. A ``BaseException``, as ``asyncio``'s
    ``CancelledError``: no handler of errors (a rule's, a parse's) takes it for one."""


def _check(cancelled: Callable[[], bool] | None) -> None:
    if cancelled is not None and cancelled():
        raise Cancelled


# ``progress(done, total, unit)``: how far a long lint of one file has got (the command line's
# display for a large file: pieces done of pieces, or top-level statements walked in a pass).
StepProgress = Callable[[int, int, str], None]


class _ProgressPoints(cst.BatchableCSTVisitor):
    """Tells ``progress`` as the rules' traversal enters each top-level statement."""

    def __init__(self, module: cst.Module, progress: StepProgress, unit: str) -> None:
        super().__init__()
        self.index = {id(statement): number for number, statement in enumerate(module.body, start=1)}
        self.progress, self.unit = progress, unit
        progress(0, len(self.index), unit)  # (the facts the rules share are built before the walk)

    def get_visitors(self) -> dict[str, Callable[[cst.CSTNode], None]]:
        return {f"visit_{kind.__name__}": self._enter for kind in STATEMENTS}

    def _enter(self, node: cst.CSTNode) -> None:
        number = self.index.get(id(node))
        if number is not None:
            self.progress(number - 1, len(self.index), self.unit)


class _CancelPoints(cst.BatchableCSTVisitor):
    """Asks ``cancelled`` as the rules' traversal enters each statement."""

    def __init__(self, cancelled: Callable[[], bool]) -> None:
        super().__init__()
        self.cancelled = cancelled

    def get_visitors(self) -> dict[str, Callable[[cst.CSTNode], None]]:
        return {f"visit_{kind.__name__}": self._enter for kind in STATEMENTS}

    def _enter(self, node: cst.CSTNode) -> None:
        _check(self.cancelled)


# --- fixes ------------------------------------------------------------------------------


class FixError(Exception):
    """A fix that cannot be applied: the rule built a change the tree does not allow."""

    def __init__(self, fix: Fix, error: BaseException) -> None:
        super().__init__(str(error))
        self.fix = fix
        self.error = error


class _ApplyChanges(cst.CSTTransformer):
    """Replaces each node of ``changes`` (a node, ``RemoveFromParent()`` or a
    ``FlattenSentinel``), LibCST handling what a removal or a flattening means where the node
    stands. With ``paths`` (every node above a changed one), only the nodes on those paths are
    rebuilt: LibCST copies each node it walks into, and a node it is told not to walk into is
    kept as it is, children and all (the same tree, without copying the whole module)."""

    def __init__(self, changes: Mapping[cst.CSTNode, object], paths: frozenset | None = None) -> None:
        super().__init__()
        self.changes = changes
        self.paths = paths

    def on_visit(self, node) -> bool:  # type: ignore[override]
        # (Below a changed node nothing matters: its replacement wins, as in a full walk.)
        return self.paths is None or (node in self.paths and node not in self.changes)

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.changes.get(original_node, updated_node)


class _Ancestors(cst.CSTVisitor):
    """Every node above the ``targets`` in a tree (one read-only walk)."""

    def __init__(self, targets: frozenset) -> None:
        super().__init__()
        self.targets = targets
        self.stack: list[cst.CSTNode] = []
        self.found: set[cst.CSTNode] = set()
        self.reached: set[cst.CSTNode] = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        if node in self.targets:
            self.found.update(self.stack)
            self.reached.add(node)
        self.stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def _span(positions: Positions, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
    pos = positions[node]
    return (pos.start.line, pos.start.column), (pos.end.line, pos.end.column)


def _overlaps(a, b) -> bool:
    return not (a[1] <= b[0] or b[1] <= a[0])


def _apply(module: cst.Module, fixes: Sequence[Fix]) -> cst.Module:
    changes = {node: new for fix in fixes for node, new in fix.changes.items()}
    targets = frozenset(changes)
    with fast_walks():
        ancestors = _Ancestors(targets)
        module.visit(ancestors)
    # A changed node the walk did not reach (not in this tree) is left to LibCST's full walk.
    paths = frozenset(ancestors.found) if ancestors.reached == targets else None
    return module.visit(_ApplyChanges(changes, paths))


@dataclass
class _Applied:
    module: cst.Module
    count: int  # fixes applied
    code: str | None = None  # the module's code (None: no fix applied)
    tree: ast.Module | None = None  # and its ``ast`` tree (Python's parser accepted it)
    fixes: Sequence[Fix] = ()  # the fixes applied


def apply_fixes(module: cst.Module, positions: Positions, fixes: Sequence[Fix]) -> tuple[cst.Module, int]:
    """Apply the fixes that do not overlap an earlier one (in the given, sorted order); the
    rest wait for the next pass. A fix whose result does not parse is dropped; a fix that
    cannot be applied at all raises ``FixError``."""
    applied = _apply_fixes(module, positions, fixes)
    return applied.module, applied.count


def _apply_fixes(module: cst.Module, positions: Positions, fixes: Sequence[Fix]) -> _Applied:
    """``apply_fixes``, with the fixed module's code and its ``ast`` tree: the code is
    rendered once, and Python's own parser (the engine's syntax check, and far faster than
    LibCST's) judges whether it parses."""
    accepted: list[Fix] = []
    taken: list[tuple] = []
    for fix in fixes:
        try:
            spans = [_span(positions, node) for node in fix.changes]
        except Exception as error:  # a changed node that is not in this module
            raise FixError(fix, error) from error
        if any(_overlaps(s, t) for s in spans for t in taken):
            continue
        accepted.append(fix)
        taken.extend(spans)
    if not accepted:
        return _Applied(module, 0)
    try:
        fixed = _apply(module, accepted)
    except Exception:
        for fix in accepted:  # find the fix that cannot be applied
            try:
                _apply(module, [fix])
            except Exception as error:
                raise FixError(fix, error) from error
        raise
    parsed = _parsed(fixed)
    if parsed is not None:
        return _Applied(fixed, len(accepted), *parsed, fixes=accepted)
    # Some fix broke the syntax: keep only the ones that parse on their own.
    good = [f for f in accepted if _parsed(_apply(module, [f])) is not None]
    if not good:
        return _Applied(module, 0)
    fixed = _apply(module, good)
    parsed = _parsed(fixed)
    return _Applied(fixed, len(good), *parsed, fixes=good) if parsed is not None else _Applied(module, 0)


def _parsed(module: cst.Module) -> tuple[str, ast.Module] | None:
    """The module's code and its ``ast`` tree, or None when Python's parser refuses the code."""
    try:
        code = module.code
        return code, syntax_tree(code)
    except Exception:
        return None


# --- fixes as text edits ----------------------------------------------------------------
#
# JSON, SARIF and the editor show each fix as text edits of the file. They are computed from
# one code generation pass over the module that records where the nodes of interest are,
# then each fix renders only the nodes it changes: time linear in the file plus the fixes.


@dataclass
class _LayoutState(CodegenState):
    """Generates a module's code, recording for the changed nodes and their ancestors the
    character span each one's code covers (whitespace it owns included), the indentation in
    force where it starts, and the chain of its ancestors."""

    targets: frozenset = frozenset()
    offset: int = 0
    stack: list = field(default_factory=list)  # [node, start, indentation, needed] per open node
    spans: dict = field(default_factory=dict)  # node -> (start, end, indentation)
    ancestors: dict = field(default_factory=dict)  # target node -> its ancestors, outermost first

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        self.offset += sum(len(t) for t in self.indent_tokens)

    def before_codegen(self, node: cst.CSTNode) -> None:
        entry = [node, self.offset, tuple(self.indent_tokens), False]
        if node in self.targets:
            self.ancestors[node] = tuple(e[0] for e in self.stack)
            for open_entry in self.stack:
                open_entry[3] = True
            entry[3] = True
        self.stack.append(entry)

    def after_codegen(self, node: cst.CSTNode) -> None:
        _, start, indentation, needed = self.stack.pop()
        if needed:
            self.spans[node] = (start, self.offset, indentation)


def _is_removal(replacement: object) -> bool:
    return isinstance(replacement, cst.RemovalSentinel) or (
        isinstance(replacement, cst.FlattenSentinel) and not replacement.nodes
    )


_NEWLINE = re.compile(r"\r\n?|\n")


class EditRenderer:
    """Text edits of the fixes of one module.

    With ``positions`` (of this module) and ``text`` (the module's code, as parsed), only the
    top-level statements holding the fixes' nodes are rendered, each from the line its
    rendering starts on; a rendering that is not the text it stands for, a fix that must be
    rendered from the module, or an unknown statement, and the whole module is rendered."""

    def __init__(
        self,
        module: cst.Module,
        fixes: Sequence[Fix],
        positions: Positions | None = None,
        text: str | None = None,
        memo: LintMemo | None = None,
    ) -> None:
        self.module = module
        self._targets = frozenset(node for fix in fixes for node in fix.changes)
        self._memo = memo
        self.whole = not (positions is not None and text is not None and self._render_statements(positions, text))
        if self.whole:
            self._render_module()

    def _render_module(self) -> None:
        module = self.module
        state = _LayoutState(
            default_indent=module.default_indent, default_newline=module.default_newline, targets=self._targets
        )
        module._codegen(state)
        self.code = "".join(state.tokens)
        self.spans = state.spans
        self.ancestors = state.ancestors
        self.line_starts = [0] + [m.end() for m in _NEWLINE.finditer(self.code)]
        self.whole = True

    def _render_statements(self, positions: Positions, text: str) -> bool:
        starts: dict[cst.CSTNode, int] = {}
        targets: dict[cst.CSTNode, set] = {}
        for node in self._targets:
            found = positions.statement_start(node)
            if found is None:
                return False
            starts[found[0]] = found[1]
            targets.setdefault(found[0], set()).add(node)
        line_starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        spans, ancestors = {}, {}
        for statement, line in starts.items():
            if line > len(line_starts):
                return False
            begin = line_starts[line - 1]
            layout = self._layout(statement, frozenset(targets[statement]), begin, text)
            if layout is None:
                return False
            spans.update(layout[0])
            ancestors.update(layout[1])
        self.code, self.spans, self.ancestors, self.line_starts = text, spans, ancestors, line_starts
        return True

    def _layout(self, statement: cst.CSTNode, targets: frozenset, begin: int, text: str) -> tuple[dict, dict] | None:
        """The spans and ancestors of ``targets`` in ``statement``, rendered from ``begin`` in
        ``text`` (or kept from the last version, moved); None when the rendering is not the
        text it stands for."""
        module = self.module
        key = (statement, targets, module.default_indent, module.default_newline)
        kept = self._memo.get(key) if self._memo is not None else None
        if kept is not None:
            code, start, spans, chains = kept
            if text.startswith(code, begin):
                moved = begin - start
                spans = {n: (a + moved, b + moved, indent) for n, (a, b, indent) in spans.items()}
                return spans, {node: (module, *chain) for node, chain in chains.items()}
        state = _LayoutState(default_indent=module.default_indent, default_newline=module.default_newline, targets=targets)
        state.offset = begin
        statement._codegen(state)
        code = "".join(state.tokens)
        if code != text[begin : state.offset]:
            return None
        if self._memo is not None:
            self._memo.keep(key, (code, begin, state.spans, state.ancestors))
        return state.spans, {node: (module, *chain) for node, chain in state.ancestors.items()}

    def edits(self, fix: Fix) -> tuple[Edit, ...]:
        """The fix as the smallest text edits of the module's code, one per changed region."""
        roots = {}
        chains = []
        for node in fix.changes:
            chain = (*self.ancestors[node], node)
            chains.append(chain)
            roots[chain[self._root(chain, fix.changes)]] = chain
        # A root inside another root is rendered with it (the outer replacement wins, as when
        # the fix is applied to the tree).
        outermost = [r for r, chain in roots.items() if not any(a in roots for a in chain[: chain.index(r)])]
        if not self.whole and self.module in outermost:
            self._render_module()  # a fix rendered from the module: it has no statement's span
            return self.edits(fix)
        # Only the nodes between a root and the changed nodes below it are rebuilt.
        paths = frozenset(node for chain in chains for node in chain)
        edits = [edit for root in outermost for edit in self._render(root, fix.changes, paths)]
        return tuple(sorted(edits, key=lambda e: (e.start, e.end)))

    def _root(self, chain: tuple[cst.CSTNode, ...], changes: Mapping) -> int:
        """The index in ``chain`` of the node to render for a change of ``chain[-1]``: the
        nearest node whose code does not depend on its parent beyond the indentation (a
        statement in a body, an expression), and whose replacement fits where it stands."""
        for k in range(len(chain) - 1, 0, -1):
            node, parent = chain[k], chain[k - 1]
            if self.spans[node][1] > len(self.code):
                continue  # the last statement of a file without a final newline
            replacement = changes.get(node, node)
            if isinstance(node, cst.BaseStatement) and isinstance(parent, (cst.Module, cst.IndentedBlock)):
                if not all(_is_removal(changes.get(s, s)) for s in parent.body):
                    return k
            elif (
                isinstance(node, cst.BaseExpression)
                and not isinstance(node, cst.BaseElement)
                and isinstance(replacement, cst.CSTNode)
            ):
                return k
        return 0

    def _render(self, root: cst.CSTNode, changes: Mapping, paths: frozenset | None = None) -> list[Edit]:
        start, end, indentation = self.spans[root]
        replaced = root.visit(_ApplyChanges(changes, paths))
        state = CodegenState(
            default_indent=self.module.default_indent,
            default_newline=self.module.default_newline,
            indent_tokens=list(indentation),
        )
        if isinstance(replaced, cst.FlattenSentinel):
            for node in replaced.nodes:
                node._codegen(state)
        elif isinstance(replaced, cst.CSTNode):
            replaced._codegen(state)
        new = "".join(state.tokens)
        old = self.code[start:end]
        if new == old:
            return []
        prefix = 0
        limit = min(len(old), len(new))
        while prefix < limit and old[prefix] == new[prefix]:
            prefix += 1
        suffix = 0
        while suffix < limit - prefix and old[-1 - suffix] == new[-1 - suffix]:
            suffix += 1
        return [
            Edit(
                content=new[prefix : len(new) - suffix],
                start=self._location(start + prefix),
                end=self._location(end - suffix),
            )
        ]

    def _location(self, offset: int) -> Location:
        row = bisect.bisect_right(self.line_starts, offset)
        return Location(row, offset - self.line_starts[row - 1] + 1)


def render_edits(module: cst.Module, fix: Fix) -> tuple[Edit, ...]:
    """One fix as text edits of ``module``'s code (``EditRenderer`` does many at once)."""
    return EditRenderer(module, [fix]).edits(fix)




def _sort_key(finding: Finding):
    return (finding.cell or 0, finding.start, finding.end, finding.code, finding.message)


def _with_fast_walks(function):
    """Run ``function`` with read-only visits taking ``traversal``'s fast walk."""

    @functools.wraps(function)
    def walking(*args, **kwargs):
        with fast_walks():
            return function(*args, **kwargs)

    return walking


@cyclic_gc_paused
@_with_fast_walks
def lint_module_source(
    source: bytes | str,
    rules: Sequence[type[Rule]],
    fix_mode: frozenset[Applicability] = FixMode.NONE,
    with_edits: bool = False,
    project: object = None,
    prescreen: bool = True,
    parse_cache: ParseCache | None = None,
    tree: ast.Module | None = None,
    cancelled: Callable[[], bool] | None = None,
    progress: StepProgress | None = None,
) -> SourceResult:
    """Lint (and, with ``fix_mode``, fix) one module's source.

    ``source`` is bytes for a file (its encoding, BOM and line endings are kept) or text for
    a notebook's joined cells. Findings come back sorted, with suppressed ones removed. A
    rule that raises is reported in ``failures``, and contributes no finding and no fix.

    Python's own parser checks the source first (TL000). The prescreen then runs only the
    rules it admits (``Rule.required_words`` and ``Rule.candidate``, on that parser's tree);
    when none is left, LibCST never parses the source. ``prescreen=False`` runs every rule
    (the tests compare the two). ``parse_cache`` (an editor's, per document) lets the
    parse reuse the pieces of the document's last version; ``tree`` is the source's ``ast``
    tree, when the caller has parsed it for itself. ``cancelled`` (an editor's) is asked
    before the parse and each of its cached pieces, at each statement the rules' traversal
    enters, and before and within the semantic facts' long stages (``run_rules``): once it
    is true, the lint stops there and raises ``Cancelled``. ``progress(done, total, unit)``
    is told, in each pass of the rules, how many of the module's top-level statements the
    walk has passed (``unit``: "statements", or with fixes "statements (fix pass N)").
    """
    try:
        return _lint_source(source, rules, fix_mode, with_edits, project, prescreen, parse_cache, tree, cancelled, progress)
    except Cancelled:
        if parse_cache is not None:
            parse_cache.stopped()  # (what the last lint left stays for the next; this one's goes)
            parse_cache = None
        raise
    finally:
        if parse_cache is not None:
            parse_cache.next_lint()  # what this lint did not use is dropped


def _lint_source(source, rules, fix_mode, with_edits, project, prescreen, parse_cache, tree, cancelled, progress=None) -> SourceResult:
    try:
        rules, waiting, lines = _prescreened(source, rules, prescreen, tree)
        if not any(map(visits, rules)) and not _judges_noqa(rules, source):
            return SourceResult([], source, source)
        _check(cancelled)
        module = _parse_checked(source, lines, cache=parse_cache, cancelled=cancelled)
    except Exception as error:  # any parse failure is a finding, never a crash
        return SourceResult([parse_error_finding(error, source)], source, source)
    failures: dict[str, BaseException] = {}
    while True:
        try:
            result = _lint_module(
                source, module, [r for r in rules if r.code not in failures], fix_mode, with_edits, failures,
                [r for r in waiting if r.code not in failures], project, lines,
                parse_cache, cancelled, progress,
            )
        except RecursionError:  # the visitors recurse once per nesting level
            return SourceResult([_error("the file is nested too deeply to analyse")], source, source)
        except _Restart:
            continue  # without the rule that failed after other fixes were applied
        result.failures = [RuleFailure.from_exception(code, error) for code, error in sorted(failures.items())]
        return result


def _prescreened(
    source: bytes | str, rules: Sequence[type[Rule]], prescreen: bool = True, tree: ast.Module | None = None
) -> tuple[list[type[Rule]], list[type[Rule]], list[tuple[int, int, int]]]:
    """The rules the prescreen admits for the source and those it holds back (``prescreen``
    False: all admitted, after the syntax check), and the lines of the source's top-level
    statements (``positions.statement_lines``). The ``ast`` tree is dropped on return: it
    is a fifth of the size of LibCST's and is not needed while LibCST's is held."""
    if tree is None:
        tree = syntax_tree(source)
    lines = statement_lines(tree)
    if not prescreen:
        return list(rules), [], lines
    screen = Prescreen(tree)
    del tree
    admitted = [r for r in rules if screen.admit(r)]
    return admitted, [r for r in rules if r not in admitted], lines


@dataclass
class PiecePlan:
    """A large file cut into pieces (``plan_pieces``): each piece's source is linted on its
    own (``lint_module_source``), and ``merge`` makes their findings the file's."""

    source: bytes
    definitions: list
    cuts: list
    suppressions: Suppressions

    def sources(self) -> Iterator[tuple[bytes, list[int]]]:
        """Each piece's source, and the file's row of each of its rows."""
        rows = source_rows(self.source)
        for piece in self.cuts:
            yield pieces.piece_source(rows, self.definitions, set(piece.own) | piece.context)

    def merge(self, results: Iterable[tuple[list[Finding], list[RuleFailure], list[int]]]) -> SourceResult | None:
        """The file's result from its pieces' (findings, failures and the file's rows, in the
        order of ``sources``); None where a piece did not parse (lint the file whole: it
        says why)."""
        findings: list[Finding] = []
        failures: dict[str, RuleFailure] = {}
        for piece, (found, failed, rows) in zip(self.cuts, results):
            if any(f.code == INVALID_FILE for f in found):
                return None
            owns = pieces.own_rows(self.definitions, piece)
            for f in found:
                f = dataclasses.replace(f, **_moved(f.start, f.end, rows))
                if f.fix is not None and f.fix.edits:
                    edits = tuple(dataclasses.replace(e, **_moved(e.start, e.end, rows)) for e in f.fix.edits)
                    f.fix = dataclasses.replace(f.fix, edits=edits)
                if owns(f.start.row) and not self.suppressions.suppresses(f):
                    findings.append(f)
            for failure in failed:
                failures.setdefault(failure.code, failure)
        findings.sort(key=_sort_key)
        result = SourceResult(_dedupe(findings), self.source, self.source)
        result.failures = [failures[code] for code in sorted(failures)]
        return result


def _moved(start: Location, end: Location, rows: list[int]) -> dict[str, Location]:
    """A piece's range in the file (``rows``: the file's row of each of the piece's). An end
    at the start of a row is the end of the row before, wherever the next row kept is, but
    for an empty range there (an insertion before the row: rows left out may come between)."""
    def row(piece_row: int) -> int:  # (the row after the piece's last: an insertion at its end)
        return rows[piece_row - 1] if piece_row <= len(rows) else rows[-1] + piece_row - len(rows)

    moved = Location(row(start.row), start.column)
    if end.column == 1 and end.row > 1 and end != start:
        return {"start": moved, "end": Location(row(end.row - 1) + 1, 1)}
    return {"start": moved, "end": Location(row(end.row), end.column)}


@cyclic_gc_paused  # (the chunks' trees are no garbage while they are read; see lint_module_source)
def read_outline(
    source: bytes, hooks: pieces.Hooks | None = None, min_lines: int | None = None, chunk_lines: int | None = None
) -> pieces.Outline | None:
    """What ``plan_pieces`` reads of a large file (``pieces.outline``, before ``hooks``'
    ``finish``: it needs nothing but the file): None where the file is not cut (fewer than
    ``min_lines`` rows, lines that end in a lone carriage return, or what does not parse)."""
    min_lines = pieces.MIN_LINES if min_lines is None else min_lines
    bodies = pieces.reader(source, chunk_lines or pieces.CHUNK_LINES) if source.count(b"\n") + 1 >= min_lines else None
    if bodies is None:
        return None
    try:
        return pieces.outline(bodies(), hooks, finish=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def plan_pieces(
    source: bytes,
    hooks: pieces.Hooks | None = None,
    piece_lines: int | None = None,
    min_lines: int | None = None,
    max_context: float = 0.5,
    chunk_lines: int | None = None,
    found: pieces.Outline | None = None,
) -> PiecePlan | SourceResult | None:
    """How to lint a large file (``min_lines`` rows or more; findings, no fix applied) in
    pieces of about ``piece_lines`` lines (``torchlint/pieces.py``); ``hooks`` is the
    semantic layer's reader of its definitions (``semantic.pieces.SemanticHooks``), and
    ``found`` what ``read_outline`` read of the file with them, when read already (by
    another process); without ``piece_lines``, ``pieces.sized_plan`` sizes the pieces. None
    where the file is not cut: lint it whole (its lint then also reports a syntax error); a
    ``SourceResult`` where a ``# torchlint: noqa`` leaves nothing to lint."""
    if found is None:
        found = read_outline(source, hooks, min_lines, chunk_lines)
        if found is None:
            return None
    if hooks is not None:
        found.shared, found.independent = hooks.finish(found.definitions)
    cuts = pieces.plan(found, piece_lines, max_context) if piece_lines else pieces.sized_plan(found, max_context)
    if cuts is None:
        return None
    suppressions = find_suppressions(source.decode(tokenize.detect_encoding(io.BytesIO(source).readline)[0]))
    if suppressions.file_all:
        return SourceResult([], source, source)
    return PiecePlan(source, found.definitions, cuts, suppressions)


def lint_in_pieces(
    source: bytes,
    rules: Sequence[type[Rule]],
    project: object = None,
    hooks: pieces.Hooks | None = None,
    with_edits: bool = False,
    progress: StepProgress | None = None,
    **cut,
) -> SourceResult | None:
    """A large file's lint in pieces, one after the other (``plan_pieces``, whose arguments
    ``cut`` passes on; ``with_edits`` as ``lint_module_source``'s); None where the file is
    not cut: lint it whole. ``progress(done, total, "pieces")`` is told as pieces are done."""
    plan = plan_pieces(source, hooks, **cut)
    if plan is None or isinstance(plan, SourceResult):
        return plan
    linted: dict[bytes, SourceResult] = {}  # (pieces of the same text, when cut finely, are linted once)
    total = len(plan.cuts)

    def lint(number: int, text: bytes) -> SourceResult:
        if progress is not None:
            progress(number, total, "pieces")
        if text not in linted:
            linted.clear()
            linted[text] = lint_module_source(text, rules, with_edits=with_edits, project=project)
        return linted[text]

    result = plan.merge(
        (result.findings, result.failures, file_rows)
        for number, (text, file_rows) in enumerate(plan.sources())
        for result in [lint(number, text)]
    )
    if progress is not None:
        progress(total, total, "pieces")
    return result


class _Restart(Exception):
    """A rule failed after fixes were applied: lint the file again from its source without it."""


def _source_text(source: bytes | str, module: cst.Module) -> str:
    """The text of the parsed source, as ``module.code`` renders it (without rendering the
    whole module: LibCST's round trip is exact)."""
    if isinstance(source, str):
        return source
    try:
        return source.decode(module.encoding)
    except (UnicodeDecodeError, LookupError):
        return module.code


def _lint_module(source, module, rules, fix_mode, with_edits, failures, waiting, project, lines, cache, cancelled=None, progress=None) -> SourceResult:
    contexts: list[RuleContext] = []  # the rules' pass's, released once the lint is done with it
    try:
        return _lint_passes(
            source, module, rules, fix_mode, with_edits, failures, waiting, project, lines, cache, cancelled, contexts, progress
        )
    finally:
        for context in contexts:
            context.release()


def _lint_passes(source, module, rules, fix_mode, with_edits, failures, waiting, project, lines, cache, cancelled, contexts, progress=None) -> SourceResult:
    text = _source_text(source, module)
    suppressions = find_suppressions(text)
    if suppressions.file_all:
        return SourceResult([], source, source)
    fixed_count = 0
    fixed_codes: dict[str, int] = {}
    for pass_number in range(MAX_FIX_PASSES + 1):
        known = len(failures)
        # (An editor's positions are those of the source; ``lines`` are the current module's.)
        memo = cache.positions if pass_number == 0 and cache is not None else None
        while contexts:  # (the last pass's: its fixes are applied)
            contexts.pop().release()
        unit = f"statements (fix pass {pass_number + 1})" if fix_mode else "statements"
        context = _rule_pass(module, rules, failures, project, lines, memo, cancelled, progress, unit)
        contexts.append(context)
        findings, positions = context.findings, context.positions
        if len(failures) > known and fixed_count:
            raise _Restart
        rules = [r for r in rules if r.code not in failures]
        findings = findings + _unused_noqa(text, module, positions, findings, suppressions, rules, waiting, failures)
        findings = [f for f in findings if not suppressions.suppresses(f)]
        findings.sort(key=_sort_key)
        fixes = [f.fix for f in findings if f.fix is not None and f.fix.applicability in fix_mode]
        if not fixes or pass_number == MAX_FIX_PASSES:
            break
        try:
            applied = _apply_fixes(module, positions, fixes)
        except FixError as error:
            failures[next(f.code for f in findings if f.fix is error.fix)] = error.error
            raise _Restart from None
        if not applied.count:
            break
        # The fixed module's code, rendered once, and its ``ast`` tree: its lines for the
        # positions of the next pass, and the prescreen of the rules held back.
        module, text, tree = applied.module, applied.code, applied.tree
        fixed_count += applied.count
        _count_codes(fixed_codes, findings, applied.fixes)
        lines = statement_lines(tree)
        suppressions = find_suppressions(text)
        if waiting:  # a fix may have written the words or nodes of a rule held back
            admitted, waiting, _ = _prescreened(text, waiting, tree=tree)
            rules = rules + admitted
        applied = tree = None  # (not held while the next pass runs)
    if with_edits:
        unfixed = fixed_count == 0
        findings = _with_edits(
            module, findings, failures, positions, text, cache.layouts if unfixed and cache is not None else None
        )
        if fixed_count and any(f.code in failures for f in findings):
            raise _Restart
        findings = [f for f in findings if f.code not in failures]
    for finding in findings:
        if finding.fix is not None:
            finding.fix = dataclasses.replace(finding.fix, changes={})
    if fixed_count == 0:
        output = source
    else:  # (``module.bytes`` is its code, encoded)
        output = text.encode(module.encoding) if isinstance(source, bytes) else text
    return SourceResult(_dedupe(findings), source, output, fixed_count, fixed_codes=fixed_codes)


def _judges_noqa(rules: Sequence[type[Rule]], source: bytes | str) -> bool:
    """Whether TL001 (unused-noqa) is selected and the source has a ``# noqa`` it judges: the
    module is then parsed even where no other rule looks at it."""
    from torchlint.suppression import UNUSED_NOQA, names_our_codes

    return any(r.code == UNUSED_NOQA for r in rules) and names_our_codes(source)


def _unused_noqa(text, module, positions, findings, suppressions, rules, waiting, failures) -> list[Finding]:
    """TL001's findings for the pass (``noqa.unused_noqa``): the rules selected are those run,
    those the prescreen held back and those that failed. A failure of its own is TL001's, as
    a rule's would be."""
    from torchlint.suppression import UNUSED_NOQA, unused_noqa

    rule = next((r for r in rules if r.code == UNUSED_NOQA), None)
    if rule is None:
        return []
    selected = [r.code for r in (*rules, *waiting)]
    try:
        return unused_noqa(text, module, positions, findings, suppressions, selected + list(failures), failures, rule)
    except (RecursionError, MemoryError):
        raise
    except Exception as error:
        failures[UNUSED_NOQA] = error
        return []


def _count_codes(counts: dict[str, int], findings: Sequence[Finding], fixes: Sequence[Fix]) -> None:
    """Add the applied ``fixes`` to ``counts``, by the code of the finding each came with."""
    codes = {id(f.fix): f.code for f in findings if f.fix is not None}
    for fix in fixes:
        code = codes.get(id(fix))
        if code is not None:
            counts[code] = counts.get(code, 0) + 1


def _with_edits(
    module: cst.Module,
    findings: list[Finding],
    failures: dict[str, BaseException],
    positions: Positions | None,
    text: str | None,
    memo: LintMemo | None = None,
) -> list[Finding]:
    """The findings with their fixes' text edits; ``positions`` and ``text`` are the module's
    (None: a fixed module, rendered whole), ``memo`` an editor's layouts of the last version."""
    fixed = [f for f in findings if f.fix is not None]
    if not fixed:
        return findings
    renderer = EditRenderer(module, [f.fix for f in fixed], positions, text, memo)
    for finding in fixed:
        try:
            edits = renderer.edits(finding.fix)
        except (RecursionError, MemoryError):
            raise
        except Exception as error:  # a replacement that cannot be generated
            failures.setdefault(finding.code, error)
            continue
        finding.fix = dataclasses.replace(finding.fix, edits=edits)
    return findings


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen = set()
    unique = []
    for f in findings:
        key = (f.cell, f.start, f.end, f.code, f.message)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def unified_diff(before: str, after: str, path: str) -> str:
    import difflib

    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}"
        )
    )
