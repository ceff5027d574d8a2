"""TL503's fix is safe only where every reader of the loaded tensors puts them where it needs
them: a module's or torch's optimizer's `load_state_dict` (with "cpu"), or any
`load_state_dict` given a device variable that means "the GPU when there is one"."""

import pytest

from torchlint.engine import FixMode, lint_module_source
from torchlint.rule import Applicability
from torchlint.config import select_rules

from rule_fixtures import RULES_DIR

CASES = {
    "bad_weights_only": Applicability.SAFE,
    "bad_resume_device": Applicability.SAFE,
    "bad_resume_unknown_optimizer": Applicability.UNSAFE,
    "bad_read_directly": Applicability.UNSAFE,
    "bad_assign": Applicability.UNSAFE,
    "bad_no_map_location": Applicability.UNSAFE,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_fix_has_the_fixture_s_applicability(case):
    source = (RULES_DIR / "TL503" / f"{case}.py").read_bytes()
    rules = select_rules(["TL503"], [], [])
    findings = lint_module_source(source, rules, FixMode.NONE).findings
    assert findings and {f.fix.applicability for f in findings} == {CASES[case]}
    safe_only = lint_module_source(source, rules, FixMode.SAFE).fixed_source
    expected = (RULES_DIR / "TL503" / f"{case}.fixed.py").read_bytes() if CASES[case] is Applicability.SAFE else source
    assert safe_only == expected
