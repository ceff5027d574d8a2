"""Jupyter notebooks: the code cells are linted and fixed as one program.

A loop in one cell and the model in another are one script, as the kernel runs them, so the
code cells are joined into one module for the engine. Between two cells goes a boundary line
(a ``pass`` statement carrying a marker comment): a fix that inserts a statement after the
last one of a cell, or before the first one of the next, lands on the right side of it, and
splitting the fixed module at the boundaries gives each cell its new source. IPython syntax
(line magics, shell escapes, help lines) is masked by ``pass`` lines of the same indentation,
so the module parses and rows stay aligned; masked lines get their text back when the cells
are rebuilt.

Findings carry the 1-based cell number, counting every cell (markdown included) as Jupyter
shows them, and rows and columns within the cell. A fix rewrites only the ``source`` of the
cells it changed; outputs, metadata, ids, key order and the JSON layout are kept.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import re
import tokenize
from dataclasses import dataclass, field
from typing import Sequence

from torchlint.engine import INVALID_FILE, FixMode, SourceResult, lint_module_source
from torchlint.rule import Applicability, Edit, Finding, Location, Rule

BOUNDARY = "pass  # __torchlint_cell_boundary__\n"
_MASK = "pass  # __torchlint_masked_line_{}__\n"
_MASK_LINE = re.compile(r"[ \t]*pass  # __torchlint_masked_line_\d+__\n")

# A line magic (`%matplotlib inline`), shell escape (`!pip install x`), help line (`model?`,
# `?model`) or an assignment from one (`files = !ls`, `t = %timeit -o f()`).
_IPYTHON_LINE = re.compile(r"[ \t]*(?:[%!]|\?{1,2}[\w.]|[\w.]+\?{1,2}[ \t]*$|[\w.]+[ \t]*=[ \t]*[%!])")
# Cell magics whose body is Python that the kernel runs. Any other (`%%bash`, `%%writefile`,
# `%%html`) makes the cell something other than Python, and it is not linted.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})


class InvalidNotebook(ValueError):
    def __init__(self, reason: str, location: Location = Location(1, 1)) -> None:
        super().__init__(reason)
        self.location = location  # in the notebook file: no cell is known yet


@dataclass
class CodeCell:
    number: int  # 1-based among all cells
    text: str  # the cell's source as stored
    lines: list[str] = field(default_factory=list)  # as joined: each ends with "\n", magics masked
    masked: dict[str, str] = field(default_factory=dict)  # masking line -> the line it replaced


def lint_notebook(
    source: bytes,
    rules: Sequence[type[Rule]],
    fix_mode: frozenset[Applicability] = FixMode.NONE,
    with_edits: bool = False,
) -> SourceResult:
    try:
        notebook, text = _load(source)
        cells = _code_cells(notebook)
    except InvalidNotebook as error:
        finding = Finding(INVALID_FILE, f"invalid notebook: {error}", error.location, error.location)
        return SourceResult([finding], source, source)
    if not cells:
        return SourceResult([], source, source)
    module = BOUNDARY.join("".join(cell.lines) for cell in cells)
    result = lint_module_source(module, rules, fix_mode, with_edits)
    new_sources = _split(result.fixed_source, cells) if result.fixed_count else None
    if result.fixed_count and new_sources is None:
        # A fix crossed a cell boundary or rewrote a masked line: that result has no notebook
        # to go back into, so nothing is fixed and the findings are reported as they are.
        result = lint_module_source(module, rules, FixMode.NONE, with_edits)
    findings = _to_cells(result.findings, _rows(result.fixed_source, cells))
    if new_sources is None:
        return SourceResult(findings, source, source)
    for cell, new in zip(cells, new_sources):
        if new != cell.text:
            raw = notebook["cells"][cell.number - 1]
            raw["source"] = new.splitlines(keepends=True) if isinstance(raw["source"], list) else new
    return SourceResult(findings, source, _dump(notebook, text), result.fixed_count)


# --- reading ---------------------------------------------------------------------------


def _load(source: bytes) -> tuple[dict, str]:
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidNotebook(f"not UTF-8: {error}") from None
    try:
        notebook = json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as error:
        raise InvalidNotebook(f"not JSON: {error.msg}", Location(error.lineno, error.colno)) from None
    except RecursionError:
        raise InvalidNotebook("nested too deeply to read") from None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise InvalidNotebook('no "cells" list (nbformat 4 is required)')
    return notebook, text


def _is_python(notebook: dict) -> bool:
    metadata = notebook.get("metadata")
    if not isinstance(metadata, dict):
        return True
    kernel, info = metadata.get("kernelspec"), metadata.get("language_info")
    language = (kernel.get("language") if isinstance(kernel, dict) else None) or (
        info.get("name") if isinstance(info, dict) else None
    )
    return not isinstance(language, str) or language.lower() == "python"


def _source_text(cell: dict, number: int) -> str:
    source = cell.get("source")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if isinstance(source, str):
        return source
    raise InvalidNotebook(f"cell {number} has no text source")


def _code_cells(notebook: dict) -> list[CodeCell]:
    if not _is_python(notebook):  # an R or Julia notebook is not ours to lint
        return []
    cells = []
    mask_ids = itertools.count(1)
    for number, raw in enumerate(notebook["cells"], 1):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        cell = CodeCell(number, _source_text(raw, number))
        magic = re.match(r"%%(\w+)", cell.text)
        if magic and magic.group(1) not in PYTHON_CELL_MAGICS:
            continue
        for row, line in enumerate(_lines(cell.text)):
            line = line if line.endswith(("\n", "\r")) else line + "\n"  # the last line
            if (row == 0 and magic) or (_IPYTHON_LINE.match(line) and _starts_statement(cell.lines)):
                indent = line[: len(line) - len(line.lstrip(" \t"))]
                mask = indent + _MASK.format(next(mask_ids))
                cell.masked[mask] = line
                line = mask
            cell.lines.append(line)
        cells.append(cell)
    return cells


def _lines(text: str) -> list[str]:
    """Lines with their endings, split only where Python splits them (not at form feeds)."""
    return io.StringIO(text, newline="").readlines()


def _starts_statement(previous: list[str]) -> bool:
    """Whether the next line begins a statement rather than continuing one: a `%` or `!` inside
    brackets, a string or after a backslash is Python, not IPython."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO("".join(previous)).readline):
            pass
    except (tokenize.TokenError, SyntaxError):
        return False
    return True


# --- fixing ----------------------------------------------------------------------------


def _split(module: str, cells: list[CodeCell]) -> list[str] | None:
    """Each code cell's new source from the fixed module, or None when a fix crossed a
    boundary or changed a masked line."""
    parts: list[list[str]] = [[]]
    for line in _lines(module):
        if line == BOUNDARY:
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) != len(cells):
        return None
    sources = []
    for cell, lines in zip(cells, parts):
        masks = [line for line in lines if _MASK_LINE.fullmatch(line)]
        if masks != list(cell.masked):
            return None
        new = "".join(cell.masked.get(line, line) for line in lines)
        if not cell.text.endswith(("\n", "\r")) and new.endswith("\n"):
            new = new[:-1]  # the newline the join added to the cell's last line
        sources.append(new)
    return sources


def _dump(notebook: dict, original: str) -> bytes:
    """The notebook as JSON laid out as ``original`` was: Jupyter's own layout (indent 1,
    non-ASCII kept) or another tool's (indent 2, ASCII escapes, CRLF, no final newline)."""
    body = original.removeprefix("\ufeff")
    layout = re.match(r"\{(\r?\n)([ \t]*)\"", body)
    text = json.dumps(notebook, indent=layout.group(2) if layout else None, ensure_ascii=body.isascii())
    if layout and layout.group(1) == "\r\n":
        text = text.replace("\n", "\r\n")  # only the layout's newlines: JSON escapes the rest
    bom = original[: len(original) - len(body)]
    return (bom + text + body[len(body.rstrip()) :]).encode("utf-8")


# --- mapping back to cells -------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    cell: int  # the cell number
    row: int  # the row within the cell
    kind: str  # "code", "masked", or "end": a boundary line, or the row after the last line,
    # whose column 1 is the end of the cell before it


def _rows(module: str, cells: list[CodeCell]) -> list[_Row]:
    """What each row of the joined module is (index: row - 1), plus the row after the last."""
    rows = []
    index, row = 0, 0
    for line in _lines(module):
        cell = cells[index]
        if line == BOUNDARY:
            rows.append(_Row(cell.number, row + 1, "end"))
            index, row = index + 1, 0
        else:
            row += 1
            rows.append(_Row(cell.number, row, "masked" if line in cell.masked else "code"))
    rows.append(_Row(cells[index].number, row + 1, "end"))
    return rows


def _place(rows: list[_Row], location: Location) -> tuple[int, Location]:
    row = rows[min(max(location.row, 1), len(rows)) - 1]
    column = 1 if row.kind == "end" else location.column
    return row.cell, Location(row.row, column)


def _to_cells(findings: list[Finding], rows: list[_Row]) -> list[Finding]:
    placed = []
    for finding in findings:
        synthetic = rows[min(finding.start.row, len(rows)) - 1].kind != "code"
        if synthetic and finding.code != INVALID_FILE:
            continue  # about a boundary or masking `pass` of ours, not the user's code
        cell, start = _place(rows, finding.start)
        end_cell, end = _place(rows, finding.end)
        fix = finding.fix
        if fix is not None and fix.edits:
            edits = [_edit_in_cell(rows, edit, cell) for edit in fix.edits]
            # An edit outside the finding's cell, across a boundary or over a masked line
            # cannot be applied to the notebook: the finding is reported without that fix.
            fix = None if None in edits else dataclasses.replace(fix, edits=tuple(edits))
        placed.append(dataclasses.replace(finding, cell=cell, start=start, end=end if end_cell == cell else start, fix=fix))
    return placed


def _edit_in_cell(rows: list[_Row], edit: Edit, cell: int) -> Edit | None:
    if edit.start != edit.end:
        last = edit.end.row - 1 if edit.end.column == 1 and edit.end.row > edit.start.row else edit.end.row
        if any(rows[row - 1].kind != "code" for row in range(edit.start.row, last + 1) if row <= len(rows)):
            return None
    start_cell, start = _place(rows, edit.start)
    end_cell, end = _place(rows, edit.end)
    if start_cell != cell or end_cell != cell:
        return None
    return Edit(edit.content, start, end)
