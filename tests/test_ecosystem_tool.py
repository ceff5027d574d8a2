"""tools/ecosystem.py: findings are matched to the triage and precision is computed from it."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("ecosystem", ROOT / "tools" / "ecosystem.py")
ecosystem = importlib.util.module_from_spec(spec)
sys.modules["ecosystem"] = ecosystem  # dataclasses look their module up there
spec.loader.exec_module(ecosystem)

HEADER = "repo\tcommit\tpath\tline\tcode\tverdict\treason\n"


def finding(code, path, row, cell=None):
    f = {"code": code, "filename": path, "location": {"row": row, "column": 1}}
    if cell:
        f["cell"] = cell
    return f


def test_keys_name_notebook_cells():
    assert ecosystem.key("a/b", finding("TL201", "./x/t.py", 3)) == ("a/b", "x/t.py", "3", "TL201")
    assert ecosystem.key("a/b", finding("TL201", "n.ipynb", 3, cell=5)) == ("a/b", "n.ipynb", "5:3", "TL201")


def test_precision_counts_reported_findings_and_lost_true_ones(tmp_path, monkeypatch):
    (tmp_path / "TL201.tsv").write_text(
        HEADER
        + "a/b\tc0\tt.py\t1\tTL201\tTP\treal\n"
        + "a/b\tc0\tt.py\t2\tTL201\tFP\tguarded\n"
        + "a/b\tc0\tt.py\t9\tTL201\tTP\tno longer reported\n"
        + "a/b\tc0\tt.py\t4\tTL502\tFP\ttrusted\n"
    )
    monkeypatch.setattr(ecosystem, "TRIAGE", tmp_path)
    found = {("a/b", "t.py", "1", "TL201"), ("a/b", "t.py", "2", "TL201"), ("a/b", "t.py", "3", "TL201"),
             ("a/b", "t.py", "4", "TL502")}
    table = ecosystem.precision_table(found, opt_in={"TL502"})
    assert "| TL201 | yes | 3 | 1 | 1 | 1 | 0.50 | below |" in table
    assert "| TL502 | opt-in | 1 | 0 | 1 | 0 | 0.00 | below |" in table
    assert "Default set: 1 TP, 1 FP, precision **0.500**" in table
    assert "no longer reported: 1." in table and "`t.py:9` TL201" in table


def test_the_repository_triage_is_well_formed():
    ecosystem.read_triage()  # raises on a verdict other than TP/FP


RECALL_HEADER = "repo\tcommit\tpath\tline\tcode\tverdict\treason\n"


def test_recall_counts_real_instances_found_near_their_row(tmp_path, monkeypatch):
    (tmp_path / "TL101.tsv").write_text(
        RECALL_HEADER
        + "a/b\tc\tt.py\t10\tTL101\tREAL\tno clear in the loop\n"
        + "a/b\tc\tt.py\t40\tTL101\tREAL\tclears only every 4 steps\n"
        + "a/b\tc\tt.py\t70\tTL101\tNOT\tthe closure clears\n"
        + "a/b\tc\tn.ipynb\t3:5\tTL101\tREAL\tno clear in the cell's loop\n"
    )
    monkeypatch.setattr(ecosystem, "RECALL", tmp_path)
    found = {("a/b", "t.py", "12", "TL101"), ("a/b", "t.py", "43", "TL101"), ("a/b", "t.py", "40", "TL201"),
             ("a/b", "n.ipynb", "4:5", "TL101")}
    table = ecosystem.recall_table(found)
    assert "| TL101 | 3 | 1 | 0.33 |" in table  # row 12 is within 2 of 10; 43 is 3 away; cell 4 is not cell 3
    assert "- a/b `t.py:40` TL101" in table and "- a/b `n.ipynb:3:5` TL101" in table
    assert "`t.py:70`" not in table  # judged NOT: no instance


def test_recall_verdicts_are_checked(tmp_path, monkeypatch):
    (tmp_path / "TL101.tsv").write_text(RECALL_HEADER + "a/b\tc\tt.py\t10\tTL101\tTP\twrong word\n")
    monkeypatch.setattr(ecosystem, "RECALL", tmp_path)
    try:
        ecosystem.recall_table(set())
    except SystemExit as exit:
        assert "REAL or NOT" in str(exit)
    else:
        raise AssertionError("a verdict other than REAL or NOT must be refused")
