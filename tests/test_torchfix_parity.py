"""What a TorchFix user sees when switching: each rule that replaces a TorchFix check names the
TorchFix codes it replaces in `torchlint rule`, and TL804's fix of a `functorch` import says
where to import from."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from torchlint.cli import main
from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("torchfix_compare", ROOT / "tools" / "torchfix_compare.py")
tc = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("torchfix_compare", tc)
_spec.loader.exec_module(tc)


def replaced_codes() -> dict[str, set[str]]:
    """Each torchlint code and the TorchFix codes it replaces: the comparison tool's mapping
    (SPEC section 5's table, with TL801 sharing TOR101/TOR103 for `torch.cuda.amp`), and the
    rows of SPEC's table when the shared SPEC is beside the project."""
    out: dict[str, set[str]] = {}
    for tor, tls in tc.TORCHFIX_TO_TORCHLINT.items():
        for tl in tls:
            out.setdefault(tl, set()).add(tor)
    spec = ROOT.parent / "shared" / "SPEC.md"
    if spec.exists():
        for row in spec.read_text().splitlines():
            m = re.match(r"\|\s*(TL\d{3})\s*\|", row)
            if m:
                out.setdefault(m[1], set()).update(re.findall(r"TOR\d{3}", row))
    return out


REPLACED = replaced_codes()


def test_every_torchfix_check_has_a_rule():
    assert set().union(*REPLACED.values()) >= {
        "TOR001", "TOR002", "TOR003", "TOR004", "TOR101", "TOR102", "TOR103", "TOR104", "TOR105", "TOR106",
        "TOR107", "TOR108", "TOR201", "TOR202", "TOR203", "TOR401", "TOR402"}


@pytest.mark.parametrize("code", sorted(REPLACED))
def test_rule_command_names_the_torchfix_codes_it_replaces(code):
    result = CliRunner().invoke(main, ["rule", code], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    named = set(re.findall(r"TOR\d{3}", result.output))
    assert REPLACED[code] <= named, f"{code}: `torchlint rule` does not name {sorted(REPLACED[code] - named)}"


def _tl804(source: str, fix_mode=FixMode.NONE):
    return lint_module_source(source, select_rules(["TL804"], [], []), fix_mode)


def test_functorch_import_fix_says_import_from_torch_func():
    result = _tl804("from functorch import vmap, grad\n\nvmap(grad(f))(x)\n")
    findings = [f for f in result.findings if f.code == "TL804"]
    assert len(findings) == 2  # one per imported name
    for f in findings:
        assert f.fix is not None
        # the fix moves the whole import: it says so, not "Use `torch.func.vmap`" for `grad`
        assert f.fix.message.startswith("Import from `torch.func`"), f.fix.message
    fixed = _tl804("from functorch import vmap, grad\n\nvmap(grad(f))(x)\n", FixMode.UNSAFE).fixed_source
    assert fixed == "from torch.func import vmap, grad\n\nvmap(grad(f))(x)\n"


def test_functorch_import_of_a_name_without_a_torch_func_twin_is_not_moved():
    # `functorch.vmap` moves, but the import also names something torch.func lacks: no import fix
    result = _tl804("from functorch import vmap, make_fx\n")
    assert [f.code for f in result.findings] == ["TL804"]
    assert all(f.fix is None or not f.fix.message.startswith("Import from") for f in result.findings)
