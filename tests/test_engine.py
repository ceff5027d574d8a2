"""The engine: parsing, suppression, fixes, encodings, and what it refuses to do."""

from __future__ import annotations

import sys

import libcst as cst
import pytest
from conftest import FIXTURES

from torchlint.config import select_rules
from torchlint.engine import FixMode, find_suppressions, lint_module_source, render_edits, run_rules

TL501 = select_rules(["TL501"], [], [])
BAD = b"import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
GOOD = b"import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model.state_dict(), 'm.pt')\n"


def test_finding_has_one_based_range_and_safe_fix():
    [finding] = lint_module_source(BAD, TL501).findings
    assert (finding.code, finding.start.row, finding.start.column) == ("TL501", 4, 12)
    assert (finding.end.row, finding.end.column) == (4, 17)
    assert finding.fix is not None and finding.fix.applicability == "safe"


def test_fix_rewrites_and_is_idempotent():
    result = lint_module_source(BAD, TL501, FixMode.SAFE)
    assert result.fixed_source == GOOD
    assert result.fixed_count == 1 and result.findings == []
    assert lint_module_source(GOOD, TL501, FixMode.SAFE).fixed_source == GOOD


def test_syntax_error_is_tl000_at_the_parser_position():
    [finding] = lint_module_source(b"x = 1\nfor x in y\n    pass\n", TL501).findings
    assert finding.code == "TL000" and finding.start.row == 2
    assert "SyntaxError" in finding.message


def test_undecodable_bytes_are_tl000():
    [finding] = lint_module_source(b"x = '\xff\xfe'\n", TL501).findings
    assert finding.code == "TL000" and finding.message == "cannot decode file: byte 0xff is not valid utf-8 (invalid start byte)"
    [finding] = lint_module_source(b"# -*- coding: nonesuch -*-\nx = 1\n", TL501).findings
    assert finding.code == "TL000" and "nonesuch" in finding.message
    [finding] = lint_module_source(b"x = 1\x00\n", TL501).findings
    assert finding.code == "TL000" and "null bytes" in finding.message


def test_empty_source_is_clean():
    assert lint_module_source(b"", TL501).findings == []


def test_crlf_bom_and_encoding_are_kept():
    bom_crlf = b"\xef\xbb\xbf" + BAD.replace(b"\n", b"\r\n")
    fixed = lint_module_source(bom_crlf, TL501, FixMode.SAFE).fixed_source
    assert fixed == b"\xef\xbb\xbf" + GOOD.replace(b"\n", b"\r\n")
    latin = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + BAD
    assert lint_module_source(latin, TL501, FixMode.SAFE).fixed_source == b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + GOOD


def test_line_noqa_suppresses_only_its_codes():
    assert lint_module_source(BAD.replace(b"'m.pt')", b"'m.pt')  # noqa: TL501"), TL501).findings == []
    assert lint_module_source(BAD.replace(b"'m.pt')", b"'m.pt')  # noqa"), TL501).findings == []
    assert len(lint_module_source(BAD.replace(b"'m.pt')", b"'m.pt')  # noqa: TL101"), TL501).findings) == 1


def test_file_noqa_forms():
    assert lint_module_source(b"# torchlint: noqa\n" + BAD, TL501).findings == []
    assert lint_module_source(b"# torchlint: noqa: TL501\n" + BAD, TL501).findings == []
    assert len(lint_module_source(b"# torchlint: noqa: TL101\n" + BAD, TL501).findings) == 1


def test_noqa_inside_a_string_is_not_a_comment():
    suppressions = find_suppressions("x = '# noqa'\ny = 1  # noqa: TL501\n")
    assert 1 not in suppressions.lines and suppressions.lines[2] == {"TL501"}


def test_overlapping_fixes_are_applied_over_passes():
    # Two findings whose fixes touch nested nodes: both end up fixed, deterministically.
    source = b"import torch\nfrom torch import nn\nm = nn.Linear(2, 2)\ntorch.save(m, 'a')\ntorch.save(m, 'b')\n"
    result = lint_module_source(source, TL501, FixMode.SAFE)
    assert result.fixed_source.count(b"m.state_dict()") == 2


def test_fix_that_does_not_parse_is_dropped():
    from torchlint.engine import apply_fixes
    from torchlint.rule import Fix

    module = cst.parse_module("x = 1\n")
    findings, wrapper = run_rules(module, ())
    target = module.body[0].body[0].value
    # A keyword validates as a name but does not parse.
    broken = Fix("break it", {target: cst.Name("if")})
    fixed, applied = apply_fixes(module, wrapper, [broken])
    assert applied == 0 and fixed.code == "x = 1\n"


def test_render_edits_gives_the_minimal_span():
    module = cst.parse_module(BAD.decode())
    findings, _ = run_rules(module, TL501)
    [edit] = render_edits(module, findings[0].fix)
    assert edit.content == ".state_dict()"
    assert (edit.start.row, edit.start.column, edit.end.row, edit.end.column) == (4, 17, 4, 17)


def test_deeply_nested_source_does_not_crash():
    source = ("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n").encode()
    result = lint_module_source(source, TL501)
    [finding] = result.findings
    assert finding.code == "TL000" and "nested" in finding.message


def test_lint_path_never_imports_torch():
    import subprocess

    code = (
        "import sys; from torchlint.cli import main\n"
        "from torchlint.engine import lint_module_source; from torchlint.config import select_rules\n"
        f"lint_module_source({BAD!r}, select_rules(['TL'], [], []))\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'pygls' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("source", [
    b"x = 1\r\ny = 2\r\n", b"\xef\xbb\xbfx = 1\n", "# -*- coding: latin-1 -*-\nx = '\xe9'\n".encode("latin-1"),
    b"x = 1\ry = 2\r", b"x = 1", b"", b"\n\n", b"x=1\n\x0c\ny=2\n", "x = 'é'\r\n",
])
def test_source_text_is_the_modules_code(source) -> None:
    """Suppressions are read from the source's text, which must be what LibCST renders."""
    from torchlint.engine import _parse_checked, _source_text

    module = _parse_checked(source)
    assert _source_text(source, module) == module.code


def test_source_text_of_every_fixture() -> None:
    from pathlib import Path

    from torchlint.engine import _parse_checked, _source_text

    for path in sorted((Path(__file__).parent.parent / "fixtures").rglob("*.py")):
        source = path.read_bytes()
        module = _parse_checked(source)
        assert _source_text(source, module) == module.code, path


_PIECES_EDGES = [
    "import a\n\n\n# about f\n@dec\n# between\n@dec2\ndef f(x):  # c\n    return x\n    # indented after the block\n\n# dedented\nclass C:\n    pass\nx = 1; y = 2  # t\nz = (1,\n     2); w = 3\n",
    "def f():\n\tif x:\n\t\treturn 1\n\n\n\nx = 1\ny = 2\nz = 3\n",
    "x = 1\ry = 2\rdef g():\r  pass\rq = 3\r",
    "x = '''a\nb\nc'''\ny = 2\n\x0c\nz = 3\nif z:\n    pass\nelse:\n    pass\n\n# end\n",
    "a = 1\n" * 20 + "b = 2\nc = 3",
]


def _pieces_equal(source, piece_lines) -> bool:
    import ast

    from torchlint.engine import _parse_checked, _parse_in_pieces
    from torchlint.positions import statement_lines

    lines = statement_lines(ast.parse(source))
    if _parse_in_pieces(source, lines, piece_lines) is None:
        return False
    pieces = _parse_checked(source, lines, piece_lines)
    whole = _parse_checked(source)
    for attribute in ("encoding", "default_indent", "default_newline", "has_trailing_newline"):
        assert getattr(pieces, attribute) == getattr(whole, attribute), attribute
    assert pieces.code == whole.code
    assert pieces.deep_equals(whole)
    return True


@pytest.mark.parametrize("source", _PIECES_EDGES)
@pytest.mark.parametrize("as_bytes", [True, False])
def test_a_module_parsed_in_pieces_is_the_whole_parse(source, as_bytes) -> None:
    assert _pieces_equal(source.encode() if as_bytes else source, 2)


def test_every_fixture_parsed_in_pieces_is_the_whole_parse() -> None:
    from pathlib import Path

    root = Path(__file__).parent.parent
    cut = 0
    for path in sorted((root / "fixtures").rglob("*.py")) + sorted((root / "src").rglob("*.py")):
        cut += _pieces_equal(path.read_bytes(), 3)
    assert cut > 100


def test_a_parse_cache_reuses_the_unchanged_pieces_of_the_next_version() -> None:
    # An editor's document, edited between lints: the tree is the whole parse of each
    # version, and only the piece that changed is parsed again.
    import ast

    from torchlint.engine import ParseCache, _parse_checked
    from torchlint.positions import statement_lines

    block = "def f{i}(x):\n    y = x + {i}\n    return y\n\n\n"
    first = "import torch\n\n\n" + "".join(block.format(i=i) for i in range(30))
    second = first.replace("y = x + 7\n", "y = x * 7  # changed\n")
    cache = ParseCache(piece_lines=10)
    trees = []
    for text in (first, second, second):
        module = _parse_checked(text, statement_lines(ast.parse(text)), cache=cache)
        whole = _parse_checked(text)
        assert module.code == text and module.deep_equals(whole)
        trees.append(module)
        cache.next_lint()  # as a lint does
    assert len(cache.pieces) > 5
    reused = [a.body is b.body for a, b in zip(trees[0].body, trees[1].body)]
    assert reused.count(False) == 2 and not reused[8]  # the piece of f7 (pieces of 10 lines: two functions)
    assert all(a.body is b.body for a, b in zip(trees[1].body, trees[2].body))
    # The statements themselves: the changed piece's two, and the first of the piece after it
    # (given the blank lines that end the changed one), are new nodes; the others are the same.
    same = [a is b for a, b in zip(trees[0].body, trees[1].body)]
    assert same.count(False) == 3 and not same[8]
    assert all(a is b for a, b in zip(trees[1].body, trees[2].body))


def test_a_parse_cache_in_lint_gives_the_same_findings() -> None:
    from pathlib import Path

    from torchlint.config import select_rules
    from torchlint.engine import ParseCache

    root = Path(__file__).parent.parent
    rules = select_rules(["ALL"], [], [])
    cache = ParseCache(piece_lines=3)
    compared = 0
    for path in sorted((root / "fixtures").rglob("*.py"))[:200]:
        text = path.read_text()
        plain = lint_module_source(text, rules, FixMode.NONE, True)
        for _ in range(2):  # filling the cache, then from it
            cached = lint_module_source(text, rules, FixMode.NONE, True, parse_cache=cache)
            assert [(f.code, f.start, f.end, f.message, f.fix) for f in cached.findings] == [
                (f.code, f.start, f.end, f.message, f.fix) for f in plain.findings
            ], path
        compared += bool(plain.findings)
    assert compared > 50


def test_sources_not_parsed_in_pieces() -> None:
    import ast

    from torchlint.engine import _parse_in_pieces
    from torchlint.positions import statement_lines

    many = "x = 1\n" * 50
    lines = statement_lines(ast.parse(many))
    assert _parse_in_pieces(many.encode(), lines, 100) is None  # too small
    assert _parse_in_pieces(b"\xef\xbb\xbf" + many.encode(), lines, 2) is None  # a BOM
    cookie = "# -*- coding: latin-1 -*-\n" + many
    assert _parse_in_pieces(cookie.encode("latin-1"), statement_lines(ast.parse(cookie)), 2) is None
    # Mixed line endings or indentations: the pieces' implicit defaults would differ.
    mixed = "x = 1\n" * 5 + "y = 2\r\n" * 5
    assert _parse_in_pieces(mixed.encode(), statement_lines(ast.parse(mixed)), 2) is None
    tabs = "if a:\n    b = 1\n" + "x = 1\n" * 5 + "if c:\n\td = 1\n"
    assert _parse_in_pieces(tabs.encode(), statement_lines(ast.parse(tabs)), 2) is None


def test_a_rules_visitor_methods_are_those_dir_finds() -> None:
    # ``_visitor_names`` looks at each class's own methods, not at ``dir``'s 600 names.
    from torchlint.rule import _visitor_names
    from torchlint.rules import all_rules

    def by_dir(cls):
        return tuple(
            n for n in dir(cls)
            if n.startswith(("visit_", "leave_")) and callable(getattr(cls, n)) and not getattr(getattr(cls, n), "_is_no_op", False)
        )

    class Base(all_rules()[1]):
        def visit_Name(self, node):
            pass

    class Derived(Base):
        visit_Name = cst.CSTVisitor.visit_Name  # a no-op again

    for cls in (*all_rules(), Base, Derived):
        assert _visitor_names(cls) == by_dir(cls), cls
    assert "visit_Name" in _visitor_names(Base) and "visit_Name" not in _visitor_names(Derived)


def test_a_cancelled_lint_stops_at_a_statement_and_leaves_the_parse_cache_for_the_next() -> None:
    """``cancelled`` is asked before the parse and at each statement the rules' traversal
    enters; once true, the lint raises ``Cancelled`` (through the handlers of rule and parse
    errors), and the parse cache keeps what it held: the next lint reuses the pieces."""
    from pathlib import Path

    from torchlint.config import select_rules
    from torchlint.engine import Cancelled, ParseCache

    text = (Path(__file__).parent.parent / "fixtures" / "example" / "train.py").read_text()
    rules = select_rules(None, [], [])
    plain = lint_module_source(text, rules, FixMode.NONE, True)
    asked = []

    def after(count: int):
        def cancelled() -> bool:
            asked.append(count)
            return len(asked) > count
        return cancelled

    cache = ParseCache(piece_lines=3)
    lint_module_source(text, rules, FixMode.NONE, True, parse_cache=cache)
    pieces = dict(cache.pieces._last)
    assert pieces
    for count in (0, 1, 7):
        asked.clear()
        with pytest.raises(Cancelled):
            lint_module_source(text, rules, FixMode.NONE, True, parse_cache=cache, cancelled=after(count))
        assert len(asked) == count + 1  # it stopped at the first answer True
    # Never cancelled: every statement asked, the same findings; the cached pieces were reused.
    asked.clear()
    finished = lint_module_source(text, rules, FixMode.NONE, True, parse_cache=cache, cancelled=after(10**6))
    assert len(asked) > 20
    assert [(f.code, f.start, f.message) for f in finished.findings] == [(f.code, f.start, f.message) for f in plain.findings]
    assert all(cache.pieces.get(key) is piece for key, piece in pieces.items())


def test_a_cancelled_lint_stops_between_the_stages_of_the_semantic_facts() -> None:
    """The semantic model is built whole at the first rule's question (its scopes, its
    collecting pass, then each facet on first use): the lint asks ``cancelled`` before each
    of those stages too, so an editor's lint stops there rather than after them."""
    import sys
    import traceback
    from pathlib import Path

    from torchlint.config import select_rules
    from torchlint.engine import Cancelled
    from torchlint.semantic import SemanticModel

    text = (Path(__file__).parent.parent / "fixtures" / "example" / "train.py").read_text()
    rules = select_rules(None, [], [])
    building = SemanticModel.__init__.__code__

    def cancelled() -> bool:  # true once asked from inside the model's construction
        frame = sys._getframe()
        while frame is not None and frame.f_code is not building:
            frame = frame.f_back
        return frame is not None

    with pytest.raises(Cancelled) as raised:
        lint_module_source(text, rules, FixMode.NONE, True, cancelled=cancelled)
    frames = [frame.f_code for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    # It stopped inside the model's construction, before its scopes were resolved.
    assert building in frames
    assert not any(code.co_name == "resolve" for code in frames)

    # Within the two walks of the model's construction, each statement asks too.
    from torchlint.semantic.model import _Collector
    from torchlint.traversal import STATEMENTS, ScopeProvider

    for walk in (ScopeProvider.visit_Module.__code__, _Collector.on_visit.__code__):
        building = walk
        with pytest.raises(Cancelled) as raised:
            lint_module_source(text, rules, FixMode.NONE, True, cancelled=cancelled)
        assert walk in [frame.f_code for frame, _ in traceback.walk_tb(raised.value.__traceback__)]

    # Each stage asks: the scopes, the collecting pass, and each facet as it is first used.
    stages = []
    module = cst.parse_module(text)
    model = SemanticModel(cst.MetadataWrapper(module, unsafe_skip_copy=True), checkpoint=lambda: stages.append(1))

    class Statements(cst.CSTVisitor):
        count = 0

        def on_visit(self, node: cst.CSTNode) -> bool:
            Statements.count += type(node) in STATEMENTS
            return True

    module.visit(Statements())
    assert len(stages) == 2 + 2 * Statements.count  # before each walk, and at each statement of both
    model.training, model.evaluation, model.devices
    assert len(stages) >= 5 + 2 * Statements.count


def test_stopped_lints_leave_nothing_of_their_own_in_the_parse_cache(monkeypatch) -> None:
    """While each keystroke stops the lint before, what those lints parsed is dropped (it was
    for versions already replaced) and what the last finished lint left stays: the cache does
    not grow with the keystrokes, and the next lint of an unchanged piece does not parse it."""
    import sys
    from pathlib import Path

    import libcst

    from torchlint.config import select_rules
    from torchlint.engine import Cancelled, ParseCache, _CancelPoints

    text = (Path(__file__).parent.parent / "fixtures" / "example" / "train.py").read_text()
    rules = select_rules(None, [], [])
    cache = ParseCache(piece_lines=3)
    lint_module_source(text, rules, FixMode.NONE, True, parse_cache=cache)
    sizes = (len(cache.pieces), len(cache.firsts), len(cache.positions))

    def in_the_rules_walk() -> bool:  # true once the parse is done and the rules' walk has begun
        frame = sys._getframe()
        while frame is not None and frame.f_code is not _CancelPoints._enter.__code__:
            frame = frame.f_back
        return frame is not None

    for keystroke in range(8):
        typed = text + "x" * (keystroke + 1) + " = 1\n"  # a new last piece each time
        with pytest.raises(Cancelled):
            lint_module_source(typed, rules, FixMode.NONE, True, parse_cache=cache, cancelled=in_the_rules_walk)
        assert (len(cache.pieces), len(cache.firsts), len(cache.positions)) == sizes

    parsed = []
    original = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda *args, **kwargs: parsed.append(args) or original(*args, **kwargs))
    lint_module_source(text, rules, FixMode.NONE, True, parse_cache=cache)
    assert parsed == []


@pytest.mark.parametrize("fix_mode", [FixMode.NONE, FixMode.SAFE], ids=["check", "fix"])
def test_a_lint_leaves_no_cyclic_garbage(fix_mode) -> None:
    """A lint's tree, facts and scopes are freed by reference counting once it returns
    (``RuleContext.release``): nothing is left for Python's cyclic collector, which would
    walk every node of the tree again."""
    import gc

    from torchlint.rules import all_rules

    source = (FIXTURES / "example" / "train.py").read_bytes()
    rules = all_rules()
    lint_module_source(source, rules, fix_mode, with_edits=True)  # (imports and caches of the first lint)
    gc.collect()
    gc.disable()
    try:
        result = lint_module_source(source, rules, fix_mode, with_edits=True)
        assert result.findings or result.fixed_count  # (the facts were built: there were findings)
        del result
        assert gc.collect() == 0
    finally:
        gc.enable()
