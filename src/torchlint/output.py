"""Text output formats (text, concise, github, statistics). Each takes the run's reports and
returns the text to print; JSON and SARIF are in ``output_json``."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from torchlint.rule import Applicability, Finding
from torchlint.rules import rule_by_code
from torchlint.runner import FileReport


def rows(reports: Sequence[FileReport]) -> list[tuple[str, Finding]]:
    """Every finding with its path, sorted by path, (cell,) row and column."""
    out = [(r.path, f) for r in reports for f in r.findings]
    out.sort(key=lambda pf: (pf[0], pf[1].cell or 0, pf[1].start, pf[1].code))
    return out


def _where(path: str, f: Finding) -> str:
    cell = f"cell {f.cell}:" if f.cell is not None else ""
    return f"{path}:{cell}{f.start.row}:{f.start.column}"


def _fixable(f: Finding, unsafe_fixes: bool) -> bool:
    """Whether ``--fix`` (with ``--unsafe-fixes`` when given) would apply the finding's fix."""
    return f.fix is not None and (f.fix.applicability == Applicability.SAFE or unsafe_fixes)


def _line(path: str, f: Finding, unsafe_fixes: bool = False) -> str:
    marker = " [*]" if _fixable(f, unsafe_fixes) else ""
    return f"{_where(path, f)}: {f.code}{marker} {f.message}"


def summary(reports: Sequence[FileReport], unsafe_fixes: bool = False) -> str:
    """The closing lines: counts, what ``--fix`` would do, and internal errors. A fix counts
    as done only when its file was written."""
    findings = [f for r in reports for f in r.findings]
    fixed = sum(r.fixed_count for r in reports)
    errors = sum(1 for r in reports for e in r.errors if not e.unwritten)
    unwritten = sum(1 for r in reports if _unwritten(r))
    lines = []
    if findings:
        n = len(findings)
        # As ruff counts: every finding found, the fixed ones included.
        found = n + fixed
        lines.append(f"Found {found} error{'s' if found != 1 else ''}" + (f" ({fixed} fixed, {n} remaining)." if fixed else "."))
        # (Not the fixes of a file that could not be written: `--fix` was given, and failed.)
        fixable = sum(1 for r in reports if not _unwritten(r) for f in r.findings if _fixable(f, unsafe_fixes))
        hidden = sum(1 for f in findings if f.fix is not None and not _fixable(f, unsafe_fixes))
        if fixable:
            lines.append(f"[*] {fixable} fixable with the `--fix` option.")
        if hidden:
            lines.append(f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the `--unsafe-fixes` option.")
    elif fixed:
        lines.append(f"Found {fixed} error{'s' if fixed != 1 else ''} ({fixed} fixed, 0 remaining).")
    elif not errors and not unwritten:
        lines.append("All checks passed!")
    if unwritten:
        lines.append(_unwritten_line(unwritten))
    if errors:
        lines.append(
            f"{errors} internal error{'s' if errors != 1 else ''} (reported above): "
            "some files were not fully checked."
        )
    return "\n".join(lines)


def _unwritten(report: FileReport) -> bool:
    return any(e.unwritten for e in report.errors)


def _unwritten_line(count: int) -> str:
    files = f"{count} file{'s' if count != 1 else ''}"
    return f"{files} could not be written (reported above): {'its' if count == 1 else 'their'} fixes were not applied."


def format_concise(reports: Sequence[FileReport], unsafe_fixes: bool = False, with_summary: bool = True) -> str:
    lines = [_line(p, f, unsafe_fixes) for p, f in rows(reports)]
    return "\n".join(lines + [summary(reports, unsafe_fixes)] * with_summary)


# Control characters shown as Unicode's pictures of them (U+2400...), as ruff shows them: a
# binary file's bytes must not reach the terminal raw. One character for one, so the carets
# stay under what they point at.
_PICTURES = {**{c: chr(0x2400 + c) for c in range(0x20) if c != 0x09}, 0x7F: "\u2421"}
_PICTURES.update({c: "\ufffd" for c in range(0x80, 0xA0)})  # C1 controls (0x9B starts a CSI)


def printable(line: str) -> str:
    """``line`` with its control characters (other than tabs) replaced by visible ones."""
    return line.translate(_PICTURES)


Sources = dict  # path -> the file's lines, or for a notebook: cell number -> the cell's lines


def read_sources(paths: Iterable[str]) -> Sources:
    """The lines the text output shows for the files at ``paths`` (read as they are now)."""
    sources: Sources = {}
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        sources[path] = source_lines(path, data)
    return sources


def source_lines(path: str, data: bytes) -> list[str] | dict[int, list[str]]:
    """A file's lines; a notebook's, per cell (numbered as findings number them, from 1,
    every cell counted); none of a binary file's, whose finding then has no code frame."""
    if path.endswith(".ipynb"):
        import json

        try:
            cells = json.loads(data).get("cells")
            return {
                number: _rows("".join(text) if isinstance(text, list) else str(text))
                for number, cell in enumerate(cells, start=1)
                if isinstance(cell, dict) and isinstance(text := cell.get("source", ""), (list, str))
            }
        except (ValueError, AttributeError, TypeError):
            return {}
    if b"\x00" in data:
        return []  # a binary file (it holds NUL bytes): no row of it is text to show
    return _rows(data.decode("utf-8", errors="replace"))


def _rows(text: str) -> list[str]:
    """The rows of ``text`` as Python counts them (``str.splitlines`` also breaks at form
    feeds and other separators, which would shift a binary file's rows)."""
    return re.split(r"\r\n|\r|\n", text)


def format_text(
    reports: Sequence[FileReport], sources: Sources | None = None, unsafe_fixes: bool = False, with_summary: bool = True
) -> str:
    """One line per finding followed by the source line it points at (in a notebook, the
    cell's row) and, where the rule can fix it, what the fix does."""
    blocks = []
    for path, f in rows(reports):
        block = [_line(path, f, unsafe_fixes)]
        lines = (sources or {}).get(path, [])
        if isinstance(lines, dict):  # a notebook's cells
            lines = lines.get(f.cell, []) if f.cell is not None else []
        elif f.cell is not None:
            lines = []
        if 0 < f.start.row <= len(lines):
            source_line = printable(lines[f.start.row - 1].rstrip("\r\n"))
            gutter = str(f.start.row)
            width = max(1, (f.end.column - f.start.column) if f.end.row == f.start.row else len(source_line) - f.start.column + 1)
            block.append(f" {gutter} | {source_line}")
            block.append(f" {' ' * len(gutter)} | {' ' * (f.start.column - 1)}{'^' * width}")
        if f.help is not None:
            block.append(f"   = help: {f.help}")
        elif f.fix is not None:
            note = "" if f.fix.applicability == "safe" else " (unsafe)"
            block.append(f"   = help: {f.fix.message}{note}")
        elif f.code != "TL000":  # no fix: where to read what to do instead (a file that
            # cannot be read or parsed says what is wrong in its message)
            block.append(f"   = help: no automatic fix; `torchlint rule {f.code}` shows what to write instead")
        blocks.append("\n".join(block))
    return "\n\n".join(blocks + [summary(reports, unsafe_fixes)] * with_summary)


def format_statistics(
    reports: Sequence[FileReport], output_format: str = "text", unsafe_fixes: bool = False, with_summary: bool = True
) -> str:
    """Findings counted per rule: a table, or with ``json`` an array as ruff gives it."""
    counts = Counter(f.code for r in reports for f in r.findings)
    fixable = {f.code for r in reports for f in r.findings if _fixable(f, unsafe_fixes)}
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    if output_format == "json":
        import json

        return json.dumps(
            [{"code": code, "name": rule_by_code(code).name, "count": n, "fixable": code in fixable} for code, n in ordered],
            indent=2,
        )
    lines = []
    for code, n in ordered:
        marker = "[*]" if code in fixable else "   "
        lines.append(f"{n:>5}\t{code}\t{marker} {rule_by_code(code).name}")
    # As ruff does: the table, then the summary and what `--fix` would fix (nothing at all
    # where nothing was found, but internal errors are always told).
    if with_summary and (ordered or any(r.errors for r in reports)):
        lines.append(summary(reports, unsafe_fixes))
    return "\n".join(lines)


def _escape(value: str, property: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if property else value


def format_github(reports: Sequence[FileReport]) -> str:
    """GitHub Actions workflow commands: one ``::error`` annotation per finding."""
    lines = []
    for path, f in rows(reports):
        title = f"title={_escape(f.code, True)}"
        if f.cell is None:
            where = f"line={f.start.row},col={f.start.column},endLine={f.end.row},endColumn={f.end.column},"
            message = f"{f.code} {f.message}"
        else:
            # A cell's rows are not lines of the notebook's JSON: annotate the file, and say
            # where in it in the message.
            where = ""
            message = f"cell {f.cell}:{f.start.row}:{f.start.column}: {f.code} {f.message}"
        lines.append(f"::error file={_escape(path, True)},{where}{title}::{_escape(message)}")
    for error in (e for r in reports for e in r.errors):
        title = _escape("torchlint internal error" if error.code else "torchlint error", True)
        lines.append(f"::error file={_escape(error.path, True)},title={title}::{_escape(error.message)}")
    return "\n".join(lines)
