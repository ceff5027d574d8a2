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

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from torchlint.rule import Finding, Location
# TL001 and the comments it reads live in the engine's layer; WITHHELD and without_codes are re-exported.
from torchlint.suppression import (
    Comment,
    INVALID_FILE,
    UNUSED_NOQA,
    WITHHELD,
    directive,
    matches,
    without_codes,
)


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
    from torchlint.suppression import find_suppressions

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
