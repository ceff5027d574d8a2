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
