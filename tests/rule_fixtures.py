"""The fixture layout every rule follows (``fixtures/rules/<CODE>/``):

- ``bad_<case>.py``: input the rule must report; every expected finding's row carries a
  trailing ``# error: <CODE>`` comment (the code once per finding on that row), and the rule
  must report exactly those rows.
- ``bad_<case>.fixed.py``: the exact output of ``--fix --unsafe-fixes`` with only that rule
  selected. Without it the rule must offer no fix for the case.
- ``clean_<case>.py``: a correct look-alike the rule must stay silent on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source

RULES_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
EXPECTED = re.compile(r"#\s*error:\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)")


@dataclass(frozen=True)
class Case:
    code: str
    path: Path

    @property
    def id(self) -> str:
        return f"{self.code}/{self.path.stem}"

    @property
    def fixed_path(self) -> Path:
        return self.path.with_name(self.path.stem + ".fixed.py")

    @property
    def is_bad(self) -> bool:
        return self.path.name.startswith("bad_")


def cases() -> list[Case]:
    found = []
    for rule_dir in sorted(p for p in RULES_DIR.iterdir() if p.is_dir()):
        for path in sorted(rule_dir.glob("*.py")):
            if path.name.endswith(".fixed.py"):
                continue
            if not path.name.startswith(("bad_", "clean_")):
                raise AssertionError(f"fixture {path} must be named bad_*.py, bad_*.fixed.py or clean_*.py")
            found.append(Case(rule_dir.name, path))
    return found


def expected_rows(source: str, code: str) -> list[int]:
    rows = []
    for row, line in enumerate(source.splitlines(), 1):
        match = EXPECTED.search(line)
        if match:  # `# error: TL201, TL201` marks two findings on the row
            rows.extend([row] * [c.strip() for c in match.group(1).split(",")].count(code))
    return rows


def lint(source: bytes, code: str, fix: bool = False):
    return lint_module_source(source, select_rules([code], [], []), FixMode.UNSAFE if fix else FixMode.NONE)
