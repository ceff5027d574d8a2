"""The project index: facts from other files of the project, through its own imports.

Golden projects live in ``fixtures/projects/<case>/``: every file carries ``# error: CODE``
on each row that must be reported when the folder is linted (all rules selected), and
``<name>.fixed.py`` beside a file is its exact output of ``--fix --unsafe-fixes``; a file
without one must come back unchanged.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rule_fixtures import EXPECTED
from torchlint.cli import main
from torchlint.semantic import Kind
from torchlint.project import build_index
from torchlint.semantic.index import ProjectIndex, module_files, search_roots
from torchlint.semantic.summary import summarize

PROJECTS = Path(__file__).resolve().parent.parent / "fixtures" / "projects"
CASES = sorted(p.name for p in PROJECTS.iterdir() if p.is_dir())
ROW = re.compile(r"^(?P<path>.+?):(?P<row>\d+):\d+: (?P<code>TL\d{3}) ")


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _copy(case: str, target: Path) -> Path:
    """The project without its expected outputs (they would be linted too)."""
    shutil.copytree(PROJECTS / case, target, ignore=shutil.ignore_patterns("*.fixed.py"))
    return target


def _expected(project: Path) -> list[tuple[str, int, str]]:
    rows = []
    for path in sorted(project.rglob("*.py")):
        for row, line in enumerate(path.read_text().splitlines(), 1):
            match = EXPECTED.search(line)
            if match:
                for code in match.group(1).split(","):
                    rows.append((path.relative_to(project).as_posix(), row, code.strip()))
    return sorted(rows)


def _reported(output: str, project: Path) -> list[tuple[str, int, str]]:
    rows = []
    for line in output.splitlines():
        match = ROW.match(line)
        if match:
            path = Path(match.group("path")).resolve().relative_to(project.resolve()).as_posix()
            rows.append((path, int(match.group("row")), match.group("code")))
    return sorted(rows)


@pytest.mark.parametrize("case", CASES)
def test_project_reports_exactly_the_marked_rows(case, tmp_path):
    project = _copy(case, tmp_path / case)
    result = run("check", "--no-cache", "--select", "ALL", "--output-format", "concise", "--exit-zero", "-j", "1", str(project))
    assert _reported(result.output, project) == _expected(project), result.output


@pytest.mark.parametrize("case", CASES)
def test_project_reports_the_marked_rows_from_the_cache_too(case, tmp_path, monkeypatch):
    """A cold run filling the cache and a warm run reading it report what a run without it
    does; then every file's source is touched (a new line at its end), and again."""
    project = _copy(case, tmp_path / case)
    monkeypatch.chdir(project)
    args = ("check", "--select", "ALL", "--output-format", "concise", "--exit-zero", "-j", "1", ".")
    expected = _expected(project)
    assert _reported(run(*args).output, project) == expected
    assert _reported(run(*args).output, project) == expected
    assert any((project / ".torchlint_cache").rglob("??*"))
    for path in sorted(project.rglob("*.py")):
        if ".torchlint_cache" not in path.parts:
            path.write_text(path.read_text() + "\n")
    assert _reported(run(*args).output, project) == expected
    assert _reported(run(*args).output, project) == expected


@pytest.mark.parametrize("case", CASES)
def test_project_fixes_give_the_expected_output(case, tmp_path):
    project = _copy(case, tmp_path / case)
    run("check", "--no-cache", "--select", "ALL", "--fix", "--unsafe-fixes", "--exit-zero", "-j", "1", str(project))
    for path in sorted(project.rglob("*.py")):
        expected = PROJECTS / case / path.relative_to(project)
        fixed = expected.with_name(expected.stem + ".fixed.py")
        assert path.read_text() == (fixed if fixed.exists() else expected).read_text(), path


def test_worker_processes_see_the_index(tmp_path):
    project = _copy("save_imported_model", tmp_path / "p")
    for i in range(4):  # enough files for a pool of two workers
        (project / f"extra_{i}.py").write_text("import torch\n")
    result = run("check", "--no-cache", "--select", "TL501", "--output-format", "concise", "--exit-zero", "-j", "2", str(project))
    assert [r for r in _reported(result.output, project) if r[0] == "train.py"] == [r for r in _expected(project) if r[0] == "train.py"]


# --- the result cache never goes stale when a sibling changes ----------------------------


def test_cached_result_follows_a_sibling_change(tmp_path):
    os.chdir(tmp_path)
    (tmp_path / "models.py").write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    (tmp_path / "train.py").write_text("import torch\n\nfrom models import Net\n\ntorch.save(Net(), 'm.pt')\n")
    args = ("check", "--select", "TL501", "--output-format", "concise", "--exit-zero", "-j", "1", "train.py")
    assert "train.py:5:12: TL501" in run(*args).output
    assert "train.py:5:12: TL501" in run(*args).output  # from the cache
    # Net is no longer a module: the cached finding must not come back.
    (tmp_path / "models.py").write_text("class Net:\n    pass\n")
    assert "TL501" not in run(*args).output
    (tmp_path / "models.py").write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    assert "train.py:5:12: TL501" in run(*args).output
    # A comment in the sibling leaves its summary, and so the cached result, as it was.
    (tmp_path / "models.py").write_text("# models\nimport torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    assert "train.py:5:12: TL501" in run(*args).output


def test_cached_result_follows_a_helper_that_stops_requiring_cuda(tmp_path):
    os.chdir(tmp_path)
    helper = "import torch\n\n\ndef setup(args):\n{early}    torch.cuda.set_device(args.gpu)\n"
    (tmp_path / "utils.py").write_text(helper.format(early=""))
    (tmp_path / "train.py").write_text("from torch import nn\n\nimport utils\n\nutils.setup(None)\nmodel = nn.Linear(2, 2).cuda()\n")
    args = ("check", "--select", "TL201", "--output-format", "concise", "--exit-zero", "-j", "1", "train.py")
    assert "TL201" not in run(*args).output
    assert "TL201" not in run(*args).output  # from the cache
    # The helper now returns first when not distributed: the script runs on CPUs again.
    (tmp_path / "utils.py").write_text(helper.format(early="    if args is None:\n        return\n"))
    assert "train.py:6:25: TL201" in run(*args).output


def test_a_function_requires_cuda_when_every_path_sets_the_device_or_starts_nccl():
    source = """
import sys
import torch
import torch.distributed as dist

def dino(args):
    if not torch.cuda.is_available():
        sys.exit(1)
    dist.init_process_group("nccl")

def deit(args):
    if not args.distributed:
        return
    torch.cuda.set_device(args.gpu)

def guarded(args):
    if torch.cuda.is_available():
        torch.cuda.set_device(args.gpu)

def gloo(args):
    dist.init_process_group(backend="gloo")

def nested(args):
    def later():
        return None
    torch.cuda.set_device(0)
"""
    summary = summarize(source)
    found = {f.name: f.requires_cuda for f in summary.functions}
    assert found == {"dino": "starts NCCL", "deit": "", "guarded": "", "gloo": "", "nested": "calls torch.cuda.set_device"}


_EVALUATE = "import torch\n\n\ndef evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n"
_CALLER = "import torch\n\nfrom metrics import evaluate\n\n\ndef main(model, loader):\n    model.eval()\n{guard}    evaluate(model, loader)\n"


def test_cached_result_follows_a_caller_change(tmp_path):
    """A file's findings depend on what holds where other files call its functions: a
    change of a caller (linted or not: a file beside it) must reach the cached result."""
    os.chdir(tmp_path)
    (tmp_path / "metrics.py").write_text(_EVALUATE)
    guarded = _CALLER.format(guard="    with torch.no_grad():\n    ").replace("\n    evaluate", "\n        evaluate")
    (tmp_path / "train.py").write_text(guarded)
    args = ("check", "--select", "TL402", "--output-format", "concise", "--exit-zero", "-j", "1", "metrics.py")
    assert "TL402" not in run(*args).output
    assert "TL402" not in run(*args).output  # from the cache
    (tmp_path / "train.py").write_text(_CALLER.format(guard=""))  # the call is no longer under no_grad
    assert "metrics.py:5:13: TL402" in run(*args).output
    (tmp_path / "train.py").write_text(guarded)
    assert "TL402" not in run(*args).output
    (tmp_path / "train.py").unlink()  # no caller in sight: the function is judged alone
    assert "metrics.py:5:13: TL402" in run(*args).output


def test_callers_in_other_files_decide_only_when_every_call_holds(tmp_path):
    _tree(tmp_path, {
        "metrics.py": _EVALUATE,
        "a.py": "import torch\nimport metrics\n\nwith torch.no_grad():\n    metrics.evaluate(m, data)\n",
        "b.py": "from metrics import evaluate as ev\n\nev(m, data)\n",
        "c.py": "from metrics import evaluate\n\nhooks = [evaluate]\n",
    })
    index = build_index([tmp_path / "metrics.py"], tmp_path)
    view = index.view(tmp_path / "metrics.py")
    assert sorted(p.name for p, _ in index.callers(tmp_path / "metrics.py", "evaluate")) == ["a.py", "b.py"]
    assert view.callers_hold("evaluate", "grad") is True  # c.py passes it around: callers unknown
    (tmp_path / "c.py").unlink()
    index = build_index([tmp_path / "metrics.py"], tmp_path)
    assert index.view(tmp_path / "metrics.py").callers_hold("evaluate", "grad") is False  # b.py does not
    (tmp_path / "b.py").unlink()
    index = build_index([tmp_path / "metrics.py"], tmp_path)
    assert index.view(tmp_path / "metrics.py").callers_hold("evaluate", "grad") is True
    assert index.view(tmp_path / "metrics.py").callers_hold("evaluate", "eval") is False  # no eval() before it


def test_siblings_are_read_only_when_they_name_the_module(tmp_path):
    _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/metrics.py": _EVALUATE,
        "pkg/unrelated.py": "x = 1\n",
        "run.py": "from pkg.metrics import evaluate\n\nevaluate(m, d)\n",
        "other/deep.py": "from pkg.metrics import evaluate\n\nevaluate(m, d)\n",  # not a folder on the way up
        "names_it.py": "def metrics():\n    pass\n",  # the word, but no import of it
        "imports_it.py": "import os, pkg.metrics as m\n",
    })
    index = build_index([tmp_path / "pkg" / "metrics.py"], tmp_path)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in index.summaries)
    assert names == ["imports_it.py", "pkg/metrics.py", "run.py"]  # the empty __init__.py names neither


# --- module resolution -------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _resolved(module: str, path: Path, root: Path) -> list[tuple[str, list[str]]]:
    found = module_files(module, path, search_roots(path, root, os.path.isfile), os.path.isfile, os.path.isdir)
    return [(f.relative_to(root).as_posix(), rest) for f, rest in found]


def test_relative_imports_resolve_from_the_file_package(tmp_path):
    _tree(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "", "pkg/sub/__init__.py": "", "pkg/sub/b.py": ""})
    b = tmp_path / "pkg/sub/b.py"
    assert _resolved(".", b, tmp_path) == [("pkg/sub/__init__.py", [])]
    assert _resolved("..a.Net", b, tmp_path)[0] == ("pkg/a.py", ["Net"])
    assert _resolved("..sub.b", b, tmp_path)[0] == ("pkg/sub/b.py", [])
    assert _resolved(".missing", b, tmp_path) == []


def test_absolute_imports_resolve_from_the_file_folder_package_root_and_src(tmp_path):
    _tree(tmp_path, {"src/lib/__init__.py": "", "src/lib/models.py": "", "tools/run.py": "", "tools/helpers.py": "",
                     "app/__init__.py": "", "app/core/__init__.py": "", "app/core/x.py": "", "app/util.py": ""})
    assert _resolved("lib.models.Net", tmp_path / "tools/run.py", tmp_path)[0] == ("src/lib/models.py", ["Net"])
    assert _resolved("helpers.f", tmp_path / "tools/run.py", tmp_path)[0] == ("tools/helpers.py", ["f"])
    # From inside a package, its top-level package is importable (the folder above it is on the path).
    assert _resolved("app.util.g", tmp_path / "app/core/x.py", tmp_path)[0] == ("app/util.py", ["g"])
    assert _resolved("numpy.zeros", tmp_path / "tools/run.py", tmp_path) == []


def test_namespace_folders_resolve(tmp_path):
    _tree(tmp_path, {"ns/models.py": "", "train.py": ""})
    assert _resolved("ns.models.Net", tmp_path / "train.py", tmp_path)[0] == ("ns/models.py", ["Net"])


def test_index_follows_imports_transitively_and_survives_cycles_and_missing_files(tmp_path):
    _tree(tmp_path, {
        "a.py": "from b import B\nimport missing_module\n",
        "b.py": "import torch.nn as nn\nfrom c import C\n\n\nclass B(C):\n    pass\n",
        "c.py": "import torch.nn as nn\nfrom a import *\nimport b\n\n\nclass C(nn.Module):\n    pass\n",
        "broken.py": "def f(:\n",
    })
    index = build_index([tmp_path / "a.py", tmp_path / "broken.py"], tmp_path)
    assert sorted(p.name for p in index.summaries) == ["a.py", "b.py", "c.py"]
    assert [p.name for p in index.dependencies(tmp_path / "a.py")] == ["b.py", "c.py"]
    view = index.view(tmp_path / "a.py")
    assert view.call_kind("b.B") is Kind.MODULE  # B's base is in c.py
    assert view.call_kind("missing_module.X") is None
    assert index.view(tmp_path / "broken.py") is None


def test_reexport_cycles_resolve_to_nothing(tmp_path):
    _tree(tmp_path, {"p/__init__.py": "from .q import X\n", "p/q.py": "from . import X\n", "main.py": "from p import X\n"})
    view = build_index([tmp_path / "main.py"], tmp_path).view(tmp_path / "main.py")
    assert view.symbol("p.X") is None


# --- summaries -----------------------------------------------------------------------------


def test_summary_of_classes_and_functions():
    summary = summarize(
        "import torch\nimport torch.nn as nn\nfrom .blocks import Block\n\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.block = Block(4)\n"
        "        self.lstm = nn.LSTM(4, 4, num_layers=2, dropout=0.2)\n\n"
        "class Plain(nn.Module):\n"
        "    def __init__(self, make):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n        self.x = make(2)\n\n"
        "def build():\n    model = Net()\n    return model.to('cpu')\n\n\n"
        "def optimizer(model):\n    return torch.optim.Adam(model.parameters())\n\n\n"
        "def evaluate(model):\n    model.eval()\n    helper(model)\n    return 1, 2\n"
    )
    net, plain = summary.classes
    assert net.bases == ("torch.nn.Module",) and net.mode_layers and net.calls == (".blocks.Block",)
    assert not plain.mode_layers and plain.mode_unknown  # a layer built by a parameter
    build, optimizer, evaluate = summary.functions
    assert build.returns == ("Net",)
    assert optimizer.returns == ("torch.optim.Adam",)
    assert evaluate.returns == () and evaluate.mode_events == ("eval",)
    assert ("Block", ".blocks.Block") in summary.imports


def test_a_lazy_index_reads_imported_files_only_when_asked(tmp_path):
    _tree(tmp_path, {
        "blocks.py": "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    pass\n",
        "models.py": "from blocks import Block\n\n\nclass Net(Block):\n    pass\n",
        "train.py": "import torch\n\nfrom models import Net\n\ntorch.save(Net(), 'm.pt')\n",
    })
    train = tmp_path / "train.py"
    lazy = build_index([train], tmp_path, lazy=True)
    assert set(lazy.summaries) == {train}
    assert lazy.view(train).class_kind("models.Net") is Kind.MODULE  # through blocks.py, read now
    assert set(lazy.summaries) == {train, tmp_path / "models.py", tmp_path / "blocks.py"}
    # Its closure, when asked for, is the eager index's.
    fresh = build_index([train], tmp_path, lazy=True)
    eager = build_index([train], tmp_path)
    assert fresh.dependencies(train) == eager.dependencies(train) == [tmp_path / "blocks.py", tmp_path / "models.py"]


def test_a_file_too_deep_to_summarise_is_linted_without_a_summary(tmp_path):
    deep = "import torch\n\nx = " + " + ".join(["a"] * 2000) + "\n"
    assert summarize(deep) is None
    (tmp_path / "deep.py").write_text(deep)
    result = run("check", "--no-cache", "--exit-zero", str(tmp_path / "deep.py"))
    assert result.exception is None and "Traceback" not in result.output


def test_summary_is_none_for_invalid_source():
    assert summarize("def f(:\n") is None


def test_summary_of_arguments_given_back_and_aliases():
    summary = summarize(
        "import torch.nn as nn\n\n\nclass DetectionModel(nn.Module):\n    pass\n\n\n"
        "Model = DetectionModel\nLayer = nn.Linear\nsize = 3\n\n\n"
        "def de_parallel(model):\n    return model.module if is_parallel(model) else model\n\n\n"
        "def moved(x, device):\n    return x.to(device).half()\n\n\n"
        "def weights(model):\n    return model.state_dict()\n\n\n"
        "def either(a, b):\n    return a if a is not None else b\n\n\n"
        "def rebound(model):\n    model = model.cpu()\n    return model\n\n\n"
        "def maybe(model, ok):\n    if ok:\n        return model\n"
    )
    given_back = {f.name: f.returns_argument for f in summary.functions}
    assert given_back == {"de_parallel": 0, "moved": 0, "weights": -1, "either": -1, "rebound": -1, "maybe": -1}
    assert summary.aliases == (("Model", "DetectionModel"), ("Layer", "torch.nn.Linear"))


def test_class_known_by_an_alias_and_a_helper_giving_back_its_argument(tmp_path):
    _tree(tmp_path, {
        "models.py": "import torch.nn as nn\n\n\nclass Detection(nn.Module):\n    pass\n\n\nModel = Detection\n",
        "helpers.py": "def unwrap(model):\n    return model.module if hasattr(model, 'module') else model\n",
        "main.py": "from models import Model\nfrom helpers import unwrap\n",
    })
    view = build_index([tmp_path / "main.py"], tmp_path).view(tmp_path / "main.py")
    assert view.call_kind("models.Model") is Kind.MODULE
    assert view.returns_argument("helpers.unwrap") == 0
    assert view.returns_argument("models.Model") is None


def test_class_kind_through_a_base_named_by_a_star_import(tmp_path):
    _tree(tmp_path, {
        "common.py": "import torch.nn as nn\nfrom layers import *\n",
        "layers.py": "import torch.optim as optim\n\n\nclass Block:\n    pass\n",
        "models.py": (
            "from common import *\n\n\nclass Net(nn.Module):\n    pass\n\n\n"
            "class Opt(optim.SGD):\n    pass\n\n\nclass Plain(Block):\n    pass\n\n\nclass Other(Missing):\n    pass\n"
        ),
        "main.py": "from models import Net, Opt, Plain, Other\n",
    })
    assert summarize("from common import *\n\n\nclass Net(nn.Module, Base):\n    pass\n").classes[0].unnamed_bases == ("nn.Module", "Base")
    view = build_index([tmp_path / "main.py"], tmp_path).view(tmp_path / "main.py")
    assert view.class_kind("models.Net") is Kind.MODULE
    assert view.class_kind("models.Opt") is Kind.OPTIMIZER
    assert view.class_kind("models.Plain") is None
    assert view.class_kind("models.Other") is None


def test_mode_layers_follow_bases_attributes_and_factories(tmp_path):
    _tree(tmp_path, {
        "blocks.py": "import torch.nn as nn\n\n\nclass Drop(nn.Module):\n    def forward(self, x):\n        return x if not self.training else x * 2\n",
        "models.py": (
            "import torch.nn as nn\nfrom blocks import Drop\nimport numpy as np\n\n\n"
            "class A(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.d = Drop()\n\n\n"
            "class B(A):\n    pass\n\n\n"
            "class C(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(1, 1)\n\n\n"
            "class D(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = np.zeros(3)\n\n\n"
            "def make_a():\n    return A()\n"
        ),
        "main.py": "from models import A, B, C, D, make_a\n",
    })
    view = build_index([tmp_path / "main.py"], tmp_path).view(tmp_path / "main.py")
    assert view.mode_layers("models.A") is True
    assert view.mode_layers("models.B") is True
    assert view.mode_layers("models.make_a") is True
    assert view.mode_layers("models.C") is False
    assert view.mode_layers("models.D") is None  # another package's call: unknown


def test_index_update_replaces_a_summary(tmp_path):
    _tree(tmp_path, {"models.py": "class Net:\n    pass\n", "main.py": "from models import Net\n"})
    index = build_index([tmp_path / "main.py"], tmp_path)
    assert index.view(tmp_path / "main.py").call_kind("models.Net") is None
    index.update(tmp_path / "models.py", "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    assert index.view(tmp_path / "main.py").call_kind("models.Net") is Kind.MODULE
    assert isinstance(index, ProjectIndex)


def test_cached_result_follows_a_change_two_imports_away_through_a_cycle(tmp_path):
    os.chdir(tmp_path)
    (tmp_path / "base.py").write_text("import torch.nn as nn\nimport models\n\n\nclass Base(nn.Module):\n    pass\n")
    (tmp_path / "models.py").write_text("import base\n\n\nclass Net(base.Base):\n    pass\n")
    (tmp_path / "train.py").write_text("import torch\n\nfrom models import Net\n\ntorch.save(Net(), 'm.pt')\n")
    args = ("check", "--select", "TL501", "--output-format", "concise", "--exit-zero", "-j", "1", "train.py")
    assert "train.py:5:12: TL501" in run(*args).output
    assert "train.py:5:12: TL501" in run(*args).output  # from the cache
    (tmp_path / "base.py").write_text("import models\n\n\nclass Base:\n    pass\n")
    assert "TL501" not in run(*args).output


def test_a_notebook_sees_the_project_files_it_imports(tmp_path):
    import json

    (tmp_path / "models.py").write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    cells = ["import torch\nfrom models import Net\n", "model = Net()\n", "torch.save(model, 'm.pt')\n"]
    notebook = {
        "cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None} for c in cells],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "train.ipynb").write_text(json.dumps(notebook))
    result = run("check", "--no-cache", "--select", "TL501", "--output-format", "concise", "--exit-zero", "-j", "1", str(tmp_path / "train.ipynb"))
    assert "train.ipynb:cell 3:1:12: TL501" in result.output


# --- the result cache: what a lint asked of other files -----------------------------------


def _summarised(monkeypatch, tmp_path) -> list[str]:
    """The names of the files summarised (not taken from the summary cache), in order."""
    from torchlint import project

    names: list[str] = []
    original = project.summarize_file_source

    def summarizing(source, suffix):
        names.extend(p.name for p in sorted(tmp_path.glob("*.py")) if p.read_bytes() == source)
        return original(source, suffix)

    monkeypatch.setattr(project, "summarize_file_source", summarizing)
    return names


def test_a_cached_run_reads_only_the_files_its_questions_reach(tmp_path, monkeypatch):
    """The cache keeps the questions a lint asked of other files and their answers, not a
    digest of every file the linted ones import: a file no question reaches is never read,
    and a change to it leaves the cached result as it is."""
    os.chdir(tmp_path)
    (tmp_path / "blocks.py").write_text("import torch.nn as nn\nimport heavy\n\n\nclass Block(nn.Module):\n    pass\n")
    (tmp_path / "heavy.py").write_text("import torch\n\n\ndef helper():\n    return torch.zeros(1)\n")
    (tmp_path / "models.py").write_text("from blocks import Block\n\n\nclass Net(Block):\n    pass\n")
    (tmp_path / "train.py").write_text("import torch\n\nfrom models import Net\n\ntorch.save(Net(), 'm.pt')\n")
    args = ("check", "--select", "TL501", "--output-format", "concise", "--exit-zero", "-j", "1", "train.py")
    read = _summarised(monkeypatch, tmp_path)
    assert "train.py:5:12: TL501" in run(*args).output
    assert sorted(read) == ["blocks.py", "models.py", "train.py"]
    (tmp_path / "heavy.py").write_text("import torch\n\n\ndef helper(x):\n    return torch.ones(1)\n")
    assert "train.py:5:12: TL501" in run(*args).output
    assert "heavy.py" not in read
    # A file a question reaches changes, keeping its size and its modification time: its
    # content is read again, and the answer has changed.
    blocks = tmp_path / "blocks.py"
    stat = blocks.stat()
    blocks.write_text("import torch.nn as nn\nimport heavy\n\n\nclass Block(object   ):\n    pass\n")
    os.utime(blocks, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "TL501" not in run(*args).output


def test_a_cached_result_asks_its_questions_again(tmp_path, monkeypatch):
    """The entry holds the questions and their answers; an entry whose answer no longer holds
    is linted again, and one from a run without an index is not used by a run with one."""
    from torchlint import cache
    from torchlint.semantic.view import AskedView, answers_hold

    _tree(tmp_path, {
        "models.py": "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n",
        "train.py": "import torch\n\nfrom models import Net\n\ntorch.save(Net(), 'm.pt')\n",
    })
    train = tmp_path / "train.py"
    index = build_index([train], tmp_path, lazy=True)
    asked = AskedView(index.view(train))
    assert asked.call_kind("models.Net") is Kind.MODULE and asked.call_kind("models.Other") is None
    assert asked.asked == {("call_kind", "models.Net"): Kind.MODULE, ("call_kind", "models.Other"): None}
    assert answers_hold(index.view(train), asked.asked)
    (tmp_path / "models.py").write_text("class Net:\n    pass\n")
    assert not answers_hold(build_index([train], tmp_path, lazy=True).view(train), asked.asked)
    assert answers_hold(None, {}) and not answers_hold(None, asked.asked)
    assert not answers_hold(index.view(train), {("symbol", "models.Net"): None})  # only the known questions
    assert cache.Entry([], {}) == cache.Entry([], {})


def test_a_new_file_that_an_import_now_reaches_is_seen(tmp_path):
    os.chdir(tmp_path)
    (tmp_path / "train.py").write_text("import torch\n\nfrom helpers import Net\n\ntorch.save(Net(), 'm.pt')\n")
    args = ("check", "--select", "TL501", "--output-format", "concise", "--exit-zero", "-j", "1", "train.py")
    assert "TL501" not in run(*args).output  # Net is unknown
    assert "TL501" not in run(*args).output
    (tmp_path / "helpers").mkdir()
    (tmp_path / "helpers" / "__init__.py").write_text("import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n")
    assert "train.py:5:12: TL501" in run(*args).output


def test_statements_come_in_the_order_ast_walk_gives() -> None:
    """The summary finds imports without walking expressions, in ``ast.walk``'s order (the
    first binding of a name wins)."""
    import ast

    from torchlint.semantic.summary import _statements_breadth_first

    root = Path(__file__).resolve().parent.parent
    snippet = (
        "def f():\n    import b as x\ntry:\n    import c\nexcept E:\n    import d as x\nelse:\n    import e\n"
        "finally:\n    import g\nmatch v:\n    case 1:\n        import h as x\nclass K:\n    import i\nimport a as x\n"
    )
    sources = [snippet] + [p.read_bytes() for p in sorted((root / "fixtures").rglob("*.py")) + sorted((root / "src").rglob("*.py"))]
    for source in sources:
        tree = ast.parse(source)
        expected = [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]
        assert [n for _, n in _statements_breadth_first(tree.body) if isinstance(n, ast.stmt)] == expected


def test_walk_function_is_iter_child_nodes_order() -> None:
    import ast

    from torchlint.semantic.summary import _walk_function

    def reference(node):
        stack = list(reversed(node.body))
        while stack:
            sub = stack.pop()
            yield sub
            skipped = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
            leaves = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)  # (nothing walks them)
            stack.extend(reversed([c for c in ast.iter_child_nodes(sub) if not isinstance(c, skipped + leaves)]))

    root = Path(__file__).resolve().parent.parent
    checked = 0
    for path in sorted((root / "fixtures").rglob("*.py")) + sorted((root / "src").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert list(_walk_function(node)) == list(reference(node))
                checked += 1
    assert checked > 500


MEMO_BASE = '''import torch
from models import Net, Other
from evaluation import evaluate

model = Net()


@torch.no_grad()
def check(loader):
    evaluate(model, loader)


def train(loader):
    model.train()
    helper(loader)
    evaluate(model, loader)


def helper(loader):
    return Net()


class Trainer:
    def run(self):
        self.model.eval()
        evaluate(self.model, None)
'''

# Each version changes one thing a definition's summary depends on besides its own text.
MEMO_VERSIONS = [
    MEMO_BASE,
    MEMO_BASE.replace("def helper(loader):\n    return Net()", "def helper(loader):\n    return Other()"),  # its own text
    MEMO_BASE.replace("model = Net()", "model = Other()"),  # what a module-level name was built by
    MEMO_BASE.replace("from evaluation import evaluate", "from metrics import evaluate"),  # an import
    MEMO_BASE.replace("def helper(loader)", "def helper_(loader)"),  # the file's definitions
    "\n\n" + MEMO_BASE,  # every line moved
    MEMO_BASE.replace("\n", "\r\n"),
    MEMO_BASE,
]


def test_an_editors_summary_memo_gives_the_summary_of_each_version():
    """The language server keeps what each top-level definition's summary found, by its text
    and what the module around it holds: every version's summary is the one made afresh,
    and an unchanged definition is not walked again."""
    from torchlint.positions import LintMemo
    from torchlint.semantic import summary as project

    memo = LintMemo()
    for text in MEMO_VERSIONS:
        assert summarize(text, memo=memo) == summarize(text), text
        memo.next_lint()

    walked = []
    original = project._Sites._body_sites
    try:
        project._Sites._body_sites = lambda self, node: walked.append(node.name) or original(self, node)
        summarize(MEMO_VERSIONS[1], memo=memo)  # after MEMO_BASE: only helper changed
    finally:
        project._Sites._body_sites = original
    assert walked == ["helper"]


def test_a_cached_result_knows_the_projects_cuda_extension(tmp_path, monkeypatch):
    """A file that imports a module the project builds from CUDA sources only is CUDA-only
    by design (TL201 silent); the cache keys a result by its source and the project's
    answers, so building the extension without a CPU fallback, then with one, changes the
    result of the same source. Its name says nothing either way (``train_gpu.py``)."""
    monkeypatch.chdir(tmp_path)
    source = "from torch import nn\n\nfrom ops import _ext\n\nnet = nn.Linear(2, 2).cuda()\n"
    _tree(tmp_path, {"train_gpu.py": source, "ops/__init__.py": ""})
    args = ("check", "--select", "TL201", "--output-format", "concise", "--exit-zero", "-j", "1")
    for _ in range(2):  # cold, then from the cache
        assert _reported(run(*args, ".").output, tmp_path) == [("train_gpu.py", 5, "TL201")]
    cuda_only = "from torch.utils.cpp_extension import CUDAExtension\n\next = [CUDAExtension('ops._ext', ['k.cu'])]\n"
    (tmp_path / "setup.py").write_text(cuda_only)
    for _ in range(2):
        assert _reported(run(*args, ".").output, tmp_path) == []
    (tmp_path / "setup.py").write_text(cuda_only.replace("CUDAExtension\n", "CUDAExtension, CppExtension\n"))
    assert _reported(run(*args, ".").output, tmp_path) == [("train_gpu.py", 5, "TL201")]


def test_a_caller_in_another_file_that_backpropagates_the_result_makes_it_unknown(tmp_path):
    """What an evaluation function returns is followed into other files: a caller that uses
    it where a backward pass runs may differentiate it (its output is not known inference),
    one that only reads it leaves it inference."""
    predict = "import torch\n\n\ndef predict(model, x):\n    model.eval()\n    return model(x)\n"
    reader = "from metrics import predict\n\nprint(predict(net, x).argmax(1))\n"
    trainer = "from metrics import predict\n\nloss = predict(net, x).sum()\nloss.backward()\n"
    _tree(tmp_path, {"metrics.py": predict, "report.py": reader})
    index = build_index([tmp_path / "metrics.py"], tmp_path)
    assert index.view(tmp_path / "metrics.py").callers_backprop("predict") is False
    os.chdir(tmp_path)
    args = ("check", "--no-cache", "--select", "TL402", "--output-format", "concise", "--exit-zero", "metrics.py")
    assert "metrics.py:6:12: TL402" in run(*args).output
    (tmp_path / "train.py").write_text(trainer)
    index = build_index([tmp_path / "metrics.py"], tmp_path)
    assert index.view(tmp_path / "metrics.py").callers_backprop("predict") is True
    assert "TL402" not in run(*args).output


def test_summary_keeps_what_is_read_as_a_module_of_a_load():
    summary = summarize(
        "import torch\nfrom torch import load as read\n\n"
        "ck = torch.load('a')\nnet = ck['model']\n\n\n"
        "def resume(model, key):\n"
        "    net.eval()\n"  # a global bound from a load's entry
        "    read('b')['generator'](1)\n"  # called, through an alias
        "    sd = torch.load('c')\n"
        "    model.load_state_dict(sd['weights'])\n"  # read as weights: not kept
        "    print(sd['epoch'], len(sd))\n"
        "    start = sd['step'] + 1\n"
        "    sd.items()\n"
        "    return helper(sd[key])\n\n\n"  # passed on, under a key not spelled: "*"
        "whole = torch.load('d')\nwhole.parameters()\n"
        "other = torch.load('e')\nother = make()\nother.eval()\n"  # rebound: no longer the load
    )
    assert summary.module_loads == ("", "*", "generator", "model")


def test_a_checkpoint_loader_anywhere_in_the_project_decides_the_fix(tmp_path):
    """A loader in a folder that imports nothing of the saving file, read from the cache and
    after it changes: the fix is safe while the loader reads the entry as weights, and gone
    once it reads it as a module."""
    project = _copy("checkpoint_loaded_as_weights", tmp_path / "p")
    os.chdir(project)
    args = ("check", "--select", "TL501", "--output-format", "json", "--exit-zero", "-j", "1", ".")

    def applicability():
        import json

        return [(f["location"]["row"], f["fix"] and f["fix"]["applicability"]) for f in json.loads(run(*args).output)]

    assert applicability() == [(6, "safe")]
    assert applicability() == [(6, "safe")]  # from the cache
    (project / "scripts").mkdir()
    (project / "scripts" / "show.py").write_text(
        "import torch\n\nnet = torch.load('last.pt', weights_only=False)['model']\nprint(net.training)\n"
    )
    assert applicability() == [(6, None)]
    (project / "scripts" / "show.py").write_text("import torch\n\nprint(torch.load('last.pt')['model'].keys())\n")
    assert applicability() == [(6, "safe")]


def test_a_project_too_large_to_read_makes_the_fix_unsafe(tmp_path, monkeypatch):
    from torchlint import project as project_index

    monkeypatch.setattr(project_index, "MAX_LOADER_FILES", 1)
    project = _copy("checkpoint_loaded_as_weights", tmp_path / "p")
    before = (project / "train.py").read_text()
    run("check", "--no-cache", "--select", "TL501", "--fix", "--exit-zero", "-j", "1", str(project))
    assert (project / "train.py").read_text() == before
    run("check", "--no-cache", "--select", "TL501", "--fix", "--unsafe-fixes", "--exit-zero", "-j", "1", str(project))
    assert (project / "train.py").read_text() == (PROJECTS / "checkpoint_loaded_as_weights" / "train.fixed.py").read_text()


def test_a_caller_in_another_file_that_returns_the_result_makes_it_unknown(tmp_path):
    """A caller that gives what it gets on (``return crit(model_output, y)`` in a loss
    method whose own caller backpropagates) may have it differentiated beyond what the
    summary follows: a function's or a method's result used in a function that returns a
    value is not known inference (ControlNet's ``apply_model`` through ``p_losses``)."""
    denoiser = (
        "import torch\nfrom torch import nn\n\n\nclass Denoiser(nn.Module):\n"
        "    def apply_model(self, x):\n        control = self.control(x)\n"
        "        control = [c * 2 for c in control]\n        return self.unet(x, control)\n\n\n"
        "def denoise(model, x):\n    return model(x)\n"
    )
    loss = (
        "from denoiser import denoise\n\n\ndef p_losses(model, x):\n    out = model.apply_model(x)\n"
        "    return (out - x).pow(2).mean()\n\n\ndef losses(model, x):\n    return denoise(model, x).mean()\n"
    )
    reader = "from denoiser import denoise\n\nprint(model.apply_model(x).tolist(), denoise(net, x).tolist())\n"
    _tree(tmp_path, {"denoiser.py": denoiser, "report.py": reader})
    view = build_index([tmp_path / "denoiser.py"], tmp_path).view(tmp_path / "denoiser.py")
    assert (view.method_callers_backprop("apply_model"), view.callers_backprop("denoise")) == (False, False)
    (tmp_path / "losses.py").write_text(loss)
    view = build_index([tmp_path / "denoiser.py"], tmp_path).view(tmp_path / "denoiser.py")
    assert (view.method_callers_backprop("apply_model"), view.callers_backprop("denoise")) == (True, True)
    os.chdir(tmp_path)
    assert "TL402" not in run("check", "--no-cache", "--select", "TL402", "--output-format", "concise", "--exit-zero", "denoiser.py").output


def test_a_helper_that_ends_the_graph_ends_the_flow(tmp_path):
    """``to_np(t)`` of another file (``t.cpu().detach().numpy()``), imported by name or
    through a star import, gives back nothing of the graph: an agent's evaluation step that
    returns ``to_np(self.network(state))`` is inference (DeepRL's ``eval_step``). A helper
    that also keeps its argument (``CACHE.append(t)``) is not one."""
    helpers = "def to_np(t):\n    return t.cpu().detach().numpy()\n\n\ndef keep(t):\n    CACHE.append(t)\n    return t.detach().numpy()\n"
    agent = (
        "import torch\nfrom {imports}\n\n\nclass Agent:\n    def __init__(self, net):\n        self.network = net\n\n"
        "    def eval_step(self, state):\n        action = self.network(state)\n        return {helper}(action)\n"
    )
    caller = "def eval_episode(agent, env):\n    action = agent.eval_step(env.reset())\n    return env.step(action)\n"
    summary = summarize(helpers)
    assert {f.name: f.gives_no_graph for f in summary.functions} == {"to_np": True, "keep": False}
    _tree(tmp_path, {
        "utils.py": helpers, "base.py": caller,
        "named.py": agent.format(imports="utils import to_np", helper="to_np"),
        "star.py": agent.format(imports="utils import *", helper="to_np"),
        "kept.py": agent.format(imports="utils import keep", helper="keep"),
    })
    os.chdir(tmp_path)
    output = run("check", "--no-cache", "--select", "TL402", "--output-format", "concise", "--exit-zero", ".").output
    assert sorted(_reported(output, tmp_path)) == [("named.py", 10, "TL402"), ("star.py", 10, "TL402")]


def test_every_loader_of_a_saved_module_must_be_known_for_a_safe_fix(tmp_path):
    """Another file loads one save whole into a name annotated as a module (no fix), hands an
    entry of another to callers the index does not follow (unsafe), and reads a third entry
    only through `load_state_dict` (safe)."""
    import json

    project = _copy("checkpoint_loaded_elsewhere", tmp_path / "p")
    args = ("check", "--no-cache", "--select", "TL501", "--output-format", "json", "--exit-zero", "-j", "1", str(project))
    found = [(f["location"]["column"], f["fix"] and f["fix"]["applicability"]) for f in json.loads(run(*args).output)]
    assert found == [(12, None), (24, "unsafe"), (44, "safe")]
    run("check", "--no-cache", "--select", "TL501", "--fix", "--exit-zero", "-j", "1", str(project))
    assert 'torch.save({"encoder": encoder, "decoder": decoder.state_dict()}, "parts.pt")' in (project / "train.py").read_text()


def test_summary_keeps_annotated_loads_and_loads_handed_to_unknown_readers():
    summary = summarize(
        "import torch\nfrom typing import Optional\n\n"
        "net: Net = torch.load('a')\n"  # annotated as a module: read as one
        "sd: dict[str, torch.Tensor] = torch.load('b')\nmodel.load_state_dict(sd)\n"  # a mapping
        "opt: Optional['OrderedDict'] = torch.load('c')['optimizer']\n\n\n"
        "def load(path):\n    return torch.load(path)['encoder']\n\n\n"  # handed to the callers
        "class Trainer:\n    def resume(self, path):\n        self.ckpt = torch.load(path)\n"  # stored
        "        parts = [torch.load(p)['decoder'] for p in path]\n"  # in a container
    )
    assert summary.module_loads == ("", "?", "?decoder", "?encoder")


def test_a_call_on_self_in_another_files_class_reaches_that_class(tmp_path):
    """``self._onepass(x)`` in another file's class reaches that class's method (or a
    subclass's), not this file's same-named one: copied trainers that each call their own
    ``_onepass`` with gradients on say nothing of this trainer's, whose only outside caller
    (a callback, through ``infer``) runs under ``no_grad``. A class that derives from the
    calling class may be reached (a base's template method)."""
    trainer = (
        "import torch\n\n\nclass CTCTrainer:\n    def __init__(self, model):\n        self.model = model\n\n"
        "    def infer(self, inputs):\n        return self._onepass(inputs)\n\n"
        "    def _onepass(self, inputs):\n        return torch.argmax(self.model(inputs).detach().cpu(), dim=-1).tolist()\n"
    )
    copy = trainer.replace("class CTCTrainer:", "class WhisperTrainer:")
    callback = (
        "import torch\n\n\nclass Validate:\n    def __call__(self, batch):\n        with torch.no_grad():\n"
        "            print(self.model.infer(batch))\n"
    )
    _tree(tmp_path, {"ctc_trainer.py": trainer, "whisper_trainer.py": copy, "evaluation.py": callback})
    files = [tmp_path / n for n in ("ctc_trainer.py", "whisper_trainer.py", "evaluation.py")]
    view = build_index(files, tmp_path).view(tmp_path / "ctc_trainer.py")
    assert view.method_callers_hold("_onepass", "grad", ()) is None  # the copy's own call does not reach it
    assert view.method_callers_hold("_onepass", "grad", ("WhisperTrainer",)) is False  # a subclass of the copy
    assert view.method_callers_hold("infer", "grad", ()) is True
    os.chdir(tmp_path)
    assert "TL402" not in run("check", "--no-cache", "--select", "TL402", "--output-format", "concise", "--exit-zero", ".").output


def test_a_module_with_no_parameters_across_files(tmp_path):
    """A class whose ``__init__`` and whose base's (another file's) store plain values holds
    no parameters (``ProjectView.parameter_free``): TL202 has no parameters' device to point
    to there. A base of another file that builds a layer makes it hold some."""
    base = (
        "import torch.nn as nn\n\n\nclass FewShotMethod(nn.Module):\n    def __init__(self, temperature=1.0):\n"
        "        super().__init__()\n        self.temperature = temperature\n"
    )
    method = (
        "from abstract import FewShotMethod\n\n\nclass MAP(FewShotMethod):\n    def __init__(self, alpha):\n"
        "        super().__init__()\n        self.alpha = alpha\n\n    def forward(self, x):\n"
        "        x = x.cuda()\n        return x * self.alpha\n"
    )
    _tree(tmp_path, {"abstract.py": base, "pt_map.py": method})
    view = build_index([tmp_path / "pt_map.py"], tmp_path).view(tmp_path / "pt_map.py")
    assert view.parameter_free("abstract.FewShotMethod") is True
    os.chdir(tmp_path)

    def codes():
        out = run("check", "--no-cache", "--select", "TL201,TL202", "--output-format", "concise", "--exit-zero", "pt_map.py").output
        return sorted({line.split()[1] for line in out.splitlines() if ": TL" in line})

    assert codes() == ["TL201"]
    (tmp_path / "abstract.py").write_text(base.replace("self.temperature = temperature", "self.scale = nn.Linear(2, 2)"))
    view = build_index([tmp_path / "pt_map.py"], tmp_path).view(tmp_path / "pt_map.py")
    assert view.parameter_free("abstract.FewShotMethod") is False
    assert codes() == ["TL201", "TL202"]


def test_the_loads_alone_are_the_summarys_loads():
    """What a project's loaders are asked (``module_loads_of_file_source``: only the top-level
    statements that can load, walked for loads only) is what the whole summary says, on every
    fixture that names torch and a load."""
    from torchlint.project import module_loads_of_file_source, summarize_file_source

    root = Path(__file__).resolve().parent.parent / "fixtures"
    checked = 0
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.ipynb")]):
        source = path.read_bytes()
        if b"load" not in source or b"torch" not in source:
            continue
        summary = summarize_file_source(source, path.suffix)
        loads = module_loads_of_file_source(source, path.suffix)
        assert (None if summary is None else sorted(set(summary.module_loads))) == (
            None if loads is None else sorted(set(loads))
        ), path
        checked += 1
    assert checked > 100
