"""tools/first_sight.py: a run's findings scored against the triage kept in ecosystem/first-sight."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("first_sight", ROOT / "tools" / "first_sight.py")
first_sight = importlib.util.module_from_spec(spec)
spec.loader.exec_module(first_sight)


def test_places_of_triage_rows():
    assert first_sight._place("a.py", "25") == ("a.py", None, 25)
    assert first_sight._place("demo.ipynb", "cell10:4") == ("demo.ipynb", 10, 4)
    assert first_sight._place("nb.ipynb#cell9", "3") == ("nb.ipynb", 9, 3)


def _finding(path, row, code, cell=None):
    found = {"code": code, "filename": path, "location": {"row": row, "column": 1}}
    if cell is not None:
        found["cell"] = cell
    return found


def test_score_matches_verdicts_and_instances(tmp_path, capsys):
    # ssd.pytorch's live demo: a triaged true TL402 and the instance it finds; one untriaged row.
    findings = [_finding("demo/live.py", 25, "TL402"), _finding("demo/live.py", 3, "TL999")]
    (tmp_path / "amdegroot+ssd.pytorch.json").write_text(json.dumps(findings))
    first_sight.score(tmp_path)
    out = capsys.readouterr().out
    assert "| TL402 | 1 | 1 | 0 | 0 |" in out
    assert "| TL999 | 1 | 0 | 0 | 1 |" in out
    assert "untriaged:\tamdegroot/ssd.pytorch\tdemo/live.py\tNone\t3\tTL999" in out
    recall = next(line for line in out.splitlines() if line.startswith("core recall:"))
    assert recall.startswith("core recall: 1/")


def test_recall_counts_only_the_linted_repositories_instances(tmp_path, capsys):
    """A run of one repository is scored against that repository's instances alone, not
    every round's (ssd.pytorch holds four in round 1's triage)."""
    (tmp_path / "amdegroot+ssd.pytorch.json").write_text(json.dumps([_finding("demo/live.py", 25, "TL402")]))
    first_sight.score(tmp_path)
    recall = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("core recall:"))
    found, total = recall.split()[2].split("/")
    assert int(found) >= 1 and int(total) == sum(
        1 for row in first_sight._rows("*instances.tsv") if row["repo"] == "amdegroot/ssd.pytorch" and row["pattern"] in first_sight.CORE
    )
