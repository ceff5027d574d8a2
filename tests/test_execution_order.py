"""Names bound in execution order (semantic/execution_order.py): what a fix may write where."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

from torchlint.text import CELL_BOUNDARY
from torchlint.semantic import SemanticModel
from torchlint.semantic.execution_order import bound_within, import_of, with_import_first


def model_of(source: str) -> SemanticModel:
    return SemanticModel(MetadataWrapper(cst.parse_module(textwrap.dedent(source))))


def use(model: SemanticModel, name: str = "use") -> cst.Call:
    """The call of ``name`` (there is one) in the module."""
    return next(c for c in model.calls_in() if isinstance(c.func, cst.Name) and c.func.value == name)


@pytest.mark.parametrize(
    "source, bound",
    [
        ("import torch\nuse(torch)\n", True),
        ("use(torch)\nimport torch\n", False),
        ("import torch; use(torch)\n", True),  # small statements run left to right
        ("use(torch); import torch\n", False),
        # Code in a function counts from its definition: it may run as soon as it is defined.
        ("import torch\ndef f():\n    use(torch)\n", True),
        ("def f():\n    use(torch)\nimport torch\nf()\n", False),
        # In a block: earlier in the same block counts, another branch does not.
        ("if __name__ == '__main__':\n    import torch\n    use(torch)\n", True),
        ("if flag:\n    import torch\nelse:\n    use(torch)\n", False),
        ("try:\n    import torch\nexcept ImportError:\n    use(torch)\n", False),
        ("try:\n    import torch\nexcept ImportError:\n    torch = None\nuse(torch)\n", True),
        # A parameter, a loop's or a `with`'s target, a local binding before the use.
        ("def f(torch):\n    use(torch)\n", True),
        ("for torch in things:\n    use(torch)\n", True),
        ("with open(p) as torch:\n    use(torch)\n", True),
        ("def f():\n    import torch\n    use(torch)\n", True),
        ("def f():\n    use(torch)\n    import torch\nimport torch\n", False),
        # A class body's names are not seen from its methods.
        ("class C:\n    import torch\n    def f(self):\n        use(torch)\n", False),
        ("use(print)\n", True),  # a builtin
    ],
)
def test_bound_before(source, bound):
    model = model_of(source)
    name = "print" if "print" in source else "torch"
    assert model.bound_before(use(model), name) is bound


def test_a_function_that_binds_the_name_itself_shadows_the_module():
    model = model_of("def f():\n    use(torch)\n    import torch\nimport torch\n")
    assert model.bound_locally(use(model), "torch")
    assert not model.bound_locally(use(model_of("use(torch)\nimport torch\n")), "torch")


@pytest.mark.parametrize(
    "source, name, spelled",
    [
        ("import torch\n", "torch", "import torch"),
        ("import os, torch as th\n", "th", "import torch as th"),
        ("import torch.nn.functional\n", "torch", "import torch"),
        ("import torch.nn as nn\n", "nn", "import torch.nn as nn"),
        ("from torch import nn, no_grad\n", "no_grad", "from torch import no_grad"),
        ("from torch import no_grad as ng\n", "ng", "from torch import no_grad as ng"),
        ("from . import helpers\n", "helpers", "from . import helpers"),
        ("torch = load()\n", "torch", None),  # bound, but not by an import
        ("from torch import *\n", "no_grad", None),
    ],
)
def test_import_of(source, name, spelled):
    assert import_of(model_of(source), name) == spelled


def test_with_import_first_leaves_a_fix_whose_name_is_bound_as_it_is():
    model = model_of("import torch\nx = use(1)\n")
    call = use(model)
    new = cst.parse_expression("torch.ones(1)")
    assert with_import_first(model, {call: new}, "torch", [call]) == {call: new}


class _Apply(cst.CSTTransformer):
    def __init__(self, changes) -> None:
        super().__init__()
        self.changes = changes

    def on_leave(self, original_node, updated_node):
        return self.changes.get(original_node, updated_node)


def fixed(source: str, rewrites: dict[str, str], name: str) -> str | None:
    """``source`` with each call ``use(<key>)`` rewritten to its value through
    ``with_import_first`` (None: no fix)."""
    model = model_of(source)
    calls = {model.module.code_for_node(c.args[0].value): c for c in model.calls_in() if isinstance(c.func, cst.Name) and c.func.value == "use"}
    changes = {calls[k]: cst.parse_expression(v) for k, v in rewrites.items()}
    result = with_import_first(model, changes, name, list(changes))
    return None if result is None else model.module.visit(_Apply(result)).code


def test_with_import_first_folds_the_changes_of_the_statement_it_imports_before():
    source = "for i in range(3):\n    y = use(i)\n    z = use(i + 1)\nimport torch as th\n"
    assert fixed(source, {"i": "th.ones(i)", "i + 1": "th.zeros(i)"}, "th") == (
        "import torch as th\nfor i in range(3):\n    y = th.ones(i)\n    z = th.zeros(i)\nimport torch as th\n"
    )


def test_with_import_first_imports_at_the_start_of_a_script_after_its_docstring_and_future_imports():
    source = '"""Doc."""\nfrom __future__ import annotations\nx = 1\ny = use(x)\nimport torch\n'
    assert fixed(source, {"x": "torch.ones(x)"}, "torch") == (
        '"""Doc."""\nfrom __future__ import annotations\nimport torch\nx = 1\ny = torch.ones(x)\nimport torch\n'
    )


def test_with_import_first_imports_at_the_start_of_the_cell_after_its_masked_lines():
    boundary, masked = CELL_BOUNDARY, "pass  # __torchlint_masked_line_1__\n"
    source = f"x = 1\n{boundary}{masked}a = 2\nb = use(a)\n{boundary}import torch\n"
    assert fixed(source, {"a": "torch.ones(a)"}, "torch") == (
        f"x = 1\n{boundary}{masked}import torch\na = 2\nb = torch.ones(a)\n{boundary}import torch\n"
    )


def test_with_import_first_offers_nothing_where_it_cannot_bind_the_name():
    shadowed = model_of("def f():\n    y = use(1)\n    import torch\nimport torch\n")
    call = use(shadowed)
    assert with_import_first(shadowed, {call: cst.parse_expression("torch.ones(1)")}, "torch", [call]) is None
    assigned = model_of("y = use(1)\ntorch = load()\n")
    call = use(assigned)
    assert with_import_first(assigned, {call: cst.parse_expression("torch.ones(1)")}, "torch", [call]) is None


def test_bound_within_a_loop_body():
    model = model_of("for x in data:\n    opt = make()\n    use(opt)\nfor opt in opts:\n    use(opt, 2)\n")
    first_loop, second_loop = model.module.body
    calls = [c for c in model.calls_in() if isinstance(c.func, cst.Name) and c.func.value == "use"]
    assert bound_within(model, calls[0], "opt", first_loop.body)
    assert not bound_within(model, calls[1], "opt", second_loop.body)  # the loop's target is bound at each iteration's start
