"""The file model: what PyTorch objects the names of a file hold.

Computed once per file, on demand, and shared by every rule. It rests on LibCST's
``ScopeProvider`` and the qualified names its scopes give (so any import alias resolves),
asked only for the nodes rules look up, and adds one
collecting pass over the module for the facts rules share: the classes of the file and their
bases, what each name and ``self.`` attribute is assigned, and which objects feed an optimizer.

Further facts live in other modules of this package, each computed on first use through a
property of ``SemanticModel`` (``semantic/__init__.py``: training iterations, evaluation scopes, device choices), so a
run whose rules never ask for them never pays for them; each scans the nodes the collecting
pass recorded for it rather than walking the tree again. The same pass numbers the nodes in
walk order, which orders them as their positions would without rendering the module.

Precision comes first: a name whose value is not known has no kind, and rules stay silent.
"""

from __future__ import annotations

import bisect
import builtins
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterator

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import (
    Assignment,
    MetadataWrapper,
    QualifiedNameSource,
    Scope,
)

from torchlint.traversal import STATEMENTS, FastDispatch, ScopeProvider, checkpoints, release_scopes
from torchlint.semantic.vocabulary import (
    _BASE_KINDS, _module_class_kind, Kind, MODULE_RETURNS_SELF, MODULE_WRAPPED_ATTRS,
)

if TYPE_CHECKING:
    from torchlint.semantic.view import ProjectView


_MODULE_FACTORIES_PREFIXES = ("torchvision.models.", "timm.create_model", "torch.hub.load")


_BUILTIN_NAMES = frozenset(f"builtins.{name}" for name in dir(builtins))

# Contexts under which no autograd graph is recorded, by qualified name.
GRAD_OFF = {
    "torch.no_grad": "no_grad",
    "torch.inference_mode": "inference_mode",
    "torch.autograd.grad_mode.no_grad": "no_grad",
    "torch.autograd.grad_mode.inference_mode": "inference_mode",
}


@dataclass
class ClassInfo:
    node: cst.ClassDef
    base_names: list[str]
    # What ``self.<attr>`` is given in any method of the class: assigned values, annotations,
    # and whether its parameters feed an optimizer.
    attribute_values: dict[str, list[cst.BaseExpression]] = field(default_factory=lambda: defaultdict(list))
    attribute_annotations: dict[str, list[cst.BaseExpression]] = field(default_factory=lambda: defaultdict(list))
    attributes_feeding_optimizer: set[str] = field(default_factory=set)


# The nodes the facets' scans (training, evaluation and device facts) look at, and those
# whose end they also see (what encloses a node: functions, classes, loops, ``if``, ``try``).
SCANNED = frozenset(
    {cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.For, cst.While, cst.Try, cst.If, cst.Assert, cst.Call, cst.Assign,
     cst.AugAssign, cst.AnnAssign, cst.Del, cst.Import, cst.ImportFrom, cst.CompFor, cst.Attribute, cst.Param, cst.Arg,
     cst.Name}
)
SCANNED_ENDS = frozenset({cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.For, cst.While, cst.Try, cst.If})


class _Collector(FastDispatch, cst.CSTVisitor):
    """One pass over the module gathering the raw facts the model answers questions from."""

    # Whitespace, comments and punctuation are not walked: no fact is about them, and they
    # have no parents, order or scope here.
    SKIPS_TRIVIA = True

    def __init__(self, model: FileModel) -> None:
        super().__init__()
        self.model = model
        self.class_stack: list[ClassInfo] = []
        self.function_stack: list[cst.FunctionDef] = []
        self.node_stack: list[cst.CSTNode] = []
        self.check = model.check

    # Parents are recorded here rather than by ParentNodeProvider, which rebuilds every
    # node's children and cost a seventh of the run; so is each node's place in the walk,
    # which orders nodes without rendering the module for their positions, and what the
    # facets' scans look at (see ``FileModel.replay``).
    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.check is not None and type(node) in STATEMENTS:
            self.check()  # (the model's checkpoint: an editor's lint may stop here)
        if self.node_stack:
            self.model.parents[node] = self.node_stack[-1]
        self.node_stack.append(node)
        self.model.order[node] = len(self.model.order)
        if type(node) in SCANNED:
            self.model.scanned.append((node, True))
        return super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        super().on_leave(original_node)
        self.node_stack.pop()
        self.model.last_inside[original_node] = len(self.model.order) - 1
        if type(original_node) in SCANNED_ENDS:
            self.model.scanned.append((original_node, False))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        bases = [qn for arg in node.bases for qn in self.model.qualified_names(arg.value)]
        info = ClassInfo(node, bases)
        self.model.classes[node] = info
        self.class_stack.append(info)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.class_stack.pop()

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "cuda" in node.value:
            self.model.cuda_strings.append(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.function_stack.append(node)
        self.model.functions.setdefault(node.name.value, []).append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.function_stack.pop()

    def _target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        if value is None:
            return
        if isinstance(target, cst.Name):
            self.model.bound_values[target] = value
        elif isinstance(target, (cst.Tuple, cst.List)) and isinstance(value, (cst.Tuple, cst.List)):
            if len(target.elements) == len(value.elements):
                for t, v in zip(target.elements, value.elements):
                    self._target(t.value, v.value)
        elif self._is_self_attribute(target):
            self.class_stack[-1].attribute_values[target.attr.value].append(value)

    def _is_self_attribute(self, node: cst.BaseExpression) -> bool:
        if not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and self.class_stack and self.function_stack):
            return False
        params = self.function_stack[-1].params.params
        return bool(params) and params[0].name.value == node.value.value

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target, node.value)
        self.model.annotations[node.target] = node.annotation.annotation
        if self._is_self_attribute(node.target):
            self.class_stack[-1].attribute_annotations[node.target.attr.value].append(node.annotation.annotation)

    def visit_Param(self, node: cst.Param) -> None:
        if node.annotation is not None:
            self.model.annotations[node] = node.annotation.annotation

    def visit_Call(self, node: cst.Call) -> None:
        # Whatever's .parameters() feed an optimizer is a module.
        if self.model.call_kind(node, follow_names=False) is not Kind.OPTIMIZER or not node.args:
            return
        params = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "params"), None)
        if params is None and node.args[0].keyword is None:
            params = node.args[0].value
        for expr in _parameter_sources(params):
            if isinstance(expr, cst.Name):
                self.model.fed_optimizer_names.add(expr)
            elif self._is_self_attribute(expr):
                self.class_stack[-1].attributes_feeding_optimizer.add(expr.attr.value)


def _parameter_sources(expr: cst.BaseExpression | None) -> Iterator[cst.BaseExpression]:
    """``m`` in ``m.parameters()``, ``m.named_parameters()``, ``[*m.parameters(), ...]`` and
    param-group dicts ``{"params": m.parameters()}``, ``dict(params=m.parameters())``."""
    if expr is None:
        return
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value in ("parameters", "named_parameters"):
            yield expr.func.value
        return
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "filter") and expr.args:
        yield from _parameter_sources(expr.args[-1].value)
    elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        for arg in expr.args:  # dict(params=m.parameters(), lr=...)
            if arg.keyword is not None and arg.keyword.value == "params":
                yield from _parameter_sources(arg.value)
    elif isinstance(expr, (cst.List, cst.Tuple)):
        for element in expr.elements:
            yield from _parameter_sources(element.value)
    elif isinstance(expr, cst.Dict):
        for element in expr.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == "params":
                yield from _parameter_sources(element.value)
    elif isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        yield from _parameter_sources(expr.elt)
        for comp in _comp_fors(expr.for_in):
            yield from _parameter_sources(comp.iter)
    elif isinstance(expr, cst.BinaryOperation):
        yield from _parameter_sources(expr.left)
        yield from _parameter_sources(expr.right)


def call_argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    """What a call passes for a parameter at ``position`` named ``keyword``; None when it is
    not visible (a splat before it) or not passed."""
    for index, arg in enumerate(call.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg.value
        elif index == position:
            return arg.value
    return None


_OPENING_CHILD: dict[type, Callable[[Any], cst.CSTNode]] = {
    cst.Call: lambda n: n.func,
    cst.Attribute: lambda n: n.value,
    cst.Subscript: lambda n: n.value,
    cst.Expr: lambda n: n.value,
    cst.BinaryOperation: lambda n: n.left,
    cst.BooleanOperation: lambda n: n.left,
    cst.Comparison: lambda n: n.left,
    cst.IfExp: lambda n: n.body,
    cst.Assign: lambda n: n.targets[0].target,
    cst.AugAssign: lambda n: n.target,
    cst.AnnAssign: lambda n: n.target,
    cst.SimpleStatementLine: lambda n: n.body[0],
}


def _opening_child(node: cst.CSTNode) -> cst.CSTNode | None:
    """The child whose text ``node``'s text starts with (no token of its own and no
    parenthesis before it), for the nodes the facts compare (these node types have no
    subclasses: a look-up by type)."""
    opening = _OPENING_CHILD.get(type(node))
    if opening is None:
        return None
    child = opening(node)
    return None if getattr(child, "lpar", None) else child


def _comp_fors(comp: cst.CompFor | None) -> Iterator[cst.CompFor]:
    while comp is not None:
        yield comp
        comp = comp.inner_for_in


class FileModel:
    """Facts about one file's PyTorch objects: names, kinds, scopes, order. The facts built
    on it (training, evaluation, devices) make it ``semantic.SemanticModel``."""


    def __init__(
        self, wrapper: MetadataWrapper, project: ProjectView | None = None, checkpoint: Callable[[], None] | None = None
    ) -> None:
        self.wrapper = wrapper
        self.project = project  # the project index as this file sees it (semantic/view.py)
        # Called before each long stage (the scopes, the collecting pass, each facet) and at
        # each statement the first two walk: the engine's way to stop an editor's lint that
        # is no longer wanted (it raises there). None: nothing to call.
        self.check = checkpoint
        self.module = wrapper.module
        self.checkpoint()
        with checkpoints(checkpoint):  # (asked at each statement the scope analysis enters)
            self.scopes = wrapper.resolve(ScopeProvider)
        self._qname_cache: dict[cst.CSTNode, list[str]] = {}
        self._imported_cache: dict[cst.CSTNode, list[str]] = {}
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {}
        # The SCANNED nodes in walk order, each with True where it is entered and (for
        # SCANNED_ENDS) False where it is left.
        self.scanned: list[tuple[cst.CSTNode, bool]] = []
        self.cuda_strings: list[cst.SimpleString] = []  # strings that name CUDA (`"cuda:1"`), in walk order
        self.order: dict[cst.CSTNode, int] = {}  # each node's index in a pre-order walk
        self.last_inside: dict[cst.CSTNode, int] = {}  # the index of the last node of its subtree
        self._start_keys: dict[cst.CSTNode, float] = {}  # start_key's answers
        self.classes: dict[cst.ClassDef, ClassInfo] = {}
        self.functions: dict[str, list[cst.FunctionDef]] = {}
        self.bound_values: dict[cst.Name, cst.BaseExpression] = {}
        self.annotations: dict[cst.CSTNode, cst.BaseExpression] = {}
        self.fed_optimizer_names: set[cst.Name] = set()
        self._fed_bindings: set[Assignment] | None = None
        self._kind_cache: dict[cst.CSTNode, Kind | None] = {}
        self._in_progress: set[cst.CSTNode] = set()
        self._uses_cache: dict[cst.ClassDef, dict[str, set[str]]] = {}
        self.checkpoint()
        self.module.visit(_Collector(self))

    def release(self) -> None:
        """Let go of everything, once the lint is done with the model: its facets point back
        at it and LibCST's scopes at each other, cycles that held the whole tree for Python's
        cyclic collector (``traversal.release_scopes``). The model must not be used after."""
        scopes = self.__dict__.get("scopes")
        if scopes is not None:
            release_scopes(scopes)
        self.__dict__.clear()

    def checkpoint(self) -> None:
        """Where a long stage of the facts begins: ``check``, if any, may stop the lint."""
        if self.check is not None:
            self.check()

    # --- facets, each computed on first use ----------------------------------------------

    def replay(self, scan: object) -> None:
        """Give a facet's scan the nodes the collecting pass recorded, in walk order: its
        ``visit_<Node>(node)`` and ``leave_<Node>(node)`` methods are called as a walk of
        the tree would call them (no scan prunes), without walking the tree again."""
        handlers: dict[tuple[type, bool], object] = {}
        for node, entering in self.scanned:
            key = (type(node), entering)
            if key not in handlers:
                handlers[key] = getattr(scan, f"{'visit' if entering else 'leave'}_{type(node).__name__}", None)
            handler = handlers[key]
            if handler is not None:
                handler(node)

    @cached_property
    def _calls(self) -> list[cst.Call]:
        return [node for node, entering in self.scanned if entering and type(node) is cst.Call]

    @cached_property
    def _call_orders(self) -> list[int]:
        return [self.order[c] for c in self._calls]

    def calls_in(self, node: cst.CSTNode | None = None) -> list[cst.Call]:
        """The calls in ``node``'s subtree (decorators of a ``def`` included; None: the
        module), in walk order, from the collecting pass's record: no walk of the tree."""
        calls = self._calls
        if node is None or node is self.module:
            return calls
        orders = self._call_orders  # increasing: the calls are in walk order
        return calls[bisect.bisect_left(orders, self.order[node]) : bisect.bisect_right(orders, self.last_inside[node])]

    # --- names -------------------------------------------------------------------------

    def qualified_names(self, node: cst.CSTNode) -> list[str]:
        """Every qualified name of ``node``, sorted (LibCST gives a set)."""
        # What QualifiedNameProvider computes, asked of the scope only for the nodes rules
        # look up: resolving the provider for the whole tree cost a fifth of the run.
        if node not in self._qname_cache:
            scope = self.scopes.get(node)
            names = scope.get_qualified_names_for(node) if scope is not None else ()
            self._qname_cache[node] = sorted(q.name for q in names)
        return self._qname_cache[node]

    def qualified_name(self, node: cst.CSTNode) -> str | None:
        """The qualified name of ``node``, chosen deterministically: a torch name first."""
        names = self.qualified_names(node)
        if not names:
            return None
        torch_names = [n for n in names if n == "torch" or n.startswith("torch.")]
        return (torch_names or names)[0]

    @cached_property
    def imported_modules(self) -> list[str]:
        """Every module name the file imports (``frameworks.imported_modules``, from this
        tree): ``from d2l import torch`` gives ``d2l`` and ``d2l.torch``; relative imports
        left out."""
        names: list[str] = []
        for node, entering in self.scanned:
            if not entering:
                continue
            if type(node) is cst.Import:
                names += [get_full_name_for_node(alias.name) for alias in node.names]
            elif type(node) is cst.ImportFrom and not node.relative and node.module is not None:
                base = get_full_name_for_node(node.module)
                aliases = () if isinstance(node.names, cst.ImportStar) else node.names
                names += [base, *(f"{base}.{get_full_name_for_node(alias.name)}" for alias in aliases)]
        return names

    @cached_property
    def torch_alias(self) -> str | None:
        """The name the module binds ``torch`` to at top level (``import torch as th``: ``th``),
        for fixes that must write a torch call; None when torch itself is not imported."""
        for statement in self.module.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Import):
                        for alias in small.names:
                            if isinstance(alias.name, cst.Name) and alias.name.value == "torch":
                                return alias.asname.name.value if alias.asname else "torch"
        return None

    def grad_off_context(self, expr: cst.BaseExpression) -> str | None:
        """``no_grad`` or ``inference_mode`` when ``expr`` (a ``with`` item or decorator,
        called or not) is one of them, however imported; None otherwise."""
        target = expr.func if isinstance(expr, cst.Call) else expr
        return GRAD_OFF.get(self.qualified_name(target) or "")

    def is_call_to(self, node: cst.CSTNode, *qnames: str) -> bool:
        return isinstance(node, cst.Call) and self.qualified_name(node.func) in qnames

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def top_statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The module's top-level statement that holds ``node`` (None: not in one)."""
        parents = self.parents
        parent = parents.get(node)
        while parent is not None and parent is not self.module:
            node, parent = parent, parents.get(parent)
        return node if parent is not None else None

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        node = self.parents.get(node)
        while node is not None:
            yield node
            node = self.parents.get(node)

    def enclosing_class(self, node: cst.CSTNode) -> ClassInfo | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return self.classes.get(ancestor)
        return None

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        return next((a for a in self.ancestors(node) if isinstance(a, cst.FunctionDef)), None)

    # --- other files of the project (the project index) ---------------------------------

    def imported_names(self, node: cst.CSTNode) -> list[str]:
        """The qualified names ``node`` has through the file's imports (torch's aside), sorted."""
        if node not in self._imported_cache:
            scope = self.scopes.get(node)
            names = scope.get_qualified_names_for(node) if scope is not None else ()
            self._imported_cache[node] = sorted(
                q.name for q in names if q.source is QualifiedNameSource.IMPORT and not q.name.startswith("torch.")
            )
        return self._imported_cache[node]

    def _project_fact(self, node: cst.CSTNode, fact: str):
        """What the project index says of the class or function an imported name refers to:
        ``fact`` is a method of ``ProjectView``. None without an index or when unknown."""
        if self.project is None or not isinstance(node, (cst.Name, cst.Attribute)):
            return None
        if not any(not q.startswith("torch.") and q not in _BUILTIN_NAMES for q in self.qualified_names(node)):
            return None  # cheap: most calls are torch's, builtins, or the file's own
        for qname in self.imported_names(node):
            found = getattr(self.project, fact)(qname)
            if found is not None:
                return found
        return None

    def project_class_kind(self, expr: cst.BaseExpression) -> Kind | None:
        """The kind of a class imported from another file of the project."""
        return self._project_fact(expr, "class_kind")

    def project_runs_forward(self, func: cst.BaseExpression, method: str) -> bool | None:
        """Whether ``method`` of an instance of the imported project class ``func`` runs its
        submodules (``ProjectView.runs_forward``); None without an index or when unknown."""
        if self.project is None or not isinstance(func, (cst.Name, cst.Attribute)):
            return None
        for qname in self.imported_names(func):
            found = self.project.runs_forward(qname, method)
            if found is not None:
                return found
        return None

    def star_imports_torch(self) -> bool:
        """Whether a ``from M import *`` of the file brings PyTorch in from a module of the
        project (``ProjectView.star_imports_torch``): ``from ..network import *`` whose
        package imports torch."""
        if self.project is None:
            return False
        for node in self.module.body:
            if not isinstance(node, cst.SimpleStatementLine):
                continue
            for statement in node.body:
                if isinstance(statement, cst.ImportFrom) and isinstance(statement.names, cst.ImportStar):
                    name = get_full_name_for_node(statement.module) if statement.module is not None else ""
                    if self.project.star_imports_torch("." * len(statement.relative) + (name or "")):
                        return True
        return False

    def project_mode_layers(self, func: cst.BaseExpression) -> bool | None:
        """Whether what an imported project class or factory builds holds a layer that train
        mode changes (True), is known to hold none (False), or neither is known (None)."""
        return self._project_fact(func, "mode_layers")

    def project_mode_effect(self, func: cst.BaseExpression) -> str | None:
        """``"eval"`` or ``"train"``: the mode an imported project function leaves modules in."""
        return self._project_fact(func, "mode_effect")

    def project_requires_cuda(self, func: cst.BaseExpression) -> str | None:
        """Why every call of an imported project function needs CUDA, or None; a name the
        file never binds is looked up through its star imports (``from utils import *``)."""
        reason = self._project_fact(func, "requires_cuda")
        if reason is None and self.project is not None and isinstance(func, cst.Name) and not self.assignments(func) and self._has_star_import:
            return self.project.requires_cuda(func.value)
        return reason

    @cached_property
    def oldest_torch(self) -> tuple[int, int] | None:
        """The oldest torch version the file's project supports (``target-torch``, else its
        declared requirement on torch: ``ProjectView.oldest_torch``), as (major, minor);
        None when unknown, or without a project index. A migration fix is safe only when its
        replacement exists there (``torch_api.available``)."""
        return self.project.oldest_torch() if self.project is not None else None

    @cached_property
    def newest_torch(self) -> tuple[int, int] | None:
        """The newest torch version the file's project supports, where its declarations pin
        or cap torch (``ProjectView.newest_torch``); None when unknown or uncapped. A
        deprecation that comes after it is none of the project's concern."""
        return self.project.newest_torch() if self.project is not None else None

    def file_name(self) -> str | None:
        """The name of the file linted, where the project index knows it (None: standard
        input, a document never saved)."""
        return self.project.file_name() if self.project is not None else None

    def project_callers_hold(self, function: cst.FunctionDef, fact: str) -> bool | None:
        """Whether ``fact`` (``"grad"``: gradients off, ``"eval"``: eval mode) holds at every
        call of a top-level function of this file in the project's other files, or of a
        method of one of its classes, ``x.name(...)`` (``"grad"`` only); None when no other
        file calls it (``ProjectView.callers_hold``, ``method_callers_hold``)."""
        if self.project is None:
            return None
        if isinstance(self.parent(function), cst.Module):
            return self.project.callers_hold(function.name.value, fact)
        cls = self.parent(self.parent(function))
        if isinstance(cls, cst.ClassDef):
            return self.project.method_callers_hold(function.name.value, fact, _base_names(cls))
        return None

    def project_callers_backprop(self, function: cst.FunctionDef) -> bool | None:
        """Whether a call of a top-level function of this file in the project's other files
        may differentiate its result (``ProjectView.callers_backprop``), or of a method of
        one of its classes, ``x.name(...)`` (``ProjectView.method_callers_backprop``); None
        when no other file calls it, or there is no project index."""
        if self.project is None:
            return None
        if isinstance(self.parent(function), cst.Module):
            return self.project.callers_backprop(function.name.value)
        cls = self.parent(self.parent(function))
        if isinstance(cls, cst.ClassDef):
            return self.project.method_callers_backprop(function.name.value, _base_names(cls))
        return None

    def project_module_loads(self) -> dict[str, str] | None:
        """What the project's files read as a module of what ``torch.load`` gives them: ""
        the loaded object, a key of it, "*" a key not spelled as a string, each with a file
        that reads it, relative to the project's folder (``ProjectView.module_loads``); empty
        without a project index, None when unknown."""
        if self.project is None:
            return {}
        loads = self.project.module_loads()
        return dict(loads) if loads is not None else None

    def project_gives_no_graph(self, func: cst.BaseExpression) -> bool:
        """Whether the function ``func`` imported from another file of the project gives back
        nothing that carries a graph of its arguments (``to_np(t)``: ``ProjectView.gives_no_graph``)."""
        if self._project_fact(func, "gives_no_graph") is True:
            return True
        # A name the file never binds, from a star import (`from ..utils import *`: `to_np`).
        return (
            self.project is not None and isinstance(func, cst.Name) and not self.assignments(func)
            and self._has_star_import and self.project.gives_no_graph(func.value) is True
        )

    @cached_property
    def _has_star_import(self) -> bool:
        return any(
            isinstance(statement, cst.ImportFrom) and isinstance(statement.names, cst.ImportStar)
            for node in self.module.body if isinstance(node, cst.SimpleStatementLine) for statement in node.body
        )

    def project_returns_argument(self, func: cst.BaseExpression) -> int | None:
        """The position of the parameter that the function ``func`` imported from another
        file of the project gives back, itself or through a module's own methods
        (``de_parallel(model)``: ``ProjectView.returns_argument``); None when unknown."""
        return self._project_fact(func, "returns_argument")

    def param_given_modules(self, name: cst.Name) -> bool:
        """An unannotated parameter of a top-level function of this file to which every call
        of the function, in this file and in the project's other files (the project index),
        passes a known module; at least one call, and the function never passed around."""
        assignments = self.assignments(name)
        if len(assignments) != 1 or not isinstance(assignments[0].node, cst.Param) or assignments[0].node in self.annotations:
            return False
        param = assignments[0].node
        function = self.enclosing_function(param)
        if function is None or not isinstance(self.parent(function), cst.Module):
            return False
        params = list(function.params.params)
        if param not in params:
            return False  # keyword-only, *args: not matched by position
        position = params.index(param)
        kinds = []
        for binding in self.assignments_of_function(function):
            for access in binding.references:
                call = self.parent(access.node)
                if not (isinstance(call, cst.Call) and call.func is access.node):
                    return False  # passed around: its callers are unknown
                argument = call_argument(call, position, param.name.value)
                kinds.append(self.kind(argument) if argument is not None else None)
        if self.project is not None:
            elsewhere = self.project.argument_kinds(function.name.value, position, param.name.value)
            if elsewhere is None:
                return False
            kinds.extend(elsewhere)
        return bool(kinds) and all(k is Kind.MODULE for k in kinds)

    def assignments_of_function(self, function: cst.FunctionDef) -> list[Assignment]:
        scope = self.scopes.get(function)
        if scope is None:
            return []
        return [a for a in scope.assignments[function.name.value] if a.node is function]

    # --- kinds -------------------------------------------------------------------------

    def class_kind(self, info: ClassInfo, seen: frozenset = frozenset()) -> Kind | None:
        """The kind of a class defined in this file, from its bases (followed through local
        classes)."""
        for base in info.base_names:
            if base in _BASE_KINDS:
                return _BASE_KINDS[base]
            kind = _module_class_kind(base)
            if kind is not None:
                return kind
        for arg in info.node.bases:
            kind = self.project_class_kind(arg.value)
            if kind is not None:
                return kind
            local = self._local_class(arg.value)
            if local is not None and local.node not in seen:
                kind = self.class_kind(local, seen | {info.node})
                if kind is not None:
                    return kind
        return None

    def parameter_free_class(self, cls: cst.ClassDef, seen: frozenset = frozenset()) -> bool:
        """Whether an instance of a class of this file is known to hold no parameters: its
        ``__init__`` (if any) calls nothing but ``super().__init__(...)`` (it stores plain
        values), and each base is ``torch.nn.Module``, such a class of this file, or one of
        another file of the project (``ProjectView.parameter_free``)."""
        if not cls.bases or cls in seen:
            return False
        for statement in cls.body.body:
            if isinstance(statement, cst.FunctionDef) and statement.name.value == "__init__":
                if any(not _super_init(c) for c in self.calls_in(statement)):
                    return False
        for base in cls.bases:
            if (self.qualified_name(base.value) or "") in ("torch.nn.Module", "torch.nn.modules.module.Module"):
                continue
            local = self._local_class(base.value)
            if local is not None:
                if not self.parameter_free_class(local.node, seen | {cls}):
                    return False
            elif self._project_fact(base.value, "parameter_free") is not True:
                return False
        return True

    def _local_class(self, expr: cst.BaseExpression) -> ClassInfo | None:
        if not isinstance(expr, cst.Name):
            return None
        for assignment in self.assignments(expr):
            if isinstance(assignment.node, cst.ClassDef):
                return self.classes.get(assignment.node)
        return None

    def assignments(self, name: cst.Name) -> list[Assignment]:
        """Every binding of ``name`` visible where it is read, in source order."""
        scope: Scope | None = self.scopes.get(name)
        if scope is None:
            return []
        found: set[Assignment] = set()
        try:
            accesses = scope.accesses[name]
        except KeyError:
            accesses = ()
        for access in accesses:
            found.update(r for r in access.referents if isinstance(r, Assignment))
        if not found:
            # A name read in a nested function or before its binding: fall back to the
            # bindings visible from its scope.
            found.update(a for a in scope[name.value] if isinstance(a, Assignment))
        if len(found) <= 1:
            return list(found)
        return sorted(found, key=lambda a: self.start_key(a.node))

    def _reaching(self, name: cst.Name, assignments: list[Assignment]) -> list[Assignment]:
        """The bindings of ``name`` that reach it in straight-line code: of those in its own
        scope, the last one that takes effect before it (``model = model.state_dict()``
        replaces the module). Bindings from enclosing scopes all count."""
        scope = self.scopes.get(name)
        if not any(a.scope is scope for a in assignments):
            return assignments
        use = self.start_key(name)
        before = [a for a in assignments if a.scope is scope and self._effect_key(a) <= use]
        if not before:
            return assignments
        return [max(before, key=self._effect_key)] + [a for a in assignments if a.scope is not scope]

    def values(self, expr: cst.BaseExpression) -> list[cst.BaseExpression]:
        """The values bound to a name that reach it (see ``_reaching``), or every value
        assigned to a ``self.`` attribute in its class."""
        if isinstance(expr, cst.Name):
            assignments = self._reaching(expr, self.assignments(expr))
            return [self.bound_values[a.node] for a in assignments if a.node in self.bound_values]
        if isinstance(expr, cst.Attribute):
            info = self._self_class(expr)
            if info is not None:
                return list(info.attribute_values.get(expr.attr.value, ()))
        return []

    def reads_of(self, value: cst.BaseExpression) -> list[cst.CSTNode]:
        """Where the value of an expression is read: the expression itself, or, when it is
        assigned to a single name (``ckpt = torch.load(path)``, or annotated: ``ckpt: dict =
        torch.load(path)``), each read of that binding."""
        parent = self.parent(value)
        target = None
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
        elif isinstance(parent, cst.AnnAssign) and parent.value is value:
            target = parent.target
        if isinstance(target, cst.Name):
            reads = self.binding_reads(target)
            if reads is not None:
                return reads
        return [value]

    def binding_reads(self, target: cst.Name | cst.Param) -> list[cst.CSTNode] | None:
        """Each read of the binding that ``target`` (an assignment's target name, or a
        parameter) makes; None where the scope analysis does not know the name."""
        name = target.name if isinstance(target, cst.Param) else target
        scope = self.scopes.get(name)
        if scope is None:
            return None
        return [r.node for a in scope.assignments[name.value] if a.node is target for r in a.references]

    def _effect_key(self, assignment: Assignment) -> float:
        # An assignment takes effect once its value is computed.
        value = self.bound_values.get(assignment.node)
        if value is not None and value in self.last_inside:
            return self.end_key(value)
        return self.start_key(assignment.node)

    # --- order in the source -------------------------------------------------------------
    # Numbers from the collecting pass's walk that compare as the nodes' positions do,
    # without resolving PositionProvider (a rendering of the whole module, left to findings).

    def start_key(self, node: cst.CSTNode) -> float:
        """Where ``node`` starts. As with positions, a node that opens with a child starts
        where that child does (``model(x)`` and ``model``), and a ``def`` or ``class`` at its
        keyword, after its decorators."""
        key = self._start_keys.get(node)
        if key is not None:
            return key
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            key = self.order[node.name] - 0.5
        else:
            opening = node
            while (child := _opening_child(opening)) is not None:
                opening = child
            key = self.order.get(opening, -1)
        if key >= 0:  # (a node the walk has not reached yet has none)
            self._start_keys[node] = key
        return key

    def end_key(self, node: cst.CSTNode) -> float:
        """Where ``node`` ends: after every node inside it, before every node after it."""
        return self.last_inside[node] + 0.5

    def inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        """Whether ``node`` is ``container`` or in it (a decorator is not in its ``def``)."""
        return self.start_key(container) <= self.start_key(node) and self.end_key(node) <= self.end_key(container)

    def call_kind(self, call: cst.Call, follow_names: bool = True) -> Kind | None:
        """The kind of object a call returns."""
        qname = self.qualified_name(call.func)
        if qname is not None:
            kind = _module_class_kind(qname)
            if kind is not None:
                return kind
            if qname == "torch.compile" and call.args and follow_names:
                return self.kind(call.args[0].value)
        kind = self._project_fact(call.func, "call_kind")
        if kind is not None:
            return kind
        if not follow_names:
            return None
        if isinstance(call.func, cst.Name):
            for assignment in self.assignments(call.func):
                if isinstance(assignment.node, cst.ClassDef) and assignment.node in self.classes:
                    return self.class_kind(self.classes[assignment.node])
                if isinstance(assignment.node, cst.FunctionDef):
                    return self._return_kind(assignment.node)
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in MODULE_RETURNS_SELF:
            if self.kind(call.func.value) is Kind.MODULE:
                return Kind.MODULE
        return None

    def _return_kind(self, function: cst.FunctionDef) -> Kind | None:
        kinds = set()

        class Returns(cst.CSTVisitor):
            def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
                return node is function

            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                return False

            def visit_Return(inner, node: cst.Return) -> None:
                if node.value is not None:
                    value = node.value
                    if isinstance(value, cst.Tuple):
                        return
                    kinds.add(self.kind(value))

        function.visit(Returns())
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None

    def kind_of_annotation(self, annotation: cst.BaseExpression) -> Kind | None:
        if isinstance(annotation, cst.Subscript):  # Optional[nn.Module]
            qname = self.qualified_name(annotation.value)
            if qname in ("typing.Optional",) and annotation.slice:
                element = annotation.slice[0].slice
                if isinstance(element, cst.Index):
                    return self.kind_of_annotation(element.value)
            return None
        if isinstance(annotation, cst.BinaryOperation) and isinstance(annotation.operator, cst.BitOr):
            kinds = {self.kind_of_annotation(annotation.left), self.kind_of_annotation(annotation.right)} - {None}
            return kinds.pop() if len(kinds) == 1 else None
        for qname in self.qualified_names(annotation):
            if qname in _BASE_KINDS:
                return _BASE_KINDS[qname]
            kind = _module_class_kind(qname)
            if kind is not None:
                return kind
        local = self._local_class(annotation) if isinstance(annotation, cst.Name) else None
        return self.class_kind(local) if local is not None else self.project_class_kind(annotation)

    def kind(self, expr: cst.BaseExpression) -> Kind | None:
        """What ``expr`` holds, if the file says: an ``nn.Module``, an optimizer, a scheduler,
        a loss function or a grad scaler. ``None`` when unknown."""
        if expr in self._kind_cache:
            return self._kind_cache[expr]
        if expr in self._in_progress:  # model = model.to(device): a cycle through the same name
            return None
        self._in_progress.add(expr)
        try:
            kind = self._kind(expr)
        finally:
            self._in_progress.discard(expr)
        self._kind_cache[expr] = kind
        return kind

    def _kind(self, expr: cst.BaseExpression) -> Kind | None:
        if isinstance(expr, cst.Call):
            return self.call_kind(expr)
        if isinstance(expr, cst.Name):
            return self._name_kind(expr)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in MODULE_WRAPPED_ATTRS and self.kind(expr.value) is Kind.MODULE:
                return Kind.MODULE
            info = self._self_class(expr)
            if info is not None:
                return self._attribute_kind(info, expr.attr.value)
        return None

    def _name_kind(self, name: cst.Name) -> Kind | None:
        kinds = set()
        assignments = self._reaching(name, self.assignments(name))
        if self._fed_bindings is None:
            self._fed_bindings = {a for fed in self.fed_optimizer_names for a in self.assignments(fed)}
        if self._fed_bindings.intersection(assignments):
            kinds.add(Kind.MODULE)
        for assignment in assignments:
            node = assignment.node
            if isinstance(node, cst.Param):
                if node in self.annotations:
                    kinds.add(self.kind_of_annotation(self.annotations[node]))
                else:
                    kinds.add(self._self_param_kind(node))
            elif isinstance(node, cst.Name):
                if node in self.bound_values:
                    kinds.add(self.kind(self.bound_values[node]))
                if node in self.annotations:
                    kinds.add(self.kind_of_annotation(self.annotations[node]))
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None

    def _self_param_kind(self, param: cst.Param) -> Kind | None:
        """``self`` in a method of a class of known kind (``torch.save(self, path)`` in a module)."""
        function = self.enclosing_function(param)
        if function is None or not function.params.params or function.params.params[0] is not param:
            return None
        if any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators):
            return None
        parent = self.parent(self.parent(function))  # FunctionDef -> IndentedBlock -> ClassDef
        if isinstance(parent, cst.ClassDef) and parent in self.classes:
            return self.class_kind(self.classes[parent])
        return None

    def _self_class(self, expr: cst.Attribute) -> ClassInfo | None:
        if not isinstance(expr.value, cst.Name):
            return None
        function = self.enclosing_function(expr)
        if function is None or not function.params.params or function.params.params[0].name.value != expr.value.value:
            return None
        # The function must be a method: its parent (through the class body) is a class.
        info = self.enclosing_class(function)
        return info

    def _attribute_kind(self, info: ClassInfo, attr: str) -> Kind | None:
        kinds = {self.kind(value) for value in info.attribute_values.get(attr, ())}
        kinds.update(self.kind_of_annotation(a) for a in info.attribute_annotations.get(attr, ()))
        if attr in info.attributes_feeding_optimizer:
            kinds.add(Kind.MODULE)
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None

    # --- modules known by how their class uses them -------------------------------------

    def attribute_used_as_module(self, expr: cst.Attribute) -> bool:
        """``self.<attr>`` whose value the file does not show (``self.model = model``) but
        which its class uses as only an ``nn.Module`` is used: its parameters, submodules or
        buffers listed, or put in train/eval mode and also called, moved or asked for its
        ``state_dict``. False when any value assigned to it is known to be something else."""
        info = self._self_class(expr)
        if info is None:
            return False
        attr = expr.attr.value
        for value in info.attribute_values.get(attr, ()):
            if isinstance(value, (cst.BaseString, cst.Integer, cst.Float, cst.BaseDict, cst.BaseList, cst.Tuple,
                                  cst.BaseSet, cst.BaseComp, cst.Lambda)):
                return False
            if self.kind(value) not in (None, Kind.MODULE):
                return False
            if isinstance(value, cst.Call) and isinstance(value.func, cst.Name):
                local = self._local_class(value.func)
                if local is not None and self.class_kind(local) is not Kind.MODULE:
                    return False
        uses = self._attribute_uses(info).get(attr, set())
        return bool(uses & _MODULE_ONLY_USES) or bool(uses & {"train", "eval"} and uses & _MODULE_LIKE_USES)

    def _attribute_uses(self, info: ClassInfo) -> dict[str, set[str]]:
        """Per ``self.<attr>`` of the class: the methods called on it, and ``"()"`` when it is
        called itself."""
        if info.node in self._uses_cache:
            return self._uses_cache[info.node]
        uses: dict[str, set[str]] = defaultdict(set)
        model = self

        class Uses(cst.CSTVisitor):
            def visit_ClassDef(self, node: cst.ClassDef) -> bool:
                return node is info.node

            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute):
                    if model._self_class(func.value) is info:  # self.model.eval()
                        uses[func.value.attr.value].add(func.attr.value)
                elif isinstance(func, cst.Attribute) and model._self_class(func) is info:  # self.model(x)
                    uses[func.attr.value].add("()")

        info.node.visit(Uses())
        self._uses_cache[info.node] = uses
        return uses

    def local_bases(self, info: ClassInfo) -> list[ClassInfo]:
        """The base classes of ``info`` that this file defines."""
        bases = [self._local_class(arg.value) for arg in info.node.bases]
        return [base for base in bases if base is not None and base is not info]


# Uses that only an nn.Module has, and uses that a module shares with other objects.
_MODULE_ONLY_USES = frozenset(
    {"parameters", "named_parameters", "modules", "named_modules", "children", "named_children", "buffers",
     "named_buffers"}
)
_MODULE_LIKE_USES = frozenset({"()", "to", "cuda", "state_dict", "load_state_dict"})
# (Public for rules that prove a value a module by what is called on it: TL501's checkpoint entries.)
MODULE_ONLY_USES = _MODULE_ONLY_USES


def _base_names(cls: cst.ClassDef) -> tuple[str, ...]:
    """The names a class's bases are spelled with, last parts (``nn.Module``: ``Module``):
    another file's class of one of these names may be one it derives from."""
    names = []
    for base in cls.bases:
        value = base.value
        while isinstance(value, cst.Attribute):
            value = value.attr
        if isinstance(value, cst.Name):
            names.append(value.value)
    return tuple(sorted(names))


def _super_init(call: cst.Call) -> bool:
    """``super().__init__(...)`` (``super(Net, self).__init__()``), or its ``super(...)``."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value == "super"
    return (
        isinstance(func, cst.Attribute) and func.attr.value == "__init__" and isinstance(func.value, cst.Call)
        and isinstance(func.value.func, cst.Name) and func.value.func.value == "super"
    )
