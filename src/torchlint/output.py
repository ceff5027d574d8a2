"""Output formats. Each takes the run's reports and returns the text to print."""

from __future__ import annotations

import json
from collections import Counter
from typing import Callable, Sequence

from torchlint.rule import Finding, Location, rule_by_code
from torchlint.runner import FileReport

def rows(reports: Sequence[FileReport]) -> list[tuple[str, Finding]]:
    """Every finding with its path, sorted by path, (cell,) row and column."""
    out = [(r.path, f) for r in reports for f in r.findings]
    out.sort(key=lambda pf: (pf[0], pf[1].cell or 0, pf[1].start, pf[1].code))
    return out


def _where(path: str, f: Finding) -> str:
    cell = f"cell {f.cell}:" if f.cell is not None else ""
    return f"{path}:{cell}{f.start.row}:{f.start.column}"


def _line(path: str, f: Finding) -> str:
    marker = " [*]" if f.fix is not None else ""
    return f"{_where(path, f)}: {f.code}{marker} {f.message}"


def summary(reports: Sequence[FileReport], fix_hint: bool = True) -> str:
    findings = [f for r in reports for f in r.findings]
    fixed = sum(r.fixed_count for r in reports)
    lines = []
    if findings:
        n = len(findings)
        lines.append(f"Found {n} error{'s' if n != 1 else ''}" + (f" ({fixed} fixed, {n} remaining)." if fixed else "."))
        safe = sum(1 for f in findings if f.fix is not None and f.fix.applicability == "safe")
        unsafe = sum(1 for f in findings if f.fix is not None and f.fix.applicability == "unsafe")
        if fix_hint and safe:
            lines.append(f"[*] {safe} fixable with the `--fix` option.")
        if fix_hint and unsafe:
            lines.append(f"{unsafe} hidden fix{'es' if unsafe != 1 else ''} can be enabled with the `--unsafe-fixes` option.")
    elif fixed:
        lines.append(f"Found {fixed} error{'s' if fixed != 1 else ''} ({fixed} fixed, 0 remaining).")
    else:
        lines.append("All checks passed!")
    return "\n".join(lines)


def format_concise(reports: Sequence[FileReport]) -> str:
    lines = [_line(p, f) for p, f in rows(reports)]
    return "\n".join(lines + [summary(reports)])


def format_text(reports: Sequence[FileReport], sources: dict[str, list[str]] | None = None) -> str:
    """One line per finding followed by the source line it points at and, where the rule can
    fix it, what the fix does."""
    blocks = []
    for path, f in rows(reports):
        block = [_line(path, f)]
        lines = (sources or {}).get(path, [])
        if f.cell is None and 0 < f.start.row <= len(lines):
            source_line = lines[f.start.row - 1].rstrip("\r\n")
            gutter = str(f.start.row)
            width = max(1, (f.end.column - f.start.column) if f.end.row == f.start.row else len(source_line) - f.start.column + 1)
            block.append(f" {gutter} | {source_line}")
            block.append(f" {' ' * len(gutter)} | {' ' * (f.start.column - 1)}{'^' * width}")
        if f.fix is not None:
            note = "" if f.fix.applicability == "safe" else " (unsafe)"
            block.append(f"   = help: {f.fix.message}{note}")
        blocks.append("\n".join(block))
    return "\n\n".join(blocks + [summary(reports)])


def _loc(location: Location) -> dict:
    return {"row": location.row, "column": location.column}


def finding_json(path: str, f: Finding) -> dict:
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": f.fix.applicability.value,
            "message": f.fix.message,
            "edits": [{"content": e.content, "location": _loc(e.start), "end_location": _loc(e.end)} for e in f.fix.edits],
        }
    entry = {
        "code": f.code,
        "message": f.message,
        "filename": path,
        "location": _loc(f.start),
        "end_location": _loc(f.end),
        "noqa_row": f.start.row,
        "url": rule_by_code(f.code).url(),
        "fix": fix,
    }
    if f.cell is not None:
        entry["cell"] = f.cell
    return entry


def format_json(reports: Sequence[FileReport]) -> str:
    return json.dumps([finding_json(p, f) for p, f in rows(reports)], indent=2)


def format_statistics(reports: Sequence[FileReport]) -> str:
    counts = Counter(f.code for r in reports for f in r.findings)
    fixable = {f.code for r in reports for f in r.findings if f.fix is not None}
    lines = []
    for code, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        marker = "[*]" if code in fixable else "   "
        lines.append(f"{n:>5}\t{code}\t{marker} {rule_by_code(code).name}")
    return "\n".join(lines)


def _escape(value: str, property: bool = False) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if property else value


def format_github(reports: Sequence[FileReport]) -> str:
    """GitHub Actions workflow commands: one ``::error`` annotation per finding."""
    lines = []
    for path, f in rows(reports):
        props = f"file={_escape(path, True)},line={f.start.row},col={f.start.column},endLine={f.end.row},endColumn={f.end.column},title={_escape(f.code, True)}"
        cell = f"cell {f.cell}: " if f.cell is not None else ""
        lines.append(f"::error {props}::{_escape(f'{cell}{f.code} {f.message}')}")
    return "\n".join(lines)


FORMATS: dict[str, Callable[..., str]] = {
    "text": format_text,
    "concise": format_concise,
    "json": format_json,
    "github": format_github,
}
# Formats that show each fix's edits, which the engine then renders.
FORMATS_WITH_EDITS = frozenset({"json"})
