"""tools/fix_check.py: the fixes on corpus copies are checked to parse, to leave no name
undefined and no import unused, to change nothing on a second run, and (for scripts that run
here) to run as the originals did; the corpora themselves are never touched."""

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "fixtures" / "scripts"
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
    result = fix_check.check([tmp_path / "corpus"], scratch, run=False)
    assert result.problems == [] and result.changed == {"safe": ["corpus/owner+repo/train.py"],
                                                        "unsafe": ["corpus/owner+repo/train.py"]}
    assert [(f.mode, f.file, f.code, f.line, f.applicability, f.verdict) for f in result.applied] == [
        ("safe", "corpus/owner+repo/train.py", "TL201", 4, "safe", "ok"),
        ("unsafe", "corpus/owner+repo/train.py", "TL201", 4, "safe", "ok"),
    ]
    fixed = (scratch / "safe" / "corpus" / "owner+repo" / "train.py").read_text()
    assert ".to(device)" in fixed and "torch.cuda.is_available()" in fixed
    assert (corpus / "train.py").read_text() == HARDCODED  # the corpus is left as it was


def test_unsafe_fixes_are_applied_only_in_the_unsafe_copy(tmp_path):
    corpus = tmp_path / "c" / "o+r"
    corpus.mkdir(parents=True)
    (corpus / "m.py").write_text("import torch\n\n\ndef run(model, x):\n    return model.forward(x)\n\n\nm = torch.nn.Linear(2, 2)\nm.forward(torch.ones(2))\n")
    result = fix_check.check([tmp_path / "c"], tmp_path / "s", run=False)
    assert result.changed["safe"] == [] and result.changed["unsafe"] == ["c/o+r/m.py"]
    assert {(f.mode, f.code, f.applicability) for f in result.applied} == {("unsafe", "TL602", "unsafe")}


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


def test_an_import_left_unused_by_a_fix_is_a_problem(tmp_path):
    pytest.importorskip("pyflakes")
    before = "from torch.cuda.amp import custom_fwd\nimport os\n\n\n@custom_fwd\ndef f(x):\n    return x\n"
    after = tmp_path / "after.py"
    after.write_text("from torch.cuda.amp import custom_fwd\nimport os\nimport torch\n\n\n@torch.amp.custom_fwd(device_type='cuda')\ndef f(x):\n    return x\n")
    # `os` was unused before: only the import the fix left behind counts
    assert fix_check.problems_of(before, after) == ["unused after the fixes: 'torch.cuda.amp.custom_fwd' imported but unused"]


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


def test_scripts_are_files_that_do_something_when_run():
    assert fix_check.is_script("def main():\n    pass\n\n\nif __name__ == '__main__':\n    main()\n", "train.py")
    assert fix_check.is_script("import torch\nfor i in range(3):\n    print(i)\n", "loop.py")
    assert not fix_check.is_script("import torch\n\nX = 1\n\n\nclass Net:\n    pass\n", "models.py")
    assert not fix_check.is_script("main()\n", "setup.py")
    assert not fix_check.is_script("main()\n", "test_train.py")


def test_a_run_that_newly_fails_is_a_broken_fix():
    assert fix_check.broken_by_run({"runs": "PASS", "learns": "PASS"}, {"runs": "FAIL", "learns": "NOT_EXERCISED"}) == [
        "`runs` FAILs after the fixes"]
    assert fix_check.broken_by_run({"runs": "PASS", "learns": "PASS"}, {"runs": "PASS", "learns": "FAIL"}) == [
        "`learns` FAILs after the fixes"]
    assert fix_check.broken_by_run({"runs": "PASS", "learns": "FAIL"}, {"runs": "PASS", "learns": "FAIL"}) == []
    assert not fix_check.runnable({"runs": "FAIL"}) and fix_check.runnable({"runs": "PASS", "learns": "WARN"})


def test_a_report_lists_every_fix_with_its_verdict(tmp_path):
    result = fix_check.Result(applied=[fix_check.Applied("safe", "c/o+r/a.py", "TL402", 21, "safe", "ok, ran")],
                              changed={"safe": ["c/o+r/a.py"]}, runs={"c/o+r/a.py": "safe: ran as before"})
    fix_check.write_report(tmp_path / "r.tsv", result, ("safe",))
    assert (tmp_path / "r.tsv").read_text().splitlines() == [
        "mode\tfile\trule\tline\tapplicability\tverdict", "safe\tc/o+r/a.py\tTL402\t21\tsafe\tok, ran"]
    fix_check.write_report(tmp_path / "r.md", result, ("safe",))
    text = (tmp_path / "r.md").read_text()
    assert "| safe | c/o+r/a.py | TL402 | 21 | safe | ok, ran |" in text
    assert "safe: 1 files changed, 1 fixes applied (TL402 safe 1); 0 broken" in text


def test_a_good_fix_runs_and_a_breaking_one_is_caught(tmp_path, monkeypatch):
    """Two fixture scripts: TL402's fix of the first is torchlint's own and trains as before;
    the second one's fixing is made to also put `@torch.no_grad()` on its training function
    (the fix issue 30 found breaking real code): the run fails, and the check traces the
    broken fix to the rule whose fixes it was applying."""
    corpus = tmp_path / "corpus" / "o+r"
    corpus.mkdir(parents=True)
    shutil.copyfile(SCRIPTS / "buggy" / "tl402_bad.py", corpus / "good.py")
    shutil.copyfile(SCRIPTS / "buggy" / "tl402_bad.py", corpus / "broken.py")
    real_lint = fix_check.lint

    def lint_then_break(folder, jobs, options, select="ALL", paths=None):
        found = real_lint(folder, jobs, options, select, paths)
        if "--fix" in options:
            for path in folder.rglob("broken.py"):
                if "@torch.no_grad()\ndef main():" not in path.read_text():
                    path.write_text(path.read_text().replace("def main():", "@torch.no_grad()\ndef main():"))
        return found

    monkeypatch.setattr(fix_check, "lint", lint_then_break)
    result = fix_check.check([tmp_path / "corpus"], tmp_path / "s", modes=("safe",), run_timeout=60)
    assert result.runs == {"corpus/o+r/broken.py": "safe: `runs` FAILs after the fixes",
                           "corpus/o+r/good.py": "safe: ran as before"}
    assert result.broken == [("safe", "corpus/o+r/broken.py", "TL402", 21, "`runs` FAILs after the fixes")]
    assert [(f.file, f.verdict) for f in result.applied] == [
        ("corpus/o+r/broken.py", "`runs` FAILs after the fixes"), ("corpus/o+r/good.py", "ok, ran")]


def test_a_script_that_cannot_run_here_says_why(tmp_path):
    """A changed script that does not run as it was is skipped, with the reason its run gave
    (a package missing here, a data file absent), for the round's record."""
    script = tmp_path / "needs_a_package.py"
    script.write_text("import a_package_nobody_has\nprint('never')\n")
    checks = fix_check.verify(script, 60, 3)
    assert checks["runs"] == "FAIL"
    assert "a_package_nobody_has" in checks[fix_check.WHY]
    script.write_text("print(open('absent.csv').read())\n")
    assert "absent.csv" in fix_check.verify(script, 60, 3)[fix_check.WHY]


def test_a_script_inside_a_package_imports_it(tmp_path):
    """``model/msls/run.py`` importing ``msls.utils`` runs with ``model/`` on the path."""
    package = tmp_path / "model" / "msls"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "utils.py").write_text("VALUE = 3\n")
    (package / "run.py").write_text("from msls.utils import VALUE\nprint(VALUE)\n")
    assert fix_check.import_roots(package / "run.py") == [package, tmp_path / "model"]
    assert fix_check.verify(package / "run.py", 60, 3)["runs"] == "PASS"
