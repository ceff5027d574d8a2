"""Output formats. Each takes the run's reports and returns the text to print."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path, PurePath
from typing import Callable, Sequence
from urllib.parse import quote

from torchlint import __version__
from torchlint.rule import Finding, Location, all_rules, rule_by_code
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
    return "\n".join(lines)


# --- SARIF 2.1.0 ------------------------------------------------------------------------

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
PROJECT_URL = "https://github.com/torchlint/torchlint"


def _sarif_rule(rule) -> dict:
    docs = rule.documentation()
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.message},
        "fullDescription": {"text": docs, "markdown": docs},
        "help": {"text": docs, "markdown": docs},
        "helpUri": rule.url(),
        "defaultConfiguration": {"level": "error"},
    }


def _sarif_region(start: Location, end: Location) -> dict:
    # SARIF's endColumn is the column after the region, as ours is.
    return {"startLine": start.row, "startColumn": start.column, "endLine": end.row, "endColumn": end.column}


def _sarif_artifact(path: str) -> dict:
    pure = PurePath(path)
    if pure.is_absolute():
        return {"uri": pure.as_uri()}
    return {"uri": quote(pure.as_posix()), "uriBaseId": "%SRCROOT%"}


def _sarif_result(path: str, f: Finding, rule_index: dict[str, int]) -> dict:
    artifact = _sarif_artifact(path)
    result = {"ruleId": f.code, "ruleIndex": rule_index[f.code], "level": "error", "message": {"text": f.message}}
    if f.cell is not None:
        # Rows within a notebook cell are not a region of the notebook file: the location is
        # the file, named down to the cell as a logical location, with the region within the
        # cell as a property. Fixes of cells are text edits of the cell, so none are given.
        result["message"]["text"] = f"cell {f.cell}:{f.start.row}:{f.start.column}: {f.message}"
        result["locations"] = [
            {
                "physicalLocation": {"artifactLocation": artifact},
                "logicalLocations": [{"name": f"cell {f.cell}", "kind": "notebookCell"}],
                "properties": {"cell": f.cell, "cellRegion": _sarif_region(f.start, f.end)},
            }
        ]
        return result
    result["locations"] = [{"physicalLocation": {"artifactLocation": artifact, "region": _sarif_region(f.start, f.end)}}]
    if f.fix is not None and f.fix.edits:
        replacements = [
            {"deletedRegion": _sarif_region(e.start, e.end), "insertedContent": {"text": e.content}} for e in f.fix.edits
        ]
        result["fixes"] = [
            {
                "description": {"text": f.fix.message},
                "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements}],
                "properties": {"applicability": f.fix.applicability.value},
            }
        ]
    return result


def format_sarif(reports: Sequence[FileReport]) -> str:
    """A SARIF 2.1.0 log for code scanning: every rule's metadata and one result per finding."""
    rules = all_rules()
    rule_index = {rule.code: i for i, rule in enumerate(rules)}
    errors = [error for r in reports for error in r.errors]
    run = {
        "tool": {
            "driver": {
                "name": "torchlint",
                "version": __version__,
                "informationUri": PROJECT_URL,
                "rules": [_sarif_rule(rule) for rule in rules],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not errors,
                "toolExecutionNotifications": [{"level": "error", "message": {"text": e}} for e in errors],
            }
        ],
        # Paths are relative to the folder torchlint ran in; columns count characters.
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri().rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_sarif_result(path, f, rule_index) for path, f in rows(reports)],
    }
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2)


FORMATS: dict[str, Callable[..., str]] = {
    "text": format_text,
    "concise": format_concise,
    "json": format_json,
    "sarif": format_sarif,
    "github": format_github,
}
# Formats that show each fix's edits, which the engine then renders.
FORMATS_WITH_EDITS = frozenset({"json", "sarif"})
