"""The verifier on the paired training scripts of fixtures/scripts/.

Each `tlNNN_bad.py` holds exactly one anti-pattern: under `torchlint verify` exactly its rule's
check fails. The same script after `torchlint check --fix --unsafe-fixes` (run here, on a copy)
passes every check, and its rule's check is exercised. The `control_*.py` scripts are correct
code that looks suspicious and must pass as they are. With a check switched off
(`TORCHLINT_VERIFY_DISABLE`), its bad script passes: no other check catches its bug.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, cuda_available

pytest.importorskip("torch")

from torchlint.runtime.checks import DISABLE_ENV, FAIL, NOT_EXERCISED, PASS, WARN  # noqa: E402
from torchlint.runtime.launcher import VerifyRequest, verify  # noqa: E402

pytestmark = pytest.mark.slow

SCRIPTS = FIXTURES / "scripts"
CORE_RULES = ["TL101", "TL103", "TL201", "TL301", "TL401", "TL402", "TL501", "TL601"]
# Four batches per DataLoader pass keep every run short but still reach evaluation and saving.
LIMIT = 4


def run(script, device="cpu", **options):
    return verify(VerifyRequest(script=script, device=device, limit_batches=LIMIT, timeout=120, **options))


def statuses(result) -> dict[str, str]:
    return {check.check: check.status for check in result.checks}


_bad_runs: dict[str, object] = {}


def bad_run(rule: str):
    """The verifier's result on a bad script, computed once per session."""
    if rule not in _bad_runs:
        _bad_runs[rule] = run(SCRIPTS / f"{rule.lower()}_bad.py")
    return _bad_runs[rule]


def test_every_core_rule_has_a_bad_script():
    assert sorted(p.name for p in SCRIPTS.glob("tl*_bad.py")) == sorted(f"{r.lower()}_bad.py" for r in CORE_RULES)


@pytest.mark.parametrize("rule", CORE_RULES)
def test_bad_script_fails_exactly_its_rules_check(rule):
    result = bad_run(rule)
    failed = {name for name, status in statuses(result).items() if status == FAIL}
    assert failed == {rule}, [c.to_json() for c in result.checks if c.status == FAIL]
    check = next(c for c in result.checks if c.check == rule)
    assert check.locations, "a failure points at the user's line"
    assert all(loc["file"].endswith(f"{rule.lower()}_bad.py") for loc in check.locations)
    assert result.failed


def lint(*args: str) -> subprocess.CompletedProcess:
    # TL401 is opt-in (below the precision bar on real code); the paired scripts exercise it.
    return subprocess.run([sys.executable, "-m", "torchlint", "check", "--no-cache", "--extend-select", "TL401", *args], capture_output=True, text=True)


@pytest.mark.parametrize("rule", CORE_RULES)
def test_bad_script_holds_only_its_rules_anti_pattern(rule):
    findings = json.loads(lint("--output-format", "json", str(SCRIPTS / f"{rule.lower()}_bad.py")).stdout)
    assert {finding["code"] for finding in findings} == {rule}


@pytest.mark.parametrize("rule", CORE_RULES)
def test_fixed_script_passes_every_check(rule, tmp_path):
    script = tmp_path / f"{rule.lower()}_fixed.py"
    shutil.copy(SCRIPTS / f"{rule.lower()}_bad.py", script)
    fix = lint("--fix", "--unsafe-fixes", str(script))
    assert script.read_text() != (SCRIPTS / f"{rule.lower()}_bad.py").read_text(), fix.stdout + fix.stderr
    result = run(script)
    found = statuses(result)
    assert found[rule] == PASS, [c.to_json() for c in result.checks if c.check == rule]
    assert not {name for name, status in found.items() if status in (FAIL, WARN)}, found
    assert not result.failed


CONTROLS = {
    # script: checks that must PASS (be exercised), and WARNs that are allowed
    "control_accumulation.py": ({"runs", "learns", "TL101", "TL301", "TL601"}, set()),
    "control_clipping.py": ({"runs", "learns", "TL101", "TL601"}, set()),
    "control_set_to_none.py": ({"runs", "learns", "TL101", "TL601"}, set()),
    # The generator's loss of a GAN rises as the discriminator improves: a warning, no failure.
    "control_gan.py": ({"runs", "TL101", "TL301", "TL107", "TL601"}, {"learns"}),
    "control_no_dropout.py": ({"runs", "learns", "TL401", "TL402", "TL101"}, set()),
    "control_frozen.py": ({"runs", "learns", "TL101", "TL601"}, set()),
}


def test_every_control_is_listed():
    assert sorted(p.name for p in SCRIPTS.glob("control_*.py")) == sorted(CONTROLS)


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_negative_control_passes(name):
    must_pass, may_warn = CONTROLS[name]
    result = run(SCRIPTS / name)
    found = statuses(result)
    assert {check for check in must_pass if found[check] != PASS} == set(), found
    assert {check for check, status in found.items() if status == WARN} <= may_warn, found
    assert not result.failed, found


def test_gan_control_is_judged_adversarial():
    found = {c.check: c for c in run(SCRIPTS / "control_gan.py").checks}
    assert found["learns"].evidence["adversarial"] is True


@pytest.mark.parametrize("rule", CORE_RULES)
def test_mutation_switching_a_check_off_lets_its_bad_script_pass(rule, monkeypatch):
    monkeypatch.setenv(DISABLE_ENV, rule)
    result = run(SCRIPTS / f"{rule.lower()}_bad.py")
    found = statuses(result)
    assert found[rule] == NOT_EXERCISED
    assert not result.failed, {name: status for name, status in found.items() if status == FAIL}


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("rule", CORE_RULES)
def test_paired_scripts_on_cuda(rule, tmp_path):
    script = tmp_path / f"{rule.lower()}_fixed.py"
    shutil.copy(SCRIPTS / f"{rule.lower()}_bad.py", script)
    lint("--fix", "--unsafe-fixes", str(script))
    for device in ("cuda", "cpu"):
        assert not run(script, device=device).failed, device
    bad = run(SCRIPTS / f"{rule.lower()}_bad.py", device="cuda")
    # With CUDA visible the hardcoded-CUDA script runs fine: only --device cpu can prove TL201.
    assert statuses(bad)[rule] == (NOT_EXERCISED if rule == "TL201" else FAIL)
