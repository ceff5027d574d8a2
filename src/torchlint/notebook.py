"""Jupyter notebooks: the code cells are linted and fixed as one program, as IPython reads them.

A loop in one cell and the model in another are one script, as the kernel runs them, so the
code cells are joined into one module for the engine. Between two cells goes a boundary line
(a ``pass`` statement carrying a marker comment): a fix that inserts a statement after the
last one of a cell, or before the first one of the next, lands on the right side of it, and
splitting the fixed module at the boundaries gives each cell its new source.

Each cell is read as IPython reads it before running it: the indentation that all its lines
share is removed, and IPython syntax (line magics, shell escapes and their backslash
continuations, help lines such as ``model?`` or ``torch.*Tensor?``, a Python cell magic such
as ``%%time``) is masked by ``pass`` lines of the same indentation, so the module parses and
rows stay aligned; when the cells are rebuilt, masked lines get their text back and the
shared indentation is put back. A cell that is still not valid Python is reported as
``TL000`` in that cell and left out of the program. A ``%%writefile name.py`` cell is the
module it writes, linted on its own; cells under other cell magics (``%%bash``) are not
Python and are skipped.

Findings carry the 1-based cell number, counting every cell (markdown included) as Jupyter
shows them, and rows and columns within the cell. A fix rewrites only the ``source`` of the
cells it changed; outputs, metadata, ids, key order and the JSON layout are kept. A fix that
would change what a cell displays (its last statement, when that is an expression) is
dropped: the finding is reported without it.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import functools
import io
import itertools
import json
import os
import re
import tokenize
import warnings
from dataclasses import dataclass, field
from typing import Sequence

import libcst as cst

from torchlint.engine import INVALID_FILE, FixMode, RuleFailure, SourceResult, lint_module_source, parse_error_finding
from torchlint.positions import Positions
from torchlint.rule import Applicability, Edit, Finding, Fix, Location, Rule
from torchlint.text import CELL_BOUNDARY, is_cell_boundary

BOUNDARY = CELL_BOUNDARY
_MASK = "pass  # __torchlint_masked_line_{}__\n"
_MASK_LINE = re.compile(r"[ \t]*pass  # __torchlint_masked_line_\d+__\n")

# IPython syntax on a line that starts a statement. An escape: a line magic (`%matplotlib
# inline`), a shell escape (`!pip install x`), help (`?model`, `??torch.save`) or an autocall
# (`/print x`, `,f a b`, `;f a b`).
_ESCAPE = re.compile(r"[ \t]*(?:[%!?]|[/,;][A-Za-z_])")
# Line magics that IPython's automagic runs without their `%`, followed by arguments.
_AUTOMAGIC = re.compile(
    r"[ \t]*(?:pip|conda|mamba|cd|ls|mkdir|cat|env|load_ext|matplotlib|run|timeit|time|rm|cp|mv|autoreload|config|"
    r"who|whos|reset|pwd|bookmark|pycat|writefile|sx|system)[ \t]+\S"
)
# What makes a line that starts with such a name Python: an assignment (augmented, annotated,
# to a tuple), a call, a subscript, an attribute.
_PYTHON_AFTER_NAME = re.compile(r"(?:=(?!=)|(?:[-+*/%&|^@]|//|\*\*|>>|<<)=|[:,(\[]|\.\w)")
# An assignment from a magic or shell escape (`files = !ls`, `t = %timeit -o f()`).
_ASSIGN_FROM_ESCAPE = re.compile(r"[ \t]*[\w.,()\[\] \t]+=[ \t]*(?:%\w|!)")
# Help after a name (`model?`, `nn.Linear??`, `torch.*Tensor?`, `%timeit?`), which IPython
# recognises at the end of any line: what comes before it on the line is dropped.
_HELP_AFTER = re.compile(r"[^#'\"\r\n]*?%{0,2}(?!\d)[\w*]+(?:\.(?!\d)[\w*]+|\[-?[0-9]+\])*\?\??[ \t]*\r?\n?$")
# Cell magics whose body is Python that the kernel runs, and those that write their body to
# a file (linted as that file when its name ends with `.py`). Any other (`%%bash`, `%%html`)
# makes the cell something other than Python, and it is not linted.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug"})
FILE_CELL_MAGICS = frozenset({"writefile", "file"})


class InvalidNotebook(ValueError):
    def __init__(self, reason: str, location: Location = Location(1, 1)) -> None:
        super().__init__(reason)
        self.location = location  # in the notebook file: no cell is known yet


@dataclass
class CodeCell:
    number: int  # 1-based among all cells
    text: str  # the cell's source as stored
    runs_in_kernel: bool  # False for a `%%writefile name.py` cell: a module of its own
    margin: str = ""  # the indentation every line shares, which IPython removes
    lines: list[str] = field(default_factory=list)  # as linted: each ends with "\n", margin removed, magics masked
    masked: dict[str, str] = field(default_factory=dict)  # masking line -> the line it replaced, as stored


def lint_notebook(
    source: bytes,
    rules: Sequence[type[Rule]],
    fix_mode: frozenset[Applicability] = FixMode.NONE,
    with_edits: bool = False,
    project: object = None,
    prescreen: bool = True,  # see lint_module_source
) -> SourceResult:
    """Lint (and fix) a notebook; ``project`` is handed to the kernel program's rules as
    ``lint_module_source`` takes it."""
    try:
        notebook, text = _load(source)
        cells = _code_cells(notebook)
    except InvalidNotebook as error:
        finding = Finding(INVALID_FILE, f"invalid notebook: {error}", error.location, error.location)
        return SourceResult([finding], source, source)
    findings = []
    valid = []
    for cell in cells:
        error = _syntax_error(cell)
        if error is None:
            valid.append(cell)
        else:  # reported in its cell; the other cells are still linted
            findings.append(error)
    # The kernel's cells are one program; each `%%writefile` cell is a module of its own.
    kernel = [cell for cell in valid if cell.runs_in_kernel]
    programs = [([_in_notebook(rule, displays=True) for rule in rules], kernel, project)] if kernel else []
    # A written module is told of the project only who loads what it saves (the kernel's
    # later cells may load it): ``WrittenModuleView``.
    written = WrittenModuleView(project) if project is not None else None
    programs += [([_in_notebook(rule, displays=False) for rule in rules], [cell], written) for cell in valid if not cell.runs_in_kernel]
    new_sources: dict[int, str] = {}
    fixed_count = 0
    fixed_codes: dict[str, int] = {}
    failures = []
    for program_rules, program, program_project in programs:
        found, fixed, count, failed = _lint_program(program, program_rules, fix_mode, with_edits, program_project, prescreen)
        findings += found
        new_sources.update(fixed)
        fixed_count += sum(count.values())
        for code, n in count.items():
            fixed_codes[code] = fixed_codes.get(code, 0) + n
        failures += failed
    findings.sort(key=lambda f: (f.cell or 0, f.start, f.end, f.code, f.message))
    if not fixed_count:
        return SourceResult(findings, source, source, failures=failures)
    for number, new in new_sources.items():
        raw = notebook["cells"][number - 1]
        raw["source"] = new.splitlines(keepends=True) if isinstance(raw["source"], list) else new
    return SourceResult(findings, source, _dump(notebook, text), fixed_count, failures=failures, fixed_codes=fixed_codes)


def _lint_program(
    cells: list[CodeCell],
    rules: Sequence[type[Rule]],
    fix_mode: frozenset[Applicability],
    with_edits: bool,
    project: object,
    prescreen: bool,
) -> tuple[list[Finding], dict[int, str], dict[str, int], list[RuleFailure]]:
    """The findings of cells joined into one module, the new source of each cell a fix
    changed, the number of fixes per rule code, and the rules that raised."""
    module = BOUNDARY.join("".join(cell.lines) for cell in cells)
    result = lint_module_source(module, rules, fix_mode, with_edits, project, prescreen=prescreen)
    fixed_parts = _parts(result.fixed_source, cells) if result.fixed_count else None
    if result.fixed_count and fixed_parts is None:
        # A fix crossed a cell boundary or rewrote a masked line: that result has no notebook
        # to go back into, so nothing is fixed and the findings are reported as they are.
        result = lint_module_source(module, rules, FixMode.NONE, with_edits, project, prescreen=prescreen)
    parts = fixed_parts or _parts(result.fixed_source, cells)
    findings = _to_cells(result.findings, cells, parts)
    if fixed_parts is None:
        return findings, {}, {}, result.failures
    new_sources = {cell.number: _restore(cell, part) for cell, part in zip(cells, fixed_parts)}
    changed = {cell.number: new_sources[cell.number] for cell in cells if new_sources[cell.number] != cell.text}
    return findings, changed, result.fixed_codes, result.failures


def kernel_code(source: bytes) -> str | None:
    """The code the kernel runs, its valid cells joined as they are linted (IPython syntax
    masked); None for a file that is not a Python notebook."""
    parts = notebook_code(source)
    return parts[0] if parts is not None else None


def notebook_code(source: bytes) -> tuple[str, list[str], list[str]] | None:
    """The code of a notebook, as the project index reads it: the kernel's (``kernel_code``),
    the module of each valid ``%%writefile name.py`` cell, and the text the kernel runs that
    is not linted (the IPython lines masked in its cells, such as ``%time net =
    torch.load(path)``, and the cells left out as invalid Python); None for a file that is
    not a Python notebook."""
    try:
        cells = _code_cells(_load(source)[0])
    except InvalidNotebook:
        return None
    kernel, written, hidden = [], [], []
    for cell in cells:
        valid = _syntax_error(cell) is None
        if not cell.runs_in_kernel:
            if valid:
                written.append("".join(cell.lines))
        elif valid:
            kernel.append("".join(cell.lines))
            hidden.extend(cell.masked.values())
        else:
            hidden.append(cell.text)
    return BOUNDARY.join(kernel), written, hidden


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
    """The cells that hold Python, read as IPython reads them."""
    if not _is_python(notebook):  # an R or Julia notebook is not ours to lint
        return []
    cells = []
    mask_ids = itertools.count(1)
    for number, raw in enumerate(notebook["cells"], 1):
        if not isinstance(raw, dict) or raw.get("cell_type") != "code":
            continue
        text = _source_text(raw, number)
        stored = [line if line.endswith(("\n", "\r")) else line + "\n" for line in _lines(text)]
        margin = _margin(stored)
        lines = [line.removeprefix(margin) if line.strip() else line for line in stored]
        first = next((row for row, line in enumerate(lines) if line.strip()), 0)
        magic = re.match(r"%%(\w+)(.*)", lines[first]) if lines else None
        if magic and magic.group(1) in FILE_CELL_MAGICS:
            if not _writes_python_module(magic.group(2)):
                continue
        elif magic and magic.group(1) not in PYTHON_CELL_MAGICS:
            continue
        runs_in_kernel = not (magic and magic.group(1) in FILE_CELL_MAGICS)
        cell = CodeCell(number, text, runs_in_kernel, margin)
        continued_indent = None  # the indentation of an IPython line continued by a backslash
        for row, line in enumerate(lines):
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            if continued_indent is not None:
                indent = continued_indent
            elif not (row == first and magic or runs_in_kernel and _is_ipython_line(line, cell.lines)):
                cell.lines.append(line)
                continue
            mask = indent + _MASK.format(next(mask_ids))
            cell.masked[mask] = stored[row]
            cell.lines.append(mask)
            continued_indent = indent if runs_in_kernel and line.endswith("\\\n") else None
        cells.append(cell)
    return cells


def _lines(text: str) -> list[str]:
    """Lines with their endings, split only where Python splits them (not at form feeds)."""
    return io.StringIO(text, newline="").readlines()


def _margin(lines: list[str]) -> str:
    """The indentation all non-blank lines share (IPython removes it before running a cell)."""
    indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines if line.strip()]
    return os.path.commonprefix(indents) if indents else ""


def _writes_python_module(arguments: str) -> bool:
    """Whether `%%writefile ARGUMENTS` writes a whole `.py` file (appending, `-a`, writes part
    of one, which need not be valid Python on its own)."""
    words = arguments.split()
    return bool(words) and not {"-a", "--append"} & set(words) and words[-1].strip("'\"").endswith(".py")


def _is_ipython_line(line: str, previous: list[str]) -> bool:
    if not (_ESCAPE.match(line) or _ASSIGN_FROM_ESCAPE.match(line) or _HELP_AFTER.match(line) or _automagic(line)):
        return False
    return _starts_statement(previous)


def _automagic(line: str) -> bool:
    """A line magic written without its `%` (`pip install timm`, `matplotlib inline`): IPython
    runs it so (automagic, on by default) where the line is no valid Python."""
    match = _AUTOMAGIC.match(line)
    if not match or _PYTHON_AFTER_NAME.match(line, match.end() - 1):
        return False  # (`system = """...`: an assignment, whose string goes on below)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(line.strip(), "<line>", "exec", ast.PyCF_ONLY_AST)
    except SyntaxError:
        return True
    return False


def _starts_statement(previous: list[str]) -> bool:
    """Whether the next line begins a statement rather than continuing one: a `%` or `!` inside
    brackets, a string or after a backslash is Python, not IPython."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO("".join(previous)).readline):
            pass
    except (tokenize.TokenError, SyntaxError):
        return False
    return True


def _syntax_error(cell: CodeCell) -> Finding | None:
    """TL000 in the cell when it is not valid Python once its IPython syntax is masked. Each
    cell is compiled on its own, as the kernel compiles it."""
    try:
        with warnings.catch_warnings():  # the user's invalid escapes are not ours to print
            warnings.simplefilter("ignore")
            compile("".join(cell.lines), "<cell>", "exec", ast.PyCF_ONLY_AST)
    except Exception as error:  # any failure is a finding, never a crash
        finding = parse_error_finding(error)
        row = min(finding.start.row, len(cell.lines)) if cell.lines else 1
        shift = len(cell.margin) if cell.lines and cell.lines[row - 1].strip() else 0
        start = Location(row, finding.start.column + shift)
        return dataclasses.replace(finding, cell=cell.number, start=start, end=start)
    return None


# --- fixing ----------------------------------------------------------------------------


def _parts(module: str, cells: list[CodeCell]) -> list[list[str]] | None:
    """Each cell's lines in the (fixed) module, or None when a fix crossed a boundary or
    changed a masked line."""
    parts: list[list[str]] = [[]]
    for line in _lines(module):
        if line == BOUNDARY:
            parts.append([])
        else:
            parts[-1].append(line)
    if len(parts) != len(cells):
        return None
    for cell, lines in zip(cells, parts):
        if [line for line in lines if _MASK_LINE.fullmatch(line)] != list(cell.masked):
            return None
    return parts


def _restore(cell: CodeCell, lines: list[str]) -> str:
    """The cell's source from its lines as linted: masked lines and the margin put back."""
    text = "".join(
        cell.masked[line] if line in cell.masked else cell.margin + line if line.strip() else line for line in lines
    )
    if not cell.text.endswith(("\n", "\r")) and text.endswith("\n"):
        text = text[:-1]  # the newline the join added to the cell's last line
    return text


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


# --- fixes a notebook can take ------------------------------------------------------------


@functools.cache
def _in_notebook(rule: type[Rule], displays: bool) -> type[Rule]:
    """``rule``, with the fixes that a notebook cannot take dropped: those that reach beyond
    the finding's cell, rewrite a masked line or, when ``displays`` (the kernel's cells),
    change what a cell displays. The finding is reported without its fix."""

    def report(self: Rule, node: cst.CSTNode, message: str | None = None, *, fix: Fix | None = None, help: str | None = None) -> None:
        if fix is not None and _reaches_beyond_cell(self.context.positions, node, fix):
            fix, help = None, f"{fix.message} (no fix: in a notebook it would change another cell)"
        elif fix is not None and displays and _changes_display(self.context.module, fix):
            fix, help = None, f"{fix.message} (no fix: in a notebook it would change what the cell displays)"
        rule.report(self, node, message, fix=fix, help=help)

    return type(rule.__name__, (rule,), {"report": report, "__module__": rule.__module__, "__doc__": rule.__doc__})


def _reaches_beyond_cell(positions: Positions, node: cst.CSTNode, fix: Fix) -> bool:
    """Whether ``fix`` changes code outside the cell of ``node``, across a cell boundary, or
    starting on a masked line. Its edits could not be shown within the finding's cell."""
    boundaries, masked = _synthetic_rows(positions.module)
    cell = bisect.bisect_left(boundaries, positions[node].start.line)
    for changed in fix.changes:
        start, end = positions[changed].start.line, positions[changed].end.line
        if start in masked or {start, end} & set(boundaries):
            return True
        if bisect.bisect_left(boundaries, start) != cell or bisect.bisect_left(boundaries, end) != cell:
            return True
    return False


@functools.lru_cache(maxsize=2)
def _synthetic_rows(module: cst.Module) -> tuple[list[int], set[int]]:
    """The rows of the boundary lines (sorted) and of the masking lines of a joined module."""
    boundaries, masked = [], set()
    for row, line in enumerate(_lines(module.code), 1):
        if line == BOUNDARY:
            boundaries.append(row)
        elif _MASK_LINE.fullmatch(line):
            masked.add(row)
    return boundaries, masked


def _changes_display(module: cst.Module, fix: Fix) -> bool:
    """Whether ``fix`` wraps, replaces by a non-expression, removes, or adds statements after
    a cell's last statement when that is an expression: Jupyter displays its value."""
    shown = _shown_statements(module)
    for node, new in fix.changes.items():
        if node is module:
            if not isinstance(new, cst.Module) or [s is not None for s in _cell_ends(new)] != [
                s is not None for s in _cell_ends(module)
            ]:
                return True
        elif node in shown:
            kept = (isinstance(new, cst.SimpleStatementLine) and _shows_value(new)) or (
                isinstance(new, cst.FlattenSentinel) and _same_statement(new.nodes[-1], node)
            )
            if not kept:
                return True
        elif any(node is statement.body[-1] for statement in shown):
            if not (isinstance(new, cst.Expr) and not isinstance(new.semicolon, cst.Semicolon)):
                return True
    return False


def _shown_statements(module: cst.Module) -> list[cst.SimpleStatementLine]:
    return [statement for statement in _cell_ends(module) if statement is not None]


def _cell_ends(module: cst.Module) -> list[cst.SimpleStatementLine | None]:
    """For each cell, its last statement when Jupyter displays its value, else None."""
    ends: list[cst.SimpleStatementLine | None] = []
    last = None
    for statement in [*module.body, None]:
        if statement is None or is_cell_boundary(statement):
            ends.append(last if isinstance(last, cst.SimpleStatementLine) and _shows_value(last) else None)
            last = None
        else:
            last = statement
    return ends


def _shows_value(statement: cst.SimpleStatementLine) -> bool:
    last = statement.body[-1]
    return isinstance(last, cst.Expr) and not isinstance(last.semicolon, cst.Semicolon)


def _same_statement(new: cst.CSTNode, old: cst.BaseStatement) -> bool:
    return isinstance(new, cst.SimpleStatementLine) and new.with_changes(leading_lines=()).deep_equals(
        old.with_changes(leading_lines=())
    )


# --- mapping back to cells -------------------------------------------------------------


@dataclass(frozen=True)
class _Row:
    cell: int  # the cell number
    row: int  # the row within the cell
    kind: str  # "code", "masked", or "end": a boundary line, or the row after the last line,
    # whose column 1 is the end of the cell before it
    shift: int = 0  # columns of the cell's margin, removed from this line


def _rows(parts: list[list[str]], cells: list[CodeCell]) -> list[_Row]:
    """What each row of the joined module is (index: row - 1), plus the row after the last."""
    rows = []
    for cell, lines in zip(cells, parts):
        for row, line in enumerate(lines, 1):
            kind = "masked" if line in cell.masked else "code"
            rows.append(_Row(cell.number, row, kind, len(cell.margin) if kind == "code" and line.strip() else 0))
        rows.append(_Row(cell.number, len(lines) + 1, "end"))
    return rows


def _place(rows: list[_Row], location: Location, shifted: bool = True) -> tuple[int, Location]:
    row = rows[min(max(location.row, 1), len(rows)) - 1]
    column = 1 if row.kind == "end" else location.column + (row.shift if shifted else 0)
    return row.cell, Location(row.row, column)


def _to_cells(findings: list[Finding], cells: list[CodeCell], parts: list[list[str]]) -> list[Finding]:
    rows = _rows(parts, cells)
    placed = []
    for finding in findings:
        synthetic = rows[min(finding.start.row, len(rows)) - 1].kind != "code"
        if synthetic and finding.code != INVALID_FILE:
            continue  # about a boundary or masking `pass` of ours, not the user's code
        cell, start = _place(rows, finding.start)
        end_cell, end = _place(rows, finding.end)
        fix = finding.fix
        if fix is not None and fix.edits:
            edits = [_edit_in_cell(rows, edit, cell, cells, parts) for edit in fix.edits]
            # An edit outside the finding's cell, across a boundary or over a masked line
            # cannot be applied to the notebook: the finding is reported without that fix.
            fix = None if None in edits else dataclasses.replace(fix, edits=tuple(edits))
        placed.append(dataclasses.replace(finding, cell=cell, start=start, end=end if end_cell == cell else start, fix=fix))
    return placed


def _edit_in_cell(rows: list[_Row], edit: Edit, cell: int, cells: list[CodeCell], parts: list[list[str]]) -> Edit | None:
    if edit.start != edit.end:
        last = edit.end.row - 1 if edit.end.column == 1 and edit.end.row > edit.start.row else edit.end.row
        if any(rows[row - 1].kind != "code" for row in range(edit.start.row, last + 1) if row <= len(rows)):
            return None
    start_cell, start = _place(rows, edit.start, shifted=False)
    end_cell, end = _place(rows, edit.end, shifted=False)
    if start_cell != cell or end_cell != cell:
        return None
    index = next(i for i, c in enumerate(cells) if c.number == cell)
    if not cells[index].margin:
        return Edit(edit.content, start, end)
    # The cell's margin goes back on every line the edit writes: compare the cell's source
    # before and after the edit, and give the one span that differs.
    lines = parts[index]
    linted = "".join(lines)
    edited = linted[: _offset(lines, start)] + edit.content + linted[_offset(lines, end) :]
    before, after = _restore(cells[index], lines), _restore(cells[index], _lines(edited))
    prefix = len(os.path.commonprefix([before, after]))
    suffix = len(os.path.commonprefix([before[prefix:][::-1], after[prefix:][::-1]]))
    return Edit(after[prefix : len(after) - suffix], _location(before, prefix), _location(before, len(before) - suffix))


def _offset(lines: list[str], location: Location) -> int:
    return sum(len(line) for line in lines[: location.row - 1]) + location.column - 1


def _location(text: str, offset: int) -> Location:
    line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return Location(len(_lines(text[:line_start])) + 1, offset - line_start + 1)


class WrittenModuleView:
    """What the module of a notebook's ``%%writefile name.py`` cell sees of its notebook's
    project: who loads what it saves (``module_loads``: the notebook's later cells among
    them, through the notebook's summary), and nothing else, every other question answered
    as a lint without a project index answers it (the module is not the notebook, whose
    name and callers the view knows). (Here, in the engine's layer: it only forwards one
    question of a project view, whatever the semantic layer asks.)"""

    def __init__(self, view) -> None:
        self._view = view

    def module_loads(self):
        return self._view.module_loads()

    def argument_kinds(self, name: str, position: int, param: str) -> list | None:
        return []  # (no other file's calls: as without an index)

    def __getattr__(self, question: str):
        if question.startswith("_"):
            raise AttributeError(question)
        return lambda *args: None
