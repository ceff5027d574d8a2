"""tools/piece_experiment.py: a file's lint in pieces against its whole lint."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("piece_experiment", ROOT / "tools" / "piece_experiment.py")
piece_experiment = importlib.util.module_from_spec(spec)
sys.modules["piece_experiment"] = piece_experiment
spec.loader.exec_module(piece_experiment)

from torchlint.config import select_rules  # noqa: E402

RULES = select_rules(None, (), ())


def test_a_file_wide_fact_in_another_piece_is_what_the_pieces_miss():
    # torch.cuda.set_device makes the file CUDA-only by design: the whole file is silent,
    # the piece without `setup` is not.
    text = (ROOT / "fixtures" / "rules" / "TL201" / "clean_set_device_local_rank.py").read_text()
    whole, pieces = piece_experiment.compare(text, 2, RULES)
    assert whole == set()
    assert {(row, code) for row, _, code in pieces} == {(10, "TL201"), (12, "TL201"), (13, "TL201")}


def test_independent_definitions_lint_alike_in_pieces():
    text = (
        "import torch\n\n\n"
        "def save():\n    model = torch.nn.Linear(2, 2)\n    torch.save(model, 'm.pt')\n\n\n"
        "def load():\n    return 1\n\n\n"
        "placed = torch.zeros(1).cuda()\n"
    )
    whole, pieces = piece_experiment.compare(text, 2, RULES)
    assert whole == pieces and {code for _, _, code in whole} == {"TL501", "TL201"}


def test_rows_stay_where_they_were():
    text = "import torch\n\n\ndef a():\n    pass\n\n\ndef b():\n    pass\n"
    lines = text.splitlines(True)
    spans = piece_experiment.definition_rows(__import__("ast").parse(text))
    assert spans == [(4, 5), (8, 9)]
    blanked = piece_experiment.blanked(lines, spans[:1])
    assert blanked.splitlines() == ["import torch", "", "", "", "", "", "", "def b():", "    pass"]


def test_the_planned_cut_holds_what_the_plain_cut_misses():
    # The plain cut reports TL201 in the piece without `setup` (set_device); the engine's
    # plan gives every piece `setup` (a fact of the whole file), and its pieces agree.
    path = ROOT / "fixtures" / "rules" / "TL201" / "clean_set_device_local_rank.py"
    piece_experiment.COUNTS.clear()
    whole, pieces = piece_experiment.compare_planned(path.read_bytes(), RULES)
    assert whole == pieces == set()
    assert piece_experiment.COUNTS["pieces"] == 2 and piece_experiment.COUNTS["pieces with no context"] == 1  # setup's
