"""The semantic model orders nodes from its collecting pass as their positions would, without
resolving ``PositionProvider`` (a rendering of the whole module); its facets replay the nodes
that pass recorded instead of walking the tree again."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.config import select_rules
from torchlint.engine import lint_module_source
from torchlint.semantic import SemanticModel, devices, evaluation, training
from torchlint.semantic.model import SCANNED, SCANNED_ENDS

FIXTURES = Path(__file__).parent.parent / "fixtures"
# The nodes the facts and rules order or compare.
COMPARED = (cst.Call, cst.Name, cst.Attribute, cst.Subscript, cst.BaseSmallStatement, cst.BaseCompoundStatement,
            cst.SimpleStatementLine, cst.Param)


def _model(path: Path) -> tuple[SemanticModel, dict]:
    wrapper = MetadataWrapper(cst.parse_module(path.read_bytes()))
    model = SemanticModel(wrapper)
    return model, wrapper.resolve(PositionProvider)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("rules/TL1*/bad_*[!d].py")) + [FIXTURES / "example" / "train.py"],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_start_key_orders_as_positions(path: Path) -> None:
    model, positions = _model(path)
    nodes = [n for n in model.order if isinstance(n, COMPARED)]
    start = {n: (positions[n].start.line, positions[n].start.column) for n in nodes}
    end = {n: (positions[n].end.line, positions[n].end.column) for n in nodes}
    ordered = sorted(nodes, key=model.start_key)
    for a, b in zip(ordered, ordered[1:]):
        # A later key never starts earlier; equal keys start at the same place.
        assert start[a] <= start[b], (cst.Module([]).code_for_node(a), cst.Module([]).code_for_node(b))
        if model.start_key(a) == model.start_key(b):
            assert start[a] == start[b]
    for node in nodes:
        if isinstance(node, cst.Call):  # a call starts where its function does, as positions say
            assert model.start_key(node) == model.start_key(node.func) or node.func.lpar
        parent = model.parent(node)
        if isinstance(parent, COMPARED):
            assert model.inside(node, parent) == (start[parent] <= start[node] and end[node] <= end[parent])


def test_decorators_are_before_their_def() -> None:
    model = SemanticModel(MetadataWrapper(cst.parse_module("@torch.no_grad()\ndef evaluate(model):\n    model(x)\n")))
    function = model.module.body[0]
    decorator_call = function.decorators[0].decorator
    assert model.start_key(decorator_call) < model.start_key(function)
    assert not model.inside(decorator_call, function)
    assert model.inside(function.body.body[0], function)


def test_a_file_without_findings_renders_no_positions(monkeypatch) -> None:
    rendered = []
    original = PositionProvider._gen_impl
    monkeypatch.setattr(PositionProvider, "_gen_impl", lambda self, module: rendered.append(1) or original(self, module))
    source = (FIXTURES / "rules" / "TL101" / "clean_dcgan.py").read_bytes()
    result = lint_module_source(source, select_rules(None, [], []))
    assert result.findings == [] and not rendered


@pytest.mark.parametrize("scan", [training._Scan, evaluation._Scan, devices._Collector])
def test_collecting_pass_records_what_the_scans_look_at(scan) -> None:
    for name in dir(scan):
        if name.startswith(("visit_", "leave_")):
            recorded = SCANNED if name.startswith("visit_") else SCANNED_ENDS
            assert getattr(cst, name.partition("_")[2]) in recorded, name
