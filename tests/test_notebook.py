"""Jupyter notebooks: linted and fixed cell by cell as one program (SPEC sections 3 and 4)."""

from __future__ import annotations

import json

import libcst as cst
import libcst.matchers as m
import pytest
from click.testing import CliRunner

from conftest import FIXTURES
from torchlint.cli import main
from torchlint.engine import FixMode
from torchlint.notebook import lint_notebook
from torchlint.rule import Edit, Fix, Location, Rule
from torchlint.rules import rule_by_code

NOTEBOOKS = FIXTURES / "notebooks"
TL501 = [rule_by_code("TL501")]
MODEL = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)"
SAVE = 'torch.save(model, "m.pt")'


def code(source: str, **extra) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source, **extra}


def markdown(source: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source}


def notebook(*cells: dict, metadata: dict | None = None) -> dict:
    return {"cells": list(cells), "metadata": metadata or {}, "nbformat": 4, "nbformat_minor": 5}


def jupyter(nb: dict) -> bytes:
    """Serialized as Jupyter (nbformat) writes notebooks."""
    cells = [{**c, "source": c["source"].splitlines(keepends=True)} for c in nb["cells"]]
    return (json.dumps({**nb, "cells": cells}, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()


def lint(nb: dict | bytes, rules=TL501, fix: bool = False, with_edits: bool = False):
    data = nb if isinstance(nb, bytes) else jupyter(nb)
    return lint_notebook(data, rules, FixMode.UNSAFE if fix else FixMode.NONE, with_edits)


def where(result) -> list[tuple[str, int, int, int]]:
    return [(f.code, f.cell, f.start.row, f.start.column) for f in result.findings]


def sources(data: bytes) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(data)["cells"]]


# --- one program -----------------------------------------------------------------------


def test_fixture_finding_carries_cell_and_row_within_the_cell():
    result = lint((NOTEBOOKS / "training.ipynb").read_bytes())
    # Cell 5 (markdown cells count) starts with `%%time`; its 8th row saves the model that
    # cell 3 built, and the magics and shell escapes of cells 2 and 3 are not parsed.
    assert where(result) == [("TL501", 5, 8, 12)]
    assert (result.findings[0].end.row, result.findings[0].end.column) == (8, 17)


def test_a_model_built_in_another_cell_is_known():
    assert where(lint(notebook(code(MODEL), markdown("Save it"), code(SAVE)))) == [("TL501", 3, 1, 12)]
    # Without the cell that builds it, `model` is of unknown type, and unknown stays silent.
    assert where(lint(notebook(code("import torch"), code(SAVE)))) == []


def test_noqa_in_a_cell_suppresses():
    assert where(lint(notebook(code(MODEL), code(SAVE + "  # noqa: TL501")))) == []


def test_syntax_error_is_reported_in_its_cell():
    result = lint(notebook(code(MODEL), code("x = 1\nfor batch in loader\n    pass")))
    assert [(f.code, f.cell, f.start.row) for f in result.findings] == [("TL000", 2, 2)]
    assert "SyntaxError" in result.findings[0].message


def test_notebook_of_another_language_is_not_linted():
    r_kernel = {"kernelspec": {"language": "R", "name": "ir"}, "language_info": {"name": "R"}}
    assert where(lint(notebook(code("x <- c(1, 2)"), metadata=r_kernel))) == []


# --- IPython syntax ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "%matplotlib inline",
        "!pip install tqdm",
        "files = !ls",
        "timing = %timeit -o sum(range(10))",
        "nn.Linear?",
        "??torch.save",
        "%load_ext autoreload",
        # automagic: a line magic without its `%`, where the line is no Python
        "pip install tqdm",
        "matplotlib inline",
        "cd ../data",
    ],
)
def test_ipython_lines_are_masked_not_parsed(line):
    result = lint(notebook(code(MODEL + "\n" + line), code(f"for i in range(2):\n    {line}\n{SAVE}")))
    assert where(result) == [("TL501", 2, 3, 12)]


@pytest.mark.parametrize("line", ["time = 3", "pip(3)", "ls = [1]", "env.reset()", "cd", 'system = """You are\n  a grader."""'])
def test_magic_names_used_as_python_are_python(line):
    # A name that automagic would run stays Python where the line is Python.
    result = lint(notebook(code(MODEL), code(f"{line}\nmodel.cuda()")))
    assert ("TL000" not in {f[0] for f in where(result)})


def test_percent_and_bang_inside_brackets_are_python():
    # `% 3` continues the expression in brackets and `!=` the condition: no masking there.
    cell = f"y = (10\n     % 3)\nif (y\n    != 1):\n    {SAVE}"
    assert where(lint(notebook(code(MODEL), code(cell)))) == [("TL501", 2, 5, 16)]


def test_python_cell_magic_is_linted_and_other_cell_magics_are_not():
    nb = notebook(code(MODEL), code(f"%%time\n{SAVE}"), code("%%bash\nfor f in *.pt; do echo $f; done"))
    assert where(lint(nb)) == [("TL501", 2, 2, 12)]


def test_fix_keeps_masked_lines_verbatim():
    cell = "%%capture out\n!echo saving\nfor _ in range(1):\n    %time {}\n{}\nmodel?"
    result = lint(notebook(code(MODEL), code(cell.format(SAVE, SAVE))), fix=True)
    # `%time torch.save(...)` is masked, so only the Python line is fixed.
    assert sources(result.fixed_source)[1] == cell.format(SAVE, 'torch.save(model.state_dict(), "m.pt")')


# --- fixing ------------------------------------------------------------------------------


def test_fix_rewrites_only_the_changed_cell_and_keeps_the_rest_byte_for_byte():
    result = lint((NOTEBOOKS / "training.ipynb").read_bytes(), fix=True)
    assert result.fixed_count == 1
    assert result.fixed_source == (NOTEBOOKS / "training.fixed.ipynb").read_bytes()
    again = lint(result.fixed_source, fix=True)
    assert where(again) == [] and again.fixed_source == result.fixed_source and again.fixed_count == 0


def test_nothing_to_fix_returns_the_input_bytes():
    data = (NOTEBOOKS / "training.fixed.ipynb").read_bytes()
    result = lint(data, fix=True)
    assert result.fixed_source is data and result.fixed_count == 0


LAYOUTS = {
    "jupyter": dict(indent=1, ensure_ascii=False, tail="\n"),
    "two spaces, ascii escapes, no final newline": dict(indent=2, ensure_ascii=True, tail=""),
    "crlf": dict(indent=1, ensure_ascii=False, tail="\r\n", crlf=True),
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=list(LAYOUTS))
def test_fix_keeps_the_json_layout(layout):
    def write(nb: dict) -> bytes:
        text = json.dumps(nb, indent=layout["indent"], ensure_ascii=layout["ensure_ascii"])
        return ((text.replace("\n", "\r\n") if layout.get("crlf") else text) + layout["tail"]).encode()

    # Keys out of sorted order, a source as one string and one as a list, outputs and ids.
    output = {"output_type": "stream", "name": "stdout", "text": ["Größe: 2 × 2\n"]}
    before = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {"title": "Modèle"},
        "cells": [
            {"source": MODEL.splitlines(keepends=True), "cell_type": "code", "id": "c1", "metadata": {},
             "outputs": [output], "execution_count": 1},
            {"id": "c2", "cell_type": "code", "metadata": {"tags": ["ü"]}, "outputs": [], "execution_count": 2,
             "source": SAVE + "\n"},
        ],
    }
    after = json.loads(json.dumps(before))
    after["cells"][1]["source"] = 'torch.save(model.state_dict(), "m.pt")\n'
    result = lint(write(before), fix=True)
    assert result.fixed_source == write(after)


def test_source_lists_are_written_back_as_lines():
    result = lint(notebook(code(MODEL), code(f"x = 1\n{SAVE}\ny = 2")), fix=True)
    cell = json.loads(result.fixed_source)["cells"][1]
    assert cell["source"] == ["x = 1\n", 'torch.save(model.state_dict(), "m.pt")\n', "y = 2"]


class FlushAfterPrint(Rule):
    """Inserts `flush()` after a module-level `print(...)` (a test rule)."""

    code, name, message = "TL998", "flush-after-print", "print without flush"

    def visit_Module(self, node: cst.Module) -> None:
        for statement, following in zip(node.body, [*node.body[1:], None]):
            if _calls(statement, "print") and not _calls(following, "flush"):
                flushed = cst.FlattenSentinel([statement, cst.parse_statement("flush()\n")])
                self.report(statement, fix=Fix("flush", {statement: flushed}))


class SeedBeforeTrain(Rule):
    """Inserts `seed()` before a module-level `train()` (a test rule)."""

    code, name, message = "TL997", "seed-before-train", "train without seed"

    def visit_Module(self, node: cst.Module) -> None:
        for previous, statement in zip([None, *node.body[:-1]], node.body):
            if _calls(statement, "train") and not _calls(previous, "seed"):
                seeded = cst.FlattenSentinel([cst.parse_statement("seed()\n"), statement])
                self.report(statement, fix=Fix("seed", {statement: seeded}))


def _calls(statement, name: str) -> bool:
    return statement is not None and m.matches(statement, m.SimpleStatementLine([m.Expr(m.Call(m.Name(name)))]))


def test_inserted_lines_land_in_the_cell_of_the_statement_they_belong_to():
    # `print(x);` ends cell 1 without displaying anything (the semicolon), so a statement may
    # be added after it.
    nb = notebook(code("x = 1\nprint(x);"), markdown("then"), code("train()\n"), code("print(2)\ntrain()"))
    result = lint(nb, rules=[FlushAfterPrint, SeedBeforeTrain], fix=True)
    assert result.fixed_count == 4 and where(result) == []
    assert sources(result.fixed_source) == ["x = 1\nprint(x);\nflush()", "then", "seed()\ntrain()\n", "print(2)\nflush()\nseed()\ntrain()"]


def test_findings_and_edits_are_relative_to_the_cell():
    result = lint(notebook(code("x = 1\nprint(x);"), code("y = 2\ntrain()")), rules=[FlushAfterPrint, SeedBeforeTrain], with_edits=True)
    found = {f.code: f for f in result.findings}
    assert (found["TL998"].cell, found["TL998"].start.row) == (1, 2)
    assert (found["TL997"].cell, found["TL997"].start.row) == (2, 2)
    [seed] = found["TL997"].fix.edits
    assert (seed.content, seed.start.row, seed.start.column, seed.end.row, seed.end.column) == ("seed()\n", 2, 1, 2, 1)
    [flush] = found["TL998"].fix.edits
    # Inserted after the last line of cell 1: the end of that cell, not the start of cell 2.
    assert (flush.content, flush.start.row, flush.start.column) == ("flush()\n", 3, 1)


class RemovePass(Rule):
    """Removes every `pass` statement (a test rule whose fixes reach the notebook's own lines)."""

    code, name, message = "TL996", "remove-pass", "useless pass"

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if m.matches(node, m.SimpleStatementLine([m.Pass()])):
            self.report(node, fix=Fix("remove", {node: cst.RemoveFromParent()}))


def test_fixes_that_would_change_the_notebooks_own_lines_are_dropped_one_by_one():
    nb = notebook(code("x = 1\npass"), code("%time y = 2\ny = 3"))
    # Only the user's own `pass` is reported, not the lines torchlint put in between (the cell
    # boundary, the line that masks `%time`), and only its fix is applied.
    assert where(lint(nb, rules=[RemovePass])) == [("TL996", 1, 2, 1)]
    result = lint(nb, rules=[RemovePass], fix=True)
    assert result.fixed_count == 1 and sources(result.fixed_source) == ["x = 1", "%time y = 2\ny = 3"]


class EmptyLoops(Rule):
    """Removes every `pass` from a loop's body (a test rule whose fix rewrites masked lines)."""

    code, name, message = "TL995", "empty-loops", "loop with pass"

    def visit_For(self, node: cst.For) -> None:
        body = [s for s in node.body.body if not m.matches(s, m.SimpleStatementLine([m.Pass()]))]
        if len(body) < len(node.body.body):
            self.report(node, fix=Fix("remove", {node: node.with_deep_changes(node.body, body=body or [cst.parse_statement("...")])}))


def test_a_fix_that_still_rewrites_a_masked_line_leaves_the_notebook_unfixed():
    data = jupyter(notebook(code("for i in range(2):\n    %time f(i)\n    pass")))
    result = lint(data, rules=[EmptyLoops], fix=True)
    assert result.fixed_source == data and result.fixed_count == 0
    assert where(result) == [("TL995", 1, 1, 1)]


# --- invalid notebooks -------------------------------------------------------------------


@pytest.mark.parametrize(
    "data, message, row, column",
    [
        (b'{"cells": [', "invalid notebook: not JSON: Expecting value", 1, 12),
        (b"[1, 2]", 'invalid notebook: no "cells" list (nbformat 4 is required)', 1, 1),
        (b'{"worksheets": []}', 'invalid notebook: no "cells" list (nbformat 4 is required)', 1, 1),
        (b'{"cells": [{"cell_type": "code", "source": 3}]}', "invalid notebook: cell 1 has no text source", 1, 1),
        (b'{"cells": "\xff"}', "invalid notebook: not UTF-8", 1, 1),
        (b"", "invalid notebook: not JSON: Expecting value", 1, 1),
        (b"[" * 100_000, "invalid notebook: nested too deeply to read", 1, 1),
    ],
)
def test_invalid_notebook_is_tl000(data, message, row, column):
    [finding] = lint(data).findings
    assert (finding.code, finding.cell, finding.start.row, finding.start.column) == ("TL000", None, row, column)
    assert finding.message.startswith(message)


def test_empty_and_markdown_only_notebooks_are_clean():
    assert where(lint(notebook())) == []
    assert where(lint(notebook(markdown("# notes"), code("")))) == []


# --- through the command line ------------------------------------------------------------


def test_cli_walks_notebooks_and_fixes_them(tmp_path):
    folder = tmp_path / "nbs"
    folder.mkdir()
    target = folder / "training.ipynb"
    target.write_bytes((NOTEBOOKS / "training.ipynb").read_bytes())
    runner = CliRunner()
    text = runner.invoke(main, ["check", "--select", "TL501", "--no-cache", "nbs"], catch_exceptions=False)
    assert text.exit_code == 1
    assert "nbs/training.ipynb:cell 5:8:12: TL501 [*]" in text.output
    as_json = runner.invoke(main, ["check", "--select", "TL501", "--output-format", "json", "nbs"])
    [entry] = json.loads(as_json.output)
    assert (entry["cell"], entry["location"], entry["fix"]["edits"][0]["location"]) == (5, {"row": 8, "column": 12}, {"row": 8, "column": 17})
    fixed = runner.invoke(main, ["--fix", "--select", "TL501", "nbs"], catch_exceptions=False)
    assert fixed.exit_code == 0, fixed.output
    assert target.read_bytes() == (NOTEBOOKS / "training.fixed.ipynb").read_bytes()


def test_cli_reports_an_invalid_notebook_without_a_traceback(tmp_path):
    (tmp_path / "broken.ipynb").write_text('{"cells": [')
    result = CliRunner().invoke(main, ["check", "--no-cache", "broken.ipynb"], catch_exceptions=False)
    assert result.exit_code == 1
    assert "broken.ipynb:1:12: TL000 invalid notebook: not JSON: Expecting value" in result.output


# --- as IPython reads a cell ---------------------------------------------------------------


def test_a_cell_indented_as_a_whole_is_linted_and_fixed_with_its_indentation():
    # IPython removes the indentation that all lines of a cell share before running it.
    cell = "    " + MODEL.replace("\n", "\n    ") + "\n\n    " + SAVE + "\n"
    result = lint(notebook(code(cell)), with_edits=True)
    assert where(result) == [("TL501", 1, 5, 16)]
    [edit] = result.findings[0].fix.edits
    assert (edit.content, edit.start, edit.end) == (".state_dict()", Location(5, 21), Location(5, 21))
    fixed = lint(notebook(code(cell)), fix=True)
    assert sources(fixed.fixed_source) == [cell.replace(SAVE, 'torch.save(model.state_dict(), "m.pt")')]


def test_statements_a_fix_inserts_into_an_indented_cell_get_its_indentation():
    nb = notebook(code("  x = 1\n  print(x);\n"), code("\ty = 2\n\ttrain()"))
    result = lint(nb, rules=[FlushAfterPrint, SeedBeforeTrain], with_edits=True)
    edits = {f.code: f.fix.edits for f in result.findings}
    assert edits["TL998"] == (Edit("  flush()\n", Location(3, 1), Location(3, 1)),)
    assert edits["TL997"] == (Edit("seed()\n\t", Location(2, 2), Location(2, 2)),)
    fixed = lint(nb, rules=[FlushAfterPrint, SeedBeforeTrain], fix=True)
    assert sources(fixed.fixed_source) == ["  x = 1\n  print(x);\n  flush()\n", "\ty = 2\n\tseed()\n\ttrain()"]


@pytest.mark.parametrize(
    "line",
    ["torch.*Tensor?", "?torch.*Tensor", "*int*??", "nn.Linear?", "model??", "?model", "%timeit?", "x = model?", "model.layers[0]?"],
)
def test_help_lines_with_or_without_wildcards_are_masked(line):
    result = lint(notebook(code(MODEL + "\n" + line), code(f"{line}\n{SAVE}")))
    assert where(result) == [("TL501", 2, 2, 12)]


def test_question_marks_that_are_not_help_are_left_to_python():
    # In a comment or a string `?` is Python; after a call it is IPython's syntax error too.
    nb = notebook(code(MODEL + '\nq = "why?"  # really?'), code(SAVE), code("print(q)?"))
    assert [(f.code, f.cell) for f in lint(nb).findings] == [("TL501", 2), ("TL000", 3)]


def test_a_shell_escape_continued_by_backslashes_is_masked_whole():
    cell = "!python prepare.py --data_dir data \\\n                   --split train\n" + SAVE
    result = lint(notebook(code(MODEL), code(cell)), fix=True)
    assert where(result) == []
    assert sources(result.fixed_source)[1] == cell.replace(SAVE, 'torch.save(model.state_dict(), "m.pt")')


def test_a_cell_magic_after_blank_lines_still_names_the_cell_language():
    nb = notebook(code(MODEL), code("\n%%bash\nfor f in *.pt; do echo $f; done"), code(f"\n\n%%time\n{SAVE}"))
    assert where(lint(nb)) == [("TL501", 3, 4, 12)]


def test_writefile_cell_is_linted_as_the_module_it_writes():
    written = f"%%writefile train.py\n{MODEL}\n{SAVE}\n"
    result = lint(notebook(code(written), code("!python train.py")), fix=True)
    assert sources(result.fixed_source)[0] == written.replace(SAVE, 'torch.save(model.state_dict(), "m.pt")')
    # The module is not the kernel's: its model is not the one a later cell saves.
    unfixed = lint(notebook(code(written), code(SAVE)))
    assert where(unfixed) == [("TL501", 1, 5, 12)]


@pytest.mark.parametrize("magic", ["%%writefile -a train.py", "%%writefile notes.md", "%%file config.yaml", "%%bash"])
def test_other_file_and_shell_cells_are_not_linted(magic):
    assert where(lint(notebook(code(f"{magic}\n{MODEL}\n{SAVE}\n!ls -l")))) == []


def test_an_ipython_line_in_a_written_python_file_is_invalid_there():
    result = lint(notebook(code(f"%%writefile run.py\n!ls\n{MODEL}")))
    assert [(f.code, f.cell, f.start.row) for f in result.findings] == [("TL000", 1, 2)]


def test_a_cell_that_is_not_python_is_tl000_and_the_others_are_still_linted():
    nb = notebook(code(MODEL), code("import torch\n\nx = <YOUR CODE>"), markdown("Save"), code(SAVE), code("  y = (\n  "))
    result = lint(nb, fix=True)
    assert [(f.code, f.cell, f.start.row, f.start.column) for f in result.findings] == [
        ("TL000", 2, 3, 5),
        ("TL000", 5, 1, 7),
    ]
    assert "SyntaxError" in result.findings[0].message
    assert sources(result.fixed_source)[1:] == ["import torch\n\nx = <YOUR CODE>", "Save", 'torch.save(model.state_dict(), "m.pt")', "  y = (\n  "]


LOAD = """import torch
from torchvision.models import resnet18
model = resnet18()
model.load_state_dict(torch.load("m.pt", map_location="cpu", weights_only=True))
model.eval()
image = preprocess(Image.open("cat.png"))"""
TL402 = [rule_by_code("TL402")]


@pytest.mark.parametrize("last", ["model(image)", "model(image).argmax(1)", "model(image)  # the logits"])
def test_a_fix_never_hides_what_a_cell_displays(last):
    # Wrapping the last expression in `with torch.no_grad():` would stop Jupyter displaying it.
    nb = notebook(code(LOAD), code(last))
    result = lint(nb, rules=TL402, fix=True, with_edits=True)
    assert where(result) == [("TL402", 2, 1, 1)] and result.findings[0].fix is None
    assert result.findings[0].help.endswith(" (no fix: in a notebook it would change what the cell displays)")
    assert result.fixed_source == jupyter(nb)


@pytest.mark.parametrize(
    "last, fixed",
    [
        ("logits = model(image)", "with torch.no_grad():\n    logits = model(image)"),
        ("print(model(image));", "with torch.no_grad():\n    print(model(image));"),
        ("logits = model(image)\nprint(1)", "with torch.no_grad():\n    logits = model(image)\nprint(1)"),
    ],
    ids=["assignment", "semicolon", "not last"],
)
def test_a_fix_may_wrap_what_a_cell_does_not_display(last, fixed):
    result = lint(notebook(code(LOAD), code(last)), rules=TL402, fix=True)
    assert sources(result.fixed_source)[1] == fixed


@pytest.mark.parametrize("last", ["model(image);", "model(image)\nprint(1)"])
def test_a_forward_pass_whose_value_no_cell_shows_is_not_known_inference(last):
    # Its output is thrown away: it ran for its hooks or its side effects, not to be read.
    assert where(lint(notebook(code(LOAD), code(last)), rules=TL402)) == []


def test_a_discarded_move_that_a_cell_displays_is_not_turned_into_an_assignment():
    nb = notebook(code("import torch\nx = torch.ones(2)"), code("x.to('cpu')"), code("x.to('cpu')\ny = 1"))
    result = lint(nb, rules=[rule_by_code("TL203")], fix=True)
    assert [(f.code, f.cell, f.fix) for f in result.findings] == [("TL203", 2, None)]
    assert sources(result.fixed_source)[1:] == ["x.to('cpu')", "x = x.to('cpu')\ny = 1"]


def test_a_fix_that_reaches_into_another_cell_is_dropped():
    # The device definition would go after the imports in cell 1, the call is in cell 2: the
    # fix cannot be shown as edits of the finding's cell, so `--fix` does not apply it either.
    nb = notebook(code("import torch"), code("model = torch.nn.Linear(2, 2)\nmodel = model.cuda()"))
    result = lint(nb, rules=[rule_by_code("TL201")], fix=True)
    assert where(result) == [("TL201", 2, 2, 15)] and result.findings[0].fix is None
    assert result.findings[0].help == "Use `.to(device)` (no fix: in a notebook it would change another cell)"
    assert result.fixed_source == jupyter(nb)


def _names_undefined_top_to_bottom(data: bytes) -> set[str]:
    """pyflakes' undefined names of the notebook's code cells joined in order (as its kernel
    runs them top to bottom: a name used before the cell that binds it is undefined)."""
    from pyflakes import api, messages
    from pyflakes.reporter import Reporter

    class Collect(Reporter):
        def __init__(self) -> None:
            self.found: set[str] = set()

        def unexpectedError(self, filename, message) -> None:
            raise AssertionError(message)

        def syntaxError(self, filename, message, lineno, offset, text) -> None:
            raise AssertionError(message)

        def flake(self, message) -> None:
            if isinstance(message, (messages.UndefinedName, messages.UndefinedLocal)):
                self.found.add(message.message_args[0])

    reporter = Collect()
    code_cells = [c for c in json.loads(data)["cells"] if c["cell_type"] == "code"]
    api.check("\n\n".join("".join(c["source"]) for c in code_cells) + "\n", "<notebook>", reporter)
    return reporter.found


def test_a_fix_in_a_cell_before_the_torch_import_imports_torch_itself():
    """The first `.cuda()` runs two cells before `import torch`: its fix may use only names of
    the cells before it, so it imports torch in its own cell; the cells after the import get
    the device defined after it. Run top to bottom, the fixed notebook names nothing undefined."""
    data = (NOTEBOOKS / "torch_imported_late.ipynb").read_bytes()
    assert _names_undefined_top_to_bottom(data) == set()
    result = lint(data, [rule_by_code("TL201")], fix=True)
    assert [(f.cell, f.start.row) for f in lint(data, [rule_by_code("TL201")]).findings] == [(3, 1), (4, 3), (5, 1)]
    assert result.fixed_source == (NOTEBOOKS / "torch_imported_late.fixed.ipynb").read_bytes()
    assert _names_undefined_top_to_bottom(result.fixed_source) == set()
    safe_only = lint_notebook(data, [rule_by_code("TL201")], FixMode.SAFE, False).fixed_source
    assert safe_only == result.fixed_source  # every one of those fixes is safe
    again = lint(result.fixed_source, [rule_by_code("TL201")], fix=True)
    assert where(again) == [] and again.fixed_source == result.fixed_source


# --- fixes use only names bound when their cell runs -----------------------------------------
# `<rule>_torch_imported_late.ipynb`: the fix's code runs in a cell before the one that binds
# the name it writes; its `.fixed.ipynb` imports the name in that cell (no `.fixed.ipynb`: no
# fix is offered). `<rule>_torch_imported_first.ipynb`: the look-alike where the name is
# bound earlier, fixed as usual (nothing imported).
ORDER_FIXTURES = sorted(p for p in NOTEBOOKS.glob("tl[0-9][0-9][0-9]_*.ipynb") if not p.name.endswith(".fixed.ipynb"))


def test_the_execution_order_fixtures_are_there():
    names = {p.name for p in ORDER_FIXTURES}
    for code in ("tl601", "tl402", "tl801"):
        assert {f"{code}_torch_imported_late.ipynb", f"{code}_torch_imported_first.ipynb"} <= names


@pytest.mark.parametrize("path", ORDER_FIXTURES, ids=lambda p: p.stem)
def test_a_fix_in_a_notebook_uses_only_names_bound_before_it(path, tmp_path):
    """`--fix --unsafe-fixes` with only the fixture's rule selected gives its `.fixed.ipynb`
    (or leaves it as it was, with the finding reported without a fix), and the fixed
    notebook, run top to bottom, names nothing undefined."""
    code = path.name[:5].upper()
    data = path.read_bytes()
    findings = lint(data, [rule_by_code(code)]).findings
    assert findings, "the fixture must show the rule's finding"
    target = tmp_path / path.name
    target.write_bytes(data)
    run = CliRunner().invoke(main, ["--fix", "--unsafe-fixes", "--no-cache", "--select", code, str(target)], catch_exceptions=False)
    assert run.exit_code in (0, 1), run.output
    expected = path.with_name(path.stem + ".fixed.ipynb")
    if expected.exists():
        assert target.read_bytes() == expected.read_bytes()
        assert _names_undefined_top_to_bottom(target.read_bytes()) == set()
        again = lint(target.read_bytes(), [rule_by_code(code)], fix=True)
        assert again.fixed_source == target.read_bytes()  # the fixed notebook is a fixed point
    else:
        assert target.read_bytes() == data
        assert all(f.fix is None for f in findings)
    if path.stem.endswith("_first") and expected.exists():
        added = set(sources(expected.read_bytes())) - set(sources(data))
        assert not any("import" in s for s in added)  # bound earlier: nothing imported


def test_fixes_in_one_cell_that_need_the_same_import_add_it_once():
    """Each fix imports torch at the start of the cell (after the cell's own imports): they
    change the same statement, so one is applied per pass and the next finds torch bound."""
    nb = notebook(
        code("x = 0.5"),
        code("from torch import exp, log\n\n# two terms\na = log(1 + x)\nb = exp(x) - 1"),
        code("import torch\nprint(a, b)"),
    )
    result = lint(nb, [rule_by_code("TL605"), rule_by_code("TL606")], fix=True)
    assert sources(result.fixed_source)[1] == (
        "from torch import exp, log\nimport torch\n\n# two terms\na = torch.log1p(x)\nb = torch.expm1(x)"
    )
    assert _names_undefined_top_to_bottom(result.fixed_source) == set()


def test_an_import_in_a_later_cell_does_not_hide_the_function_defined_before_the_call():
    """`from utils import evaluate` in a later cell binds the name; it does not pass the
    cell's own `evaluate` around, whose callers (before the import) are known: its pass with
    gradients on is reported."""
    net = (
        "import torch\nimport torch.nn as nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n    def forward(self, x):\n        return self.fc(x)"
    )
    evaluate = (
        "def evaluate(model, loader):\n    model.eval()\n    correct = 0\n    for x, y in loader:\n"
        "        correct += (model(x).argmax(1) == y).sum().item()\n    return correct"
    )
    training = (
        "model = Net()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\nfor epoch in range(3):\n    model.train()\n"
        "    for x, y in train_loader:\n        optimizer.zero_grad()\n        nn.functional.cross_entropy(model(x), y).backward()\n"
        "        optimizer.step()\n    print(evaluate(model, val_loader))"
    )
    later = "from utils import evaluate\nprint(evaluate(model, test_loader))"
    result = lint(notebook(code(net), code(evaluate), code(training), code(later)), rules=[rule_by_code("TL402")])
    assert where(result) == [("TL402", 2, 5, 21)]  # (cells and columns counted from 1)
