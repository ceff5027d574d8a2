"""Recall of the core rules on the hand-written cases of fixtures/recall/ (tools/recall.py):
at least 0.9 of the expected findings are reported, and no clean look-alike is."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from conftest import ROOT

spec = importlib.util.spec_from_file_location("recall", ROOT / "tools" / "recall.py")
recall = importlib.util.module_from_spec(spec)
sys.modules["recall"] = recall  # dataclasses look their module up there
spec.loader.exec_module(recall)

RECALL_BAR = 0.9


def test_hand_written_recall_meets_the_bar():
    result = recall.measure()
    assert sum(result.expected.values()) >= 60
    assert result.recall() >= RECALL_BAR, recall.report(result)


def test_clean_look_alikes_stay_silent():
    result = recall.measure()
    assert sum(result.look_alikes.values()) >= sum(result.expected.values())
    assert result.false_positives == [], recall.report(result)


def test_a_missed_finding_lowers_recall(tmp_path: Path):
    (tmp_path / "bad_case.py").write_text(
        "import torch\n"
        "model = torch.nn.Linear(2, 2).cuda()  # expect: TL201\n"
        "x = 1  # expect: TL101\n"
    )
    (tmp_path / "clean_case.py").write_text("import torch\nmodel = torch.nn.Linear(2, 2).cuda()  # clean: TL201\n")
    result = recall.measure(tmp_path)
    assert (result.found["TL201"], result.expected["TL101"], result.found["TL101"]) == (1, 1, 0)
    assert result.recall() == 0.5
    assert result.missed == ["bad_case.py:3 TL101"]
    assert result.false_positives == ["clean_case.py:2 TL201"]
