"""The verifier on the training scripts of fixtures/scripts/.

`correct/` holds correct training code in many styles (closures, distillation, checkpointing,
SWA, GANs, AMP, TBPTT, dataclass outputs, checkpoint dicts...): no check may FAIL on them.
`buggy/` holds scripts with one bug each; a header names the check that must fail and how the
bug is fixed:

    # verify: FAIL TL301
    # fixed-by: correct/outputs_collected_detached.py     (its fixed twin in the corpus)
    # fixed-by: torchlint --fix                           (the static fix, applied to a copy here)

Exactly that check fails on the buggy script; on its fixed version that check PASSes (it is
exercised) and nothing fails. Switching the check off (`TORCHLINT_VERIFY_DISABLE`) lets the
buggy script pass: no other check catches its bug. A bug that is two rules' at once (a
validation loss computed with gradients on and kept across epochs: TL402 and TL301) names
both (`# verify: FAIL TL301 TL402`): exactly those fail, each one catches it on its own (with
the other switched off, the one left still fails), and with both off nothing fails. Every
script runs once per session; the runs go two at a time.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import FIXTURES, cuda_available

pytest.importorskip("torch")

from torchlint.runtime.checks import CHECKS, FAIL, NOT_EXERCISED, PASS, WARN, evaluate  # noqa: E402
from torchlint.runtime.launcher import VerifyRequest, verify  # noqa: E402

pytestmark = pytest.mark.slow

SCRIPTS = FIXTURES / "scripts"
CORRECT = sorted((SCRIPTS / "correct").glob("*.py"))
BUGGY = sorted((SCRIPTS / "buggy").glob("*.py"))
# Four batches per DataLoader pass keep every run short but still reach evaluation and saving.
LIMIT = 4
HEADER = re.compile(r"^# verify: FAIL (?P<checks>\S+(?: \S+)*)\n# fixed-by: (?P<fixed>.+)\n")


def run(script: Path, device: str = "cpu"):
    return verify(VerifyRequest(script=script, device=device, limit_batches=LIMIT, timeout=300))


def statuses(result) -> dict[str, str]:
    return {check.check: check.status for check in result.checks}


def header(script: Path) -> tuple[set[str], str]:
    match = HEADER.match(script.read_text())
    assert match, f"{script.name}: the header must name the failing checks and the fix"
    return set(match["checks"].split()), match["fixed"].strip()


_results: dict[str, dict[Path, object]] = {}


def result_of(script: Path, device: str = "cpu"):
    """The verifier's result on a corpus script run with ``--device device``; the first call
    for a device runs the whole corpus (two scripts at a time on the CPU, four on a GPU
    machine, which has the cores for them)."""
    if device not in _results:
        scripts = [*CORRECT, *BUGGY]
        workers = min(2 if device == "cpu" else 4, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            _results[device] = dict(zip(scripts, pool.map(lambda s: run(s, device=device), scripts)))
    return _results[device][script]


def test_corpus_size_and_headers():
    assert len(CORRECT) >= 30 and len(BUGGY) >= 15
    for script in BUGGY:
        checks, fixed = header(script)
        assert checks <= set(CHECKS), script.name
        assert fixed == "torchlint --fix" or (SCRIPTS / fixed).is_file(), script.name


@pytest.mark.parametrize("script", CORRECT, ids=lambda p: p.name)
def test_correct_script_has_no_failure(script):
    result = result_of(script)
    found = statuses(result)
    assert found["runs"] == PASS, [c.to_json() for c in result.checks if c.check == "runs"]
    assert not result.failed, [c.to_json() for c in result.checks if c.status == FAIL]


@pytest.mark.parametrize("script", BUGGY, ids=lambda p: p.name)
def test_buggy_script_fails_exactly_its_check(script):
    checks, _ = header(script)
    result = result_of(script)
    failed = {name for name, status in statuses(result).items() if status == FAIL}
    assert failed == checks, [c.to_json() for c in result.checks if c.status == FAIL]
    for failure in (c for c in result.checks if c.check in checks):
        assert failure.locations, "a failure points at the user's line"
        assert all(Path(loc["file"]).name == script.name for loc in failure.locations)


@pytest.mark.parametrize("script", BUGGY, ids=lambda p: p.name)
def test_switching_the_check_off_lets_the_buggy_script_pass(script):
    # The verdicts are made in the parent from the child's facts: switching a check off there
    # is what TORCHLINT_VERIFY_DISABLE does, without running the script again.
    checks, _ = header(script)
    verdicts = {c.check: c.status for c in evaluate(result_of(script).facts, disabled=checks)}
    assert {verdicts[check] for check in checks} == {NOT_EXERCISED}
    assert FAIL not in verdicts.values(), verdicts
    for check in checks:  # each of a bug's checks catches it on its own
        verdicts = {c.check: c.status for c in evaluate(result_of(script).facts, disabled={check})}
        assert {name for name, status in verdicts.items() if status == FAIL} == checks - {check}, verdicts


@pytest.mark.parametrize("script", [s for s in BUGGY if header(s)[1] != "torchlint --fix"], ids=lambda p: p.name)
def test_fixed_twin_passes_the_check(script):
    checks, fixed = header(script)
    result = result_of(SCRIPTS / fixed)
    # exercised and not failed (the checkpoint dict's NumPy extras are a TL501 WARN)
    for check in checks:
        assert statuses(result)[check] in (PASS, WARN), [c.to_json() for c in result.checks if c.check == check]
    assert not result.failed


def test_leaks_point_at_the_line_that_keeps_the_graphs():
    expected = {"tl301_outputs_appended.py": "predictions.append(logits)", "tl301_running_sum.py": "total = total + loss"}
    for name, code in expected.items():
        failure = next(c for c in result_of(SCRIPTS / "buggy" / name).checks if c.check == "TL301")
        assert [loc["code"] for loc in failure.locations] == [code], name


def lint(*args: str) -> subprocess.CompletedProcess:
    # (TL401 is in the default set since it reports only models known to hold dropout or batch norm.)
    return subprocess.run([sys.executable, "-m", "torchlint", "check", "--no-cache", "--extend-select", "TL401", *args], capture_output=True, text=True)


STATICALLY_FIXED = [s for s in BUGGY if header(s)[1] == "torchlint --fix"]


@pytest.mark.parametrize("script", STATICALLY_FIXED, ids=lambda p: p.name)
def test_statically_fixed_script_holds_only_its_rules_anti_pattern(script):
    findings = json.loads(lint("--output-format", "json", str(script)).stdout)
    assert {finding["code"] for finding in findings} == header(script)[0]


@pytest.mark.parametrize("script", STATICALLY_FIXED, ids=lambda p: p.name)
def test_statically_fixed_script_passes_every_check(script, tmp_path):
    checks, _ = header(script)
    fixed = tmp_path / script.name
    shutil.copy(script, fixed)
    fix = lint("--fix", "--unsafe-fixes", str(fixed))
    assert fixed.read_text() != script.read_text(), fix.stdout + fix.stderr
    result = run(fixed)
    found = statuses(result)
    assert {found[check] for check in checks} == {PASS}, [c.to_json() for c in result.checks if c.check in checks]
    assert FAIL not in found.values() and WARN not in found.values(), found


def test_gan_is_judged_adversarial():
    found = {c.check: c for c in result_of(SCRIPTS / "correct" / "gan.py").checks}
    assert found["learns"].evidence["adversarial"] is True


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("script", CORRECT, ids=lambda p: p.name)
def test_correct_script_has_no_failure_on_cuda(script):
    result = result_of(script, device="cuda")
    assert result.facts["device"]["cuda_available"] is True
    assert statuses(result)["runs"] == PASS, [c.to_json() for c in result.checks if c.check == "runs"]
    assert not result.failed, [c.to_json() for c in result.checks if c.status == FAIL]


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("script", BUGGY, ids=lambda p: p.name)
def test_buggy_script_fails_exactly_its_check_on_cuda(script):
    checks, _ = header(script)
    failed = {name for name, status in statuses(result_of(script, device="cuda")).items() if status == FAIL}
    # With CUDA visible the hardcoded-CUDA script runs fine: only --device cpu can prove TL201.
    assert failed == checks - {"TL201"}, failed


@pytest.mark.cuda
@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("script", STATICALLY_FIXED, ids=lambda p: p.name)
def test_paired_scripts_on_cuda(script, tmp_path):
    checks, _ = header(script)
    fixed = tmp_path / script.name
    shutil.copy(script, fixed)
    lint("--fix", "--unsafe-fixes", str(fixed))
    for device in ("cuda", "cpu"):
        assert not run(fixed, device=device).failed, device
    bad = run(script, device="cuda")
    # With CUDA visible the hardcoded-CUDA script runs fine: only --device cpu can prove TL201.
    assert {statuses(bad)[check] for check in checks} == {NOT_EXERCISED if check == "TL201" else FAIL for check in checks}


@pytest.mark.parametrize("script", [*CORRECT, *BUGGY], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_verifier_and_the_static_rules_agree_on_inference_passes(script):
    """The verifier as the oracle of TL401/TL402: the inference passes it saw run in training
    mode or with gradients on (no backward ran through them) are, line for line, the passes
    the static rules report. A disagreement is a static fact to fix (or, where the run cannot
    see it, to explain in the script's header)."""
    seen = {
        (check.check, location["line"])
        for check in result_of(script).checks
        if check.check in ("TL401", "TL402")
        for location in check.locations
        if Path(location.get("file", "")).name == script.name
    }
    findings = json.loads(lint("--select", "TL401,TL402", "--output-format", "json", str(script)).stdout)
    assert {(f["code"], f["location"]["row"]) for f in findings} == seen
