"""Output formats that are JSON documents: ruff-shaped JSON and SARIF 2.1.0. Kept apart from
the text formats so that a run that prints text never imports them.

Internal errors do not appear in the JSON array (whose elements are always findings, so
consumers of ruff's shape keep working); they are printed on stderr and make the exit
status 2. SARIF lists them as the run's ``toolExecutionNotifications``.
"""

from __future__ import annotations

import json
from pathlib import Path, PurePath
from typing import Sequence
from urllib.parse import quote

import torchlint
from torchlint.output import rows
from torchlint.rule import Finding, Location, project_urls
from torchlint.rules import all_rules, rule_by_code
from torchlint.runner import FileReport, RunError


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


# --- SARIF 2.1.0 ------------------------------------------------------------------------

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


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


def _sarif_notification(error: RunError, rule_index: dict[str, int]) -> dict:
    notification = {
        "level": "error",
        "message": {"text": str(error)},
        "locations": [{"physicalLocation": {"artifactLocation": _sarif_artifact(error.path)}}],
    }
    if error.code is not None:
        notification["associatedRule"] = {"id": error.code, "index": rule_index[error.code]}
    return notification


def format_sarif(reports: Sequence[FileReport]) -> str:
    """A SARIF 2.1.0 log for code scanning: every rule's metadata and one result per finding."""
    rules = all_rules()
    rule_index = {rule.code: i for i, rule in enumerate(rules)}
    errors = [error for r in reports for error in r.errors]
    run = {
        "tool": {
            "driver": {
                "name": "torchlint",
                "version": torchlint.__version__,
                # (The project's home, where [project.urls] declares one: SARIF wants a URI.)
                **({"informationUri": home} if (home := project_urls().get("Homepage")) else {}),
                "rules": [_sarif_rule(rule) for rule in rules],
            }
        },
        "invocations": [
            {
                "executionSuccessful": not errors,
                "toolExecutionNotifications": [_sarif_notification(e, rule_index) for e in errors],
            }
        ],
        # Paths are relative to the folder torchlint ran in; columns count characters.
        "originalUriBaseIds": {"%SRCROOT%": {"uri": Path.cwd().as_uri().rstrip("/") + "/"}},
        "columnKind": "unicodeCodePoints",
        "results": [_sarif_result(path, f, rule_index) for path, f in rows(reports)],
    }
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2)
