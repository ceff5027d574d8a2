"""The fast walk (``torchlint.traversal``) calls a read-only visitor exactly as LibCST's own
``visit`` does: the same callbacks, on the same nodes, in the same order."""

from __future__ import annotations

import contextlib
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider, ScopeProvider

from torchlint import traversal

ROOT = Path(__file__).parent.parent
SOURCES = sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "src" / "torchlint").rglob("*.py"))

# Syntax the fixtures may not hold: f-strings with and without format specs, match, type
# parameters, star expressions, decorators, walrus, lambda defaults, global/nonlocal.
SNIPPET = '''
import a.b as c, d
from .e import (f as g, h)
from . import *
@dec(1)
@other
async def fn[T, *Ts, **P](x: int = 1, /, y=2, *args: T, z, **kw) -> "T":
    global q
    nonlocal_ = [i async for i in x if i if not i]
    w = f"{x!r:>{y}} {z=} {x:{'a'}}" f'{y}' "plain"
    match w:
        case {"a": 1, **rest} | [1, *_] | Point(x=0, y=b) if b > 0:
            pass
        case str() as s:
            return s
    with open(x) as (a, b), lock:
        yield (await y)
    lambda p=1, *q, r=2: (p := r)
    del x[1:2, ::3], y.z
    try:
        raise ValueError from None
    except* (TypeError, KeyError) as e:
        ...
    finally:
        assert x, "m"
    for i, *j in {**kw, 1: 2}: continue
    else: break
    while not x: x += -1 if x else ~y @ z ** 2
    type Alias[K] = dict[K, int]
class C(Base, metaclass=M):
    def __init__(self): nonlocal y; print(*a, **b, sep="")
# Bindings, as LibCST's expression contexts would mark them (the scope analysis asks).
*s1, (s2, [s3, *s4]) = s5.attr, s6[s7] = t1 = {k: v for k, v in items if (w1 := k) for v2 in v}
u1: int = [[x2 for x2 in y2] for y2 in (z2 := [])]
u2 += sum(g for g in range(u2) if g)
for o1.attr, o2[o3] in pairs: o4 = o1
with ctx() as (m1, m2), other() as m3.attr: pass
try: pass
except E as err: err2 = err
q1[(q2 := 3)] = lambda l1, *l2, l3=q2: l1
import pkg.sub as alias
'''


class Recorder(cst.CSTVisitor):
    """Records every callback, attribute callbacks included."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.calls.append(("visit", id(node)))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.calls.append(("leave", id(original_node)))

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        self.calls.append(("visit_attribute", id(node), attribute))

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        self.calls.append(("leave_attribute", id(original_node), attribute))


class SkipsFunctions(Recorder):
    """Records node callbacks only, and does not descend into functions."""

    def on_visit(self, node: cst.CSTNode) -> bool:
        super().on_visit(node)
        return not isinstance(node, cst.FunctionDef)

    on_visit_attribute = cst.CSTVisitor.on_visit_attribute
    on_leave_attribute = cst.CSTVisitor.on_leave_attribute


class ClassBasesHook(cst.CSTVisitor):
    """An attribute hook on one node type (as LibCST's scope analysis has)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def visit_Name(self, node: cst.Name) -> None:
        self.calls.append(("name", node.value))

    def visit_ClassDef_bases(self, node: cst.ClassDef) -> None:
        self.calls.append(("bases", node.name.value))

    def leave_ClassDef_bases(self, node: cst.ClassDef) -> None:
        self.calls.append(("end bases", node.name.value))


def _modules():
    yield "snippet", cst.parse_module(SNIPPET)
    for path in SOURCES:
        yield str(path.relative_to(ROOT)), cst.parse_module(path.read_bytes())


@pytest.mark.parametrize("visitor_class", [Recorder, SkipsFunctions, ClassBasesHook])
def test_same_calls_as_libcst(visitor_class) -> None:
    compared = 0
    for name, module in _modules():
        libcst_walk, fast_walk = visitor_class(), visitor_class()
        module.visit(libcst_walk)
        with traversal.fast_walks():
            assert module.visit(fast_walk) is module
        assert fast_walk.calls == libcst_walk.calls, name
        compared += len(libcst_walk.calls)
    assert compared > 10_000


def test_batched_visitors_and_metadata_are_the_same() -> None:
    """Metadata computed during a fast walk (scopes, parents) equals LibCST's own."""
    module = cst.parse_module((ROOT / "fixtures" / "example" / "train.py").read_bytes() + SNIPPET.encode())
    expected_wrapper, fast_wrapper = MetadataWrapper(module, unsafe_skip_copy=True), MetadataWrapper(module, unsafe_skip_copy=True)
    expected = expected_wrapper.resolve_many([ScopeProvider, ParentNodeProvider, PositionProvider])
    with traversal.fast_walks():
        fast = fast_wrapper.resolve_many([ScopeProvider, ParentNodeProvider, PositionProvider])
    assert dict(fast[ParentNodeProvider]) == dict(expected[ParentNodeProvider])
    assert dict(fast[PositionProvider]) == dict(expected[PositionProvider])
    # (String annotations are parsed anew by each scope analysis: only the module's own
    # nodes are comparable.)
    nodes = set(expected[ParentNodeProvider]) | {module}
    scopes, expected_scopes = fast[ScopeProvider], expected[ScopeProvider]
    assert scopes.keys() & nodes == expected_scopes.keys() & nodes
    for node in expected_scopes.keys() & nodes:
        scope, other = scopes[node], expected_scopes[node]
        assert type(scope) is type(other) and getattr(scope, "node", None) is getattr(other, "node", None)
        if isinstance(node, cst.Name):
            assert {(q.name, q.source) for q in scope.get_qualified_names_for(node)} == {
                (q.name, q.source) for q in other.get_qualified_names_for(node)
            }
            assert {a.node for a in scope.assignments[node.value]} == {a.node for a in other.assignments[node.value]}
            assert {a.node for a in scope.accesses[node.value]} == {a.node for a in other.accesses[node.value]}


def test_transformers_and_nesting() -> None:
    """Transformers keep LibCST's walk; LibCST's ``visit`` is back once the last user is done."""
    module = cst.parse_module("x = 1\n")
    original = cst.CSTNode.visit

    class Rename(cst.CSTTransformer):
        def leave_Name(self, original_node, updated_node):
            return updated_node.with_changes(value="y")

    with traversal.fast_walks():
        with traversal.fast_walks():
            assert module.visit(Rename()).code == "y = 1\n"
        assert cst.CSTNode.visit is not original
    assert cst.CSTNode.visit is original


def _scope_facts(scopes, module, nodes):
    """What the semantic layer reads of scopes, for every node of the module."""
    facts = []
    for node in nodes:
        scope = scopes.get(node)
        fact = [type(node).__name__, type(scope).__name__, getattr(scope, "node", None) is not None and id(scope.node)]
        if isinstance(node, cst.Name) and scope is not None:
            fact.append(sorted((q.name, q.source.name) for q in scope.get_qualified_names_for(node)))
            fact.append(sorted(id(a.node) for a in scope.assignments[node.value]))
            fact.append(sorted(id(a.node) for a in scope.accesses[node.value]))
            fact.append(sorted(id(r.node) for a in scope.accesses[node] for r in a.referents if hasattr(r, "node")))
            fact.append(sorted((id(a.node), getattr(a, "_index", None)) for a in scope.assignments[node.value]))
        facts.append(fact)
    return facts


def test_scope_provider_visitors_are_what_libcst_would_find() -> None:
    """torchlint's ScopeProvider names its batched walk's methods itself (LibCST finds them
    with ``inspect.getmembers`` for every file): the same as LibCST's look-up gives."""
    from libcst import BatchableCSTVisitor

    provider = traversal.ScopeProvider()
    assert provider.get_visitors() == BatchableCSTVisitor.get_visitors(provider) == {"visit_Module": provider.visit_Module}


def test_scope_provider_equals_libcsts() -> None:
    """torchlint's ScopeProvider (LibCST's, dispatching through tables and not walking trivia)
    gives the same scopes, assignments, accesses and qualified names as LibCST's to every
    node but whitespace, comments and punctuation, inside and outside fast walks."""
    checked = 0
    for name, module in _modules():
        expected_wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        expected = expected_wrapper.resolve(ScopeProvider)
        # (Whitespace, comments and punctuation get no scope from torchlint's.)
        nodes = [n for n in expected_wrapper.resolve(ParentNodeProvider) if type(n) not in traversal.TRIVIA] + [module]
        for fast in (False, True):
            wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
            with traversal.fast_walks() if fast else contextlib.nullcontext():
                scopes = wrapper.resolve(traversal.ScopeProvider)
            assert _scope_facts(scopes, module, nodes) == _scope_facts(expected, module, nodes), name
        checked += len(nodes)
    assert checked > 50_000


class Methods:
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.calls.append(("def", node.name.value))
        return False  # not its body

    def visit_Name(self, node: cst.Name) -> None:
        self.calls.append(("name", node.value))

    def leave_Call(self, original_node: cst.Call) -> None:
        self.calls.append(("call",))


class Dispatching(traversal.FastDispatch, Methods, cst.CSTVisitor):
    pass


class Dispatching2(Methods, cst.CSTVisitor):
    pass


def test_fast_dispatch_calls_what_libcsts_dispatch_calls() -> None:
    checked = 0
    for name, module in _modules():
        fast, plain = Dispatching(), Dispatching2()
        module.visit(fast)
        module.visit(plain)
        assert fast.calls == plain.calls, name
        checked += len(plain.calls)
    assert checked > 10_000


def test_batched_walks_skip_trivia_no_visitor_asks_for() -> None:
    module = cst.parse_module("x = f(a, b)  # note\n\n# alone\ny = 2\n")
    seen: list[str] = []

    class Comments(cst.BatchableCSTVisitor):
        def visit_Comment(self, node: cst.Comment) -> None:
            seen.append(node.value)

        def visit_Name(self, node: cst.Name) -> None:
            seen.append(node.value)

    class Names(cst.BatchableCSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            seen.append(node.value)

    class Spaces(Names):
        def visit_SimpleWhitespace(self, node: cst.SimpleWhitespace) -> None:
            seen.append("ws")

    with traversal.fast_walks():
        traversal.visit_batched(MetadataWrapper(module, unsafe_skip_copy=True), [Comments()])
        assert seen == ["x", "f", "a", "b", "# note", "# alone", "y"]
        seen.clear()
        traversal.visit_batched(MetadataWrapper(module, unsafe_skip_copy=True), [Names()])
        assert seen == ["x", "f", "a", "b", "y"]
        seen.clear()
        traversal.visit_batched(MetadataWrapper(module, unsafe_skip_copy=True), [Spaces()])
        assert "ws" in seen


def test_libcsts_batched_walk_of_module_only_visitors_stops_at_the_module() -> None:
    """LibCST resolves providers in a batched walk of the module even when they only visit
    the module: the fast walk calls those and nothing below; any other method keeps it whole."""
    module = cst.parse_module("x = f(a)\n")
    calls: list[str] = []

    class ModuleOnly(cst.BatchableCSTVisitor):
        def visit_Module(self, node: cst.Module) -> None:
            calls.append("module")

        def leave_Module(self, original_node: cst.Module) -> None:
            calls.append("end")

    class Names(ModuleOnly):
        def visit_Name(self, node: cst.Name) -> None:
            calls.append(node.value)

    with traversal.fast_walks():
        MetadataWrapper(module, unsafe_skip_copy=True).visit_batched([ModuleOnly()])
        assert calls == ["module", "end"]
        calls.clear()
        MetadataWrapper(module, unsafe_skip_copy=True).visit_batched([Names()])
        assert calls == ["module", "x", "f", "a", "end"]


def test_visitor_classes_defined_in_functions_share_their_tables():
    """A visitor class defined inside a function is a new class object at each call: the
    walk's tables are kept by where it is defined, so they do not grow with every lint (an
    editor lints for hours)."""
    import libcst as cst

    from torchlint import traversal

    def names(expr: cst.CSTNode) -> list[str]:
        found = []

        class Names(cst.CSTVisitor):
            def visit_Name(self, node: cst.Name) -> None:
                found.append(node.value)

        with traversal.fast_walks():
            expr.visit(Names())
        return found

    def calls(expr: cst.CSTNode) -> list[str]:
        found = []

        class Names(cst.CSTVisitor):  # the same name, defined elsewhere: tables of its own
            def visit_Call_func(self, node: cst.Call) -> None:
                found.append("call")

        with traversal.fast_walks():
            expr.visit(Names())
        return found

    expr = cst.parse_expression("f(a, b.c)")
    assert names(expr) == ["f", "a", "b", "c"] and calls(expr) == ["call"]
    sizes = len(traversal._SKIPPED), len(traversal._HOOKED_TYPES)
    for _ in range(5):
        assert names(expr) == ["f", "a", "b", "c"] and calls(expr) == ["call"]
    assert (len(traversal._SKIPPED), len(traversal._HOOKED_TYPES)) == sizes
