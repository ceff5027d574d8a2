"""Linting a large file in pieces (torchlint/pieces.py): the chunked parse, the chunked
project summary and the lint in pieces each give what the whole file gives.

The lint in pieces runs on files of ``pieces.MIN_LINES`` lines or more; these tests cut every
file (``min_lines=0``) with every definition a piece of its own and no limit on the context
(``piece_lines=1``, ``max_context=1.0``), and every chunk as small as the cuts allow
(``chunk_lines=1``): the hardest cuts there are.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from torchlint import engine, pieces, runner
from torchlint.text import source_rows
from torchlint.config import select_rules
from torchlint.engine import INVALID_FILE, lint_in_pieces, lint_module_source
from torchlint.semantic import summary as project
from torchlint.semantic.pieces import SemanticHooks

sys.path.insert(0, str(Path(__file__).parent))
from strategies import programs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RULES = select_rules(None, (), ())
FIXTURES = sorted(p for p in (ROOT / "fixtures").rglob("*.py"))
sys.path.insert(0, str(ROOT / "bench"))
from gen_training import generate  # noqa: E402

TRICKY = '''import torch
"""A docstring that holds code at column 0:
def not_a_function():
    pass
class NotAClass:
@not_a_decorator
"""


@torch.no_grad()
def evaluate(model, loader):
    return [model(x) for x in loader]


x = (1,
2)
def f(): return 1
async def g():
    await f()
class C(torch.nn.Module): pass
y = """
class Inside:
"""
@property
def h(): pass
'''


def _dump(body: list[ast.stmt]) -> str:
    return ast.dump(ast.Module(body=body, type_ignores=[]), include_attributes=True)


def _key(f) -> tuple:
    fix = None if f.fix is None else (f.fix.applicability, f.fix.message, f.fix.edits)
    return (f.start.row, f.start.column, f.end.row, f.end.column, f.code, f.message, fix)


def in_pieces(source: bytes, with_edits: bool = False):
    return lint_in_pieces(
        source, RULES, None, SemanticHooks(), with_edits, piece_lines=1, min_lines=0, max_context=1.0, chunk_lines=1
    )


@pytest.mark.parametrize("source", [TRICKY, *(p.read_text() for p in FIXTURES[::7])], ids=["tricky", *(p.name for p in FIXTURES[::7])])
def test_chunks_are_the_whole_parse(source):
    starts = pieces.definition_rows(source.encode())
    chunked = [node for chunk in pieces.chunks(source, starts, 1) for node in chunk]
    assert _dump(chunked) == _dump(ast.parse(source).body)


def test_rows_are_those_python_counts():
    # str.splitlines would also cut at the form feed, the vertical tab and the line separator.
    source = (
        "import torch\n# a comment with \u2028 a line separator\n\x0c\n"
        "def a():\n    return 1\n\n\ndef b():\n    x = '\x0b'\n    return torch.zeros(1).cuda()\n"
    )
    chunked = [node for chunk in pieces.chunks(source, pieces.definition_rows(source.encode()), 1) for node in chunk]
    assert _dump(chunked) == _dump(ast.parse(source).body)
    result = lint_in_pieces(source.encode(), RULES, None, SemanticHooks(), piece_lines=1, min_lines=0)
    assert [(f.code, f.start.row) for f in result.findings] == [("TL201", 10)]


def test_definition_names_guess_the_top_level_definitions():
    source = (
        b"class Foo[T]:\n    def method(self): pass\nasync  def fetch(x): pass\n"
        b"def\thelper(): pass\nclass Net(Base): pass\ntext = '''\ndef in_string(): pass\n'''\n"
    )
    names, functions = pieces.definition_names(source)
    # (A line of a string is a guess too: the summary read once checks what it asked.)
    assert names == {"Foo", "fetch", "helper", "Net", "in_string"}
    assert functions == {"fetch", "helper", "in_string"}


def test_walk_is_ast_walk_without_contexts_and_operators():
    leaves = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    for path in FIXTURES[::2]:
        tree = ast.parse(path.read_bytes())
        expected = {id(n) for n in ast.walk(tree) if not isinstance(n, leaves)}
        walked = pieces.walk(tree)
        assert len(walked) == len(expected) and {id(n) for n in walked} == expected, path


def test_tricky_cuts_are_tried_and_grown():
    starts = pieces.definition_rows(TRICKY.encode())
    assert starts == [3, 5, 6, 10, 11, 17, 18, 20, 22, 24, 25]  # 3, 5, 6 and 22 inside strings
    lines = [[node.lineno for node in chunk] for chunk in pieces.chunks(TRICKY, starts, 1)]
    # A cut inside a string, or between a decorator and its function, grew its chunk.
    assert lines == [[1, 2], [11, 15], [17], [18], [20, 21], [25]]


def test_a_syntax_error_is_raised_by_the_last_chunk():
    source = "def f():\n    pass\n\n\ndef g(:\n    pass\n"
    with pytest.raises(SyntaxError):
        list(pieces.chunks(source, pieces.definition_rows(source.encode()), 1))


def _read_once(text: str, chunk_lines: int = 1) -> tuple[project.ModuleSummary, int]:
    """The summary of ``text`` with its chunks read once (``_Summarizer``'s ``names``), and
    how many times the chunks were read."""
    source = text.encode()
    starts = pieces.definition_rows(source)
    read = []

    def bodies():
        read.append(1)
        return pieces.chunks(text, starts, chunk_lines)

    return project._Summarizer(bodies, names=pieces.definition_names(source)).summary(), len(read)


@pytest.mark.parametrize("path", FIXTURES[::3], ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_the_chunked_summary_is_the_whole_summary(path):
    source = path.read_bytes()
    text = source.decode("utf-8")
    starts = pieces.definition_rows(source)
    whole = project.summarize(source)
    assert project._Summarizer(lambda: pieces.chunks(text, starts, 1)).summary() == whole
    assert _read_once(text)[0] == whole


# What a chunk asks of the file that only a later chunk answers: the summary read once reads
# again from the first chunk that got another answer than the whole file's.
LATER_ANSWERS = {
    "a later import of a name read before": (
        "def first():\n    return helpers.build()\n\n\ndef second():\n    import project.helpers as helpers\n    return 1\n",
        2,
    ),
    "a top-level import after a function's": (
        "def first():\n    import other as np\n    return np.load()\n\n\ndef second():\n    return np.zeros()\n\n\nimport numpy as np\n",
        2,
    ),
    "a name that a string guesses defined": (
        'def first():\n    return helper()\n\n\ntext = """\ndef helper():\n"""\n\n\ndef second():\n    return 2\n',
        2,
    ),
    "a function defined after its caller": (
        "def first():\n    return later(3)\n\n\ndef later(n):\n    return n\n",
        1,
    ),
    "a function defined after its caller, with a tab": (
        "def first():\n    return later(3)\n\n\ndef middle():\n    return 1\n\n\ndef\tlater(n):\n    return n\n",
        1,
    ),
    "a function defined after its caller, its name on the next line": (
        "def first():\n    return later(3)\n\n\ndef \\\nlater(n):\n    return n\n",
        2,
    ),
    "a class defined after a function that builds it": (
        "import torch\n\n\ndef first():\n    return Net()\n\n\nclass Net(torch.nn.Module):\n    pass\n",
        1,
    ),
}


@pytest.mark.parametrize("text, reads", LATER_ANSWERS.values(), ids=LATER_ANSWERS.keys())
def test_the_summary_read_once_is_the_whole_summary(text, reads):
    summary, read = _read_once(text)
    assert summary == project.summarize(text)
    assert read == reads


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(programs)
def test_the_summary_read_once_is_the_whole_summary_of_generated_programs(program):
    # (Scrambled programs call and import in any order.)
    assert _read_once(program.source)[0] == project.summarize(program.source)


def test_a_large_file_is_summarized_in_chunks(monkeypatch):
    source = generate(3_000).encode()
    whole = project.summarize(source)
    monkeypatch.setattr(pieces, "MIN_LINES", 100)
    read = []
    original = pieces.chunks
    monkeypatch.setattr(pieces, "chunks", lambda *a, **k: read.append(1) or original(*a, **k))
    assert project.summarize(source) == whole and len(read) == 1  # (read once: imports and summaries)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: str(p.relative_to(ROOT / "fixtures")))
def test_every_fixture_lints_alike_in_pieces(path):
    # (With the fixes' text edits, which JSON, SARIF and the editor show.)
    source = path.read_bytes()
    cut = in_pieces(source, with_edits=True)
    if cut is None:
        assert len(pieces.outline(iter([ast.parse(source).body])).definitions) < 2
        return
    whole = lint_module_source(source, RULES, with_edits=True)
    assert sorted(map(_key, cut.findings)) == sorted(map(_key, whole.findings))


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(programs)
def test_generated_programs_lint_alike_in_pieces(program):
    source = program.source.encode()
    cut = in_pieces(source)
    if cut is not None:
        assert sorted(map(_key, cut.findings)) == sorted(map(_key, lint_module_source(source, RULES).findings))


def test_the_generated_training_file_is_cut_with_a_small_context():
    source = generate(3_000).encode()
    found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks())
    cuts = pieces.plan(found, piece_lines=500)
    names = [d.name for d in found.definitions]
    assert len(cuts) >= 5
    # Each run of training functions holds the model class and the loader factory, not the
    # callers of the factory: it takes an int and builds a DataLoader (independent).
    assert all({names[i] for i in c.context} <= {"Net", "make_loader"} for c in cuts)
    assert names.index("make_loader") in found.independent
    result = lint_in_pieces(source, RULES, None, SemanticHooks(), piece_lines=500, min_lines=0)
    assert result is not None and result.findings
    assert sorted(map(_key, result.findings)) == sorted(map(_key, lint_module_source(source, RULES).findings))


def _context_share(found, cuts) -> float:
    """What the pieces' contexts add to the lines linted, each piece's module-level
    statements counted in, as a share of the file's (definitions' and module-level) lines."""
    sizes = [d.last - d.first + 1 for d in found.definitions]
    added = sum(sizes[i] for c in cuts for i in c.context) + len(cuts) * found.prelude_lines
    return added / (sum(sizes) + found.prelude_lines)


def test_pieces_are_small_where_their_contexts_add_little(monkeypatch):
    monkeypatch.setattr(pieces, "PIECE_LINES", 500)
    source = generate(6_000).encode()
    found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks())
    small = pieces.plan(found, piece_lines=500)
    # (The model class, the loader factory and the imports: 16 lines a piece.)
    assert _context_share(found, small) <= pieces.SMALL_CONTEXT
    assert pieces.sized_plan(found) == small and len(small) > len(pieces.plan(found, piece_lines=1_000))


def test_pieces_are_twice_as_long_where_their_contexts_would_add_much(monkeypatch):
    # Every function uses a 40-line class: each piece holds it again.
    monkeypatch.setattr(pieces, "PIECE_LINES", 50)
    helper = "class Big:\n" + "".join(f"    def m{i}(self):\n        return {i}\n" for i in range(20))
    functions = "".join(f"\n\ndef f{i}(x):\n    b = Big()\n    y = [b, x]\n    z = y + [x]\n    return z\n" for i in range(60))
    found = pieces.outline(iter([ast.parse(helper + functions).body]), SemanticHooks())
    small = pieces.plan(found, piece_lines=50)
    assert small is not None and _context_share(found, small) > pieces.SMALL_CONTEXT
    assert pieces.sized_plan(found) == pieces.plan(found, piece_lines=100) != small


def test_longer_pieces_are_tried_where_no_small_plan_is_made(monkeypatch):
    # Each function calls the next: every other function is context, fewer where a run is longer.
    monkeypatch.setattr(pieces, "PIECE_LINES", 50)
    source = "".join(f"def f{i}(model):\n    a = model\n    b = f{i + 1}(a)\n    c = [b]\n    return c\n\n\n" for i in range(60))
    found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks())
    assert pieces.plan(found, piece_lines=50, max_context=0.75) is None  # (a piece's context: 250 of 300 lines)
    longer = pieces.plan(found, piece_lines=100, max_context=0.75)
    assert longer is not None and pieces.sized_plan(found, max_context=0.75) == longer


def _functions(count: int) -> str:
    return "".join(f"def f{i}(x):\n    y = [x]\n    z = y + [x]\n    w = z + y\n    return w\n\n\n" for i in range(count))


def test_the_module_level_statements_count_as_every_pieces_context():
    # 60 functions of 5 lines, no context of their own; every piece holds the module-level
    # statements: 100 lines of them leave the pieces small, 400 make each most of the file.
    functions = _functions(60)
    for statements, cut in ((100, True), (400, False)):
        source = "".join(f"X{i} = {i}\n" for i in range(statements)) + "\n\n" + functions
        found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks())
        assert found.prelude_lines == statements
        assert (pieces.plan(found, piece_lines=100) is not None) is cut
    # Not cut, the file is linted whole (as torch's common_methods_invocations.py, whose
    # module-level statements are 17,800 of its 27,800 rows).
    assert lint_in_pieces(source.encode(), RULES, None, SemanticHooks(), piece_lines=100, min_lines=0) is None


def test_pieces_are_twice_as_long_where_the_module_level_statements_would_add_much(monkeypatch):
    # No piece has a context of its own; the 12 lines of module-level statements are in each.
    monkeypatch.setattr(pieces, "PIECE_LINES", 50)
    source = "".join(f"X{i} = {i}\n" for i in range(12)) + "\n\n" + _functions(60)
    found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks())
    small = pieces.plan(found, piece_lines=50)
    assert small is not None and all(not c.context for c in small)
    assert _context_share(found, small) > pieces.SMALL_CONTEXT
    assert pieces.sized_plan(found) == pieces.plan(found, piece_lines=100) != small


def test_a_caller_is_context_for_the_function_it_calls():
    # `model.eval()` in `main` is what keeps `evaluate` silent: its piece must hold `main`.
    source = (
        "import torch\n\n\n"
        "def evaluate(model, loader):\n    with torch.no_grad():\n        return [model(x) for x in loader]\n\n\n"
        "def main(model, loader):\n    model.eval()\n    return evaluate(model, loader)\n"
    )
    found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks())
    cuts = pieces.plan(found, piece_lines=1, max_context=1.0)
    assert cuts[0].own == [0] and cuts[0].context == {1}
    assert found.independent == set()


def test_a_file_wide_fact_is_in_every_piece():
    # torch.cuda.set_device in `setup` makes the whole file CUDA-only: every piece holds it.
    path = ROOT / "fixtures" / "rules" / "TL201" / "clean_set_device_local_rank.py"
    source = path.read_bytes()
    found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks())
    setup = [d.name for d in found.definitions].index("setup")
    assert setup in found.shared
    assert in_pieces(source).findings == [] == lint_module_source(source, RULES).findings


def test_rows_map_back_to_the_file():
    source = b"import torch\n\n\ndef a():\n    return 1\n\n\ndef b():\n    return torch.zeros(1).cuda()\n"
    result = lint_in_pieces(source, RULES, None, SemanticHooks(), piece_lines=1, min_lines=0)
    assert [(f.code, f.start.row) for f in result.findings] == [("TL201", 9)]


def test_what_is_not_cut_is_linted_whole():
    small = generate(300).encode()
    assert lint_in_pieces(small, RULES, None, SemanticHooks()) is None  # under MIN_LINES
    broken = b"def f():\n    pass\n\n\ndef g(:\n    pass\n"
    assert lint_in_pieces(broken, RULES, None, SemanticHooks(), min_lines=0) is None
    assert [f.code for f in lint_module_source(broken, RULES).findings] == [INVALID_FILE]
    lone_cr = b"def f():\r    pass\r\r\rdef g():\r    pass\r"
    assert lint_in_pieces(lone_cr, RULES, None, SemanticHooks(), min_lines=0) is None


def test_a_file_noqa_anywhere_holds_for_every_piece():
    source = generate(600).encode().replace(b"def train_3(", b"# torchlint: noqa\ndef train_3(")
    assert lint_in_pieces(source, RULES, None, SemanticHooks(), piece_lines=100, min_lines=0).findings == []


def test_a_piece_leaves_out_the_blank_rows_after_a_definition_left_out():
    source = 'X = """a\n\nb"""\ndef f():\n    pass\n\n  \n\ndef g():\n\n    return 1\n\n\nY = 2\n'
    found = pieces.outline(iter([ast.parse(source).body]))
    rows = source_rows(source.encode())
    text, kept = pieces.piece_source(rows, found.definitions, {1})  # g's piece: f left out
    assert text.decode() == 'X = """a\n\nb"""\ndef g():\n\n    return 1\n\n\nY = 2\n'
    assert kept == [1, 2, 3, 9, 10, 11, 12, 13, 14]
    text, kept = pieces.piece_source(rows, found.definitions, {0})  # f's: g and the blank rows after it left out
    assert text.decode() == 'X = """a\n\nb"""\ndef f():\n    pass\n\n  \n\nY = 2\n'


def test_an_end_at_the_start_of_a_row_stays_after_the_row_before():
    from torchlint.engine import _moved
    from torchlint.rule import Location as L

    rows = [1, 2, 3, 10, 11]  # the piece's rows in the file: rows 4 to 9 left out
    assert _moved(L(2, 5), L(4, 1), rows) == {"start": L(2, 5), "end": L(4, 1)}  # an end: after row 3
    assert _moved(L(4, 1), L(5, 1), rows) == {"start": L(10, 1), "end": L(11, 1)}
    assert _moved(L(3, 1), L(4, 7), rows) == {"start": L(3, 1), "end": L(10, 7)}
    # An empty range at the start of a row (a decorator inserted before a `def`): that row.
    assert _moved(L(4, 1), L(4, 1), rows) == {"start": L(10, 1), "end": L(10, 1)}


# --- the command line: a large file's pieces, one after the other or side by side


def _check(tmp_path, *args):
    from click.testing import CliRunner

    from torchlint.cli import main

    result = CliRunner().invoke(main, ["check", *args, "--output-format", "json", str(tmp_path / "big.py")], catch_exceptions=False)
    return result.exit_code, json.loads(result.output)


@pytest.fixture
def big(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    (tmp_path / "big.py").write_text(generate(3_000))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_command_line_lints_a_large_file_alike_in_pieces(big, monkeypatch):
    whole = _check(big, "--no-cache", "-j", "1")
    monkeypatch.setattr(pieces, "MIN_LINES", 1_000)
    monkeypatch.setattr(pieces, "PIECE_LINES", 500)
    planned = []
    original = engine.plan_pieces
    monkeypatch.setattr(runner, "plan_pieces", lambda *a, **k: planned.append(1) or original(*a, **k))
    taken = []  # (whether the outline came read by the process of its own)
    take = runner._Outlines.take
    monkeypatch.setattr(runner._Outlines, "take", lambda self, *a: _taken(taken, take(self, *a)))
    one_by_one = _check(big, "--no-cache", "-j", "1")
    side_by_side = _check(big, "--no-cache", "-j", "2")
    assert whole[0] == 1 and whole == one_by_one == side_by_side
    assert planned == [1] and taken == [True]  # (-j 1 plans inside lint_in_pieces)
    # With the cache: the pieces' result is stored, and the next run reads it (no outline read).
    assert _check(big, "-j", "2") == whole and planned == [1, 1] and taken == [True, True]
    assert _check(big, "-j", "2") == whole and planned == [1, 1] and taken == [True, True]


def _taken(taken: list, read):
    taken.append(read is not None)
    return read


def test_an_outline_read_apart_is_that_of_the_file_as_it_is_now(big, monkeypatch):
    from torchlint.config import load_settings

    monkeypatch.setattr(pieces, "MIN_LINES", 1_000)
    path = big / "big.py"
    source = path.read_bytes()
    settings = load_settings(big / "pyproject.toml")
    reader = runner._Outlines([path], settings, runner.RunOptions(use_cache=False))
    try:
        found, hooks = reader.take(path, source)
        assert found == engine.read_outline(source, SemanticHooks()) and hooks.project is None
        assert "torch" in hooks.modules and reader.take(path, source) is None  # (taken once)
    finally:
        reader.close()
    reader = runner._Outlines([path], settings, runner.RunOptions(use_cache=False))
    try:
        assert reader.take(path, source + b"x = 1\n") is None  # the file changed since it was read
    finally:
        reader.close()


def test_a_call_of_a_project_function_that_needs_cuda_is_in_every_piece(tmp_path, monkeypatch):
    # `prepare` calls a helper of another file that sets the CUDA device on every path: the
    # whole file is CUDA-only by design, and so must every piece be (no TL201 anywhere).
    (tmp_path / "pyproject.toml").write_text("[tool.torchlint]\n")
    (tmp_path / "utils.py").write_text("import torch\n\n\ndef setup(args):\n    torch.cuda.set_device(args.gpu)\n")
    source = generate(3_000).replace("import torch\n", "import torch\nimport utils\n", 1)
    source = source.replace("\ndef train_5(", "\ndef prepare(args):\n    utils.setup(args)\n\n\ndef train_5(", 1)
    (tmp_path / "big.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    whole = _check(tmp_path, "--no-cache", "-j", "1")
    assert not [f for f in whole[1] if f["code"] == "TL201"]
    monkeypatch.setattr(pieces, "MIN_LINES", 1_000)
    monkeypatch.setattr(pieces, "PIECE_LINES", 500)
    assert _check(tmp_path, "--no-cache", "-j", "1") == whole == _check(tmp_path, "--no-cache", "-j", "2")
    from torchlint.project import build_index

    view = build_index([tmp_path / "big.py"], tmp_path, lazy=True).view(tmp_path / "big.py")
    found = pieces.outline(iter([ast.parse(source).body]), SemanticHooks(view))
    assert [d.name for d in found.definitions].index("prepare") in found.shared
    assert "prepare" not in {found.definitions[i].name for i in pieces.outline(iter([ast.parse(source).body]), SemanticHooks()).shared}


class _Recorder:
    """A progress display that keeps what it is told (``runner.check_files``' ``progress``)."""

    def __init__(self) -> None:
        self.files: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.files.append((done, total))


def _progress_of(big, jobs: int, fix_mode) -> _Recorder:
    from torchlint.config import resolve_settings

    recorder = _Recorder()
    told = []
    recorder.within = lambda path, done, total, unit: told.append((path, done, total, unit))
    settings = resolve_settings([big / "big.py"], None, [], [], [])
    options = runner.RunOptions(fix_mode=fix_mode, use_cache=False)
    [report] = runner.check_files([big / "big.py"], settings, options, jobs, recorder)
    assert report.findings
    recorder.told = told
    return recorder


@pytest.mark.parametrize("jobs", [1, 2])
def test_one_large_files_progress_counts_its_pieces(big, monkeypatch, jobs):
    monkeypatch.setattr(pieces, "MIN_LINES", 1_000)
    monkeypatch.setattr(pieces, "PIECE_LINES", 500)
    recorder = _progress_of(big, jobs, engine.FixMode.NONE)
    told = recorder.told
    assert recorder.files[0] == (0, 1) and recorder.files[-1] == (1, 1)
    assert {(path, unit) for path, _, _, unit in told} == {("big.py", "pieces")}
    [total] = {total for _, _, total, _ in told}
    done = [d for _, d, _, _ in told]
    assert total >= 4 and done == sorted(done) and done[-1] == total and len(set(done)) > 2


def test_one_large_files_progress_with_fix_counts_the_statements_of_each_pass(big):
    recorder = _progress_of(big, 1, engine.FixMode.SAFE)
    statements = len(ast.parse((big / "big.py").read_bytes()).body)
    passes = [unit for _, _, _, unit in recorder.told]
    assert passes[0] == "statements (fix pass 1)" and "statements (fix pass 2)" in passes
    first = [(done, total) for _, done, total, unit in recorder.told if unit == "statements (fix pass 1)"]
    assert {total for _, total in first} == {statements}
    assert [done for done, _ in first] == sorted(done for done, _ in first) and first[-1][0] == statements - 1


def test_a_small_file_tells_no_progress_but_its_files(tmp_path):
    from torchlint.config import resolve_settings

    (tmp_path / "small.py").write_text(generate(300))
    told = []
    recorder = _Recorder()
    recorder.within = lambda *args: told.append(args)
    settings = resolve_settings([tmp_path / "small.py"], None, [], [], [])
    runner.check_files([tmp_path / "small.py"], settings, runner.RunOptions(use_cache=False), 1, recorder)
    assert told == [] and recorder.files == [(0, 1), (1, 1)]
