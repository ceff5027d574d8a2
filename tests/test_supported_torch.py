"""The oldest torch a project supports (semantic/supported_torch.py): `target-torch`, else the
project's declared requirement on torch; and how a migration fix's safety follows it."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.cli import main
from torchlint.config import ConfigError, load_settings
from torchlint.semantic import supported_torch
from torchlint.semantic.supported_torch import _declared, bounds, declared_newest, declared_oldest, lower_bound, parse_target


@pytest.fixture(autouse=True)
def _fresh_cache():
    _declared.cache_clear()
    yield
    _declared.cache_clear()


@pytest.mark.parametrize(
    "spec, expected",
    [
        (">=1.13", ((1, 13), None)),
        ("==1.13.1", ((1, 13), (1, 13))),
        (">=1.13,<2.4", ((1, 13), (2, 3))),
        ("<2", (None, (1, 99))),
        ("<2.0", (None, (1, 99))),
        ("<=2.3", (None, (2, 3))),
        ("<2.4.1", (None, (2, 4))),
        ("~=2.1", ((2, 1), (2, 99))),
        ("~=2.1.0", ((2, 1), (2, 1))),
        ("==2.*", ((2, 0), (2, 99))),
        ("=1.12.1=py3.9_cuda11.6_0", ((1, 12), (1, 12))),  # conda
        ("!=2.0.0", (None, None)),
    ],
)
def test_bounds(spec, expected):
    assert bounds(spec) == expected


def test_newest_is_known_only_when_every_declaration_caps_torch(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("torch==1.13.1\n")
    assert declared_newest(str(tmp_path)) == (1, 13)
    (tmp_path / "requirements-dev.txt").write_text("torch>=1.13\n")
    _declared.cache_clear()
    assert declared_newest(str(tmp_path)) is None


def test_a_deprecation_after_the_newest_supported_torch_is_not_reported(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "train.py").write_text(SCALER + "x = torch.chain_matmul(a, b, c)\n")

    def codes():
        result = CliRunner().invoke(main, ["check", str(tmp_path), "--no-cache", "--output-format", "json", "--select", "TL801,TL804"])
        return sorted(f["code"] for f in json.loads(result.output))

    (tmp_path / "requirements.txt").write_text("torch==1.13.1\n")
    assert codes() == ["TL804"]  # chain_matmul: deprecated in 1.9; the amp API only in 2.4
    (tmp_path / "requirements.txt").write_text("torch==1.8.0\n")
    _declared.cache_clear()
    assert codes() == []
    (tmp_path / "requirements.txt").write_text("torch>=1.13\n")
    _declared.cache_clear()
    assert codes() == ["TL801", "TL804"]


@pytest.mark.parametrize(
    "spec, expected",
    [
        (">=1.13", (1, 13)),
        ("==2.0.1", (2, 0)),
        ("~=2.1", (2, 1)),
        (">=1.13,<3", (1, 13)),
        ("<3,>=2.2.0", (2, 2)),
        (">1.12", (1, 12)),
        ("==2.*", (2, 0)),
        ("^2.1", (2, 1)),  # Poetry
        ("2.1.*", (2, 1)),
        ("=2.0.1=py3.9_cuda11.7_0", (2, 0)),  # conda
        (">=2.0 ; python_version >= '3.8'", (2, 0)),
        ("<2.0", None),
        ("!=2.0.0", None),
        ("", None),
        ("@ https://download.pytorch.org/torch-2.0.whl", None),
    ],
)
def test_lower_bound(spec, expected):
    assert lower_bound(spec) == expected


def test_requirement_names():
    assert supported_torch.requirement_bound("torch>=2.0") == (True, ((2, 0), None))
    assert supported_torch.requirement_bound("pytorch::pytorch>=1.13") == (True, ((1, 13), None))
    assert supported_torch.requirement_bound("torch[opt]>=2.1,<2.5") == (True, ((2, 1), (2, 4)))
    assert supported_torch.requirement_bound("torchvision>=0.15") == (False, (None, None))
    assert supported_torch.requirement_bound("torch_geometric>=2.0") == (False, (None, None))
    assert supported_torch.requirement_bound("torch") == (True, (None, None))


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return tmp_path


@pytest.mark.parametrize(
    "files, expected",
    [
        ({"pyproject.toml": '[project]\nname = "x"\ndependencies = ["numpy", "torch>=1.13"]\n'}, (1, 13)),
        ({"pyproject.toml": '[project]\nname = "x"\n[project.optional-dependencies]\ngpu = ["torch==2.0.1"]\n'}, (2, 0)),
        ({"pyproject.toml": '[tool.poetry.dependencies]\npython = "^3.9"\ntorch = "^2.1"\n'}, (2, 1)),
        ({"pyproject.toml": '[tool.poetry.dependencies]\ntorch = {version = ">=2.2", source = "pytorch"}\n'}, (2, 2)),
        ({"requirements.txt": "numpy\ntorch~=2.1  # pinned\n"}, (2, 1)),
        ({"requirements-dev.txt": "torch>=2.3\n"}, (2, 3)),
        ({"requirements/base.txt": "torch>=1.12\n"}, (1, 12)),
        ({"setup.cfg": "[options]\ninstall_requires =\n    numpy\n    torch>=1.11\n"}, (1, 11)),
        ({"setup.py": "from setuptools import setup\nsetup(name='x', install_requires=['torch>=2.4', 'numpy'])\n"}, (2, 4)),
        ({"setup.py": "from setuptools import setup\nREQ = ['torch==2.5.0']\nsetup(name='x', install_requires=REQ)\n"}, (2, 5)),
        ({"environment.yml": "name: x\ndependencies:\n  - python=3.10\n  - pytorch=2.0.1\n  - pip:\n    - numpy\n"}, (2, 0)),
        # any conda environment file's name; its channels (`- pytorch`) are no requirement
        ({"env.yml": "name: x\nchannels:\n  - pytorch\n  - defaults\ndependencies:\n  - pytorch=1.9.0\n"}, (1, 9)),
        ({"conda-gpu.yaml": "dependencies:\n  - pip:\n    - torch>=2.1\n"}, (2, 1)),
        # several declarations: the lowest
        ({"requirements.txt": "torch>=2.2\n", "setup.py": "setup(install_requires=['torch>=1.13'])\n"}, (1, 13)),
        # a declaration with no lower bound: unknown
        ({"requirements.txt": "torch\n", "setup.py": "setup(install_requires=['torch>=1.13'])\n"}, None),
        ({"requirements.txt": "numpy\n"}, None),
        ({}, None),
        # setup.py is read, never run
        ({"setup.py": "raise SystemExit('ran')\nsetup(install_requires=['torch>=2.1'])\n"}, (2, 1)),
        ({"setup.py": "def broken(:\n"}, None),
        ({"pyproject.toml": "not [toml\ntorch\n"}, None),
    ],
)
def test_declared(tmp_path, files, expected):
    root = _project(tmp_path, {**files, "src/pkg/train.py": "import torch\n"})
    (root / ".git").mkdir()
    assert declared_oldest(str(root / "src" / "pkg")) == expected


def test_search_stops_at_the_project_root(tmp_path):
    _project(tmp_path, {"requirements.txt": "torch>=2.1\n", "inner/pyproject.toml": '[project]\nname = "x"\n', "inner/a.py": ""})
    assert declared_oldest(str(tmp_path / "inner")) is None  # the inner project declares nothing
    _project(tmp_path, {"other/scripts/a.py": ""})
    assert declared_oldest(str(tmp_path / "other" / "scripts")) == (2, 1)  # no root on the way: the folder above declares


def test_target_torch_config(tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.torchlint]\ntarget-torch = "2.1"\n')
    assert load_settings(config).target_torch == (2, 1)
    for bad in ('"two"', "2.1", '"2"', '["2.1"]'):
        config.write_text(f"[tool.torchlint]\ntarget-torch = {bad}\n")
        with pytest.raises(ConfigError, match=r"pyproject\.toml.*target-torch"):
            load_settings(config)
    assert parse_target("2.4.1") == (2, 4)


def _fix_of(tmp_path: Path, source: str) -> dict:
    (tmp_path / "train.py").write_text(source)
    result = CliRunner().invoke(main, ["check", str(tmp_path / "train.py"), "--no-cache", "--output-format", "json", "--select", "TL801"])
    findings = json.loads(result.output)
    assert len(findings) == 1, result.output
    return findings[0]["fix"]


SCALER = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"


def test_fix_safety_follows_the_supported_versions(tmp_path):
    (tmp_path / ".git").mkdir()
    assert _fix_of(tmp_path, SCALER)["applicability"] == "unsafe"  # nothing declared: unknown
    (tmp_path / "requirements.txt").write_text("torch>=2.1\n")
    _declared.cache_clear()
    assert _fix_of(tmp_path, SCALER)["applicability"] == "unsafe"  # GradScaler came with 2.3
    (tmp_path / "requirements.txt").write_text("torch>=2.3\n")
    _declared.cache_clear()
    assert _fix_of(tmp_path, SCALER)["applicability"] == "safe"
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\ntarget-torch = "2.2"\n')
    assert _fix_of(tmp_path, SCALER)["applicability"] == "unsafe"  # the configuration wins


def test_bad_target_torch_is_a_config_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\ntarget-torch = "latest"\n')
    (tmp_path / "a.py").write_text("import torch\n")
    result = CliRunner().invoke(main, ["check", str(tmp_path / "a.py"), "--no-cache"])
    assert result.exit_code == 2
    assert "target-torch" in result.output and "pyproject.toml" in result.output


def _tl502(tmp_path: Path) -> list[str]:
    result = CliRunner().invoke(main, ["check", str(tmp_path / "load.py"), "--no-cache", "--output-format", "json", "--select", "TL502"])
    return [f["message"] for f in json.loads(result.output)]


def test_torch_load_default_judged_by_the_oldest_supported_torch(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "load.py").write_text("import torch\nstate = torch.load('ckpt.pt')\nother = torch.load('b.pt', **options)\n")
    assert _tl502(tmp_path) == []  # unknown: silent (torch 2.6 and later load safely by default)
    (tmp_path / "requirements.txt").write_text("torch>=2.0\n")
    _declared.cache_clear()
    found = _tl502(tmp_path)
    assert len(found) == 1 and "supports 2.0" in found[0]  # `**options` may pass weights_only
    (tmp_path / "requirements.txt").write_text("torch>=2.6\n")
    _declared.cache_clear()
    assert _tl502(tmp_path) == []


def test_torchvision_weights_are_not_asked_of_a_project_capped_below_them(tmp_path):
    """TL807: a project pinned to a torch older than 1.12 (torchvision 0.13, where `weights=`
    came) has `pretrained=` as its API."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "model.py").write_text("import torchvision\n\nnet = torchvision.models.resnet18(pretrained=True)\n")

    def codes():
        _declared.cache_clear()
        result = CliRunner().invoke(main, ["check", str(tmp_path), "--no-cache", "--output-format", "json", "--select", "TL807"])
        return sorted(f["code"] for f in json.loads(result.output))

    assert codes() == ["TL807"]
    (tmp_path / "env.yml").write_text("channels:\n  - pytorch\ndependencies:\n  - pytorch=1.9.0\n  - torchvision=0.10.0\n")
    assert codes() == []
    (tmp_path / "env.yml").write_text("dependencies:\n  - pytorch=1.12.1\n")
    assert codes() == ["TL807"]


def test_weights_only_is_not_asked_of_a_project_pinned_before_it_existed(tmp_path):
    """TL502: `weights_only` came with torch 1.13; a project pinned to 1.12 (a conda
    environment's `pytorch=1.12.1`) has none to pass, one that allows 1.13 does."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "load.py").write_text("import torch\n\nstate = torch.load('model.pt')\n")

    def codes():
        _declared.cache_clear()
        result = CliRunner().invoke(main, ["check", str(tmp_path), "--no-cache", "--output-format", "json", "--select", "TL502"])
        return sorted(f["code"] for f in json.loads(result.output))

    (tmp_path / "environment.yaml").write_text("channels:\n  - pytorch\ndependencies:\n  - pytorch=1.12.1\n")
    assert codes() == []
    (tmp_path / "environment.yaml").write_text("dependencies:\n  - pytorch>=1.12,<2.1\n")
    assert codes() == ["TL502"]
