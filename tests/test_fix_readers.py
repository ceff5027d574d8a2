"""A safe fix knows every reader of what it changes (issue 39): each case's fixes have the
applicability listed, and a run with safe fixes only gives the fixture's expected output
where they are safe and leaves the file alone where none is (the fixture's `.fixed.py` is
the output with unsafe fixes too)."""

import pytest

from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source
from torchlint.rule import Applicability

from rule_fixtures import RULES_DIR

SAFE, UNSAFE = Applicability.SAFE, Applicability.UNSAFE

CASES = {
    # A load annotated as a mapping and read by load_state_dict alone.
    ("TL501", "bad_loaded_annotated_as_mapping"): SAFE,
    # Validation inside the batch loop: train() restored at the start of each step, in one go.
    ("TL107", "bad_validation_in_batch_loop"): SAFE,
    # A demonstration that reads the tensor's device after the discarded move.
    ("TL203", "bad_device_inspected"): UNSAFE,
    ("TL203", "bad_discarded"): SAFE,
}


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: "/".join(c))
def test_each_fix_has_the_applicability_its_readers_allow(case):
    code, name = case
    source = (RULES_DIR / code / f"{name}.py").read_bytes()
    rules = select_rules([code], [], [])
    findings = [f for f in lint_module_source(source, rules, FixMode.NONE).findings if f.code == code]
    assert findings and all(f.fix is not None for f in findings)
    assert {f.fix.applicability for f in findings} == {CASES[case]}
    safe_only = lint_module_source(source, rules, FixMode.SAFE).fixed_source
    expected = (RULES_DIR / code / f"{name}.fixed.py").read_bytes() if CASES[case] is SAFE else source
    assert safe_only == expected


def _findings_with_target_torch(tmp_path, code, name, target, fix_mode=FixMode.NONE):
    from torchlint.project import build_index

    source = (RULES_DIR / code / f"{name}.py").read_bytes()
    path = tmp_path / "train.py"
    path.write_bytes(source)
    view = build_index([path], tmp_path, target_torch=target).view(path)
    return lint_module_source(source, select_rules([code], [], []), fix_mode, project=view)


def test_tl801_rewrites_the_scaler_s_class_tests_with_its_calls(tmp_path):
    """In a project on torch 2.3 or later the `GradScaler` fix is safe where it rewrites every
    `isinstance` test of the old class too; a test it cannot rewrite (`type(s) is ...`) makes
    it unsafe, and its message says what still refers to the old class."""
    findings = _findings_with_target_torch(tmp_path, "TL801", "bad_isinstance_test", (2, 3)).findings
    assert len(findings) == 2 and {f.fix.applicability for f in findings} == {SAFE}
    result = _findings_with_target_torch(tmp_path, "TL801", "bad_isinstance_test", (2, 3), FixMode.SAFE)
    assert result.fixed_source == (RULES_DIR / "TL801" / "bad_isinstance_test.fixed.py").read_bytes()
    [finding] = _findings_with_target_torch(tmp_path, "TL801", "bad_class_compared", (2, 3)).findings
    assert finding.fix.applicability is UNSAFE
    assert "`type(scaler) is torch.cuda.amp.GradScaler` still refers to `torch.cuda.amp.GradScaler`" in finding.fix.message
