"""The project index: what one file needs to know about the other files of its project.

Each Python file is summarised from Python's own ``ast`` (a C parser, much cheaper than
LibCST) into plain, picklable data: its import bindings, its classes (bases, the layers
they build, the project classes and functions they call) and its functions (what they
return, the modes they switch models to). Summaries keep names as qualified names through
the file's own imports (``torch.nn.Module``, ``.models.Net``, ``models.build_model``); a
name defined in the file itself stays bare (``Net``).

``build_index`` summarises the files being linted and the project files they import,
transitively and bounded, resolving module names to files as Python would from the project
root. ``ProjectIndex.view(path)`` is what one file's lint sees: the semantic model asks it
about names its file imports. A name that does not resolve to a project file, a star
import, or a fact a summary could not see is unknown, and the rules stay silent.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
from collections import ChainMap, deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, ClassVar, Iterable, Iterator

from torchlint import pieces
from torchlint.engine import cyclic_gc_paused, source_rows
from torchlint.positions import LintMemo
from torchlint.rule import syntax_tree
from torchlint.semantic.supported_torch import marks_project

# Enough to follow a package's __init__ re-exports down to the class that builds the layers.
MAX_IMPORT_DEPTH = 6
# Files added beyond the linted ones: an import of a huge sibling tree stays bounded.
MAX_EXTRA_FILES = 2000
# Files beside the linted ones (their folders up to the project root) read for the calls they
# make of the linted files' functions.
MAX_SIBLING_FILES = 500
# Files of the project looked at for loads of a checkpoint read as a module (TL501's readers).
MAX_LOADER_FILES = 5000
# Folders under a project root that hold no code of the project.
_NOT_PROJECT_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})
_MAX_RESOLUTION = 12  # re-export chains and class hierarchies followed in one question

_BUILTINS = frozenset(dir(builtins))
DEPENDENT, FREE = True, False  # a class's mode facts; None: unknown


@dataclass(frozen=True)
class ClassSummary:
    name: str
    bases: tuple[str, ...]  # qualified names; "" for a base that is not a plain name
    # Builds or runs a layer that train mode changes (dropout, batch norm, RReLU, a
    # transformer layer, ``dropout=``), calls such a function, or reads ``.training``.
    mode_layers: bool
    # Calls something whose effect on modes is not visible (so "free" cannot be known).
    mode_unknown: bool
    # Qualified names of the calls it makes that may be project classes or functions.
    calls: tuple[str, ...]
    # The methods it defines, and those of them that run the module or its submodules
    # (``self(...)``, ``self.forward(...)``, ``self.<attribute>(...)``) with gradients left as the
    # caller has them: a call of one is a forward pass (SPEC section 5).
    methods: tuple[str, ...] = ()
    forward_methods: tuple[str, ...] = ()
    # The bases no import of the file names, as written (``nn.Module`` where ``nn`` comes
    # from a ``from module import *``): looked up through the star imports when asked.
    unnamed_bases: tuple[str, ...] = ()


@dataclass(frozen=True)
class FunctionSummary:
    name: str
    # What each ``return`` gives: the qualified name of the call that built it, or "" for
    # a value the summary cannot name. Tuples and bare ``return`` are left out.
    returns: tuple[str, ...]
    # Mode switches in the function's own body, in order: "eval", "train", or
    # "call:<qualified name>" for a call of a plain function (resolved when asked).
    mode_events: tuple[str, ...]
    # Why every call of the function needs CUDA ("calls torch.cuda.set_device", "starts
    # NCCL"), or "" (``_Summarizer._requires_cuda``).
    requires_cuda: str = ""
    # Decorated as a kernel of a GPU-only library (``@triton.jit``, ``@triton.autotune(...)``).
    gpu_kernel: bool = False
    # What the calls that run on every call of it call (not in a branch, loop or ``try``,
    # before any ``return``): qualified names of possible project functions, a launched
    # kernel's name for ``kernel[grid](...)``, or a GPU-only library's function.
    unconditional_calls: tuple[str, ...] = ()
    # The position of the parameter that every ``return`` gives back, as itself or through
    # what a module returns itself from (``model.module if parallel else model``,
    # ``model.to(device)``), the parameter never rebound; -1 when there is none.
    returns_argument: int = -1


@dataclass(frozen=True)
class CallSite:
    """A call of a name that may be a project function: ``helper(...)`` of the file's own
    top-level functions, ``evaluate(...)`` / ``utils.evaluate(...)`` of an imported one."""

    target: str  # the qualified name called (bare for the file's own functions)
    # The top-level function whose own body makes the call; "" at module level, or inside a
    # method or a nested function (whose callers the summary does not follow).
    function: str
    # Someone else owns the mode and gradients where the call runs: a framework hook, a
    # method of a module or framework class, a test.
    owned: bool
    grad_off: bool  # inside no_grad / inference_mode, or after set_grad_enabled(False)
    # The mode switches of the calling body before the call, from the last plain one
    # ("eval", "train", or "call:<qualified name>" of a function called by name).
    modes_before: tuple[str, ...]
    # What each argument was built by: the qualified name of the call ("" unknown).
    args: tuple[str, ...]
    keywords: tuple[tuple[str, str], ...]
    used: bool = True  # what it returns is used (not a statement of its own, thrown away)


# The target of a pseudo call that marks a body calling a backward pass (`loss.backward()`,
# `torch.autograd.grad`): the callers whose body backpropagates may differentiate a result.
BACKWARD_TARGET = "<backward>"


@dataclass(frozen=True)
class ModuleSummary:
    imports: tuple[tuple[str, str], ...]  # (local name, qualified name) of top-level imports
    imported_modules: tuple[str, ...]  # every module any import names ("" parts relative: ".models")
    classes: tuple[ClassSummary, ...]
    functions: tuple[FunctionSummary, ...]
    calls: tuple[CallSite, ...] = ()
    # Names of possible project functions used other than by calling them (a callback).
    references: tuple[str, ...] = ()
    # Calls of methods, ``x.name(...)`` on what no import names: (name, the top-level
    # function whose own body calls it or "", whether what it returns is used), once each;
    # and the attribute names read other than by calling them (``callback=self.step``).
    method_calls: tuple[tuple[str, str, bool], ...] = ()
    method_references: tuple[str, ...] = ()
    star_imports: tuple[str, ...] = ()  # the modules of `from M import *` ("" parts relative: "..network")
    # What the file reads as a module of what ``torch.load`` gives (``_Sites._module_read``):
    # "" the loaded object itself, a key of it (``ckpt["model"].eval()``), "*" a key not
    # spelled as a string.
    module_loads: tuple[str, ...] = ()
    # Top-level names bound to another name (``Model = DetectionModel``), with its qualified name.
    aliases: tuple[tuple[str, str], ...] = ()


# --- summarising one file --------------------------------------------------------------


@cyclic_gc_paused  # as while a file is linted: the tree is no garbage
def summarize(source: bytes | str, tree: ast.Module | None = None, memo: LintMemo | None = None) -> ModuleSummary | None:
    """The summary of one module's source (``tree``: its ``ast`` tree, when the caller has
    parsed it); None when it does not parse. ``memo`` (an editor's, per document) keeps what
    was found in each top-level function and class of the last version: one whose text, and
    what the module around it holds (imports, definitions, what module-level names were
    built by), are unchanged is not walked again."""
    try:
        if tree is None and memo is None and isinstance(source, bytes) and source.count(b"\n") >= pieces.MIN_LINES:
            bodies = pieces.reader(source)  # a large file: never its whole tree at once, read once
            if bodies is not None:
                return _Summarizer(bodies, names=pieces.definition_names(source)).summary()
        if tree is None:
            tree = syntax_tree(source)  # the lint's own syntax check, warnings silenced
        # The walks recurse once per nesting level: a chain of thousands of `+` is too deep.
        body = tree.body
        return _Summarizer(lambda: [body], source_rows(source) if memo is not None else None, memo).summary()
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


# What holds statements: statements' bodies, and the handlers and cases between a ``try`` or
# ``match`` and theirs.
_STATEMENT_HOLDERS = (ast.stmt, ast.excepthandler, ast.match_case) if hasattr(ast, "match_case") else (ast.stmt, ast.excepthandler)


def _statements_breadth_first(body: list[ast.stmt]) -> Iterator[tuple[int, ast.AST]]:
    """The statements of a module's ``body``, with their depth, in the order ``ast.walk``
    reaches them (breadth first, each node's children in field order), without walking the
    expressions: an import is a statement, and the first binding of a name wins."""
    queue = deque((0, node) for node in body)
    while queue:
        depth, node = queue.popleft()
        yield depth, node
        for name in node._fields:
            value = getattr(node, name)
            if type(value) is list:
                queue.extend((depth + 1, child) for child in value if isinstance(child, _STATEMENT_HOLDERS))


class _Summarizer:
    """One module's summary, from its top-level statements: ``bodies()`` gives them (a list
    per chunk of the file, ``pieces.chunks``). What a definition's summary depends on besides
    its own text is the file's imports and top-level definitions (``qualify`` and
    ``callable_name`` read them): they are read first, in a pass of their own, then the
    summaries; or, given ``names`` (those that may be defined at the top level: a guess,
    ``pieces.definition_names``), in one pass (``summary``), for a file whose every reading
    is a parse."""

    def __init__(
        self,
        bodies: Callable[[], Iterable[list[ast.stmt]]],
        rows: list | None = None,
        memo: LintMemo | None = None,
        names: tuple[set[str], set[str]] | None = None,
    ) -> None:
        self.bodies = bodies
        self.rows, self.memo = rows, memo  # the source's lines, for ``memo``'s keys
        self.imports: dict[str, str] = {}  # every import binding of the file, by local name
        self.top_imports: list[tuple[str, str]] = []
        self.modules: list[str] = []
        self.stars: list[str] = []
        self.defined: set[str] = set()
        self.functions_defined: set[str] = set()
        self._found: list[tuple] = []  # (depth, chunk, order, node, top): ``_statements_breadth_first`` of the whole
        self.names = names
        self.asked: set | None = None  # (read once: what the chunk being read asked of the file)
        if names is None:
            for chunk, body in enumerate(bodies()):
                self._learn(chunk, body, self.defined, self.functions_defined)
            self._bind_imports()
        # What a definition's summary depends on besides its own text.
        self.context = (tuple(self.imports.items()), frozenset(self.defined), frozenset(self.functions_defined))

    def _learn(self, chunk: int, body: list[ast.stmt], defined: set[str], functions: set[str]) -> None:
        """The top-level definitions and the imports of a chunk."""
        for node in body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                defined.add(node.name)
                if not isinstance(node, ast.ClassDef):
                    functions.add(node.name)
        top = {id(n) for n in _top_level_imports(body)}
        for order, (depth, node) in enumerate(_statements_breadth_first(body)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self._found.append((depth, chunk, order, node, id(node) in top))

    def _bind_imports(self) -> None:
        """The import bindings of the chunks read, in the order ``ast.walk`` of the whole
        file reaches them (the first binding of a name wins)."""
        self.imports, self.top_imports, self.modules, self.stars = {}, [], [], []
        for *_, node, top in sorted(self._found, key=lambda entry: entry[:3]):
            self._import(node, top)

    def remembered(self, kind: str, node: ast.stmt, extra: tuple, make: Callable[[], object]) -> object:
        """``make()``, or what it gave for the same text of the top-level definition ``node``
        in the same context (``memo``'s)."""
        if self.memo is None:
            return make()
        first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        text = tuple(self.rows[first - 1 : node.end_lineno])
        return self.memo.setdefault((kind, self.context, extra, text), make)

    def _import(self, node: ast.Import | ast.ImportFrom, top: bool) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.modules.append(alias.name)
                if alias.asname:
                    bindings = [(alias.asname, alias.name)]
                else:
                    head = alias.name.split(".")[0]
                    bindings = [(head, head)]
                self._bind(bindings, top)
            return
        module = "." * node.level + (node.module or "")
        if node.module:
            self.modules.append(module)
        prefix = module if module.endswith(".") else module + "."
        for alias in node.names:
            if alias.name == "*":
                self.stars.append(module)
                continue  # what it binds is unknown
            self.modules.append(prefix + alias.name)  # from . import models: maybe a module
            self._bind([(alias.asname or alias.name, prefix + alias.name)], top)

    def _bind(self, bindings: list[tuple[str, str]], top: bool) -> None:
        for local, qualified in bindings:
            self.imports.setdefault(local, qualified)
            if top:
                self.top_imports.append((local, qualified))

    def qualify(self, node: ast.expr) -> str | None:
        """The qualified name of a name or attribute chain: through the file's imports, or
        bare for a top-level definition of the file; None for anything else."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if self.asked is not None:
            self.asked.add(head)
        if head in self.defined:
            return dotted
        if head in self.imports:
            target = self.imports[head]
            return f"{target}.{rest}" if rest else target
        return None

    def summary(self) -> ModuleSummary:
        classes: list[ClassSummary] = []
        functions: list[FunctionSummary] = []
        sites = _Sites(self)
        if self.names is not None:
            self._read_once(classes, functions, sites)
        else:
            for body in self.bodies():
                self._summarize(body, classes, functions, sites)
        return ModuleSummary(
            imports=tuple(self.top_imports),
            imported_modules=tuple(dict.fromkeys(self.modules)),
            classes=tuple(classes),
            functions=tuple(functions),
            calls=tuple(sites.calls),
            references=tuple(dict.fromkeys(sites.references)),
            method_calls=tuple(dict.fromkeys(sites.method_calls)),
            method_references=tuple(dict.fromkeys(sites.method_references)),
            star_imports=tuple(dict.fromkeys(self.stars)),
            module_loads=tuple(sorted(sites.module_loads)),
            aliases=tuple(sites.aliases),
        )

    def _summarize(self, body: list[ast.stmt], classes: list, functions: list, sites: _Sites) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                classes.append(self.remembered("class", node, (), lambda: self._class(node)))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(self.remembered("function", node, (), lambda: self._function(node)))
            sites.visit(node)  # (as a visit of the module: its statements in order)
            sites.called.clear()  # (ids of this statement's nodes, which a later chunk's may reuse)
            sites.discarded.clear()

    def _read_once(self, classes: list, functions: list, sites: _Sites) -> None:
        """The summaries with the chunks read once: each chunk is summarised as soon as it is
        read, with the imports of the chunks read so far and the names that may be defined
        (``names``, and those read so far), and what it asked is kept with the answers it
        got. Once every chunk is read, a chunk whose answers differ from the whole file's
        (a later import of a name it reads, a name guessed defined in a string) and those
        after it are summarised again."""
        defined: set[str] = set()
        functions_defined: set[str] = set()
        guessed, guessed_functions = self.names
        self.defined, self.functions_defined = set(guessed), set(guessed_functions)
        read: list[tuple[tuple, dict]] = []  # each chunk's (state before it, answers)
        for chunk, body in enumerate(self.bodies()):
            state = (
                len(classes), len(functions), len(sites.calls), len(sites.references), sites.module_body.copy(),
                len(sites.method_calls), len(sites.method_references),
            )
            known = len(self._found)
            self._learn(chunk, body, defined, functions_defined)
            self.defined |= defined
            self.functions_defined |= functions_defined
            if len(self._found) > known:
                self._bind_imports()
            self.asked = set()
            self._summarize(body, classes, functions, sites)
            read.append((state, {key: self._answer(key) for key in self.asked}))
        self.asked = None
        self.defined, self.functions_defined = defined, functions_defined
        self.context = (tuple(self.imports.items()), frozenset(defined), frozenset(functions_defined))
        changed = next((c for c, (_, answers) in enumerate(read) if any(self._answer(k) != a for k, a in answers.items())), None)
        if changed is None:
            return
        state = read[changed][0]
        del classes[state[0]:], functions[state[1]:], sites.calls[state[2]:], sites.references[state[3]:]
        del sites.method_calls[state[5]:], sites.method_references[state[6]:]
        sites.body = sites.module_body = state[4]
        for chunk, body in enumerate(self.bodies()):
            if chunk >= changed:
                self._summarize(body, classes, functions, sites)

    def _answer(self, key: str | tuple[str]) -> tuple:
        """What ``qualify`` (a name: the head of a dotted name) or ``callable_name`` (a
        1-tuple: a bare qualified name) reads of the file for ``key``."""
        if isinstance(key, tuple):
            return key[0] in self.defined, key[0] in self.functions_defined
        return key in self.defined, self.imports.get(key)

    def callable_name(self, node: ast.expr) -> str | None:
        """The qualified name of what may be a project function: the file's own top-level
        function, or a name imported from a module that is not torch's."""
        qname = self.qualify(node)
        if qname is None or qname.startswith(("torch.", "torchvision.")) or qname == "torch":
            return None
        if "." not in qname:
            if self.asked is not None:
                self.asked.add((qname,))
            if qname in self.defined:
                return qname if qname in self.functions_defined else None
        return qname

    # --- classes

    def _class(self, node: ast.ClassDef) -> ClassSummary:
        from torchlint.semantic.evaluation import _BUILDING_BUILTINS, _LOADING, _MODE_FUNCTIONS, _PLAIN_METHODS

        bases = tuple(self.qualify(b) or "" for b in node.bases)
        mode_layers = unknown = False
        calls: list[str] = []
        for method in node.body:
            if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            builds = method.name == "__init__"
            for sub in _walk_function(method):
                if isinstance(sub, ast.Attribute) and sub.attr == "training":
                    mode_layers = True
                if not isinstance(sub, ast.Call):
                    continue
                qname = self.qualify(sub.func)
                if qname is None:
                    if isinstance(sub.func, ast.Name) and sub.func.id in _BUILTINS:
                        unknown = unknown or sub.func.id in _BUILDING_BUILTINS
                    elif builds and not _on_self(sub.func) and not (
                        isinstance(sub.func, ast.Attribute) and sub.func.attr in _PLAIN_METHODS
                    ):
                        unknown = True  # a layer built by a parameter or an unknown object
                    continue
                last = qname.rpartition(".")[2]
                if qname.startswith("torch.nn.functional."):
                    mode_layers = mode_layers or bool(_MODE_FUNCTIONS.search(last))
                elif qname.startswith("torch.nn.") and last[:1].isupper():
                    mode_layers = mode_layers or not _layer_mode_free(last, sub)
                elif qname.startswith("torch."):
                    unknown = unknown or qname in _LOADING
                else:
                    calls.append(qname)  # a project class or function, or another package
        methods, forward_methods = self._forward_methods(node)
        unnamed = tuple(d for b, q in zip(node.bases, bases) if not q and (d := _dotted(b)) is not None)
        return ClassSummary(
            node.name, bases, mode_layers, unknown, tuple(dict.fromkeys(calls)), methods, forward_methods, unnamed
        )

    def _forward_methods(self, node: ast.ClassDef) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The class's methods, and those that run its submodules without turning gradients
        off, and with no decorator, which may (as ``EvaluationFacts._runs_submodules`` judges
        a method of the linted file)."""
        from torchlint.semantic.evaluation import _GRAD_CONTEXTS

        defined = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
        names = {m.name for m in defined}

        def grad_off(expr: ast.expr) -> bool:
            target = expr.func if isinstance(expr, ast.Call) else expr
            return (self.qualify(target) or "") in _GRAD_CONTEXTS

        runners = []
        for method in defined:
            args = method.args.posonlyargs + method.args.args
            if not args or isinstance(method, ast.AsyncFunctionDef) or method.decorator_list:
                continue  # a decorator may set gradients itself (`@smart_inference_mode()`)
            owner, runs = args[0].arg, False
            for sub in _walk_function(method):
                if not isinstance(sub, ast.Call):
                    continue
                func = sub.func
                if grad_off(func):
                    break  # it sets gradients itself (`with torch.no_grad():`, set_grad_enabled)
                if isinstance(func, ast.Name) and func.id == owner:
                    runs = True
                elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == owner:
                    runs = runs or func.attr == "forward" or func.attr not in names
            else:
                if runs:
                    runners.append(method.name)
        return tuple(m.name for m in defined), tuple(runners)

    # --- functions

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> FunctionSummary:
        from torchlint.semantic import MODULE_RETURNS_SELF

        built: dict[str, str] = {}  # local name -> the call that built its latest value
        returns: list[str] = []
        events: list[str] = []
        returned: list[ast.expr | None] = []  # (returns_argument)
        stored: set[str] = set()
        for sub in _walk_function(node):
            if isinstance(sub, ast.Return):
                returned.append(sub.value)
            elif isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load):
                stored.add(sub.id)
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                built[sub.targets[0].id] = self._built_by(sub.value, built, MODULE_RETURNS_SELF)
            elif isinstance(sub, ast.Return) and sub.value is not None and not isinstance(sub.value, ast.Tuple):
                returns.append(self._built_by(sub.value, built, MODULE_RETURNS_SELF))
            elif isinstance(sub, ast.Call):
                event = self._mode_event(sub)
                if event is not None:
                    events.append(event)
        return FunctionSummary(
            node.name, tuple(returns), tuple(events), self._requires_cuda(node),
            self._gpu_kernel(node), self._unconditional_calls(node), _returned_argument(node, returned, stored),
        )

    def _gpu_kernel(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        from torchlint.semantic.devices import _gpu_only_module

        for decorator in node.decorator_list:
            qname = self.qualify(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
            if qname and _gpu_only_module(qname.rpartition(".")[0] or qname):
                return True
        return False

    def _unconditional_calls(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
        """``FunctionSummary.unconditional_calls``."""
        from torchlint.semantic.devices import _gpu_only_module

        found: list[str] = []
        stack = list(reversed(node.body))
        while stack:
            statement = stack.pop()
            if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match, *_NOT_WALKED)):
                continue
            if isinstance(statement, (ast.With, ast.AsyncWith)):
                stack.extend(reversed(statement.body))
                walked = [sub for item in statement.items for sub in ast.walk(item.context_expr)]
            else:
                walked = _walk_function(ast.Module(body=[statement], type_ignores=[]))
            if any(isinstance(sub, ast.Return) for sub in walked):
                break
            for sub in walked:
                if isinstance(sub, (ast.IfExp, ast.BoolOp)):
                    break  # (what follows in the statement may not run)
                if not isinstance(sub, ast.Call):
                    continue
                func = sub.func.value if isinstance(sub.func, ast.Subscript) else sub.func  # kernel[grid](...)
                qname = self.qualify(func) or ""
                name = self.callable_name(func) if not qname or not _gpu_only_module(qname.rpartition(".")[0]) else qname
                if name:
                    found.append(name)
        return tuple(dict.fromkeys(found))

    def _requires_cuda(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        """Why every call of the function needs CUDA: a statement of its own body (not inside
        an ``if``, ``try`` or loop) calls ``torch.cuda.set_device`` or starts NCCL, and no
        ``return`` comes before it (DINO's ``init_distributed_mode``, which exits without a
        GPU; not DeiT's, which returns first when it is not distributed). "" otherwise."""
        for index, statement in enumerate(node.body):
            reason = self._cuda_statement(statement)
            if reason:
                # (Only then are the statements before it walked for a ``return``.)
                before = [s for s in node.body[:index] if not isinstance(s, _NOT_WALKED)]
                walked = _walk_function(ast.Module(body=before, type_ignores=[]))
                return "" if any(isinstance(sub, ast.Return) for sub in walked) else reason
        return ""

    def _cuda_statement(self, statement: ast.stmt) -> str:
        """Why the statement needs CUDA, when it is a call of ``torch.cuda.set_device`` or
        one that starts NCCL; "" otherwise."""
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            qname = self.qualify(call.func) or ""
            if qname == "torch.cuda.set_device":
                return "calls torch.cuda.set_device"
            backend = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "backend")]
            if qname.endswith(".init_process_group") and any(
                isinstance(b, ast.Constant) and b.value == "nccl" for b in backend
            ):
                return "starts NCCL"
        return ""

    def _built_by(self, value: ast.expr, built: dict[str, str], returns_self: frozenset) -> str:
        while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in returns_self:
            value = value.func.value  # Net().to(device)
        if isinstance(value, ast.Name):
            return built.get(value.id, "")
        if isinstance(value, ast.Call):
            return self.qualify(value.func) or ""
        return ""

    def _mode_event(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("eval", "train") and not _on_self(func):
            if func.attr == "eval":
                return "eval" if not call.args and not call.keywords else None
            if not call.args and not call.keywords:
                return "train"
            if len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, bool):
                return "train" if call.args[0].value else "eval"
            return None
        if isinstance(func, ast.Name):
            qname = self.qualify(func)
            return f"call:{qname}" if qname is not None else None
        return None


class _Sites(ast.NodeVisitor):
    """The calls of possible project functions, with what holds where each one runs (as the
    evaluation facts judge a same-file call: gradients, the modes switched before it, who owns
    the code), and the names of possible project functions passed around as values."""

    def __init__(self, summarizer: _Summarizer) -> None:
        from torchlint.semantic import MODULE_RETURNS_SELF
        from torchlint.semantic.evaluation import _FRAMEWORK_HOOKS, _FRAMEWORK_PACKAGES, _GRAD_CONTEXT_TEXT, _GRAD_CONTEXTS

        self.summarizer = summarizer
        self.returns_self = MODULE_RETURNS_SELF
        self.hooks, self.frameworks = _FRAMEWORK_HOOKS, _FRAMEWORK_PACKAGES
        self.grad_contexts, self.grad_text = _GRAD_CONTEXTS, _GRAD_CONTEXT_TEXT
        self.calls: list[CallSite] = []
        self.references: list[str] = []
        self.method_calls: list[tuple[str, str, bool]] = []
        self.method_references: list[str] = []
        self.module_body = self.body = _Body("", owned=False, grad=False)  # the body being walked
        self.grad_withs = 0  # `with no_grad()` blocks around the current node, in this body
        self.scopes: list[ast.AST] = []  # enclosing classes and functions
        self.called: set[int] = set()  # the callees of calls: not references
        self.discarded: set[int] = set()  # calls that are statements: their results thrown away
        self.module_loads: set[str] = set()  # (``ModuleSummary.module_loads``)
        self.aliases: list[tuple[str, str]] = []  # (``ModuleSummary.aliases``)

    # ``ast.NodeVisitor``'s walk, with each node type's method looked up once (``visit`` builds
    # and looks up its name at every node) and the fields read without ``iter_fields``'
    # generator: the same nodes in the same order. (No subclass: the table is this class's.)
    _methods: ClassVar[dict[type, Callable | None]] = {}

    def visit(self, node: ast.AST) -> None:
        kind = type(node)
        try:
            method = self._methods[kind]
        except KeyError:
            method = getattr(_Sites, f"visit_{kind.__name__}", None)
            if method is ast.NodeVisitor.visit_Constant:  # (its look-up of legacy methods: none here)
                method = None
            self._methods[kind] = method
        if method is None:
            self.generic_visit(node)
        else:
            method(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        visit = self.visit
        kind = type(node)  # (contexts and operators aside: nothing here looks at them)
        for name in pieces.CHILD_FIELDS[kind] if kind in pieces.CHILD_FIELDS else pieces.child_fields(kind):
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        visit(item)
            elif isinstance(value, ast.AST):
                visit(value)

    # --- bodies

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for item in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if item is not None:
                self.visit(item)
        cls = self.scopes[-1] if self.scopes and isinstance(self.scopes[-1], ast.ClassDef) else None
        # A decorator does not cover a coroutine's body; a nested function runs where it is
        # defined as far as the evaluation facts go (they look at every enclosing block).
        decorated = isinstance(node, ast.FunctionDef) and any(self._grad_context(d) for d in node.decorator_list)
        inherited = self.body.grad or self.grad_withs > 0 or self.body.grad_statement if self.scopes else False
        saved = self.body, self.grad_withs
        self.body = _Body(node.name if not self.scopes else "", self.body.owned or self._owned(node, cls), decorated or inherited)
        self.grad_withs = 0
        if self.scopes:
            self._walk_body(node)
        else:  # a top-level function's calls depend on its text, and on what module-level names were built by
            calls, references, method_calls, method_references, loads = self.summarizer.remembered(
                "sites", node, (tuple(self.module_body.built.items()), tuple(self.module_body.loaded.items())),
                lambda: self._body_sites(node),
            )
            self.calls.extend(calls)
            self.references.extend(references)
            self.method_calls.extend(method_calls)
            self.method_references.extend(method_references)
            self.module_loads.update(loads)
        self.body, self.grad_withs = saved

    def _walk_body(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scopes.append(node)
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    def _body_sites(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list, list, list, list, set[str]]:
        """The calls, references, method calls and module reads of loads a function's body
        adds, walked on their own."""
        outer = self.calls, self.references, self.method_calls, self.method_references, self.module_loads
        self.calls, self.references, self.method_calls, self.method_references, self.module_loads = [], [], [], [], set()
        try:
            self._walk_body(node)
            return self.calls, self.references, self.method_calls, self.method_references, self.module_loads
        finally:
            self.calls, self.references, self.method_calls, self.method_references, self.module_loads = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        saved = self.body
        self.body = _Body("", saved.owned, saved.grad or self.grad_withs > 0)
        self.generic_visit(node)
        self.body = saved

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(item)
        self.scopes.append(node)
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    def _owned(self, function: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.ClassDef | None) -> bool:
        """As ``EvaluationFacts._framework_owned``, from what one file's ``ast`` shows."""
        if function.name.startswith("test"):
            return True
        if cls is None:
            return False
        if self.hooks.match(function.name) or cls.name.startswith("Test") or cls.name.endswith("TestCase"):
            return True
        bases = [self.summarizer.qualify(b) or "" for b in cls.bases]
        if any(b.startswith((*self.frameworks, "torch.nn.")) or b.endswith("TestCase") for b in bases):
            return True
        return any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "forward" for s in cls.body)

    # --- gradients

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        grad = any(self._grad_context(item.context_expr) for item in node.items)
        for item in node.items:
            self.visit(item)
        self.grad_withs += grad
        for statement in node.body:
            self.visit(statement)
        self.grad_withs -= grad

    visit_AsyncWith = visit_With

    def _grad_context(self, expr: ast.expr) -> bool:
        """As ``EvaluationFacts._grad_context``: gradients off, or deliberately on."""
        call = expr if isinstance(expr, ast.Call) else None
        target = call.func if call is not None else expr
        qname = self.summarizer.qualify(target) or ""
        if qname in self.grad_contexts:
            if call is not None and call.args and isinstance(call.args[0], ast.Constant):
                value = call.args[0].value
                if (qname.endswith("set_grad_enabled") and value is True) or (qname.endswith("inference_mode") and value is False):
                    return False
            return True
        text = ast.unparse(expr)
        return any(word in text for word in self.grad_text)

    def visit_Expr(self, node: ast.Expr) -> None:
        self.discarded.add(id(node.value))
        self.generic_visit(node)
        call = node.value
        if isinstance(call, ast.Call) and (self.summarizer.qualify(call.func) or "") in self.grad_contexts:
            if len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, bool):
                self.body.grad_statement = not call.args[0].value  # torch.set_grad_enabled(False)

    # --- calls and references

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if self.body is self.module_body and not self.scopes:
            self._alias(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            self.body.built[node.targets[0].id] = self._built(node.value)
            key = self._loaded_key(node.value)
            if key is None:
                self.body.loaded.pop(node.targets[0].id, None)
            else:
                self.body.loaded[node.targets[0].id] = key

    def _alias(self, node: ast.Assign) -> None:
        """``Model = DetectionModel`` at the top level: the name another one is known by."""
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, (ast.Name, ast.Attribute)):
            qualified = self.summarizer.qualify(node.value)
            if qualified is not None and qualified != node.targets[0].id:
                self.aliases.append((node.targets[0].id, qualified))

    # --- what is read as a module of what ``torch.load`` gives

    def _loaded_key(self, expr: ast.expr) -> str | None:
        """Which part of a ``torch.load`` result ``expr`` is: "" the whole, a key, "*" a key
        not spelled as a string; None when it is not one (as far as names in order show)."""
        if isinstance(expr, ast.Name):
            if self.body is self.module_body:
                return self.body.loaded.get(expr.id)
            return self.body.loaded.get(expr.id, self.module_body.loaded.get(expr.id))
        if isinstance(expr, ast.Call):
            return "" if self.summarizer.qualify(expr.func) == "torch.load" else None
        if isinstance(expr, ast.Subscript):
            base = self._loaded_key(expr.value)
            if base != "":
                return base  # None, or a part of an entry: the entry
            key = expr.slice
            return key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else "*"
        return None

    def _module_read(self, expr: ast.expr) -> None:
        """``expr`` is used as a module may be (called, an attribute other than a mapping's
        read, passed to a function): if it is a part of a load, that part is kept."""
        key = self._loaded_key(expr)
        if key is not None:
            self.module_loads.add(key)

    def _built(self, value: ast.expr) -> str:
        # A global read in a function: what the module level built last (a name the function
        # also assigns is its own).
        built = ChainMap(self.body.built, self.module_body.built) if self.body is not self.module_body else self.body.built
        return self.summarizer._built_by(value, built, self.returns_self)

    def visit_Call(self, node: ast.Call) -> None:
        self.called.add(id(node.func))
        self.generic_visit(node)
        func = node.func
        self._module_read(func)  # checkpoint["model"](x)
        if not (isinstance(func, ast.Attribute) and func.attr == "load_state_dict") and (
            not isinstance(func, ast.Name) or func.id not in _INSPECTING_BUILTINS
        ):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                self._module_read(arg.value if isinstance(arg, ast.Starred) else arg)
        target = self.summarizer.callable_name(node.func)
        if target is not None and not any(isinstance(a, ast.Starred) for a in node.args):
            self.calls.append(
                CallSite(
                    target=target,
                    function=self.body.function,
                    owned=self.body.owned,
                    grad_off=self.body.grad or self.grad_withs > 0 or self.body.grad_statement,
                    modes_before=tuple(self.body.modes),
                    args=tuple(self._built(a) for a in node.args),
                    keywords=tuple((k.arg, self._built(k.value)) for k in node.keywords if k.arg),
                    used=id(node) not in self.discarded,
                )
            )
        func = node.func
        if target is None and isinstance(func, ast.Attribute):
            self.method_calls.append((func.attr, self.body.function, id(node) not in self.discarded))
        if (isinstance(func, ast.Attribute) and func.attr in ("backward", "manual_backward")) or (
            self.summarizer.qualify(func) or ""
        ) in ("torch.autograd.grad", "torch.autograd.backward"):
            self.calls.append(CallSite(BACKWARD_TARGET, self.body.function, False, False, (), (), ()))
        event = self.summarizer._mode_event(node)
        if event is not None:
            if event.startswith("call:"):
                self.body.modes.append(event)
            else:
                self.body.modes[:] = [event]  # what came before no longer matters

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.called:
            self._reference(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.called:
            self.method_references.append(node.attr)
        if node.attr not in _MAPPING_METHODS:
            self._module_read(node.value)  # checkpoint["model"].eval()
        if isinstance(node.ctx, ast.Load) and id(node) not in self.called and _dotted(node) is not None:
            self._reference(node)
            return
        self.generic_visit(node)

    def _reference(self, node: ast.expr) -> None:
        target = self.summarizer.callable_name(node)
        if target is not None:
            self.references.append(target)


@dataclass
class _Body:
    function: str  # the top-level function it is, or ""
    owned: bool
    grad: bool  # gradients off (or deliberately on) around the whole body
    modes: list[str] = field(default_factory=list)
    built: dict[str, str] = field(default_factory=dict)  # local name -> the call that built it
    loaded: dict[str, str] = field(default_factory=dict)  # local name -> the part of a load it holds
    grad_statement: bool = False  # torch.set_grad_enabled(False) so far

    def copy(self) -> _Body:
        return replace(self, modes=list(self.modes), built=dict(self.built), loaded=dict(self.loaded))


# What a state dict (a mapping) answers: reading these of a loaded entry is no module use.
_MAPPING_METHODS = frozenset(
    {"keys", "items", "values", "get", "copy", "pop", "popitem", "update", "setdefault", "clear", "move_to_end",
     "__contains__", "__getitem__", "__len__", "__iter__"}
)
# Builtins that look at any value alike: passing a loaded entry to them is no module use.
_INSPECTING_BUILTINS = frozenset({"print", "len", "isinstance", "type", "repr", "str", "sorted", "list", "dict", "set", "iter"})


def _top_level_imports(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The imports that bind module-level names, also under a top-level ``try`` or ``if``
    (``try: from .x import Y``)."""
    for statement in body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield statement
        elif isinstance(statement, ast.If):
            yield from _top_level_imports(statement.body)
            yield from _top_level_imports(statement.orelse)
        elif isinstance(statement, ast.Try):
            for block in (statement.body, statement.orelse, statement.finalbody, *(h.body for h in statement.handlers)):
                yield from _top_level_imports(block)


def _walk_function(node: ast.AST) -> list[ast.AST]:
    """The nodes of a function's body in source order, nested functions and classes aside,
    and expression contexts and operators (``pieces.child_fields``)."""
    found = []
    stack = list(reversed(node.body))
    fields = pieces.CHILD_FIELDS
    while stack:
        sub = stack.pop()
        found.append(sub)
        kind = type(sub)
        children = []  # ``ast.iter_child_nodes``, without its generators
        for name in fields[kind] if kind in fields else pieces.child_fields(kind):
            value = getattr(sub, name, None)
            if isinstance(value, ast.AST):
                if not isinstance(value, _NOT_WALKED):
                    children.append(value)
            elif type(value) is list:
                children.extend(c for c in value if isinstance(c, ast.AST) and not isinstance(c, _NOT_WALKED))
        stack.extend(reversed(children))
    return found


_NOT_WALKED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _on_self(func: ast.expr) -> bool:
    """``self.f`` or ``super().f``."""
    if not isinstance(func, ast.Attribute):
        return False
    value = func.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "super":
        return True
    return isinstance(value, ast.Name) and value.id == "self"


def _layer_mode_free(layer: str, call: ast.Call) -> bool:
    """As ``EvaluationFacts._layer_mode_free``, on an ``ast`` call."""
    from torchlint.semantic.evaluation import _MODE_LAYERS

    if _MODE_LAYERS.search(layer):
        return False
    for keyword in call.keywords:
        if keyword.arg == "dropout":
            if not (isinstance(keyword.value, ast.Constant) and keyword.value.value == 0):
                return False
    return not (layer in ("RNN", "LSTM", "GRU") and len(call.args) >= 6)


# --- resolving modules to files --------------------------------------------------------


def _package_root(path: Path) -> Path:
    """The folder above the outermost package that holds ``path``."""
    folder = path.parent
    while (folder / "__init__.py").is_file() and folder.parent != folder:
        folder = folder.parent
    return folder


def search_roots(path: Path, root: Path) -> tuple[Path, ...]:
    """Where an absolute import in ``path`` is looked up, as Python would find it when the
    file runs as a script, as part of its package, or from the project root (``src/``
    layouts too)."""
    roots = [path.parent, _package_root(path), root, root / "src"]
    return tuple(dict.fromkeys(roots))


def module_files(
    module: str, path: Path, roots: tuple[Path, ...], exists: Callable[[str], bool], is_dir: Callable[[str], bool]
) -> Iterator[tuple[Path, list[str]]]:
    """The files a module name (possibly relative, ``..models``, possibly naming an object
    inside a module, ``models.Net``) may refer to from ``path``, absolute names looked up
    under ``roots``: each with the names left over after the module part, longest module
    first. ``exists`` says whether a file exists, ``is_dir`` whether a folder does (both
    asked with string paths: this runs for every import of every file)."""
    level = len(module) - len(module.lstrip("."))
    parts = [p for p in module[level:].split(".") if p]
    if level:
        folder = os.path.dirname(str(path))
        for _ in range(level - 1):
            folder = os.path.dirname(folder)
        folders = [folder]
        if not parts:
            init = os.path.join(folder, "__init__.py")
            if exists(init):
                yield Path(init), []
            return
    else:
        folders = [str(root) for root in roots]
    reach = [_folder_depth(folder, parts, is_dir) for folder in folders]
    for k in range(len(parts), 0, -1):
        for folder, depth in zip(folders, reach):
            if k > depth + 1:
                continue  # the folders on the way are not there
            base = os.path.join(folder, *parts[:k])
            for candidate in (base + ".py", os.path.join(base, "__init__.py")):
                if exists(candidate):
                    yield Path(candidate), parts[k:]
                    break


def _folder_depth(folder: str, parts: list[str], is_dir: Callable[[str], bool]) -> int:
    """How many of ``parts`` name nested folders under ``folder``."""
    depth = 0
    for part in parts:
        folder = os.path.join(folder, part)
        if not is_dir(folder):
            break
        depth += 1
    return depth


# --- the index -------------------------------------------------------------------------


@dataclass
class ProjectIndex:
    """Summaries of the project's files, by absolute path, and the files each one imports."""

    root: Path
    summaries: dict[Path, ModuleSummary] = field(default_factory=dict)
    imports: dict[Path, tuple[Path, ...]] = field(default_factory=dict)
    _roots: dict[Path, tuple[Path, ...]] = field(default_factory=dict, repr=False)
    # The summarised files and the folders holding them, as strings, for resolving names.
    _files: set[str] = field(default_factory=set, repr=False)
    _folders: set[str] | None = field(default=None, repr=False)
    # Who calls each project function: (file, function name) -> [(calling file, call)], and
    # the functions some file passes around by name; built on first use.
    _callers: dict[tuple[Path, str], list[tuple[Path, CallSite]]] | None = field(default=None, repr=False)
    _referenced: set[tuple[Path, str]] | None = field(default=None, repr=False)
    # Who calls a method of each name, x.name(...): name -> [(calling file, body, used)], and
    # the files that read an attribute of that name other than by calling it.
    _method_sites: dict[str, list[tuple[Path, str, bool]]] | None = field(default=None, repr=False)
    _method_refs: dict[str, set[Path]] | None = field(default=None, repr=False)
    _module_loads: dict[Path, tuple[str, ...] | None] = field(default_factory=dict, repr=False)
    # A lazy index (a command-line run) summarises the files the linted ones import only when
    # a question reaches them. ``cache_root``: where summaries are cached, if anywhere.
    lazy: bool = False
    cache_root: Path | None = None
    linted: tuple[Path, ...] = ()
    # The files whose calls count as callers: the linted files and the files beside them,
    # fixed when the index is built (so a question's answer never depends on what was
    # summarised before it); None: every summarised file.
    callers_from: frozenset[Path] | None = None
    # `target-torch` of the configuration, as (major, minor); None: each file's project
    # declares it (``ProjectView.oldest_torch``).
    target_torch: tuple[int, int] | None = None
    _closed: bool = field(default=False, repr=False)
    _loaded: dict[Path, ModuleSummary | None] = field(default_factory=dict, repr=False)
    _exists: dict[str, bool] = field(default_factory=dict, repr=False)
    _is_dir: dict[str, bool] = field(default_factory=dict, repr=False)

    def summary(self, path: Path) -> ModuleSummary | None:
        """The summary of an indexed file; in a lazy index, of any project file, read when
        first asked."""
        found = self.summaries.get(path)
        if found is not None or not self.lazy:
            return found
        if path not in self._loaded:
            self._loaded[path] = None
            if len(self._loaded) <= MAX_EXTRA_FILES:
                source = _read_file(path)
                if source is not None:
                    self._loaded[path] = self._summarizer()(source, path.suffix)
        summary = self._loaded[path]
        if summary is not None:
            self.summaries[path] = summary
        return summary

    def _summarizer(self) -> Callable[[bytes, str], ModuleSummary | None]:
        return cached_summarize(self.cache_root) if self.cache_root is not None else summarize_file_source

    def _close(self) -> None:
        """Summarise every file the linted ones import, directly or not (within the bounds)."""
        if self.lazy and not self._closed:
            self._closed = True
            builder = _Builder(self, _read_file, cached_summarize(self.cache_root) if self.cache_root is not None else None)
            builder.add_imports(self.linted)
            builder.add_imports(sorted(self.callers_from - set(self.linted)), follow=False)  # the files beside them

    def view(self, path: Path | None) -> ProjectView | None:
        if path is None:
            return None
        path = Path(os.path.abspath(path))
        if path not in self.summaries:
            return None
        return ProjectView(self, path)

    def dependencies(self, path: Path) -> list[Path]:
        """Every file ``path`` imports, directly or not, in the index."""
        self._close()
        path = Path(os.path.abspath(path))
        seen = {path}
        stack = [path]
        while stack:
            for dep in self._imported(stack.pop()):
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        seen.discard(path)
        return sorted(seen)

    # --- callers

    def callers(self, path: Path, name: str) -> list[tuple[Path, CallSite]]:
        """The calls of the top-level function ``name`` of ``path`` in the index, by file."""
        self._link_callers()
        return self._callers.get((path, name), [])

    def referenced(self, path: Path, name: str) -> bool:
        """Whether some file of the index uses the function other than by calling it."""
        self._link_callers()
        return (path, name) in self._referenced

    def module_loads(self, path: Path) -> tuple[str, ...] | None:
        """What the project's files (every Python file and notebook under the project's root
        folder, ``_project_folder``) read as a module of what
        ``torch.load`` gives them (``ModuleSummary.module_loads``), whoever saved it; None
        when there are more files than are read (``MAX_LOADER_FILES``): unknown."""
        top = _project_folder(path)
        if top not in self._module_loads:
            self._module_loads[top] = self._scan_loads(top)
        return self._module_loads[top]

    def _scan_loads(self, top: Path) -> tuple[str, ...] | None:
        """(``module_loads``.) Under a folder that marks a project's root (``pyproject.toml``,
        ``setup.py``, ``setup.cfg``, ``.git``) every file below it; under any other folder
        (a file opened in ``/tmp`` or a home folder) only the files beside it, and unknown
        when it holds folders, which may hold more readers than are worth walking."""
        found: set[str] = set()
        files = 0
        project = marks_project(top)
        for folder, dirs, names in os.walk(top):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _NOT_PROJECT_FOLDERS)
            if not project:
                if any(d != "__pycache__" for d in dirs):
                    return None
                dirs[:] = []
            for name in sorted(names):
                if not name.endswith((".py", ".ipynb")):
                    continue
                files += 1
                if files > MAX_LOADER_FILES:
                    return None
                path = Path(folder) / name
                summary = self.summaries.get(path)
                if summary is None:
                    source = _read_file(path)
                    if source is None or b"load" not in source:
                        continue
                    summary = self._summarizer()(source, path.suffix)
                if summary is not None:
                    found.update(summary.module_loads)
        return tuple(sorted(found))

    def _link_callers(self) -> None:
        if self._callers is not None:
            return
        callers: dict[tuple[Path, str], list[tuple[Path, CallSite]]] = {}
        referenced: set[tuple[Path, str]] = set()
        sources = self.summaries if self.callers_from is None else self.callers_from
        for path in sorted(sources):
            summary = self.summaries[path]
            view = ProjectView(self, path)
            targets: dict[str, tuple[Path, str] | None] = {}

            def function(qname: str) -> tuple[Path, str] | None:
                if qname not in targets:
                    found = view.symbol(qname)
                    targets[qname] = (found.path, found.definition.name) if found is not None and isinstance(found.definition, FunctionSummary) else None
                return targets[qname]

            for call in summary.calls:
                key = function(call.target)
                if key is not None:
                    callers.setdefault(key, []).append((path, call))
            for name in summary.references:
                key = function(name)
                if key is not None:
                    referenced.add(key)
        self._callers, self._referenced = callers, referenced
        method_sites: dict[str, list[tuple[Path, str, bool]]] = {}
        method_refs: dict[str, set[Path]] = {}
        for path in sorted(sources):
            summary = self.summaries[path]
            for name, body, used in summary.method_calls:
                method_sites.setdefault(name, []).append((path, body, used))
            for name in summary.method_references:
                method_refs.setdefault(name, set()).add(path)
        self._method_sites, self._method_refs = method_sites, method_refs

    def method_callers(self, name: str) -> tuple[list[tuple[Path, str, bool]], set[Path]]:
        """The calls ``x.name(...)`` in the index, by file (with the calling body and whether
        the result is used), and the files that read ``.name`` other than by calling it."""
        self._link_callers()
        return self._method_sites.get(name, []), self._method_refs.get(name, set())

    def _imported(self, path: Path) -> Iterator[Path]:
        return (d for d in self.imports.get(path, ()) if d in self.summaries)

    def update(
        self,
        path: Path,
        source: bytes | str,
        read: Callable[[Path], bytes | str | None] | None = None,
        tree: ast.Module | None = None,
        memo: LintMemo | None = None,
    ) -> None:
        """Summarise ``path`` from ``source`` (an editor's unsaved text; ``tree``, its ``ast``
        tree if parsed already; ``memo``, what the summary of its last version kept) and add
        the files it imports that are not indexed yet."""
        path = Path(os.path.abspath(path))
        self._folders = self._callers = None
        summary = summarize(source, tree, memo)
        if summary is None:
            self.summaries.pop(path, None)
            self.imports.pop(path, None)
            return
        self.summaries[path] = summary
        builder = _Builder(self, read or _read_file, None)
        builder.add_imports([path])
        builder.add_siblings([path])

    def roots(self, path: Path) -> tuple[Path, ...]:
        if path not in self._roots:
            self._roots[path] = search_roots(path, self.root)
        return self._roots[path]

    def resolve_module(self, module: str, path: Path) -> Iterator[tuple[Path, list[str]]]:
        if self.lazy:  # any file of the project, summarised when asked
            return module_files(module, path, self.roots(path), self._file_exists, self._folder_exists)
        if self._folders is None:
            self._files = {str(file) for file in self.summaries}
            self._folders = {str(folder) for file in self.summaries for folder in file.parents}
        return module_files(module, path, self.roots(path), self._files.__contains__, self._folders.__contains__)


    def _file_exists(self, path: str) -> bool:
        if path not in self._exists:
            self._exists[path] = os.path.isfile(path)
        return self._exists[path]

    def _folder_exists(self, path: str) -> bool:
        if path not in self._is_dir:
            self._is_dir[path] = os.path.isdir(path)
        return self._is_dir[path]


def _project_folder(path: Path) -> Path:
    """The root of the project holding ``path``: the nearest folder above it that holds
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``; the file's own folder when
    none does."""
    for folder in path.parents:
        if marks_project(folder):
            return folder
    return path.parent


def _read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


class _Builder:
    def __init__(self, index: ProjectIndex, read: Callable[[Path], bytes | str | None], summary_cache) -> None:
        self.index = index
        self.read = read
        self.cache = summary_cache
        self.extra = 0
        self._files: dict[str, bool] = {}
        self._dirs: dict[str, bool] = {}
        self._resolved: dict[tuple, list[Path]] = {}  # (module, where it is looked up) -> files

    def exists(self, path: str) -> bool:
        if path not in self._files:
            self._files[path] = os.path.isfile(path)
        return self._files[path]

    def is_dir(self, path: str) -> bool:
        if path not in self._dirs:
            self._dirs[path] = os.path.isdir(path)
        return self._dirs[path]

    def summarize_file(self, path: Path) -> ModuleSummary | None:
        source = self.read(path)
        if source is None:
            return None
        if self.cache is not None:
            return self.cache(source, path.suffix)
        return summarize_file_source(source, path.suffix)

    def add_siblings(self, paths: Iterable[Path]) -> None:
        """Summarise the files that may import ``paths`` by plain or package imports: those
        in their folders and the folders above, up to the project root, whose text imports
        the module by name (so may call its functions). Their own imports are
        linked to an eager index, not followed."""
        wanted: dict[Path, set[bytes]] = {}  # folder -> the module names its files may import
        for path in paths:
            names = _module_names(path)
            for folder in _folders_up_to(path.parent, self.index.root):
                wanted.setdefault(folder, set()).update(names)
        added: list[Path] = []
        for folder, names in wanted.items():
            alternatives = b"|".join(map(re.escape, sorted(names)))
            # `from pkg.name import f`, `from .name import f`, `import pkg.name`, `from . import name`
            named = re.compile(rb"\bfrom\s+[\w.]*\b(?:%s)\b|\bimport\s+[^\n;]*\b(?:%s)\b" % (alternatives, alternatives)).search
            for sibling in self._listing(folder):
                if len(added) >= MAX_SIBLING_FILES:
                    break
                if sibling in self.index.summaries:
                    continue
                source = self.read(sibling)
                if source is None:
                    continue
                text = source if isinstance(source, bytes) else source.encode("utf-8", "surrogatepass")
                if not named(text):
                    continue
                summary = self.cache(source, sibling.suffix) if self.cache is not None else summarize_file_source(source, sibling.suffix)
                if summary is not None:
                    self.index.summaries[sibling] = summary
                    added.append(sibling)
        if not self.index.lazy:  # (a lazy index links them only when its closure is asked for)
            self.add_imports(added, follow=False)

    def _listing(self, folder: Path) -> list[Path]:
        """The Python files and notebooks in ``folder`` (a symlink loop or an unreadable
        entry is left out: the run reports those files, the index only skips them)."""
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return []
        files = []
        for entry in entries:
            if entry.name.endswith((".py", ".ipynb")):
                try:
                    if entry.is_file():
                        files.append(Path(entry.path))
                except OSError:
                    continue
        return files

    def add_imports(self, paths: Iterable[Path], follow: bool = True) -> None:
        frontier = list(paths)
        for _depth in range(MAX_IMPORT_DEPTH):
            found: dict[Path, None] = {}  # in order, and a quick membership test
            for path in frontier:
                deps: list[Path] = []
                for module in self.index.summaries[path].imported_modules:
                    for file in self._files_of(module, path):
                        deps.append(file)
                        if not follow or file in self.index.imports or file in found:
                            continue
                        if file in self.index.summaries:  # summarised already (a lazy index's question)
                            found[file] = None
                        elif self.extra < MAX_EXTRA_FILES:
                            summary = self.summarize_file(file)
                            if summary is not None:
                                self.extra += 1
                                self.index.summaries[file] = summary
                                found[file] = None
                self.index.imports[path] = tuple(dict.fromkeys(d for d in deps if d != path))
            frontier = list(found)
            if not frontier:
                break
        for path in frontier:  # past the depth bound: known, but their imports are not followed
            self.index.imports.setdefault(path, ())
        for path, deps in self.index.imports.items():  # drop what was summarised but failed
            self.index.imports[path] = tuple(d for d in deps if d in self.index.summaries)

    def _files_of(self, module: str, path: Path) -> list[Path]:
        """The module's file, and the packages' ``__init__.py`` on the way (they run first
        and may re-export names)."""
        roots = self.index.roots(path)
        key = (module, path.parent if module.startswith(".") else roots)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(module, path, roots)
        return self._resolved[key]

    def _resolve(self, module: str, path: Path, roots: tuple[Path, ...]) -> list[Path]:
        files = []
        for file, _rest in module_files(module, path, roots, self.exists, self.is_dir):
            files.append(file)
            break
        level = len(module) - len(module.lstrip("."))
        parts = [p for p in module[level:].split(".") if p]
        for k in range(1, len(parts)):
            prefix = "." * level + ".".join(parts[:k])
            for file, rest in module_files(prefix, path, roots, self.exists, self.is_dir):
                if not rest and file.name == "__init__.py":
                    files.append(file)
                break
        return files


def build_index(
    files: Iterable[Path],
    root: Path,
    summary_cache: Callable[[bytes], ModuleSummary | None] | None = None,
    lazy: bool = False,
    cache_root: Path | None = None,
    target_torch: tuple[int, int] | None = None,
) -> ProjectIndex:
    """The index of the linted Python files and the project files they import (``lazy``:
    those only when asked, through ``ProjectIndex.summary``)."""
    index = ProjectIndex(Path(os.path.abspath(root)), lazy=lazy, cache_root=cache_root, target_torch=target_torch)
    builder = _Builder(index, _read_file, summary_cache)
    linted = []
    for file in files:
        if file.suffix not in (".py", ".pyi", ".ipynb"):
            continue
        path = Path(os.path.abspath(file))
        summary = builder.summarize_file(path)
        if summary is not None:
            index.summaries[path] = summary
            linted.append(path)
    index.linted = tuple(linted)
    if not lazy:
        builder.add_imports(linted)
    builder.add_siblings(linted)
    if lazy:
        index.callers_from = frozenset(index.summaries)
    return index


def _folders_up_to(folder: Path, root: Path) -> list[Path]:
    """``folder`` and the folders above it up to ``root``, when it lies inside ``root``."""
    folders = [folder]
    if folder != root and root in folder.parents:
        for parent in folder.parents:
            folders.append(parent)
            if parent == root:
                break
    return folders


def _module_names(path: Path) -> list[bytes]:
    """The name an import of ``path`` spells: its module's (its package's, for an
    ``__init__.py``). A caller that reaches it through a package's re-export
    (``from pkg import evaluate``) is not looked for: in a package, nearly every file
    imports the package."""
    name = path.parent.name if path.stem == "__init__" else path.stem
    return [name.encode()] if name else []


def summarize_file_source(source: bytes | str, suffix: str) -> ModuleSummary | None:
    """The summary of a file's content: a module's, or a notebook's kernel code."""
    if suffix == ".ipynb":
        from torchlint.notebook import kernel_code

        source = kernel_code(source if isinstance(source, bytes) else source.encode())
        if source is None:
            return None
    return summarize(source)


def cached_summarize(root: Path) -> Callable[[bytes, str], ModuleSummary | None]:
    """``summarize_file_source`` through the result cache, keyed by the file's content."""
    from torchlint import cache

    def summarize_cached(source: bytes, suffix: str) -> ModuleSummary | None:
        key = cache.summary_key(source, suffix)
        found = cache.load(root, key)
        if isinstance(found, ModuleSummary):
            return found
        summary = summarize_file_source(source, suffix)
        if summary is not None:
            cache.store(root, key, summary)
        return summary

    return summarize_cached


# --- what one file's lint sees ---------------------------------------------------------


@dataclass(frozen=True)
class Symbol:
    path: Path
    summary: ModuleSummary
    definition: ClassSummary | FunctionSummary


class ProjectView:
    """The index as one file sees it: its imported names resolved to project classes and
    functions, and the facts about them that the semantic model asks for."""

    def __init__(self, index: ProjectIndex, path: Path) -> None:
        self.index = index
        self.path = path
        self._symbols: dict[tuple[str, Path], Symbol | None] = {}
        self._class_kinds: dict[tuple[Path, str], object] = {}
        self._modes: dict[tuple[Path, str], bool | None] = {}

    # --- names

    def symbol(self, qname: str, path: Path | None = None, depth: int = 0) -> Symbol | None:
        """The project class or function ``qname`` names from ``path`` (this file by default),
        through re-exports; None when it is not one."""
        path = path or self.path
        key = (qname, path)
        if key in self._symbols:
            return self._symbols[key]
        self._symbols[key] = None  # a cycle of re-exports resolves to nothing
        found = self._symbol(qname, path, depth)
        self._symbols[key] = found
        return found

    def _symbol(self, qname: str, path: Path, depth: int) -> Symbol | None:
        if depth > _MAX_RESOLUTION or not qname:
            return None
        head, _, rest = qname.partition(".")
        own = self.index.summary(path)
        if own is not None and not qname.startswith(".") and not rest:
            local = _definition(own, head)
            if local is not None:
                return Symbol(path, own, local)
        for file, names in self.index.resolve_module(qname, path):
            if len(names) != 1:
                continue
            summary = self.index.summary(file)
            if summary is None:
                continue  # not Python the summary can read
            definition = _definition(summary, names[0])
            if definition is not None:
                return Symbol(file, summary, definition)
            target = dict(summary.imports).get(names[0]) or dict(summary.aliases).get(names[0])
            if target is not None:
                return self.symbol(target, file, depth + 1)
            return None
        return None

    # --- kinds

    def call_kind(self, qname: str):
        """The kind of object calling the project class or function ``qname`` builds."""
        found = self.symbol(qname)
        if found is None:
            return None
        return self._symbol_kind(found, 0)

    def class_kind(self, qname: str):
        """The kind of the project class ``qname`` (annotations and bases)."""
        found = self.symbol(qname)
        if found is None or not isinstance(found.definition, ClassSummary):
            return None
        return self._class_kind(found, 0)

    def _symbol_kind(self, found: Symbol, depth: int):
        if isinstance(found.definition, ClassSummary):
            return self._class_kind(found, depth)
        return self._return_kind(found, depth)

    def _class_kind(self, found: Symbol, depth: int):
        from torchlint.semantic import _BASE_KINDS, _module_class_kind

        key = (found.path, found.definition.name)
        if key in self._class_kinds:
            return self._class_kinds[key]
        self._class_kinds[key] = None
        kind = None
        if depth <= _MAX_RESOLUTION:
            for base in found.definition.bases:
                kind = _BASE_KINDS.get(base) or _module_class_kind(base)
                if kind is None:
                    parent = self.symbol(base, found.path) if base else None
                    if parent is not None and isinstance(parent.definition, ClassSummary):
                        kind = self._class_kind(parent, depth + 1)
                if kind is not None:
                    break
            if kind is None and found.definition.unnamed_bases and found.summary.star_imports:
                kind = self._star_base_kind(found, depth)
        self._class_kinds[key] = kind
        return kind

    def _star_base_kind(self, found: Symbol, depth: int):
        """The kind of a class from a base named through a star import (``class
        Model(nn.Module)`` with ``nn`` bound by ``from models.common import *``)."""
        from torchlint.semantic import _BASE_KINDS, _module_class_kind

        for written in found.definition.unnamed_bases:
            head, _, rest = written.partition(".")
            for module in found.summary.star_imports:
                named = self._star_binding(module, found.path, head, 0)
                if named is None:
                    continue
                qname, path = named
                qname = f"{qname}.{rest}" if rest else qname
                kind = _BASE_KINDS.get(qname) or _module_class_kind(qname)
                if kind is None:
                    parent = self.symbol(qname, path)
                    if parent is not None and isinstance(parent.definition, ClassSummary) and parent.definition is not found.definition:
                        kind = self._class_kind(parent, depth + 1)
                if kind is not None:
                    return kind
        return None

    def _star_binding(self, module: str, path: Path, name: str, depth: int) -> tuple[str, Path] | None:
        """What ``from module import *`` in ``path`` binds ``name`` to: its qualified name
        and the file it is qualified in (a top-level import or definition of the module,
        through its own star imports)."""
        if depth > _MAX_RESOLUTION:
            return None
        for file, rest in self.index.resolve_module(module, path):
            summary = self.index.summary(file) if not rest else None
            if summary is None:
                continue
            imported = dict(summary.imports).get(name)
            if imported is not None:
                return imported, file
            if _definition(summary, name) is not None:
                return name, file
            for star in summary.star_imports:
                found = self._star_binding(star, file, name, depth + 1)
                if found is not None:
                    return found
            return None
        return None

    def _return_kind(self, found: Symbol, depth: int):
        """As ``SemanticModel._return_kind``: the one kind the function's returns are known to have."""
        from torchlint.semantic import _module_class_kind

        kinds = set()
        for returned in found.definition.returns:
            kind = _module_class_kind(returned) if returned else None
            if kind is None and returned and depth <= _MAX_RESOLUTION:
                target = self.symbol(returned, found.path)
                if target is not None and target.definition is not found.definition:
                    kind = self._symbol_kind(target, depth + 1)
            kinds.add(kind)
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None

    # --- star imports

    def star_imports_torch(self, module: str) -> bool | None:
        """Whether ``from module import *`` (a module of the project, as this file names it)
        brings PyTorch in: the module imports torch, or star-imports a module that does.
        None when the module is not in the project."""
        return self._star_torch(module, self.path, frozenset())

    def _star_torch(self, module: str, path: Path, seen: frozenset) -> bool | None:
        from torchlint.semantic.frameworks import _is_torch

        answer = None
        for found, _ in self.index.resolve_module(module, path):
            summary = self.index.summary(found)
            if summary is None or found in seen or len(seen) > _MAX_RESOLUTION:
                continue
            if any(_is_torch(m) for m in summary.imported_modules if not m.startswith(".")):
                return True
            answer = False
            for star in summary.star_imports:
                if self._star_torch(star, found, seen | {found}):
                    return True
        return answer

    # --- forward passes through methods

    def runs_forward(self, qname: str, method: str) -> bool | None:
        """Whether calling ``method`` on an instance of the project class ``qname`` runs its
        submodules with gradients as the caller has them (``ClassSummary.forward_methods``;
        ``"__call__"`` for calling the instance): True or False from the class that defines
        the method (followed through project bases); None when unknown (a base outside the
        project, a class not found)."""
        found = self.symbol(qname)
        if found is None or not isinstance(found.definition, ClassSummary):
            return None
        return self._runs_forward(found, "forward" if method == "__call__" else method, 0)

    def _runs_forward(self, found: Symbol, method: str, depth: int) -> bool | None:
        definition = found.definition
        if method in definition.methods:
            return method in definition.forward_methods
        if depth > _MAX_RESOLUTION:
            return None
        for base in definition.bases:
            if base in ("torch.nn.Module", "torch.nn.modules.module.Module"):
                continue  # nothing of the question's is defined there
            parent = self.symbol(base, found.path) if base else None
            if parent is None or not isinstance(parent.definition, ClassSummary):
                return None  # a base outside the project may define it
            answer = self._runs_forward(parent, method, depth + 1)
            if answer is not None:
                return answer
        return None

    # --- layers that train mode changes

    def mode_layers(self, qname: str) -> bool | None:
        """Whether what calling ``qname`` builds holds a layer that train mode changes: True
        when it is known to, False when every layer is visible and none does, None when
        unknown (not a project class or factory, or something it builds is not visible)."""
        found = self.symbol(qname)
        return self._mode(found, 0) if found is not None else None

    def _mode(self, found: Symbol, depth: int) -> bool | None:
        key = (found.path, found.definition.name)
        if key in self._modes:
            return self._modes[key]
        self._modes[key] = None  # recursion: unknown until shown
        mode = self._compute_mode(found, depth) if depth <= _MAX_RESOLUTION else None
        self._modes[key] = mode
        return mode

    def _compute_mode(self, found: Symbol, depth: int) -> bool | None:
        from torchlint.semantic import Kind, _module_class_kind

        definition = found.definition
        if isinstance(definition, FunctionSummary):
            return self._combine(self._built_mode(r, found.path, depth) for r in definition.returns)
        if definition.mode_layers:
            return DEPENDENT
        parts: list[bool | None] = [None] if definition.mode_unknown else []
        for base in definition.bases:
            if base in ("torch.nn.Module", "torch.nn.modules.module.Module"):
                parts.append(FREE)
            elif _module_class_kind(base) is Kind.MODULE:
                parts.append(DEPENDENT if _mode_layer_name(base) else None)
            else:
                parts.append(self._built_mode(base, found.path, depth))
        for call in definition.calls:
            target = self.symbol(call, found.path)
            if target is None:
                parts.append(None)  # another package's layer, or a name the summary cannot see
            elif isinstance(target.definition, ClassSummary) and not any(b and b != "object" for b in target.definition.bases):
                continue  # a plain class (a config, a helper object) builds no layer
            elif isinstance(target.definition, FunctionSummary):
                parts.append(self._combine(self._built_mode(r, target.path, depth + 1) for r in target.definition.returns) if target.definition.returns else None)
            else:
                parts.append(self._mode(target, depth + 1))
        return self._combine(parts) if parts else None

    def _built_mode(self, qname: str, path: Path, depth: int) -> bool | None:
        from torchlint.semantic import Kind, _module_class_kind

        if not qname:
            return None
        if _module_class_kind(qname) is Kind.MODULE and qname.startswith("torch.nn."):
            return DEPENDENT if _mode_layer_name(qname) else None
        target = self.symbol(qname, path)
        return self._mode(target, depth + 1) if target is not None else None

    @staticmethod
    def _combine(parts: Iterable[bool | None]) -> bool | None:
        parts = list(parts)
        if DEPENDENT in parts:
            return DEPENDENT
        if parts and all(p is FREE for p in parts):
            return FREE
        return None

    # --- the file itself

    def file_name(self) -> str:
        """The name of the file linted (``train_gpu.py``): what it says it is for."""
        return self.path.name

    def oldest_torch(self) -> tuple[int, int] | None:
        """The oldest torch the file's project supports: ``target-torch``, else what the
        project declares (``supported_torch.declared_oldest``, read once per folder); None:
        unknown."""
        if self.index.target_torch is not None:
            return self.index.target_torch
        from torchlint.semantic.supported_torch import declared_oldest

        return declared_oldest(str(self.path.parent))

    def newest_torch(self) -> tuple[int, int] | None:
        """The newest torch the file's project supports, where every declaration pins or caps
        it (``torch==1.13.1``, ``torch<2.4``: ``supported_torch.declared_newest``); None:
        unknown or uncapped."""
        from torchlint.semantic.supported_torch import declared_newest

        return declared_newest(str(self.path.parent))

    # --- functions that need CUDA

    def requires_cuda(self, qname: str) -> str | None:
        """Why every call of the project function ``qname`` needs CUDA: its body calls
        ``torch.cuda.set_device`` or starts NCCL on every path, it is a GPU kernel (Triton),
        or it calls on every path a GPU-only library's function or a project function that
        needs CUDA, to any depth; None otherwise."""
        found = self.symbol(qname)
        if found is None or not isinstance(found.definition, FunctionSummary):
            return None
        return self._requires_cuda(found, frozenset())

    def _requires_cuda(self, found: Symbol, seen: frozenset) -> str | None:
        from torchlint.semantic.devices import _gpu_only_module

        definition = found.definition
        if definition.requires_cuda:
            return definition.requires_cuda
        if definition.gpu_kernel:
            return f"is a GPU kernel ({definition.name})"
        if len(seen) > _MAX_RESOLUTION:
            return None
        for callee in definition.unconditional_calls:
            module = callee.rpartition(".")[0]
            if module and _gpu_only_module(module):
                return f"calls {callee}, which runs on the GPU only"
            target = self.symbol(callee, found.path)
            key = (target.path, callee) if target is not None else None
            if target is None or not isinstance(target.definition, FunctionSummary) or key in seen:
                continue
            reason = self._requires_cuda(target, seen | {key})
            if reason is not None:
                return reason
        return None

    # --- modes that functions leave models in

    def mode_effect(self, qname: str) -> str | None:
        """``"eval"`` or ``"train"``: the mode the project function ``qname`` leaves modules
        in (its last mode switch, following the plain functions it calls); None otherwise."""
        found = self.symbol(qname)
        if found is None or not isinstance(found.definition, FunctionSummary):
            return None
        return self._effect(found, frozenset())

    def _effect(self, found: Symbol, seen: frozenset) -> str | None:
        if found.definition.name in seen or len(seen) > _MAX_RESOLUTION:
            return None
        for event in reversed(found.definition.mode_events):
            if not event.startswith("call:"):
                return event
            callee = self.symbol(event[5:], found.path)
            if callee is not None and isinstance(callee.definition, FunctionSummary):
                effect = self._effect(callee, seen | {found.definition.name})
                if effect is not None:
                    return effect
        return None


    # --- what holds where other files call this file's functions

    def callers_hold(self, name: str, fact: str) -> bool | None:
        """Whether ``fact`` holds at every call of this file's top-level function ``name`` in
        the project's other files: ``"grad"`` gradients are off there (or deliberately on),
        ``"eval"`` the modules are in eval mode. None when no other file calls it; True when
        one passes it around by name (its callers are unknown, as in one file)."""
        if self.index.referenced(self.path, name):
            return True
        calls = [(p, c) for p, c in self.index.callers(self.path, name) if p != self.path]
        if not calls:
            return None
        return all(self._holds(p, c, fact, frozenset()) for p, c in calls)

    def callers_backprop(self, name: str) -> bool | None:
        """Whether a call of this file's top-level function ``name`` in another file may
        differentiate what it returns: its result is used in a body that calls a backward pass
        (or a method's, or module-level code's, where any backward pass there counts). None
        when no other file calls it; True when one passes it around by name."""
        if self.index.referenced(self.path, name):
            return True
        calls = [(p, c) for p, c in self.index.callers(self.path, name) if p != self.path]
        if not calls:
            return None
        for path, call in calls:
            summary = self.index.summary(path)
            if call.used and summary is not None and any(
                c.target == BACKWARD_TARGET and c.function == call.function for c in summary.calls
            ):
                return True
        return False

    def method_callers_backprop(self, name: str) -> bool | None:
        """As ``callers_backprop``, for a method of this file's classes: whether a call
        ``x.name(...)`` in another file may differentiate what it returns (its result used in
        a body that calls a backward pass). True when another file reads ``.name`` other than
        by calling it (a callback: its callers are unknown); None when no other file calls it.
        Calls of any object's method of that name count: which class a call reaches is not
        known, and more calls only make the answer less often False."""
        sites, references = self.index.method_callers(name)
        if references - {self.path}:
            return True
        sites = [(p, body, used) for p, body, used in sites if p != self.path]
        if not sites:
            return None
        for path, body, used in sites:
            summary = self.index.summary(path)
            if used and summary is not None and any(c.target == BACKWARD_TARGET and c.function == body for c in summary.calls):
                return True
        return False

    def _holds(self, path: Path, call: CallSite, fact: str, seen: frozenset) -> bool:
        if call.owned:
            return True
        if fact == "grad" and call.grad_off:
            return True
        if fact == "eval":
            mode = self._mode_before(path, call)
            if mode is not None:
                return mode == "eval"
        key = (path, call.function)
        if not call.function or len(seen) > _MAX_RESOLUTION:
            return False
        if key in seen:
            return True  # a recursive call: the other calls decide
        if self.index.referenced(path, call.function):
            return True  # passed around in its own file: unknown callers
        # The calling function's own callers, in its file (as the evaluation facts follow them).
        calls = [c for p, c in self.index.callers(path, call.function) if p == path]
        return bool(calls) and all(self._holds(path, c, fact, seen | {key}) for c in calls)

    def _mode_before(self, path: Path, call: CallSite) -> str | None:
        """The mode the modules are left in by the switches before ``call`` in its body."""
        view = self if path == self.path else ProjectView(self.index, path)
        for event in reversed(call.modes_before):
            if not event.startswith("call:"):
                return event
            qname = event[5:]
            found = view.symbol(qname)
            if found is not None and isinstance(found.definition, FunctionSummary):
                effect = view._effect(found, frozenset())
            else:  # an unknown helper named for a mode, as the evaluation facts read it
                from torchlint.semantic.evaluation import EVAL, TRAIN, words

                ws = words(qname.rpartition(".")[2])
                effect = EVAL if EVAL in ws else TRAIN if ws and ws[0] in (TRAIN, "fit") else None
            if effect is not None:
                return effect
        return None

    def argument_kinds(self, name: str, position: int, param: str) -> list | None:
        """The kinds of what the project's other files pass to this file's top-level function
        ``name`` for a parameter (at ``position``, or by keyword): one per call, None for an
        argument of unknown kind; None in all when one of them passes the function around."""
        from torchlint.semantic import _module_class_kind

        if self.index.referenced(self.path, name):
            return None
        calls = [(p, c) for p, c in self.index.callers(self.path, name) if p != self.path]
        kinds = []
        for path, call in calls:
            built = dict(call.keywords).get(param, call.args[position] if position < len(call.args) else "")
            kind = _module_class_kind(built) if built else None
            if kind is None and built:
                kind = ProjectView(self.index, path).call_kind(built)
            kinds.append(kind)
        return kinds

    def module_loads(self) -> tuple[str, ...] | None:
        """What the project's files read as a module of what ``torch.load`` gives them
        (``ProjectIndex.module_loads``); None: unknown."""
        return self.index.module_loads(self.path)

    def returns_argument(self, qname: str) -> int | None:
        """The position of the parameter the project function ``qname`` gives back
        (``FunctionSummary.returns_argument``); None when it is not one that does."""
        found = self.symbol(qname)
        if found is None or not isinstance(found.definition, FunctionSummary) or found.definition.returns_argument < 0:
            return None
        return found.definition.returns_argument


# What the semantic model asks a ProjectView: every fact from outside the file's source that a lint
# can depend on (the other files, and the file's own name).
QUESTIONS = (
    "call_kind", "class_kind", "mode_layers", "mode_effect", "requires_cuda", "callers_hold", "argument_kinds", "file_name",
    "callers_backprop", "runs_forward", "method_callers_backprop", "star_imports_torch", "module_loads",
    "oldest_torch", "newest_torch", "returns_argument",
)


class AskedView:
    """A ``ProjectView`` that keeps each question a lint asks it, with the answer, for the
    result cache: a file's cached findings stay good while its source, its settings and the
    answers to the same questions are unchanged (``answers_hold``). What the other files hold
    reaches a lint only through these questions, so the cache need not know which files (or
    how many: an import closure can be thousands) the answers came from."""

    def __init__(self, view: ProjectView) -> None:
        self._view = view
        self.asked: dict[tuple, object] = {}

    def _ask(self, question: str, *args):
        key = (question, *args)
        if key not in self.asked:
            self.asked[key] = getattr(self._view, question)(*args)
        return self.asked[key]

    def call_kind(self, qname: str):
        return self._ask("call_kind", qname)

    def class_kind(self, qname: str):
        return self._ask("class_kind", qname)

    def mode_layers(self, qname: str) -> bool | None:
        return self._ask("mode_layers", qname)

    def mode_effect(self, qname: str) -> str | None:
        return self._ask("mode_effect", qname)

    def requires_cuda(self, qname: str) -> str | None:
        return self._ask("requires_cuda", qname)

    def file_name(self) -> str:
        return self._ask("file_name")

    def oldest_torch(self) -> tuple[int, int] | None:
        return self._ask("oldest_torch")

    def newest_torch(self) -> tuple[int, int] | None:
        return self._ask("newest_torch")

    def callers_hold(self, name: str, fact: str) -> bool | None:
        return self._ask("callers_hold", name, fact)

    def argument_kinds(self, name: str, position: int, param: str) -> list | None:
        return self._ask("argument_kinds", name, position, param)

    def callers_backprop(self, name: str) -> bool | None:
        return self._ask("callers_backprop", name)

    def runs_forward(self, qname: str, method: str) -> bool | None:
        return self._ask("runs_forward", qname, method)

    def method_callers_backprop(self, name: str) -> bool | None:
        return self._ask("method_callers_backprop", name)

    def star_imports_torch(self, module: str) -> bool | None:
        return self._ask("star_imports_torch", module)

    def module_loads(self) -> tuple[str, ...] | None:
        return self._ask("module_loads")

    def returns_argument(self, qname: str) -> int | None:
        return self._ask("returns_argument", qname)


def answers_hold(view: ProjectView | None, asked: dict[tuple, object]) -> bool:
    """Whether ``view`` answers each question as it was answered (a cached result's). A
    question that fails does not hold: the lint asks it again, and reports the failure."""
    if view is None:
        return not asked
    try:
        return all(question in QUESTIONS and getattr(view, question)(*args) == answer for (question, *args), answer in asked.items())
    except Exception:
        return False


def _returned_argument(node: ast.FunctionDef | ast.AsyncFunctionDef, returned: list, stored: set[str]) -> int:
    """``FunctionSummary.returns_argument``: from the values of the function's returns and
    the names it binds (its body ending in a ``return``, so that it never gives back None)."""
    from torchlint.semantic import MODULE_RETURNS_SELF, MODULE_WRAPPED_ATTRS

    def given_back(value: ast.expr | None) -> str | None:
        if isinstance(value, ast.IfExp):
            body, orelse = given_back(value.body), given_back(value.orelse)
            return body if body == orelse else None
        while True:
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in MODULE_RETURNS_SELF:
                value = value.func.value
            elif isinstance(value, ast.Attribute) and value.attr in MODULE_WRAPPED_ATTRS:
                value = value.value
            else:
                return value.id if isinstance(value, ast.Name) else None

    if not isinstance(node.body[-1], (ast.Return, ast.Raise)):
        return -1  # it may end without a return, giving back None
    names = {given_back(value) for value in returned}
    params = [a.arg for a in node.args.posonlyargs + node.args.args]
    if len(names) != 1 or (name := names.pop()) is None or name not in params or name in stored:
        return -1
    return params.index(name)


def _definition(summary: ModuleSummary, name: str) -> ClassSummary | FunctionSummary | None:
    for cls in summary.classes:
        if cls.name == name:
            return cls
    for function in summary.functions:
        if function.name == name:
            return function
    return None


def _mode_layer_name(qname: str) -> bool:
    from torchlint.semantic.evaluation import _MODE_LAYERS

    return bool(_MODE_LAYERS.search(qname.rpartition(".")[2]))

