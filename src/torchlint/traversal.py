"""A faster walk of LibCST trees for read-only visitors.

LibCST visits a tree by rebuilding it: ``CSTNode.visit`` calls the node's
``_visit_and_replace_children``, which constructs (and validates) a new copy of every node it
passes, and for a ``CSTVisitor`` (which cannot change the tree) the copy is then thrown away.
Each child attribute also costs two dispatches through formatted method names
(``visit_Call_func``), whether the visitor has such a method or not. Linting walks every tree
several times (LibCST's expression-context and scope analyses, the semantic model's
collecting pass, the rules' batched traversal), and this bookkeeping was about a third of a
run.

``fast_walks()`` replaces ``CSTNode.visit``, while it is active, by a walk that calls the
visitor exactly as LibCST does (``on_visit``, ``on_visit_attribute``, the children in LibCST's
order, ``on_leave_attribute``, ``on_leave``; the same node objects) without building copies,
and that calls the attribute hooks only for node types the visitor has such hooks for.
Transformers, and any visitor while it is not active, go through LibCST's own ``visit``.
The order of each node type's children is LibCST's: it is read once per type, from the
attribute callbacks LibCST's own ``_visit_and_replace_children`` makes on a node of that type
(``tests/test_traversal.py`` checks that both walks make the same calls on every fixture).

Two more things LibCST does at every node are done once per type here: finding a visitor's
``visit_<Type>`` method (``FastDispatch``; LibCST formats the name and looks it up each
time) and, in its scope analysis, testing the node against eighteen abstract classes
(``ScopeProvider``: LibCST's, the same scopes). Visitors that look at no whitespace, comment
or punctuation (``SKIPS_TRIVIA``, and the rules' batched walk) are not walked into them.

It knows nothing about PyTorch; the engine activates it while it lints a file.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
import re
import threading
from typing import Callable, Iterator, Mapping, Sequence

import libcst as cst
from libcst._batched_visitor import _BatchedCSTVisitor
from libcst._nodes.base import CSTNode
from libcst.metadata import ExpressionContext, ExpressionContextProvider, MetadataWrapper
from libcst.metadata import ScopeProvider as _LibCSTScopeProvider

try:  # the parts of LibCST's scope analysis that ``ScopeProvider`` below builds on
    from libcst.metadata.scope_provider import _ASSIGNMENT_LIKE_NODES
    from libcst.metadata.scope_provider import ScopeVisitor as _LibCSTScopeVisitor
except ImportError:  # a LibCST without them: its own analysis, as it is
    _ASSIGNMENT_LIKE_NODES = None

_LIBCST_VISIT = CSTNode.visit
_LIBCST_VISITOR_BASES = frozenset(cst.CSTVisitor.__mro__)

# Each node type's child attributes, in LibCST's visiting order, and those of them LibCST
# visits only when they are set (an f-string expression's ``format_spec``).
_FIELDS: dict[type, tuple[str, ...]] = {}
_WHEN_SET: dict[type, frozenset[str]] = {}
# Whether a type is a CSTNode (``isinstance`` on LibCST's abstract node classes is slow).
_IS_NODE: dict[type, bool] = {}
# Attribute hooks: ``visit_<Type>_<attribute>`` / ``leave_<Type>_<attribute>``.
_ATTRIBUTE_HOOK = re.compile(r"(?:visit|leave)_([A-Z][A-Za-z0-9]*)_[a-z][a-z0-9_]*$")
_HOOKED_TYPES: dict[object, frozenset[str]] = {}  # by ``_class_key``


class _AttributeRecorder(cst.CSTVisitor):
    """Records the attributes LibCST's ``_visit_and_replace_children`` visits, in order,
    without descending into them."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def on_visit(self, node: CSTNode) -> bool:
        return False

    def on_leave(self, original_node: CSTNode) -> None:
        pass

    def on_visit_attribute(self, node: CSTNode, attribute: str) -> None:
        self.names.append(attribute)

    def on_leave_attribute(self, original_node: CSTNode, attribute: str) -> None:
        pass


def _fields(node: CSTNode) -> tuple[str, ...]:
    """The child attributes of ``node``'s type, read off LibCST's own walk of this node."""
    cls = type(node)
    recorder = _AttributeRecorder()
    node._visit_and_replace_children(recorder)
    names = [name for name in dict.fromkeys(recorder.names) if name not in _VISITED_WHEN_SET]
    # The other fields: values (``Name.value``, never nodes, skipped by the walk) and the
    # attributes LibCST visits only when set, which come last in their node types.
    rest = [f.name for f in dataclasses.fields(cls) if f.name not in names]
    _WHEN_SET[cls] = frozenset(rest)
    fields = _FIELDS[cls] = tuple(names + rest)
    if not fields:
        _VALUES[cls] = _no_values
    elif len(fields) == 1:
        one = operator.attrgetter(fields[0])
        _VALUES[cls] = lambda node: (one(node),)
    else:
        _VALUES[cls] = operator.attrgetter(*fields)
    return fields


def _no_values(node: CSTNode) -> tuple[()]:
    return ()


# The attributes LibCST's ``_visit_and_replace_children`` visits only when they are not None
# (``format_spec`` of ``FormattedStringExpression`` and ``TemplatedStringExpression``); any
# other attribute gets its callbacks whatever it holds.
_VISITED_WHEN_SET = frozenset({"format_spec"})
# Each node type's getter of its fields' values, in ``_FIELDS`` order.
_VALUES: dict[type, Callable[[CSTNode], tuple]] = {}


def _is_node(kind: type) -> bool:
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, CSTNode)
    return known


class _EveryType(frozenset):
    def __contains__(self, name: object) -> bool:
        return True


_EVERY_TYPE = _EveryType({"*"})


def _hooked_types(visitor: cst.CSTVisitor) -> frozenset[str]:
    """The names of the node types the visitor has attribute hooks for (all of them when it
    handles attributes itself)."""
    if isinstance(visitor, _BatchedCSTVisitor):
        return frozenset(m.group(1) for m in map(_ATTRIBUTE_HOOK.match, visitor.visitor_methods) if m)
    cls = type(visitor)
    key = _class_key(cls)
    hooked = _HOOKED_TYPES.get(key)
    if hooked is None:
        if cls.on_visit_attribute is not cst.CSTVisitor.on_visit_attribute or (
            cls.on_leave_attribute is not cst.CSTVisitor.on_leave_attribute
        ):
            hooked = _EVERY_TYPE
        else:
            # (LibCST's visitor base declares every hook as a stub: only the classes above
            # it count.)
            hooked = frozenset(
                m.group(1)
                for klass in cls.__mro__
                if klass not in _LIBCST_VISITOR_BASES
                for m in map(_ATTRIBUTE_HOOK.match, vars(klass))
                if m
            )
        _HOOKED_TYPES[key] = hooked
    return hooked


def _class_key(cls: type) -> object:
    """What the walk's tables of a visitor class are kept by: the class, or, for a class
    defined inside a function (a new class object at each call, as a visitor that collects
    into the function's variables is), where it is defined and the names it defines. The
    tables depend on nothing else, and kept by class they would grow with every call."""
    if "<locals>" not in cls.__qualname__:
        return cls
    return (cls.__module__, cls.__qualname__, cls.__bases__, tuple(vars(cls)))


def _walk(node: CSTNode, visitor: cst.CSTVisitor, hooked: frozenset[str], skip: frozenset[type]) -> None:
    if visitor.on_visit(node):
        cls = type(node)
        values = _VALUES.get(cls)
        if values is None:
            _fields(node)
            values = _VALUES[cls]
        if hooked and cls.__name__ in hooked:
            _walk_with_hooks(node, _FIELDS[cls], visitor, hooked, skip)
        else:
            is_node = _IS_NODE.get
            for value in values(node):
                kind = type(value)
                if kind is tuple or kind is list:
                    for child in value:
                        if type(child) not in skip:
                            _walk(child, visitor, hooked, skip)
                elif kind not in skip and (is_node(kind) or (is_node(kind) is None and _is_node(kind))):
                    _walk(value, visitor, hooked, skip)
    visitor.on_leave(node)


def _walk_with_hooks(
    node: CSTNode, fields: tuple[str, ...], visitor: cst.CSTVisitor, hooked: frozenset[str], skip: frozenset[type]
) -> None:
    when_set = _WHEN_SET[type(node)]
    for name in fields:
        value = getattr(node, name)
        kind = type(value)
        is_sequence = kind is tuple or kind is list
        if name in when_set and not (is_sequence or _is_node(kind)):
            continue
        visitor.on_visit_attribute(node, name)
        if is_sequence:
            for child in value:
                if type(child) not in skip:
                    _walk(child, visitor, hooked, skip)
        elif kind not in skip and _is_node(kind):
            _walk(value, visitor, hooked, skip)
        visitor.on_leave_attribute(node, name)


# Whitespace, comments and punctuation: three fifths of a tree's nodes. A visitor that skips
# trivia (``SKIPS_TRIVIA``; the rules' batched walk does) is not walked into them, unless it
# has a ``visit_``/``leave_`` method for one of them: none of them holds code.
TRIVIA = frozenset({
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline, cst.EmptyLine,
    cst.Comment, cst.Dot, cst.Comma, cst.AssignEqual, cst.Colon, cst.Semicolon, cst.LeftParen, cst.RightParen,
    cst.LeftSquareBracket, cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace,
})
_NOTHING: frozenset[type] = frozenset()
_SKIPPED: dict[object, frozenset[type]] = {}  # by ``_class_key``


def _skipped(visitor: cst.CSTVisitor) -> frozenset[type]:
    """The trivia types the walk leaves out for ``visitor``."""
    if isinstance(visitor, _Batched):
        return visitor.skipped
    cls = type(visitor)
    key = _class_key(cls)
    skipped = _SKIPPED.get(key)
    if skipped is None:
        # (Trivia hold other trivia: a visitor of any of them, a comment say, is walked into all.)
        wanted = any(_lookup({}, cls, prefix, kind) is not None for kind in TRIVIA for prefix in ("visit_", "leave_"))
        skipped = TRIVIA if getattr(cls, "SKIPS_TRIVIA", False) and not wanted else _NOTHING
        _SKIPPED[key] = skipped
    return skipped


def _fast_visit(self: CSTNode, visitor):  # the replacement of ``CSTNode.visit``
    if not isinstance(visitor, cst.CSTVisitor):
        return _LIBCST_VISIT(self, visitor)
    if _module_only(visitor):
        # LibCST resolves metadata providers in a batched walk of the whole module, though
        # theirs only visit the module (and walk it themselves): nothing below it is called.
        visitor.on_visit(self)
        visitor.on_leave(self)
        return self
    _walk(self, visitor, _hooked_types(visitor), _skipped(visitor))
    return self


def _module_only(visitor: cst.CSTVisitor) -> bool:
    """A batched visitor of LibCST's whose visitors have methods for the module alone (or
    none at all: LibCST walks the module for an empty batch too)."""
    return (
        type(visitor) is _BatchedCSTVisitor
        and visitor.before_visit is None
        and visitor.after_leave is None
        and all(name in ("visit_Module", "leave_Module") for name in visitor.visitor_methods)
    )


# --- dispatch by node type ---------------------------------------------------------------

_STUB = object()
# Per visitor class: node type -> its ``visit_<Type>`` / ``leave_<Type>`` function, or None.
_VISIT_TABLES: dict[type, dict[type, Callable | None]] = {}
_LEAVE_TABLES: dict[type, dict[type, Callable | None]] = {}


def _lookup(table: dict, visitor_class: type, prefix: str, node_type: type) -> Callable | None:
    name = prefix + node_type.__name__
    method = getattr(visitor_class, name, None)
    # LibCST's visitor base declares every method as a stub that does nothing.
    if method is not None and method is getattr(cst.CSTVisitor, name, _STUB):
        method = None
    table[node_type] = method
    return method


class FastDispatch:
    """A mixin for ``cst.CSTVisitor`` subclasses: ``on_visit`` and ``on_leave`` find the
    ``visit_<Type>`` / ``leave_<Type>`` method in a table per visitor class and node type,
    where ``CSTVisitor`` formats the name and looks it up at every node. The same methods
    are called, with the same effect on the walk."""

    def on_visit(self, node: CSTNode) -> bool:
        method = _method(_VISIT_TABLES, type(self), "visit_", type(node))
        return method is None or method(self, node) is not False

    def on_leave(self, original_node: CSTNode) -> None:
        method = _method(_LEAVE_TABLES, type(self), "leave_", type(original_node))
        if method is not None:
            method(self, original_node)


def _method(tables: dict[type, dict[type, Callable | None]], visitor_class: type, prefix: str, node_type: type):
    table = tables.get(visitor_class)
    if table is None:
        table = tables[visitor_class] = {}
    method = table.get(node_type, _STUB)
    if method is _STUB:
        method = _lookup(table, visitor_class, prefix, node_type)
    return method


class _Batched(_BatchedCSTVisitor):
    """LibCST's batched visitor, dispatching by node type through tables."""

    def __init__(self, visitor_methods: dict[str, list[Callable]]) -> None:
        super().__init__(visitor_methods)
        self._visits: dict[type, tuple[Callable, ...]] = {}
        self._leaves: dict[type, tuple[Callable, ...]] = {}
        wanted = any(f"{prefix}_{kind.__name__}" in visitor_methods for kind in TRIVIA for prefix in ("visit", "leave"))
        self.skipped = _NOTHING if wanted else TRIVIA

    def on_visit(self, node: CSTNode) -> bool:
        kind = type(node)
        methods = self._visits.get(kind)
        if methods is None:
            methods = self._visits[kind] = tuple(self.visitor_methods.get("visit_" + kind.__name__, ()))
        for method in methods:
            method(node)
        return True

    def on_leave(self, original_node: CSTNode) -> None:
        kind = type(original_node)
        methods = self._leaves.get(kind)
        if methods is None:
            methods = self._leaves[kind] = tuple(self.visitor_methods.get("leave_" + kind.__name__, ()))
        for method in methods:
            method(original_node)


def visit_batched(wrapper: MetadataWrapper, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
    """``wrapper.visit_batched(visitors)``: their metadata resolved, one walk of the module
    calling each visitor's methods, in the visitors' order."""
    with contextlib.ExitStack() as stack:
        for visitor in visitors:
            stack.enter_context(visitor.resolve(wrapper))
        methods: dict[str, list[Callable]] = {}
        for visitor in visitors:
            for name, method in visitor.get_visitors().items():
                methods.setdefault(name, []).append(method)
        wrapper.module.visit(_Batched(methods))


if _ASSIGNMENT_LIKE_NODES is None:
    ScopeProvider = _LibCSTScopeProvider
else:
    _ASSIGNMENT_LIKE_TYPES = frozenset(_ASSIGNMENT_LIKE_NODES)

    # Where LibCST's expression contexts make a name a binding (``ExpressionContext.STORE``):
    # each such node's attribute holding the target, walked as LibCST walks it.
    _BINDING_TARGETS: dict[type, str] = {
        cst.Assign: "targets", cst.AnnAssign: "target", cst.AugAssign: "target", cst.NamedExpr: "target",
        cst.AsName: "name", cst.For: "target", cst.CompFor: "target", cst.ClassDef: "name",
        cst.FunctionDef: "name", cst.Param: "name",
    }
    _COMPREHENSIONS = frozenset({cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp})

    def _stored_names(target: CSTNode, found: set) -> None:
        """The names LibCST's expression contexts mark STORE in an assignment's target: a
        name; the elements of a tuple, list or starred target, and so on down; not the value
        of an attribute or a subscript (read, not bound)."""
        kind = type(target)
        if kind is cst.Name:
            found.add(target)
        elif kind is cst.AssignTarget:
            _stored_names(target.target, found)
        elif kind is cst.Tuple or kind is cst.List:
            for element in target.elements:  # (``children`` would copy their punctuation too)
                _stored_names(element.value, found)
        elif kind is cst.StarredElement or kind is cst.Element:
            _stored_names(target.value, found)
        elif kind is not cst.Attribute and kind is not cst.Subscript:
            for child in target.children:
                _stored_names(child, found)

    class _ScopeVisitor(FastDispatch, _LibCSTScopeVisitor):
        """LibCST's scope analysis, which asks LibCST's expression contexts one thing: whether
        a name is bound where it stands (STORE; a load, a ``del`` and no context are all read
        alike). The bound names are found here, at the nodes that bind them, before the walk
        reaches them: not by a whole walk of the module to give every name its context."""

        SKIPS_TRIVIA = True  # (no scope is asked of whitespace or punctuation)

        def __init__(self, provider) -> None:
            super().__init__(provider)
            self.stored: set[CSTNode] = set()
            self.check = getattr(_checks, "check", None)  # (``checkpoints``)

        def on_visit(self, node: CSTNode) -> bool:
            kind = type(node)
            if self.check is not None and kind in STATEMENTS:
                self.check()
            attribute = _BINDING_TARGETS.get(kind)
            if attribute is not None:
                value = getattr(node, attribute)
                for target in value if type(value) is tuple or type(value) is list else (value,):
                    _stored_names(target, self.stored)
            elif kind in _COMPREHENSIONS:
                # (The scope analysis walks a comprehension's targets without its ``CompFor``s.)
                for_in = node.for_in
                while for_in is not None:
                    _stored_names(for_in.target, self.stored)
                    for_in = for_in.inner_for_in
            return FastDispatch.on_visit(self, node)

        def on_leave(self, original_node: CSTNode) -> None:
            # LibCST's ``on_leave``, with its ``isinstance`` against eighteen abstract node
            # classes (a Python-level call for each, at every node) as a set look-up: the node
            # classes are concrete, and nothing subclasses them.
            self.provider.set_metadata(original_node, self.scope)
            if type(original_node) in _ASSIGNMENT_LIKE_TYPES:
                self.scope._assignment_count += 1
            FastDispatch.on_leave(self, original_node)


    class ScopeProvider(_LibCSTScopeProvider):
        """LibCST's ``ScopeProvider`` (the same scopes, assignments and accesses; tested on every
        fixture), its visitor dispatching through ``FastDispatch``, not walked into trivia, and
        told which names are bound without LibCST's expression contexts (``_ScopeVisitor``)."""

        METADATA_DEPENDENCIES = ()
        # LibCST unites the dependencies of a provider's bases with its own (and caches them on
        # the class, where a subclass would read its base's): none here, where LibCST's
        # expression contexts would otherwise be computed as well. (Were the cache's name to
        # change, they would be: the same results, slower.)
        _INHERITED_METADATA_DEPENDENCIES_CACHE = frozenset(METADATA_DEPENDENCIES)

        def get_metadata(self, key, node, *default):  # type: ignore[override]
            # LibCST's scope analysis asks for the expression context of each name it visits.
            if key is ExpressionContextProvider:
                return ExpressionContext.STORE if node in self._visitor.stored else (default[0] if default else None)
            return super().get_metadata(key, node, *default)

        def get_visitors(self) -> dict[str, Callable]:
            # What LibCST's finds by ``inspect.getmembers`` over some 700 attributes (2.5 ms,
            # for every file): its one method that is not a no-op.
            return {"visit_Module": self.visit_Module}

        def visit_Module(self, node: cst.Module) -> bool | None:
            self._visitor = visitor = _ScopeVisitor(self)
            node.visit(visitor)
            visitor.infer_accesses()
            del self._visitor
            return None


_lock = threading.Lock()
_active = 0

# Statements: where a long walk asks whether to go on (``checkpoints``).
STATEMENTS = frozenset({cst.SimpleStatementLine, cst.FunctionDef, cst.ClassDef, cst.For, cst.While, cst.If, cst.With, cst.Try})
_checks = threading.local()


@contextlib.contextmanager
def checkpoints(check: Callable[[], None] | None) -> Iterator[None]:
    """While this is active, the scope analysis run in this thread calls ``check`` (None:
    nothing) at each statement it enters: an editor's way to stop it half-way (``check``
    raises)."""
    previous = getattr(_checks, "check", None)
    _checks.check = check
    try:
        yield
    finally:
        _checks.check = previous


@contextlib.contextmanager
def fast_walks() -> Iterator[None]:
    """Read-only visits take the fast walk while this is active (re-entrant, thread-safe: the
    last one out puts LibCST's own ``visit`` back)."""
    global _active
    with _lock:
        _active += 1
        if _active == 1:
            CSTNode.visit = _fast_visit  # type: ignore[method-assign]
    try:
        yield
    finally:
        with _lock:
            _active -= 1
            if _active == 0:
                CSTNode.visit = _LIBCST_VISIT  # type: ignore[method-assign]


def release_scopes(scopes: Mapping[cst.CSTNode, object]) -> None:
    """Empty the scopes of a finished scope analysis (``ScopeProvider``'s answers, node to
    scope), and their assignments, so that the tree they point at is freed by reference
    counting once it is dropped. LibCST links each scope and its assignments both ways (and
    each assignment and its accesses), and such cycles left the whole tree to Python's cyclic
    collector: it walked every node of it again, at about fifteen times the cost of freeing it
    (a tenth of a large file's lint). The scopes must not be used after."""
    seen: dict[int, object] = {}
    for scope in scopes.values():
        while scope is not None and id(scope) not in seen:
            seen[id(scope)] = scope
            scope = getattr(scope, "parent", None)
    for scope in list(seen.values()):
        for assignment in scope.assignments:
            _forget(assignment)
    for scope in seen.values():
        _forget(scope)


def _forget(thing: object) -> None:
    """Drop every attribute ``thing`` holds in its ``__dict__`` (none where it has slots)."""
    attributes = getattr(thing, "__dict__", None)
    if attributes is not None:
        attributes.clear()
