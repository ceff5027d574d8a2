"""tools/fix_check.py: the fixes on a corpus copy are checked to parse, to leave no name
undefined, and to change nothing on a second run; the corpus itself is never touched."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("fix_check", ROOT / "tools" / "fix_check.py")
fix_check = importlib.util.module_from_spec(spec)
sys.modules["fix_check"] = fix_check
spec.loader.exec_module(fix_check)

HARDCODED = """import torch
from torch import nn

model = nn.Linear(4, 2).cuda()
"""


def test_a_corpus_copy_is_fixed_and_checked(tmp_path):
    corpus = tmp_path / "corpus" / "owner+repo"
    corpus.mkdir(parents=True)
    (corpus / "train.py").write_text(HARDCODED)
    (corpus / "clean.py").write_text("import torch\n\nx = torch.ones(2)\n")
    scratch = tmp_path / "scratch"
    problems, changed = fix_check.check(tmp_path / "corpus", scratch, jobs=1)
    assert (problems, changed) == ([], 1)
    fixed = (scratch / "owner+repo" / "train.py").read_text()
    assert ".to(device)" in fixed and "torch.cuda.is_available()" in fixed
    assert (corpus / "train.py").read_text() == HARDCODED  # the corpus is left as it was


def test_a_name_left_undefined_by_a_fix_is_a_problem(tmp_path):
    pytest.importorskip("pyflakes")
    after = tmp_path / "after.py"
    after.write_text("import torch\nmodel = torch.nn.Linear(4, 2).to(device)\n")
    assert fix_check.problems_of("import torch\nmodel = torch.nn.Linear(4, 2).cuda()\n", after) == [
        "undefined after the fixes: undefined name 'device'"
    ]
    # a name that was undefined before is not the fix's doing
    after.write_text("model = net.to('cpu')\n")
    assert fix_check.problems_of("model = net.cuda()\n", after) == []


def test_a_fixed_file_that_does_not_parse_is_a_problem(tmp_path):
    after = tmp_path / "after.py"
    after.write_text("model = (\n")
    [problem] = fix_check.problems_of("model = 1\n", after)
    assert problem.startswith("does not parse after the fixes")


def test_a_notebook_is_checked_as_its_code_cells(tmp_path):
    notebook = tmp_path / "n.ipynb"
    cells = [{"cell_type": "markdown", "source": ["# title"]},
             {"cell_type": "code", "source": ["%matplotlib inline\n", "import torch\n"]},
             {"cell_type": "code", "source": "x = torch.ones(1)\n!ls\n"}]
    notebook.write_text(json.dumps({"cells": cells}))
    assert fix_check.python_of(notebook) == "pass\nimport torch\n\nx = torch.ones(1)\npass"
    assert fix_check.problems_of("import torch\nx = torch.ones(1)\n", notebook) == []


def test_magics_keep_their_indentation_and_continuation(tmp_path):
    notebook = tmp_path / "n.ipynb"
    cells = [{"cell_type": "code", "source": "import sys\nif 'google.colab' in sys.modules:\n    !pip install x\n"},
             {"cell_type": "code", "source": "!python run.py \\\n        --out data \\\n        --seed 1\nx = 1\n"}]
    notebook.write_text(json.dumps({"cells": cells}))
    source = fix_check.python_of(notebook)
    assert source.splitlines() == ["import sys", "if 'google.colab' in sys.modules:", "    pass", "",
                                   "pass", "", "", "x = 1"]
    compile(source, "n.ipynb", "exec")
    assert fix_check.problems_of(source, notebook) == []


def test_a_file_that_did_not_parse_before_is_judged_by_its_names(tmp_path):
    after = tmp_path / "after.py"
    after.write_text("print 'python 2'\n")
    assert fix_check.problems_of("print 'python 2'\n", after) == []
