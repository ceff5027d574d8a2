"""``# noqa`` comments: what they name, TL001 unused-noqa (ruff's RUF100), and the comments
``--add-noqa`` writes.

TL001 is computed by the engine after suppression, in the same pass as the rules (it needs to
know which findings each ``# noqa: CODES`` suppressed): ``unused_noqa`` is that step.
``add_noqa`` writes ``# noqa: CODES`` on the lines of the findings a run reports, merging
with a ``# noqa`` already there, as ``ruff --add-noqa`` does.

Only torchlint's own codes (``TL`` and digits) are ours to judge: ``# noqa: E501`` and a
bare ``# noqa`` belong to the other linters of the project too, and TL001 never reports them.
Nothing here knows PyTorch.
"""

from __future__ import annotations

import dataclasses
import io
import re
import tokenize
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Sequence

import libcst as cst

from torchlint.rule import Applicability, Finding, Fix, Location

UNUSED_NOQA = "TL001"
# The help line of a finding whose fix the configuration withholds (`fixable` / `unfixable`).
WITHHELD = "not applied: `fixable` / `unfixable` in the configuration"
INVALID_FILE = "TL000"  # (the engine's; it cannot be suppressed)
_OURS = re.compile(r"TL\d+")
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
# A line `# noqa` naming one of our codes: the test that decides whether TL001 has anything
# to look at (most files have none, and LibCST then need not parse a file for it alone).
_NAMES_OURS = re.compile(r"noqa\s*:[^\r\n]*?\bTL\d", re.IGNORECASE)
_NAMES_OURS_BYTES = re.compile(rb"noqa\s*:[^\r\n]*?\bTL\d", re.IGNORECASE)


def _line_noqa() -> re.Pattern:
    from torchlint.engine import _LINE_NOQA  # the engine's own reading of a `# noqa`

    return _LINE_NOQA


def _file_noqa() -> re.Pattern:
    from torchlint.engine import _FILE_NOQA

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
    from torchlint.engine import noqa_names

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
    ``rule``, TL001's rule class as selected (None: not selected)."""
    if rule is None or not names_our_codes(text):
        return []
    from torchlint.rules import all_rules

    known = [r.code for r in all_rules()]
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


def open_rows(text: str) -> tuple[set[int], dict[int, Comment]] | None:
    """The rows whose end a comment can be added to (not inside a string, not continued by a
    backslash: the tokenizer ends them with a NEWLINE or NL token), and the comment each row
    has; None where the text does not tokenize."""
    rows: set[int] = set()
    found: dict[int, Comment] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL):
                rows.add(token.start[0])
            elif token.type == tokenize.COMMENT:
                rows.add(token.start[0])
                found[token.start[0]] = Comment(token.start[0], token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return rows, found


def line_with_codes(line: str, comment: Comment | None, codes: Sequence[str], shift: int = 0) -> str | None:
    """``line`` (without its line ending) with ``# noqa: CODES`` added: into its ``# noqa``
    when it has one (after the codes there), else after the code and any comment, two spaces
    before it, as ruff writes it; None when it has a bare ``# noqa`` (it suppresses all).
    ``comment`` is the line's comment, at ``shift`` more columns in ``line`` than it says."""
    found = directive(comment) if comment is not None else None
    if found is not None:
        if found.codes is None:
            return None
        column = comment.column + shift
        new = [c for c in codes if not any(matches(c, named) for named, _, _ in found.codes)]
        if not new:
            return line
        at = column + found.codes[-1][2]
        return line[:at] + "".join(f", {c}" for c in new) + line[at:]
    return line.rstrip(" \t") + "  # noqa: " + ", ".join(codes)


@dataclass
class Added:
    """What ``add_to_text`` did: the new text, the rows it gave a ``# noqa``, and the rows it
    could not (the line ends inside a string or continues with a backslash)."""

    text: str
    rows: list[int]
    refused: list[int]


_ENDING = re.compile(r"\r\n|\r|\n")


def add_to_text(text: str, wanted: Mapping[int, Iterable[str]], linted: str | None = None, shift: Mapping[int, int] | None = None) -> Added:
    """``text`` with ``# noqa: CODES`` on each row of ``wanted`` (row -> codes). ``linted`` is
    the text as Python reads it where it differs from ``text`` without moving rows (a notebook
    cell with its IPython lines masked and its margin removed; ``shift``: the margin's width per
    row); its tokens say which rows can take a comment."""
    read = open_rows(text if linted is None else linted)
    lines = io.StringIO(text, newline="").readlines()
    done, refused = [], []
    for row in sorted(wanted):
        codes = sorted(set(wanted[row]))
        if read is None or row not in read[0] or row > len(lines):
            refused.append(row)
            continue
        line = lines[row - 1]
        body = _ENDING.split(line, 1)[0]
        new = line_with_codes(body, read[1].get(row), codes, (shift or {}).get(row, 0))
        if new is None or new == body:
            continue
        lines[row - 1] = new + line[len(body) :]
        done.append(row)
    return Added("".join(lines), done, refused)


def wanted_rows(findings: Iterable[Finding]) -> dict[int | None, dict[int, set[str]]]:
    """The codes to write per cell (None: a plain file) and row: every finding but TL000 (a
    file that cannot be read cannot be suppressed) and TL001 (remove the unused directive
    instead)."""
    wanted: dict[int | None, dict[int, set[str]]] = {}
    for finding in findings:
        if finding.code in (INVALID_FILE, UNUSED_NOQA):
            continue
        wanted.setdefault(finding.cell, {}).setdefault(finding.start.row, set()).add(finding.code)
    return wanted


def _suppressed(text: str, rows: Mapping[int, Iterable[str]]) -> list[int]:
    """The rows of ``rows`` on which the engine, reading ``text``, does not suppress all of the
    row's codes (a comment it reads otherwise, a file-level ``# torchlint: noqa`` on the line)."""
    from torchlint.engine import find_suppressions

    read = find_suppressions(text)
    return [
        row for row, codes in rows.items()
        if not all(read.suppresses(Finding(code, "", Location(row, 1), Location(row, 1))) for code in codes)
    ]


def _same_code(before: str, after: str) -> bool:
    """Whether two texts are the same program (only comments and trailing blanks differ)."""
    import ast

    from torchlint.text import syntax_tree

    try:
        old = syntax_tree(before)
    except Exception:  # (never linted as Python: nothing to compare, and nothing to break)
        return True
    try:
        return ast.dump(old) == ast.dump(syntax_tree(after))
    except Exception:
        return False


def _checked(text: str, wanted: Mapping[int, Iterable[str]], linted: str | None = None, shift=None, program=None) -> Added:
    """``add_to_text``, keeping only the rows where the engine then reads the ``# noqa`` as
    written and the program is unchanged (``program``: the text Python reads from a new
    ``text``, when that is not ``text`` itself)."""
    wanted = {row: set(codes) for row, codes in wanted.items()}
    refused: list[int] = []
    while True:
        added = add_to_text(text, wanted, linted, shift)
        new = added.text if program is None else program(added.text)
        bad = _suppressed(new, {row: wanted[row] for row in added.rows})
        if not bad and not _same_code(text if program is None else program(text), new):
            bad = list(added.rows)  # (cannot happen: a comment at a line's end is no code)
        if not bad:
            added.refused = sorted(refused + added.refused)
            return added
        refused += bad
        wanted = {row: codes for row, codes in wanted.items() if row not in bad}


@dataclass
class FileNoqa:
    """``add_noqa_source``'s answer: the file's new bytes (None: unchanged), how many lines got
    a ``# noqa``, and where one could not be written (``cell N:ROW`` or ``ROW``)."""

    data: bytes | None
    added: int
    refused: list[str]


def add_noqa_source(source: bytes, findings: Iterable[Finding], notebook: bool = False) -> FileNoqa:
    """A file's bytes with ``# noqa: CODES`` on the line of each finding (encoding, BOM and
    line endings kept; a notebook's JSON laid out as it was)."""
    wanted = wanted_rows(findings)
    if not wanted:
        return FileNoqa(None, 0, [])
    if notebook:
        return _add_to_notebook(source, wanted)
    encoding = tokenize.detect_encoding(io.BytesIO(source).readline)[0]
    text = source.decode(encoding)
    added = _checked(text, wanted.get(None, {}))
    data = added.text.encode(encoding) if added.rows else None
    return FileNoqa(data, len(added.rows), [str(row) for row in added.refused])


def _add_to_notebook(source: bytes, wanted: dict[int | None, dict[int, set[str]]]) -> FileNoqa:
    from torchlint.notebook import _code_cells, _dump, _lines, _load

    notebook, original = _load(source)
    cells = {cell.number: cell for cell in _code_cells(notebook)}
    count, refused = 0, []
    for number, rows in sorted((n, r) for n, r in wanted.items() if n is not None):
        cell = cells.get(number)
        if cell is None:
            refused += [f"cell {number}:{row}" for row in sorted(rows)]
            continue
        masked = {row for row, line in enumerate(cell.lines, 1) if line in cell.masked}
        shift = {row: len(cell.margin) for row, line in enumerate(cell.lines, 1) if line.strip()}

        def program(text: str, cell=cell, masked=masked) -> str:
            """The cell as Python reads it (rows do not move: masked lines masked, margin removed)."""
            return "".join(
                cell.lines[row - 1] if row in masked else line.removeprefix(cell.margin) if line.strip() else line
                for row, line in enumerate(_lines(text), 1)
            )

        added = _checked(
            cell.text, {row: codes for row, codes in rows.items() if row not in masked}, "".join(cell.lines), shift, program
        )
        refused += [f"cell {number}:{row}" for row in sorted(set(added.refused) | (set(rows) & masked))]
        if added.rows:
            raw = notebook["cells"][number - 1]
            raw["source"] = _lines(added.text) if isinstance(raw["source"], list) else added.text
            count += len(added.rows)
    return FileNoqa(_dump(notebook, original) if count else None, count, refused)
