"""The prescreen (``Rule.required_words`` and ``Rule.candidate``, on Python's ``ast`` tree)
changes nothing but the time a run takes: every fixture and the real code of the corpus test
lint to the same findings, fixes, text edits, fixed output and failures with it as without
it, with every rule selected, with and without fixing. A rule whose words or candidate test
are not a necessary condition of its findings fails here."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source
from torchlint.notebook import lint_notebook
from torchlint.rule import Prescreen
from torchlint.rules import all_rules, rule_by_code

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def outcome(path: Path, fix_mode: frozenset, prescreen: bool):
    """Everything a run reports about one file."""
    lint = lint_notebook if path.suffix == ".ipynb" else lint_module_source
    result = lint(path.read_bytes(), select_rules(["ALL"], [], []), fix_mode, True, prescreen=prescreen)
    findings = [
        (f.code, f.message, f.cell, f.start, f.end, f.fix and (f.fix.message, f.fix.applicability, f.fix.edits))
        for f in result.findings
    ]
    failures = [failure.describe() for failure in result.failures]
    return findings, result.fixed_source, result.fixed_count, failures


def differences(path: Path) -> list[str]:
    found = []
    for mode in (FixMode.NONE, FixMode.UNSAFE):
        if outcome(path, mode, prescreen=True) != outcome(path, mode, prescreen=False):
            found.append(f"{path}: differs with the prescreen ({'--fix --unsafe-fixes' if mode else 'check'})")
    return found


FIXTURE_FILES = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".py", ".ipynb") and not p.name.endswith(".fixed.py"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_lints_the_same_with_the_prescreen(path: Path):
    assert differences(path) == []


@pytest.mark.corpus
def test_real_code_lints_the_same_with_the_prescreen():
    from test_corpus import corpus

    paths = [path for path, _ in corpus()]
    with ProcessPoolExecutor(max_workers=2) as pool:
        found = [d for ds in pool.map(differences, paths, chunksize=4) for d in ds]
    assert found == []


def test_words_are_whole_words_and_marked_ones_any_text():
    class Needs:
        required_words = (("backward", "manual_backward"), ("~Loss",))

    assert Prescreen.of_source(b"loss.backward()\n").admit(Needs)
    assert Prescreen.of_source("crit = nn.CrossEntropyLoss()\ntrainer.manual_backward(x)\n").admit(Needs)
    assert not Prescreen.of_source(b"loss.backwards()\n").admit(Needs)  # not the whole word
    assert not Prescreen.of_source(b"x.backward()\n").admit(Needs)  # a group without a word of it


def test_name_parts_split_as_camel_case_and_underscores():
    class Needs:
        required_words = (("*val", "*testloader"),)

    for text in (b"X_val = 1", b"valLoss", b"VAL", b'split = "Val"', b"for x in TestLoader: pass", b"testloader"):
        assert Prescreen.of_source(text).admit(Needs), text
    for text in (b"value = interval", b"evaluate()", b"testloaders"):
        assert not Prescreen.of_source(text).admit(Needs), text


def test_a_file_no_rule_can_report_on_is_only_syntax_checked(monkeypatch):
    import torchlint.engine as engine

    def parse(source):
        raise AssertionError("LibCST parsed a file that no rule can report on")

    monkeypatch.setattr(engine.cst, "parse_module", parse)
    rules = select_rules(["ALL"], [], [])
    assert lint_module_source(b"x = 1\n", rules).findings == []
    [finding] = lint_module_source(b"x = (\n", rules).findings
    assert finding.code == "TL000"


def test_a_fix_that_writes_a_held_back_rules_words_lets_it_run():
    # TL108 is held back (no `grad` in the file) until TL101's fix writes `opt.zero_grad()`:
    # the fixed file is linted with it, as it would be without the prescreen.
    source = (
        b"import torch\n"
        b"model = torch.nn.Linear(2, 1)\n"
        b"opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        b"for x in data:\n"
        b"    loss = model(x).sum()\n"
        b"    loss.backward()\n"
        b"    opt.step()\n"
    )
    rules = select_rules(["TL101", "TL108"], [], [])
    assert not Prescreen.of_source(source).admit(next(r for r in rules if r.code == "TL108"))
    with_prescreen = lint_module_source(source, rules, FixMode.UNSAFE)
    without = lint_module_source(source, rules, FixMode.UNSAFE, prescreen=False)
    assert b"opt.zero_grad()" in with_prescreen.fixed_source
    assert with_prescreen == without


def test_comments_docstrings_and_string_statements_hold_no_words():
    class Needs:
        required_words = (("cuda",),)

    for text in (
        '"""Runs on cuda."""\nx = 1\n',
        'def f():\n    """cuda"""\n    return 1\n',
        "x = 1  # x.cuda()\n",
        'x = 1\n"""\nx.cuda()\n"""\n',
    ):
        assert not Prescreen.of_source(text).admit(Needs), text
    for text in ("x.cuda()\n", 'd = "cuda:0"\n', 'd = f"cuda:{i}"\n', "f(cuda=1)\n", "import torch.cuda\n",
                 "from a import b as cuda\n", "def f(cuda): pass\n", "class cuda: pass\n", 'f"{x.cuda()}"\n'):
        assert Prescreen.of_source(text).admit(Needs), text


# Fixtures whose rule's words are only in comments and docstrings: held back, and silent anyway.
WORDS_IN_COMMENTS = sorted(FIXTURES.glob("rules/*/clean_*_in_comment*.py"))


@pytest.mark.parametrize("path", WORDS_IN_COMMENTS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_words_only_in_comments_hold_the_rule_back(path: Path):
    assert not Prescreen.of_source(path.read_bytes()).admit(rule_by_code(path.parent.name))


def test_some_fixtures_have_words_only_in_comments():
    assert len(WORDS_IN_COMMENTS) >= 4


# Per rule: code holding the rule's words without a candidate, then with one.
CANDIDATES = {
    "TL201": ("import torch\nok = torch.cuda.is_available()\n", "import torch\nx = torch.ones(1).cuda()\n"),
    "TL202": (
        "class Net(nn.Module):\n    def forward(self, x):\n        return x\n    def move(self, x):\n        return x.cuda()\n",
        "class Net(nn.Module):\n    async def forward(self, x):\n        return [y.to('cuda') for y in x]\n",
    ),
    "TL203": ("x = torch.ones(1)\nx = x.to(device)\n", "x = torch.ones(1)\nx.to(device)\n"),
    "TL602": ("class Net(nn.Module):\n    def __call__(self, x):\n        return self.forward(x)\n", "y = model.forward(x)\n"),
    "TL603": (
        'class Net(nn.Module):\n    def __init__(self):\n        """A net."""\n        super().__init__()\n        self.fc = nn.Linear(1, 1)\n'
        "class Plain:\n    def __init__(self):\n        self.fc = nn.Linear(1, 1)\n"
        "class Opt(Optimizer):\n    def __init__(self, params, lr):\n        defaults = dict(lr=lr)\n        super().__init__(params, defaults)\n"
        "        self.fc = nn.Linear(1, 1)\n",
        'class Net(nn.Module):\n    def __init__(self):\n        """A net."""\n        self.fc = nn.Linear(1, 1)\n        super().__init__()\n',
    ),
}


@pytest.mark.parametrize("code", sorted(CANDIDATES))
def test_candidate_tests(code: str):
    rule = rule_by_code(code)
    without, with_candidate = CANDIDATES[code]
    assert not Prescreen.of_source(without).admit(rule)
    assert Prescreen.of_source(with_candidate).admit(rule)
