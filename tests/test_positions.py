"""Positions rendered one top-level statement at a time are LibCST's own."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

from torchlint.positions import Positions, statement_lines

ROOT = Path(__file__).parent.parent
SOURCES = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "src" / "torchlint").rglob("*.py"))

EDGES = [
    "# header\n\n# lead\n@dec\n# between\n@dec2\ndef f(x):  # c\n    return x\n\nx = 1; y = 2  # t\nclass C: pass\n",
    "if x:\n    y = 1\n    # footer of the block\n# dedented\nz = '''a\nb'''\n",
    "x = 1\r\ny = 2\r\n",
    "import a\n\n\n",
    "\n\n# only comments\n",
    "x = 1",
]


def _check(source: str | bytes, lines, fast: bool = True) -> int:
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    parents = wrapper.resolve(ParentNodeProvider)

    def top(node):
        while node in parents and parents[node] is not module:
            node = parents[node]
        return node if node in module.body else None  # not the header's or footer's lines

    positions = Positions(wrapper, lines, top)
    inside = [node for node in expected if top(node) is not None]
    for node in reversed(inside):  # statements rendered on demand, innermost nodes first
        assert positions[node] == expected[node], (source, node)
    if fast:  # no statement failed its check: the whole module was never rendered
        assert positions._full is None
    for node in expected:  # the module, its header and footer: from the whole module
        assert positions[node] == expected[node], (source, node)
    return len(inside)


@pytest.mark.parametrize("source", EDGES)
def test_edge_cases(source: str) -> None:
    _check(source, statement_lines(ast.parse(source)))


def test_every_fixture_and_module() -> None:
    checked = 0
    for path in SOURCES:
        source = path.read_bytes()
        checked += _check(source, statement_lines(ast.parse(source)))
    assert checked > 50_000


def test_a_statement_whose_line_does_not_match_falls_back() -> None:
    # A backslash before an empty line: LibCST's lines differ from the parser's; the check
    # after rendering sees it.
    _check("x = (1,\n     2)\n\\\n\ny = 3\n", statement_lines(ast.parse("x = (1,\n     2)\n\\\n\ny = 3\n")), fast=False)


@pytest.mark.parametrize("lines", [None, [(1, 1, 1)], [(5, 5, 5), (9, 9, 9), (10, 10, 10), (10, 10, 10), (12, 12, 12)]])
def test_unknown_or_wrong_lines_fall_back_to_the_whole_module(lines) -> None:
    _check(EDGES[0], lines, fast=False)


def test_only_the_statement_asked_about_is_rendered() -> None:
    source = "import torch\n" + "".join(f"def f{i}():\n    return {i}\n" for i in range(50))
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    last = module.body[-1]
    positions = Positions(wrapper, statement_lines(ast.parse(source)), lambda node: last)
    assert positions[last].start.line == 100
    assert wrapper.module is module and not wrapper._metadata  # PositionProvider never resolved


_BLOCK = '''def train_{i}(loader):
    model = Net().cuda()
    for x, y in loader:
        loss = model(x).sum()
        loss.backward()
    torch.save(model, "m{i}.pt")


'''


def test_an_editors_memo_moves_the_positions_of_unchanged_statements(monkeypatch):
    # An editor's document, edited between lints: the positions kept from the last version
    # (moved by the lines added above) are those a fresh lint renders.
    import torchlint.positions as positions_module
    from torchlint.config import select_rules
    from torchlint.engine import FixMode, ParseCache, lint_module_source

    rendered = []

    class Counting(PositionProvider):
        def __init__(self) -> None:
            super().__init__()
            rendered.append(self)

    monkeypatch.setattr(positions_module, "PositionProvider", Counting)
    head = "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    pass\n\n\n"
    base = head + "".join(_BLOCK.format(i=i) for i in range(20))
    versions = [base]
    versions.append(versions[-1].replace("class Net", "# a comment\n# and another\n\nclass Net"))  # lines above all
    versions.append(versions[-1].replace('"m7.pt"', '"m7b.pt"'))  # one statement changed
    versions.append(versions[-1].replace("\n\n\ndef train_3", "\n\ndef train_3"))  # a blank line removed
    rules = select_rules(["TL201", "TL501"], [], [])
    cache = ParseCache(piece_lines=8)
    counts = []
    for text in versions:
        plain = lint_module_source(text, rules, FixMode.NONE, True)
        rendered.clear()
        cached = lint_module_source(text, rules, FixMode.NONE, True, parse_cache=cache)
        counts.append(len(rendered))
        assert len(cached.findings) == 40
        assert [(f.code, f.start, f.end, f.message, f.fix) for f in cached.findings] == [
            (f.code, f.start, f.end, f.message, f.fix) for f in plain.findings
        ]
    # Rendered again: the statements of a changed piece, and the first of the piece after it
    # (it is given the blank lines that end the changed one).
    assert counts[0] == 20 and counts[1] == 1 and 1 <= counts[2] <= 2 and 1 <= counts[3] <= 3
