"""Recall of the core rules on the hand-written cases of fixtures/recall/.

    python tools/recall.py [FOLDER]

Every rule is selected (``ALL``, so the opt-in TL401 is measured too). In ``bad_*.py`` each
expected finding is a trailing ``# expect: TLxxx`` on a row (a code once per finding); it is
found when the rule reports that code on the row or within ``TOLERANCE`` rows of it (the row a
rule anchors a finding on is a choice: the step or the backward pass, the first or the second
model call), each finding matching one expected finding at most. ``clean_*.py`` files mark
their look-alike rows with ``# clean: TLxxx``; any core-rule finding in them is a false
positive. Core-rule findings in bad files that match no expected row are listed as unexpected.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from torchlint.config import select_rules
from torchlint.engine import lint_module_source

FOLDER = Path(__file__).resolve().parent.parent / "fixtures" / "recall"
CORE = ("TL101", "TL103", "TL201", "TL301", "TL401", "TL402", "TL501", "TL601")
TOLERANCE = 2
MARK = re.compile(r"#\s*(expect|clean):\s*(TL\d{3}(?:\s*,\s*TL\d{3})*)")


@dataclass
class Measurement:
    expected: Counter = field(default_factory=Counter)  # code -> expected findings
    found: Counter = field(default_factory=Counter)  # code -> expected findings reported
    look_alikes: Counter = field(default_factory=Counter)  # code -> clean rows marked
    missed: list[str] = field(default_factory=list)  # "file:row code"
    unexpected: list[str] = field(default_factory=list)  # "file:row code" in bad files
    false_positives: list[str] = field(default_factory=list)  # "file:row code" in clean files

    def recall(self, code: str | None = None) -> float:
        expected = sum(self.expected.values()) if code is None else self.expected[code]
        found = sum(self.found.values()) if code is None else self.found[code]
        return found / expected if expected else 1.0


def marks(source: str, kind: str) -> list[tuple[int, str]]:
    """(row, code) per marked finding of ``kind`` (``expect`` or ``clean``)."""
    rows = []
    for row, line in enumerate(source.splitlines(), 1):
        match = MARK.search(line)
        if match and match.group(1) == kind:
            rows.extend((row, code.strip()) for code in match.group(2).split(","))
    return rows


def measure(folder: Path = FOLDER) -> Measurement:
    rules = select_rules(["ALL"], [], [])
    result = Measurement()
    for path in sorted(folder.glob("*.py")):
        source = path.read_bytes()
        findings = [(f.start.row, f.code) for f in lint_module_source(source, rules).findings if f.code in CORE]
        text = source.decode()
        if path.name.startswith("clean_"):
            result.look_alikes.update(code for _, code in marks(text, "clean"))
            result.false_positives += [f"{path.name}:{row} {code}" for row, code in findings]
            continue
        unused = list(findings)
        for row, code in marks(text, "expect"):
            result.expected[code] += 1
            near = [f for f in unused if f[1] == code and abs(f[0] - row) <= TOLERANCE]
            if near:
                unused.remove(min(near, key=lambda f: abs(f[0] - row)))
                result.found[code] += 1
            else:
                result.missed.append(f"{path.name}:{row} {code}")
        result.unexpected += [f"{path.name}:{row} {code}" for row, code in unused]
    return result


def report(result: Measurement) -> str:
    lines = ["rule    expected  found  recall  clean rows  false positives"]
    fp = Counter(item.split()[-1] for item in result.false_positives)
    for code in CORE:
        lines.append(f"{code}   {result.expected[code]:8}  {result.found[code]:5}  {result.recall(code):6.2f}"
                     f"  {result.look_alikes[code]:10}  {fp[code]:15}")
    lines.append(f"all     {sum(result.expected.values()):8}  {sum(result.found.values()):5}  {result.recall():6.2f}"
                 f"  {sum(result.look_alikes.values()):10}  {len(result.false_positives):15}")
    for title, items in (("missed", result.missed), ("false positives (clean files)", result.false_positives),
                         ("unexpected (bad files)", result.unexpected)):
        if items:
            lines.append(f"\n{title}:")
            lines += [f"  {item}" for item in items]
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(measure(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER)))
