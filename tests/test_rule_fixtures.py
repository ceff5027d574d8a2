"""Golden tests generated from every rule's fixtures (see ``rule_fixtures.py``): adding a
rule's fixtures adds its tests."""

from __future__ import annotations

import re

import libcst as cst
import pytest

from rule_fixtures import RULES_DIR, cases, expected_rows, lint
from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source
from torchlint.rule import Applicability
from torchlint.rules import all_rules

CASES = cases()
BAD = [c for c in CASES if c.is_bad]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_reports_exactly_the_marked_rows(case):
    source = case.path.read_bytes()
    result = lint(source, case.code)
    rows = sorted(f.start.row for f in result.findings if f.code == case.code)
    assert rows == expected_rows(source.decode(), case.code)
    if case.is_bad:
        assert rows, f"{case.path.name} marks no `# error: {case.code}` row"


@pytest.mark.parametrize("case", BAD, ids=lambda c: c.id)
def test_fix_gives_the_expected_output(case):
    source = case.path.read_bytes()
    fixed = lint(source, case.code, fix=True).fixed_source
    if case.fixed_path.exists():
        assert fixed.decode() == case.fixed_path.read_text()
    else:
        assert fixed == source, "the rule fixed a case that has no .fixed.py"


@pytest.mark.parametrize("case", [c for c in BAD if c.fixed_path.exists()], ids=lambda c: c.id)
def test_fixed_output_parses_is_clean_and_idempotent(case):
    fixed = case.fixed_path.read_bytes()
    cst.parse_module(fixed)
    compile(fixed, str(case.fixed_path), "exec")
    again = lint(fixed, case.code, fix=True)
    assert again.fixed_source == fixed, "a second --fix changed the fixed output"
    assert not [f for f in again.findings if f.fix is not None], "fixable findings remain after the fix"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_every_rule_has_fixtures_and_docs(rule):
    if rule.code == "TL000":  # reported by the engine itself; tested in test_engine
        return
    own = [c for c in CASES if c.code == rule.code]
    assert any(c.is_bad for c in own), f"{rule.code} has no bad_*.py fixture"
    assert any(not c.is_bad for c in own), f"{rule.code} has no clean_*.py fixture"
    doc = rule.documentation()
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
        assert heading in doc, f"{rule.code} docs lack {heading!r}"


def test_tl801_fixes_are_safe_only_where_every_supported_torch_has_the_replacement(tmp_path):
    """`torch.amp.autocast` exists since torch 2.0; `GradScaler` came with 2.3 and
    `custom_fwd(device_type=...)` with 2.4: each fix is safe only when the oldest torch the
    project supports (`target-torch`) has its replacement; unknown, it is unsafe (the
    fixture's expected output is with --unsafe-fixes)."""
    from torchlint.project import build_index

    source = (RULES_DIR / "TL801" / "bad_cuda_amp.py").read_bytes()
    path = tmp_path / "train.py"
    path.write_bytes(source)

    def applicability(target):
        view = build_index([path], tmp_path, target_torch=target).view(path) if target else None
        by_name = {}
        for finding in lint_module_source(source, select_rules(["TL801"], [], []), project=view).findings:
            assert finding.fix is not None
            name = re.search(r"torch\.cuda\.amp\.(\w+)", finding.message).group(1)
            by_name.setdefault(name, set()).add(finding.fix.applicability)
        return by_name

    assert applicability(None) == {"autocast": {Applicability.UNSAFE}, "GradScaler": {Applicability.UNSAFE}}
    assert applicability((2, 0)) == {"autocast": {Applicability.SAFE}, "GradScaler": {Applicability.UNSAFE}}
    assert applicability((2, 3)) == {"autocast": {Applicability.SAFE}, "GradScaler": {Applicability.SAFE}}
    view = build_index([path], tmp_path, target_torch=(2, 0)).view(path)
    safe_only = lint_module_source(source, select_rules(["TL801"], [], []), FixMode.SAFE, project=view).fixed_source.decode()
    assert "torch.amp.autocast(" in safe_only and "torch.amp.GradScaler(" not in safe_only
