"""Suppression comments: how the engine reads ``# noqa`` and ``# torchlint: noqa``, and TL001
(unused-noqa, ruff's RUF100), which judges them after the engine has suppressed what they name.
In the engine's layer (the engine asks it; ``noqa.py``, the command line's ``--add-noqa``, and
the language server build on it)."""

from __future__ import annotations

import dataclasses
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Sequence

import libcst as cst

from torchlint.rule import Applicability, Finding, Fix, Location

INVALID_FILE = "TL000"  # (the engine's; it cannot be suppressed)


_CODES = r"(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
_LINE_NOQA = re.compile(r"#\s*noqa" + _CODES, re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*torchlint\s*:\s*noqa" + _CODES, re.IGNORECASE)
ALL_CODES = None  # a bare noqa


@dataclass
class Suppressions:
    lines: dict[int, set[str] | None]
    file: set[str] | None  # None: the whole file is suppressed
    file_all: bool = False

    def suppresses(self, finding: Finding) -> bool:
        if finding.code == INVALID_FILE:
            return False
        if self.file_all or noqa_names(finding.code, self.file or ()):
            return True
        if finding.start.row in self.lines:
            codes = self.lines[finding.start.row]
            return codes is ALL_CODES or noqa_names(finding.code, codes)
        return False


def noqa_names(code: str, names: Iterable[str]) -> bool:
    """Whether a ``noqa`` comment's codes name ``code``: the code itself, or a prefix of it
    (``# noqa: TL5`` names TL501 and TL502), as ``--select`` and ``--ignore`` take prefixes.
    (ruff's noqa takes whole codes only; SPEC section 4 takes prefixes.)"""
    return any(code.startswith(name) for name in names)


def _comments(text: str) -> Iterable[tuple[int, str]]:
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # Newer syntax than this Python's tokenizer knows: fall back to a line scan.
        for row, line in enumerate(text.splitlines(), 1):
            if "#" in line:
                yield row, line[line.index("#"):]


def _codes(match: re.Match) -> set[str] | None:
    codes = match.group("codes")
    return None if codes is None else {c.upper() for c in re.split(r"[\s,]+", codes) if c}


def find_suppressions(text: str) -> Suppressions:
    result = Suppressions(lines={}, file=set())
    if "noqa" not in text.lower():
        return result
    for row, comment in _comments(text):
        file_match = _FILE_NOQA.search(comment)
        if file_match:
            codes = _codes(file_match)
            if codes is None:
                result.file_all = True
            else:
                result.file.update(codes)
            continue
        line_match = _LINE_NOQA.search(comment)
        if line_match:
            codes = _codes(line_match)
            previous = result.lines.get(row, set())
            result.lines[row] = None if codes is None or previous is None else previous | codes
    return result



UNUSED_NOQA = "TL001"
# The help line of a finding whose fix the configuration withholds (`fixable` / `unfixable`).
WITHHELD = "not applied: `fixable` / `unfixable` in the configuration"
_OURS = re.compile(r"TL\d+")
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
# A line `# noqa` naming one of our codes: the test that decides whether TL001 has anything
# to look at (most files have none, and LibCST then need not parse a file for it alone).
_NAMES_OURS = re.compile(r"noqa\s*:[^\r\n]*?\bTL\d", re.IGNORECASE)
_NAMES_OURS_BYTES = re.compile(rb"noqa\s*:[^\r\n]*?\bTL\d", re.IGNORECASE)


def _line_noqa() -> re.Pattern:
    return _LINE_NOQA  # the engine's own reading of a `# noqa`


def _file_noqa() -> re.Pattern:
    return _FILE_NOQA


def names_our_codes(source: bytes | str) -> bool:
    """Whether the source may hold a ``# noqa`` naming a torchlint code."""
    pattern = _NAMES_OURS_BYTES if isinstance(source, bytes) else _NAMES_OURS
    return pattern.search(source) is not None


# --- reading ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Comment:
    row: int  # 1-based
    column: int  # 0-based, in characters
    text: str  # the comment as written, from its `#`


@dataclass(frozen=True)
class Directive:
    """A line's ``# noqa``: its comment, the span of the directive in it, and its codes with
    their spans (offsets in the comment's text); ``codes`` is None for a bare ``# noqa``."""

    comment: Comment
    start: int
    end: int
    codes: tuple[tuple[str, int, int], ...] | None

    @property
    def row(self) -> int:
        return self.comment.row


def comments(text: str) -> Iterator[Comment]:
    """The comments of a module's text, in order (a line scan where the tokenizer gives up)."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                yield Comment(token.start[0], token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        for row, line in enumerate(io.StringIO(text, newline="").readlines(), 1):
            if "#" in line:
                column = line.index("#")
                yield Comment(row, column, line[column:].rstrip("\r\n"))


def directive(comment: Comment) -> Directive | None:
    """The line ``# noqa`` in ``comment``, read as the engine reads it (a file-level
    ``# torchlint: noqa`` is none)."""
    if _file_noqa().search(comment.text):
        return None
    match = _line_noqa().search(comment.text)
    if match is None:
        return None
    if match.group("codes") is None:
        return Directive(comment, match.start(), match.end(), None)
    base = match.start("codes")
    codes = tuple(
        (code.group().upper(), base + code.start(), base + code.end()) for code in _CODE.finditer(match.group("codes"))
    )
    return Directive(comment, match.start(), match.end(), codes)


def directives(text: str) -> list[Directive]:
    return [d for d in map(directive, comments(text)) if d is not None]


def matches(code: str, selector: str) -> bool:
    """Whether a ``# noqa`` code names ``code`` (itself, or a prefix of it), as the engine reads it."""
    return noqa_names(code, (selector,))


# --- TL001 -----------------------------------------------------------------------------


def unused_noqa(
    text: str,
    module: cst.Module,
    positions,
    findings: Sequence[Finding],
    suppressions,
    selected: Iterable[str],
    failed: Iterable[str],
    rule: type | None,
) -> list[Finding]:
    """TL001's findings for a module: each line ``# noqa: CODES`` with a torchlint code that
    suppressed none of ``findings`` (the pass's findings before suppression), that names no
    rule, or that names a rule not selected, or that repeats itself. ``suppressions`` is the
    engine's reading of the module's ``noqa`` comments (a finding counts for a code when the
    engine suppressed it on that line, not at file level, and the code names it);
    ``selected``, the codes of the rules selected for the file; ``failed``, those of the rules
    that raised on it (what they would have found is unknown: their codes are left alone);
    ``rule``, TL001's rule class as selected (None: not selected), which knows every
    rule's code (``known_codes``)."""
    if rule is None or not names_our_codes(text):
        return []
    known = rule.known_codes()
    selected, failed = set(selected), set(failed)
    at_line = dataclasses.replace(suppressions, file=set(), file_all=False)
    at_file = dataclasses.replace(suppressions, lines={})
    by_row: dict[int, list[Finding]] = {}
    for finding in findings:
        if finding.code != UNUSED_NOQA and at_line.suppresses(finding) and not at_file.suppresses(finding):
            by_row.setdefault(finding.start.row, []).append(finding)
    reported = []
    nodes: dict | None = None  # the comments' nodes, found once a fix needs them
    for found in directives(text):
        if not found.codes:
            continue  # a bare `# noqa`: the project's other linters may need it
        kinds: dict[str, list[str]] = {}
        removed: set[int] = set()
        seen: set[str] = set()
        for index, (code, _, _) in enumerate(found.codes):
            kind = _judge(code, seen, known, selected, failed, by_row.get(found.row, ()))
            seen.add(code)
            if kind is not None:
                kinds.setdefault(kind, []).append(code)
                removed.add(index)
        if not kinds:
            continue
        detail = "; ".join(f"{kind}: {', '.join(f'`{c}`' for c in codes)}" for kind, codes in sorted(kinds.items(), key=_kind_order))
        comment = found.comment
        start = Location(found.row, comment.column + found.start + 1)
        end = Location(found.row, comment.column + found.end + 1)
        finding = Finding(UNUSED_NOQA, f"unused `noqa` directive ({detail})", start, end)
        if not getattr(rule, "fix_withheld", False):
            if nodes is None:
                nodes = _comment_nodes(module, positions, text)
            finding.fix = _removal(nodes, found, removed)
        else:
            finding.help = f"Remove unused `noqa` directive ({WITHHELD})"
        reported.append(finding)
    return reported


_KINDS = ("duplicated", "unused", "non-enabled", "unknown")


def _kind_order(item: tuple[str, list[str]]) -> int:
    return _KINDS.index(item[0])


def _judge(code: str, seen: set[str], known: list[str], selected: set[str], failed: set[str], on_row) -> str | None:
    """Why the ``# noqa`` code ``code`` is unused, or None when it is used or not ours to judge."""
    if code in seen:
        return "duplicated" if _OURS.fullmatch(code) else None
    if not _OURS.fullmatch(code) or code == UNUSED_NOQA:
        return None  # another tool's code; and TL001 itself, which this very report obeys
    named = [c for c in known if matches(c, code)]
    if not named:
        return "unknown"
    if any(matches(f.code, code) for f in on_row):
        return None
    if any(c in failed for c in named):
        return None  # the rule raised on this file: what it would have found is unknown
    return "unused" if any(c in selected for c in named) else "non-enabled"


def without_codes(found: Directive, removed: set[int]) -> str | None:
    """The comment's text once the codes at ``removed`` (indexes) are taken out of its
    directive; None where nothing of the comment is left."""
    text = found.comment.text
    kept = [code for index, (code, _, _) in enumerate(found.codes or ()) if index not in removed]
    if kept:
        first, last = found.codes[0][1], found.codes[-1][2]
        spelled = [text[s:e] for index, (_, s, e) in enumerate(found.codes) if index not in removed]
        return text[:first] + ", ".join(spelled) + text[last:]
    before, after = text[: found.start].rstrip(), text[found.end :].strip()
    if before and before != "#":
        return before + (f"  {after}" if after.startswith("#") else f" {after}" if after else "")
    if not after:
        return None
    return after if after.startswith("#") else f"# {after}"


def _removal(nodes: Mapping[int, tuple[cst.CSTNode, cst.Comment]], found: Directive, removed: set[int]) -> Fix | None:
    """The fix that takes the unused codes out of the directive, or the comment out of the
    line where nothing else is left of it (its line too, for a comment on a line of its own);
    ``nodes``: each row's comment node (``_comment_nodes``)."""
    node = nodes.get(found.row)
    if node is None:
        return None
    parent, comment = node
    new = without_codes(found, removed)
    if new is not None:
        change: Mapping = {comment: cst.Comment(new)}
    elif isinstance(parent, cst.TrailingWhitespace):
        change = {parent: parent.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None)}
    else:  # an `EmptyLine`: the comment's whole line
        change = {parent: cst.RemoveFromParent()}
    return Fix("Remove unused `noqa` directive", change, Applicability.SAFE)


class _Comments(cst.CSTVisitor):
    """Every comment of a tree with the node that holds it, in the tree's order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[cst.CSTNode, cst.Comment]] = []

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        if node.comment is not None:
            self.found.append((node, node.comment))

    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        if node.comment is not None:
            self.found.append((node, node.comment))


def _comment_nodes(module: cst.Module, positions, text: str) -> dict[int, tuple[cst.CSTNode, cst.Comment]]:
    """The comment node of each row that has one. The tree holds the comments in the order of
    the text: the tokenizer's rows are theirs when the two agree (else LibCST's positions,
    which render the module)."""
    visitor = _Comments()
    module.visit(visitor)
    tokens = list(comments(text))
    if [t.text for t in tokens] == [c.value for _, c in visitor.found]:
        return {t.row: node for t, node in zip(tokens, visitor.found)}
    return {positions[comment].start.line: (parent, comment) for parent, comment in visitor.found}


# --- --add-noqa ------------------------------------------------------------------------


