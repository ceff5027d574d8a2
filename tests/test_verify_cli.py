"""`torchlint verify` on the command line: options, exit codes, output shapes, the reference trainer."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, cuda_available
from torchlint.cli import main

pytest.importorskip("torch")

SCRIPTS = FIXTURES / "scripts"
CHECK_NAMES = ["runs", "learns", "TL101", "TL103", "TL201", "TL301", "TL401", "TL402", "TL107", "TL501", "TL601"]
STATUSES = {"PASS", "FAIL", "WARN", "NOT_EXERCISED"}


def verify(*args: str):
    return CliRunner().invoke(main, ["verify", *args])


def write(path, source: str):
    path.write_text(textwrap.dedent(source))
    return path


def as_json(result) -> dict:
    return json.loads(result.stdout)


def test_the_parent_process_does_not_import_torch():
    code = "import sys, torchlint.runtime.cli; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_json_output_shape_and_exit_zero():
    result = verify("--device", "cpu", "--limit-batches", "2", "--output-format", "json", str(SCRIPTS / "correct" / "clipping.py"))
    assert result.exit_code == 0, result.output
    report = as_json(result)  # the script's own prints went to stderr
    assert set(report) == {"target", "script", "args", "reference", "device", "exit_code", "duration_s", "summary", "notes", "checks", "series"}
    assert report["exit_code"] == 0 and report["device"]["cuda_hidden"] is True
    assert [check["check"] for check in report["checks"]] == CHECK_NAMES
    for check in report["checks"]:
        assert set(check) == {"check", "status", "message", "locations", "evidence"}
        assert check["status"] in STATUSES
    assert sum(report["summary"].values()) == len(CHECK_NAMES)
    (losses,) = report["series"]["loss"].values()
    assert len(losses) == 6 and all(isinstance(v, float) for v in losses)
    assert report["series"]["lr"] == {"Adam#0": [[1, 0.01]]}
    assert report["notes"] == []


def test_failing_check_exits_one_and_names_the_line():
    result = verify("--device", "cpu", "--limit-batches", "2", str(SCRIPTS / "buggy" / "tl501_bad.py"))
    assert result.exit_code == 1
    assert "FAIL          TL501" in result.stdout
    assert "tl501_bad.py:36  torch.save(model, Path(output_dir) / \"model.pt\")" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["missing.py"],
        ["--reference", "mod:factory", "train.py"],
        ["--device", "tpu", "train.py"],
        ["--limit-batches", "0", "train.py"],
        ["--timeout", "-1", "train.py"],
    ],
)
def test_usage_errors_exit_two(args, tmp_path):
    write(tmp_path / "train.py", "print('hi')\n")
    assert verify(*args).exit_code == 2


def test_script_arguments_pass_through(tmp_path):
    script = write(
        tmp_path / "args.py",
        """
        import sys
        from pathlib import Path
        assert sys.argv[1:] == ["--epochs", "2", "--device", "gpu", "-x"], sys.argv
        assert Path(sys.path[0]) == Path(__file__).parent, sys.path[0]
        """,
    )
    result = verify("--output-format", "json", str(script), "--epochs", "2", "--device", "gpu", "-x")
    assert result.exit_code == 0, result.stderr
    assert as_json(result)["args"] == ["--epochs", "2", "--device", "gpu", "-x"]


def test_an_exception_fails_runs_with_its_line(tmp_path):
    script = write(
        tmp_path / "crash.py",
        """
        def load():
            raise ValueError("no such dataset")

        load()
        """,
    )
    result = verify("--output-format", "json", str(script))
    assert result.exit_code == 1
    runs = as_json(result)["checks"][0]
    assert runs["status"] == "FAIL" and runs["message"] == "raised ValueError: no such dataset"
    assert runs["locations"][0]["line"] == 3


def test_a_syntax_error_shows_the_users_file_not_torchlints_frames(tmp_path):
    # The child's stderr is the terminal's, so this runs the command line for real.
    script = write(tmp_path / "broken.py", "import torch\nx = (1,\ny = 2\n")
    run = subprocess.run(
        [sys.executable, "-m", "torchlint", "verify", "--device", "cpu", "--output-format", "json", str(script)],
        capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 1, run.stderr
    assert run.stderr.splitlines() == [f'  File "{script}", line 2', "    x = (1,", "        ^", "SyntaxError: '(' was never closed"]
    runs = json.loads(run.stdout)["checks"][0]
    assert runs["status"] == "FAIL" and runs["message"].startswith("raised SyntaxError: '(' was never closed")
    assert [(loc["line"], loc["code"]) for loc in runs["locations"]] == [(2, "x = (1,")]


def test_exit_status_of_the_script(tmp_path):
    script = write(tmp_path / "quit.py", "import sys\nsys.exit(3)\n")
    result = verify("--output-format", "json", str(script))
    assert result.exit_code == 1
    assert as_json(result)["checks"][0]["message"] == "exited with status 3"
    assert verify(str(write(tmp_path / "done.py", "raise SystemExit(0)\n"))).exit_code == 0


@pytest.mark.parametrize("source", ["import sys\nsys.exit(3)\n", "def broken(:\n    pass\n"])
def test_a_script_that_never_got_going_proves_nothing(tmp_path, source):
    result = verify("--device", "cpu", "--output-format", "json", str(write(tmp_path / "early.py", source)))
    report = as_json(result)
    assert result.exit_code == 1
    assert {c["check"]: c["status"] for c in report["checks"]} == {"runs": "FAIL", **dict.fromkeys(CHECK_NAMES[1:], "NOT_EXERCISED")}
    assert any("no optimizer step ran" in note for note in report["notes"])


TRAINS_THEN = """
import os, signal, sys
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(32, 4), torch.randn(32, 1)
for step in range(6):
    optimizer.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
import time; time.sleep(2.5)  # the facts are published once a second
{ending}
"""


@pytest.mark.parametrize(
    ("ending", "message"),
    [
        ("os._exit(0)", "ended with status 0"),
        ("import ctypes; ctypes.string_at(0)", "killed by SIGSEGV"),
        ("os.kill(os.getpid(), signal.SIGKILL)", "killed by SIGKILL"),
    ],
)
def test_a_crash_fails_runs_with_the_partial_evidence(tmp_path, ending, message):
    script = write(tmp_path / "crash.py", TRAINS_THEN.replace("{ending}", ending))
    result = verify("--device", "cpu", "--output-format", "json", str(script))
    assert result.exit_code == 1, result.output
    report = as_json(result)
    found = {c["check"]: c for c in report["checks"]}
    assert found["runs"]["status"] == "FAIL" and message in found["runs"]["message"]
    assert "PASS" not in {c["status"] for c in report["checks"]}  # lost facts are never a PASS
    assert found["TL101"]["status"] == "NOT_EXERCISED" and "5 steps checked" in found["TL101"]["message"]
    (losses,) = report["series"]["loss"].values()
    assert len(losses) == 6
    assert any("died" in note for note in report["notes"])


def test_a_script_that_swallows_the_timeout_is_killed_and_fails(tmp_path, monkeypatch):
    monkeypatch.setattr("torchlint.runtime.launcher.GRACE_S", 2.0)
    script = write(
        tmp_path / "stubborn.py",
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(0.1)
        """,
    )
    result = verify("--timeout", "3", "--output-format", "json", str(script))
    assert result.exit_code == 1
    runs = as_json(result)["checks"][0]
    assert runs["status"] == "FAIL" and "timeout" in runs["message"]


def test_without_torch_one_line_says_how_to_install_it(tmp_path, monkeypatch):
    # The child finds this `torch` first, and importing it fails as a missing torch would.
    (tmp_path / "no_torch" / "torch").mkdir(parents=True)
    write(tmp_path / "no_torch" / "torch" / "__init__.py", "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "no_torch"))
    result = verify(str(write(tmp_path / "train.py", "print('hi')\n")))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "torchlint verify: PyTorch is not installed; install the verify extra: pip install 'torchlint[verify]'"
    ]


def test_timeout_stops_the_script_and_reports_where(tmp_path):
    script = write(
        tmp_path / "hang.py",
        """
        import time
        while True:
            time.sleep(0.1)
        """,
    )
    started = time.perf_counter()
    result = verify("--timeout", "20", "--output-format", "json", str(script))
    assert time.perf_counter() - started < 60
    assert result.exit_code == 1
    runs = as_json(result)["checks"][0]
    assert runs["status"] == "FAIL" and "timeout" in runs["message"]
    assert runs["locations"][0]["line"] == 4


@pytest.mark.skipif(cuda_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda_is_a_usage_error():
    result = verify("--device", "cuda", str(SCRIPTS / "correct" / "clipping.py"))
    assert result.exit_code == 2
    assert "no CUDA device" in result.stderr


# -- the reference trainer ------------------------------------------------------------------

MODELS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


def classifier():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.BatchNorm1d(32), nn.Linear(32, 3))
    batch = (torch.randn(16, 8), torch.randint(0, 3, (16,)))
    return model, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), lr=1e-2), batch


def batch_norm_without_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.Dropout(0.1), nn.ReLU(), nn.Linear(16, 3))
    return model, nn.CrossEntropyLoss(), torch.optim.Adam(model.parameters(), lr=1e-2)


def regressor_without_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))
    return model, nn.MSELoss(), torch.optim.Adam(model.parameters(), lr=1e-2)


class AlwaysDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(F.dropout(x, 0.5))  # F.dropout defaults to training=True


def always_dropout():
    model = AlwaysDropout()
    return {"model": model, "loss_fn": nn.CrossEntropyLoss(), "optimizer": torch.optim.Adam(model.parameters(), lr=1e-2)}


class LazyStats(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 1)

    def forward(self, x):
        if not hasattr(self, "seen"):
            self.register_buffer("seen", torch.zeros(()))  # only a model that ran has it
        return self.fc(x)


def lazy_stats():
    model = LazyStats()
    return model, nn.MSELoss(), torch.optim.SGD(model.parameters(), lr=0.1), (torch.randn(8, 8), torch.randn(8, 1))


def broken():
    raise RuntimeError("no weights here")
"""


@pytest.fixture
def models(tmp_path):
    write(tmp_path / "models.py", MODELS)  # the tests run in tmp_path, which is on the import path


def reference(factory: str):
    result = verify("--reference", f"models:{factory}", "--output-format", "json")
    return result, (as_json(result) if result.exit_code in (0, 1) else None)


def statuses(report) -> dict:
    return {check["check"]: check["status"] for check in report["checks"]}


@pytest.mark.parametrize("factory", ["classifier", "regressor_without_batch", "batch_norm_without_batch"])
def test_reference_trainer_passes_a_correct_model(models, factory):
    result, report = reference(factory)
    assert result.exit_code == 0, result.output
    found = statuses(report)
    assert [found[name] for name in ("overfit", "eval-determinism", "state-dict")] == ["PASS"] * 3
    assert found["runs"] == found["learns"] == found["TL101"] == "PASS"
    assert report["reference"] == f"models:{factory}"


def test_reference_trainer_catches_dropout_in_eval(models):
    result, report = reference("always_dropout")
    assert result.exit_code == 1
    assert statuses(report)["eval-determinism"] == "FAIL"


def test_reference_trainer_catches_a_state_dict_that_does_not_load(models):
    result, report = reference("lazy_stats")
    assert result.exit_code == 1
    check = next(c for c in report["checks"] if c["check"] == "state-dict")
    assert check["status"] == "FAIL" and "seen" in check["message"]


@pytest.mark.parametrize("spec", ["models:broken", "models:missing", "no_such_module:f", "models"])
def test_reference_setup_errors_exit_two(models, spec):
    result = verify("--reference", spec)
    assert result.exit_code == 2
    assert "--reference" in result.stderr
