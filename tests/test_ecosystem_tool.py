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
