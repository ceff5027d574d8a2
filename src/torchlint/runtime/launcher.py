"""The parent side of `torchlint verify`: run the child process, enforce the timeout, read its facts.

The parent never imports torch: the child does, once, as the script itself would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from torchlint.runtime.checks import CheckResult, blank_facts, evaluate

# Seconds the child gets, after SIGTERM at the timeout, to unwind the script and report.
GRACE_S = 10.0
# Threads for a child whose environment does not choose: verification runs are small, and a
# large OpenMP pool costs start-up time that such runs do not win back.
DEFAULT_THREADS = 4


class SetupError(Exception):
    """The run could not start (no CUDA for --device cuda, a broken --reference factory)."""


@dataclass
class VerifyRequest:
    script: Path | None = None
    args: tuple[str, ...] = ()
    reference: str | None = None
    device: str = "auto"
    timeout: float = 600.0
    limit_batches: int | None = None
    max_steps: int | None = None


@dataclass
class VerifyResult:
    request: VerifyRequest
    facts: dict
    checks: list[CheckResult]
    duration_s: float
    failed: bool = field(init=False)

    def __post_init__(self) -> None:
        self.failed = any(check.status == "FAIL" for check in self.checks)


def child_environment(device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.setdefault("OMP_NUM_THREADS", str(min(DEFAULT_THREADS, os.cpu_count() or 1)))
    return env


def verify(request: VerifyRequest, *, script_output_to_stderr: bool = False) -> VerifyResult:
    started = time.perf_counter()
    config = {
        "script": str(request.script) if request.script else None,
        "reference": request.reference,
        "device": request.device,
        "limit_batches": request.limit_batches,
        "max_steps": request.max_steps,
    }
    with tempfile.TemporaryDirectory(prefix="torchlint-verify-") as scratch:
        result_path = Path(scratch) / "facts.json"
        command = [sys.executable, "-m", "torchlint.runtime._child", str(result_path), json.dumps(config), *request.args]
        # With JSON output the report owns stdout, so the script's prints go to stderr.
        stdout = sys.__stderr__.fileno() if script_output_to_stderr else None
        child = subprocess.Popen(command, env=child_environment(request.device), stdout=stdout)
        timed_out = _wait(child, request.timeout)
        facts = json.loads(result_path.read_text(encoding="utf-8")) if result_path.exists() else None
    if facts is None:  # the child died before it could write anything
        facts = blank_facts({"requested": request.device, "cuda_available": None, "cuda_hidden": request.device == "cpu"})
    if "setup_error" in facts:
        raise SetupError(facts["setup_error"])
    if "outcome" not in facts:  # the facts stop where the child died: they are partial
        facts["partial"] = True
        facts["outcome"] = {"status": "crash", "exit_code": child.returncode, "signal": _signal_name(child.returncode)}
    if timed_out:
        facts["outcome"] = {**facts["outcome"], "status": "timeout", "timeout_s": request.timeout}
    return VerifyResult(request, facts, evaluate(facts), time.perf_counter() - started)


def _signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _wait(child: subprocess.Popen, timeout: float) -> bool:
    """Wait for the child; at the timeout ask it to stop (it reports), then kill it. True if timed out."""
    try:
        child.wait(timeout=timeout)
        return False
    except subprocess.TimeoutExpired:
        pass
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    return True
