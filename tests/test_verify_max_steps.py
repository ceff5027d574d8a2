"""`torchlint verify --max-steps N`: a real script runs unmodified, leaving its training loop
after N optimizer steps and going on with its evaluation and saving; where no DataLoader
drives the loop, the run ends at the next step and says so."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

EPOCHS = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
x = torch.randn(256, 4)
y = (x.sum(1) > 0).long()
train = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
val = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=32)
model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = 0
for epoch in range(EPOCH_COUNT):
    model.train()
    for xb, yb in train:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        steps += 1
    model.eval()
    with torch.no_grad():
        correct = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val)
    print("EPOCH", epoch, "EVALUATED", correct)
print("DONE AFTER", steps, "STEPS")
torch.save(model.state_dict(), OUT)
"""

WHILE = """
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
while step < 1_000_000:
    opt.zero_grad()
    loss = model(torch.randn(8, 4)).pow(2).mean()
    loss.backward()
    opt.step()
    step += 1
print("NEVER REACHED")
"""


def run(tmp_path, source: str, *options: str, epochs: int = 3) -> tuple[dict, str]:
    script = tmp_path / "train.py"
    out = tmp_path / "model.pt"
    script.write_text(textwrap.dedent(source).replace("OUT", repr(str(out))).replace("EPOCH_COUNT", str(epochs)))
    command = [sys.executable, "-m", "torchlint", "verify", "--device", "cpu", "--output-format", "json", *options, str(script)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout), result.stderr  # (the script's prints go to stderr with JSON)


def check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["check"] == name)


def test_the_training_loop_is_left_and_evaluation_and_saving_run(tmp_path):
    report, printed = run(tmp_path, EPOCHS, "--max-steps", "5")  # 32 steps an epoch, 3 epochs
    runs = check(report, "runs")
    assert runs["status"] == "PASS"
    assert "leaving the training loop after 5 optimizer steps" in runs["message"]
    # The epochs after the fifth step ran with the training loader emptied: each evaluated.
    assert [f"EPOCH {e} EVALUATED" in printed for e in range(3)] == [True] * 3
    assert "DONE AFTER 5 STEPS" in printed
    assert (tmp_path / "model.pt").is_file()
    assert check(report, "TL501")["status"] == "PASS"  # the save after the loop was checked


def test_an_epoch_loop_that_goes_on_is_ended_after_its_evaluation_ran(tmp_path):
    report, printed = run(tmp_path, EPOCHS, "--max-steps", "5", epochs=10_000)
    runs = check(report, "runs")
    assert runs["status"] == "PASS"
    assert runs["message"] == "ended by --max-steps 5: the loop around the training loop went on for 2 more passes after it was left"
    assert "EPOCH 0 EVALUATED" in printed and "EPOCH 2 EVALUATED" in printed and "DONE AFTER" not in printed


def test_a_loop_no_dataloader_drives_ends_the_run_at_the_next_step(tmp_path):
    report, printed = run(tmp_path, WHILE, "--max-steps", "3")
    runs = check(report, "runs")
    assert runs["status"] == "PASS"
    assert runs["message"].startswith("ended by --max-steps 3: optimizer 0 was about to take step 4")
    assert "NEVER REACHED" not in printed


def test_without_the_option_the_script_runs_its_own_loop(tmp_path):
    source = WHILE.replace("1_000_000", "7").replace("NEVER REACHED", "DONE")
    report, printed = run(tmp_path, source)
    assert check(report, "runs")["status"] == "PASS" and "DONE" in printed
