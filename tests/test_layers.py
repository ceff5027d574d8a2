"""The house's layers are one-way: the picture drawn from the package's imports has no circle,
and no layer imports one above it.

From the bottom: text utilities (``text``, ``positions``, ``traversal``, ``pieces``,
``_startup``), the engine (``rule``, ``engine``, ``notebook``, ``cache``), which knows nothing
about PyTorch; the semantic layer (``torchlint.semantic.*``), which knows PyTorch and reads no
file of the project itself (the project index asks its ``ProjectFiles``); the rules' bases
(``torch_rule``) and the rules; then the builder of the project index, the runner, the
outputs, the command line and the language server.

Every import statement counts, at module level or inside a function, except those under
``if TYPE_CHECKING:`` (annotations only: they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "src" / "torchlint").rglob("*.py")):
        parts = list(path.relative_to(ROOT / "src").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    for path in sorted((ROOT / "rules").glob("*.py")):
        found["torchlint.rules" + ("" if path.stem == "__init__" else "." + path.stem)] = path
    return found


MODULES = _modules()


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports (``from pkg import submodule`` imports the
    submodule; ``from pkg import name`` the package)."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:
                    found.add(f"{target}.{alias.name}")
                elif target in MODULES:
                    found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    found.discard(name)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """A circle of imports, if there is one (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(GRAPH):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_the_import_graph_has_no_circle():
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_the_graph_sees_the_imports_it_must():
    """The picture is drawn from real edges (a test of the test): lazy imports inside
    functions count, annotation-only ones do not."""
    assert "torchlint.engine" in GRAPH["torchlint.runner"]
    assert "torchlint.semantic.project" not in MODULES
    assert {"torchlint.semantic.model", "torchlint.semantic.training"} <= GRAPH["torchlint.semantic.evaluation"] | GRAPH[
        "torchlint.semantic.forward"
    ]
    assert "torchlint.semantic.pieces" in GRAPH["torchlint.runner"]  # imported inside a function
    assert "torchlint.semantic" not in GRAPH["torchlint.semantic.training"]  # only under TYPE_CHECKING
    GRAPH["torchlint.text"].add("torchlint.engine")
    try:
        assert _cycle() is not None
    finally:
        GRAPH["torchlint.text"].discard("torchlint.engine")


def _in(module: str, *prefixes: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


TEXT = ("torchlint.text", "torchlint.positions", "torchlint.traversal", "torchlint.pieces", "torchlint._startup")
ENGINE = ("torchlint.rule", "torchlint.engine", "torchlint.notebook", "torchlint.cache", "torchlint.suppression")
SEMANTIC = ("torchlint.semantic",)
RULE_BASES = ("torchlint.torch_rule", "torchlint.rules")
APPLICATION = (
    "torchlint.project", "torchlint.runner", "torchlint.config", "torchlint.files", "torchlint.output",
    "torchlint.noqa", "torchlint.exclusion", "torchlint.cli_options",
    "torchlint.output_json", "torchlint.cli", "torchlint.lsp", "torchlint.runtime", "torchlint.__main__",
)
# What each layer may not import: everything above it.
FORBIDDEN = [
    (TEXT, ENGINE + SEMANTIC + RULE_BASES + APPLICATION),
    (ENGINE, SEMANTIC + RULE_BASES + APPLICATION),
    (SEMANTIC, ENGINE + RULE_BASES + APPLICATION),
    (RULE_BASES, ("torchlint.engine", "torchlint.notebook", "torchlint.cache") + APPLICATION),
]


@pytest.mark.parametrize("layer, above", FORBIDDEN, ids=["text", "engine", "semantic", "rules"])
def test_no_layer_imports_one_above_it(layer, above):
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if _in(module, *layer)
        for target in targets
        if _in(target, *above)
    )
    assert wrong == []


def test_every_module_has_a_layer():
    everything = TEXT + ENGINE + SEMANTIC + RULE_BASES + APPLICATION
    assert [m for m in MODULES if not _in(m, *everything) and m != "torchlint"] == []


# The semantic package's own layers, from the bottom: the vocabulary of PyTorch and helpers
# that read nothing of a file's facts; the project index (summaries of files, the view a lint
# asks); a file's facts (its model, then the facets built on it); the package's facade.
SEMANTIC_LAYERS = [
    ("vocabulary", "names", "frameworks", "torch_api", "supported_torch", "gradflow", "execution_order", "migration",
     "readers", "references"),
    ("summary", "pieces", "view", "index"),
    ("model", "training", "devices", "forward", "modes", "evaluation"),
    ("",),
]


def test_the_semantic_package_is_layered():
    """A fact is a module that the facts above it ask: no module of the semantic package
    imports one of a layer above its own (the project index never asks a file's facts)."""
    layer_of = {f"torchlint.semantic.{m}" if m else "torchlint.semantic": i for i, names in enumerate(SEMANTIC_LAYERS) for m in names}
    assert sorted(m for m in MODULES if _in(m, *SEMANTIC)) == sorted(layer_of)
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module in layer_of
        for target in targets
        if target in layer_of and layer_of[target] > layer_of[module]
    )
    assert wrong == []
    assert GRAPH["torchlint.semantic.vocabulary"] == set()  # (it asks nothing)
