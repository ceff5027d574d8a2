"""Fixes as text edits (what JSON, SARIF and the editor apply) mean exactly what the engine's
CST fixes do: a property checked on every rule fixture that has a fix."""

from __future__ import annotations

import re

import libcst as cst
import pytest

from rule_fixtures import cases
from torchlint.config import select_rules
from torchlint.engine import EditRenderer, FixMode, _apply, _ApplyChanges, apply_fixes, lint_module_source, render_edits, run_rules
from torchlint.positions import statement_lines
from torchlint.rule import Edit, Fix
from torchlint.text import syntax_tree

FIXED = [c for c in cases() if c.is_bad and c.fixed_path.exists()]
_NEWLINE = re.compile(r"\r\n?|\n")


def apply_edits(text: str, edits) -> str:
    """Apply non-overlapping text edits (1-based rows and columns in characters)."""
    starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(location) -> int:
        return starts[location.row - 1] + location.column - 1

    for edit in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        text = text[: offset(edit.start)] + edit.content + text[offset(edit.end) :]
    return text


@pytest.mark.parametrize("case", FIXED, ids=lambda c: c.id)
def test_each_fix_as_edits_equals_the_fix_applied_to_the_tree(case):
    module = cst.parse_module(case.path.read_bytes())
    findings, _ = run_rules(module, select_rules([case.code], [], []))
    fixes = [f.fix for f in findings if f.fix is not None]
    assert fixes
    renderer = EditRenderer(module, fixes)
    for fix in fixes:
        edits = renderer.edits(fix)
        assert edits, f"{fix.message}: no edits"
        assert apply_edits(module.code, edits) == _apply(module, [fix]).code


@pytest.mark.parametrize("case", FIXED, ids=lambda c: c.id)
def test_fixes_applied_along_their_paths_equal_libcsts_whole_walk(case):
    """``_apply`` rebuilds only the nodes above the changed ones: the same tree as LibCST's
    transformer walking (and copying) the whole module, each fix alone and all at once."""
    module = cst.parse_module(case.path.read_bytes())
    findings, _ = run_rules(module, select_rules([case.code], [], []))
    fixes = [f.fix for f in findings if f.fix is not None]
    assert fixes
    for group in [[fix] for fix in fixes] + [fixes]:
        changes = {node: new for fix in group for node, new in fix.changes.items()}
        whole = module.visit(_ApplyChanges(changes))
        pruned = _apply(module, group)
        assert pruned.code == whole.code and pruned.deep_equals(whole)


def test_fixes_applied_along_their_paths_keep_the_rest_of_the_tree():
    module = cst.parse_module("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    target = module.body[1].body.body[0].body[0].value
    fixed = _apply(module, [Fix("two", {target: cst.Integer("3")})])
    assert fixed.code.endswith("return 3\n")
    assert fixed.body[0] is module.body[0]  # not walked into, not copied
    assert fixed.body[1] is not module.body[1]


@pytest.mark.parametrize("case", FIXED, ids=lambda c: c.id)
def test_edits_rendered_from_the_statements_are_those_rendered_from_the_module(case):
    source = case.path.read_bytes()
    module = cst.parse_module(source)
    lines = statement_lines(syntax_tree(source))
    findings, positions = run_rules(module, select_rules([case.code], [], []), statement_lines=lines)
    fixes = [f.fix for f in findings if f.fix is not None]
    whole = EditRenderer(module, fixes)
    parts = EditRenderer(module, fixes, positions, source.decode())
    assert whole.whole
    for fix in fixes:
        assert parts.edits(fix) == whole.edits(fix)


def test_edits_are_rendered_from_the_statements_that_hold_the_fixes():
    source = "import torch\nfrom torch import nn\nm = nn.Linear(2, 2)\n" + "x = 1\n" * 50 + "torch.save(m, 'a')\n"
    module = cst.parse_module(source)
    lines = statement_lines(syntax_tree(source))
    findings, positions = run_rules(module, select_rules(["TL501"], [], []), statement_lines=lines)
    [fix] = [f.fix for f in findings]
    renderer = EditRenderer(module, [fix], positions, source)
    assert not renderer.whole and len(renderer.spans) < 10
    [edit] = renderer.edits(fix)
    assert edit.start.row == 54 and apply_edits(source, [edit]) == _apply(module, [fix]).code
    # Text that is not the module's: rendered whole.
    assert EditRenderer(module, [fix], positions, source.replace("'a'", "'b'")).whole


@pytest.mark.parametrize("case", FIXED, ids=lambda c: c.id)
def test_applying_the_reported_edits_until_stable_gives_the_fixed_file(case):
    # What an editor's "apply every fix" does: the findings' edits, pass after pass.
    rules = select_rules([case.code], [], [])
    text = case.path.read_text()
    for _ in range(10):
        result = lint_module_source(text, rules, FixMode.NONE, with_edits=True)
        taken: list[Edit] = []
        for finding in result.findings:
            edits = finding.fix.edits if finding.fix is not None else ()
            if edits and not any(_overlap(e, t) for e in edits for t in taken):
                taken.extend(edits)
        if not taken:
            break
        text = apply_edits(text, taken)
    assert text == case.fixed_path.read_text()


def _overlap(a: Edit, b: Edit) -> bool:
    return not (a.end <= b.start or b.end <= a.start) or a.start == b.start


def _module_and_fix(code: str, pick, replacement) -> tuple[cst.Module, Fix]:
    module = cst.parse_module(code)
    return module, Fix("test", {pick(module): replacement})


SHAPES = [
    # (code, the node to change, its replacement)
    ("x = 1\n", lambda m: m.body[0].body[0].value, cst.Name("y")),
    ("def f():\n    a = 1\n    b = 2\n", lambda m: m.body[0].body.body[1], cst.RemovalSentinel.REMOVE),
    ("def f():\n    a = 1\n", lambda m: m.body[0].body.body[0], cst.RemovalSentinel.REMOVE),  # empties the body
    (
        "if x:\n    # lead\n    a = 1\n",
        lambda m: m.body[0].body.body[0],
        cst.FlattenSentinel([cst.parse_statement("b = 2\n"), cst.parse_statement("for i in y:\n    c()\n")]),
    ),
    ("a = 1\nb = 2", lambda m: m.body[1], cst.RemovalSentinel.REMOVE),  # no final newline
    ("a = 1\nb = 2", lambda m: m.body[1], cst.parse_statement("c = 3\n")),
    ("f(a, b)\n", lambda m: m.body[0].body[0].value.args[1], cst.RemovalSentinel.REMOVE),
    ("f(a, b)\n", lambda m: m.body[0].body[0].value.args[1], cst.Arg(cst.Name("c"))),
    ("f(a)\n", lambda m: m.body[0].body[0].value.args[0], cst.FlattenSentinel([cst.Arg(cst.Name("b")), cst.Arg(cst.Name("c"))])),
    ("if a:\n    pass\nelif b:\n    pass\n", lambda m: m.body[0].orelse, cst.parse_statement("if c:\n    pass\n")),
    ("x = (1 +\n     2)\n", lambda m: m.body[0].body[0].value, cst.Name("y")),
    ("class A:\n    def f(self):\n        return (\n            1)\n", lambda m: m.body[0].body.body[0].body.body[0],
     cst.parse_statement("return (\n    2)\n")),
    ("a = 1\r\nb = 2\r\n", lambda m: m.body[1], cst.FlattenSentinel([cst.parse_statement("c = 3\n"), cst.parse_statement("d = 4\n")])),
    ("a = 1\rb = 2\r", lambda m: m.body[1].body[0].value, cst.Integer("5")),
    ("def f():\n\tif x:\n\t\treturn 1\n", lambda m: m.body[0].body.body[0].body.body[0], cst.parse_statement("y = 2\n")),
]


@pytest.mark.parametrize("code, pick, replacement", SHAPES)
def test_edits_of_every_kind_of_change(code, pick, replacement):
    module, fix = _module_and_fix(code, pick, replacement)
    assert apply_edits(module.code, render_edits(module, fix)) == _apply(module, [fix]).code


def test_nested_changes_of_one_fix_render_as_the_tree_applies_them():
    module = cst.parse_module("def f():\n    g(a)\n")
    statement = module.body[0].body.body[0]
    name = statement.body[0].value.args[0].value
    fix = Fix("test", {statement: cst.parse_statement("h()\n"), name: cst.Name("b")})
    assert apply_edits(module.code, render_edits(module, fix)) == _apply(module, [fix]).code


def test_edits_are_small_and_separate_for_distant_changes():
    module = cst.parse_module("a = 1\n" + "x = 0\n" * 50 + "b = 2\n")
    fix = Fix("test", {module.body[0].body[0].value: cst.Integer("3"), module.body[-1].body[0].value: cst.Integer("4")})
    first, second = render_edits(module, fix)
    assert (first.content, first.start.row, second.content, second.start.row) == ("3", 1, "4", 52)


def test_one_pass_of_all_fixes_equals_their_edits(tmp_path):
    source = b"import torch\nfrom torch import nn\nm = nn.Linear(2, 2)\n" + b"torch.save(m, 'a')\n" * 30
    module = cst.parse_module(source)
    findings, wrapper = run_rules(module, select_rules(["TL501"], [], []))
    fixes = [f.fix for f in findings]
    fixed, applied = apply_fixes(module, wrapper, fixes)
    renderer = EditRenderer(module, fixes)
    assert applied == 30
    assert apply_edits(module.code, [e for fix in fixes for e in renderer.edits(fix)]) == fixed.code


@pytest.mark.parametrize("case", FIXED, ids=lambda c: c.id)
def test_what_a_fix_run_reports_is_what_a_lint_of_the_fixed_file_reports(case):
    """After the safe fixes, the findings left (with their unsafe fixes' edits, rendered from
    the fixed module's statements) are those a fresh lint of the fixed file reports."""
    source = case.path.read_bytes()
    rules = select_rules([case.code], [], [])
    fixed = lint_module_source(source, rules, FixMode.SAFE, True)
    fresh = lint_module_source(fixed.fixed_source, rules, FixMode.NONE, True)

    def shown(findings):
        return [(f.code, f.start, f.end, f.message, f.fix and (f.fix.message, f.fix.edits)) for f in findings]

    assert shown(fixed.findings) == shown(fresh.findings)
