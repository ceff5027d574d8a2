"""One file's summary for the project index: what the other files of its project need to know
about it.

Each Python file is summarised from Python's own ``ast`` (a C parser, much cheaper than
LibCST) into plain, picklable data: its import bindings, its classes (bases, the layers
they build, the project classes and functions they call) and its functions (what they
return, the modes they switch models to). Summaries keep names as qualified names through
the file's own imports (``torch.nn.Module``, ``.models.Net``, ``models.build_model``); a
name defined in the file itself stays bare (``Net``). A fact a summary could not see is
unknown, and the rules stay silent.
"""

from __future__ import annotations

import ast
import builtins
from collections import ChainMap, deque
from dataclasses import dataclass, field, replace
from typing import Callable, ClassVar, Iterable, Iterator

from torchlint import pieces
from torchlint._startup import cyclic_gc_paused
from torchlint.positions import LintMemo
from torchlint.text import source_rows, syntax_tree
from torchlint.semantic.vocabulary import (
    _BUILDING_BUILTINS, _FRAMEWORK_HOOKS, _FRAMEWORK_PACKAGES, _gpu_only_module, _GRAD_CONTEXT_TEXT, _GRAD_CONTEXTS,
    _LOADING, _MODE_FUNCTIONS, _MODE_LAYERS, _PLAIN_METHODS, MODULE_RETURNS_SELF, MODULE_WRAPPED_ATTRS,
)

_BUILTINS = frozenset(dir(builtins))


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
    # Its ``__init__`` calls something other than ``super().__init__(...)``: it may build
    # layers or parameters (``ProjectView.parameter_free``).
    init_builds: bool = True


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
    # Every ``return`` gives back a value that carries no autograd graph, made on the spot
    # (``t.cpu().detach().numpy()``, ``x.item()``, ``x.data``; ``_gives_no_graph``), and the
    # function keeps nothing of its parameters elsewhere (no assignment to an attribute or
    # subscript, no method call as a statement): what it is given ends there.
    gives_no_graph: bool = False


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
    # The function that makes the call gives a value back (``return x``): what the call
    # returns may go on to its callers, whose backward passes this summary does not see.
    returning: bool = False


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
    # function whose own body calls it or "", whether what it returns is used, whether it
    # runs with gradients off, whether the calling function returns a value, and for a
    # call on ``self`` in a method, its class's name: it reaches that class's method or a
    # subclass's, else ""), once each; and the attribute names read other than by calling
    # them (``callback=self.step``).
    method_calls: tuple[tuple[str, str, bool, bool, bool, str], ...] = ()
    method_references: tuple[str, ...] = ()
    star_imports: tuple[str, ...] = ()  # the modules of `from M import *` ("" parts relative: "..network")
    # What the file reads as a module of what ``torch.load`` gives (``_Sites._module_read``):
    # "" the loaded object itself, a key of it (``ckpt["model"].eval()``), "*" a key not
    # spelled as a string; and, after a "?", what it hands to readers the summary does not
    # follow (``_Sites._unknown_read``: returned, stored in an attribute or a container),
    # or "?" alone for code the summary cannot read (a notebook's masked IPython lines).
    module_loads: tuple[str, ...] = ()
    # Top-level names bound to another name (``Model = DetectionModel``), with its qualified name.
    aliases: tuple[tuple[str, str], ...] = ()
    # Modules the file imports on every path (statements of its own top-level body, not under
    # ``if`` or ``try``): ``from . import _C`` gives ".", "._C"; importing it needs them.
    required_imports: tuple[str, ...] = ()
    # The extension modules this file (a ``setup.py``) builds from CUDA sources with
    # ``CUDAExtension`` and no ``CppExtension`` (which would give a CPU build): "pkg._C".
    cuda_extensions: tuple[str, ...] = ()


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


@cyclic_gc_paused
def module_loads_of(source: bytes | str) -> tuple[str, ...] | None:
    """``summarize(source).module_loads`` without the rest of the summary (what a project's
    loaders of checkpoints are asked: a file read only for them). Only the top-level
    statements that can load (their text names a ``load``) or read a name a module-level load
    bound are walked, and only for loads; None when the source does not parse."""
    try:
        tree = syntax_tree(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    rows = source_rows(source)
    summarizer = _Summarizer(lambda: [tree.body])
    # What a load is spelled with: `load` (`torch.load`, `t.load`), or a name it is imported as.
    words = ["load", *(name for name, qualified in summarizer.imports.items() if qualified == "torch.load")]
    if isinstance(source, bytes):
        words = [w.encode() for w in words]
    empty = words[0][:0]
    sites = _Sites(summarizer, loads_only=True)
    try:
        for node in tree.body:
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            text = empty.join(rows[first - 1 : node.end_lineno])
            if sites.module_body.loaded or any(word in text for word in words):
                sites.visit(node)
                sites.called.clear()
                sites.discarded.clear()
    except RecursionError:
        return None
    return tuple(sorted(sites.module_loads))


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
        self.required: list[str] = []
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
        self.required: list[str] = []
        for depth, _, _, node, top in sorted(self._found, key=lambda entry: entry[:3]):
            start = len(self.modules)
            self._import(node, top)
            if depth == 0:
                self.required.extend(self.modules[start:])

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
            required_imports=tuple(dict.fromkeys(self.required)),
            cuda_extensions=self._cuda_extensions(),
        )

    def _cuda_extensions(self) -> tuple[str, ...]:
        """The names of the extensions built with ``CUDAExtension(name, sources)`` when the
        file imports it and no ``CppExtension`` (a build script that falls back to the CPU)."""
        qualified = set(self.imports.values())
        if not any(q.endswith("CUDAExtension") for q in qualified) or any(q.endswith("CppExtension") for q in qualified):
            return ()
        names = []
        for body in self.bodies():
            for node in ast.walk(ast.Module(body=body, type_ignores=[])):
                if not (isinstance(node, ast.Call) and (_dotted(node.func) or "").endswith("CUDAExtension")):
                    continue
                name = next((k.value for k in node.keywords if k.arg == "name"), node.args[0] if node.args else None)
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    names.append(name.value)
        return tuple(dict.fromkeys(names))

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
            node.name, bases, mode_layers, unknown, tuple(dict.fromkeys(calls)), methods, forward_methods, unnamed,
            init_builds=_init_builds(node),
        )

    def _forward_methods(self, node: ast.ClassDef) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The class's methods, and those that run its submodules without turning gradients
        off, and with no decorator, which may (as ``EvaluationFacts._runs_submodules`` judges
        a method of the linted file)."""
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
            _gives_no_graph(node, returned),
        )

    def _gpu_kernel(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for decorator in node.decorator_list:
            qname = self.qualify(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
            if qname and _gpu_only_module(qname.rpartition(".")[0] or qname):
                return True
        return False

    def _unconditional_calls(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...]:
        """``FunctionSummary.unconditional_calls``."""
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

    def __init__(self, summarizer: _Summarizer, loads_only: bool = False) -> None:

        self.summarizer = summarizer
        self.loads_only = loads_only  # only ``module_loads`` is asked (``module_loads_of``)
        self.calls: list[CallSite] = []
        self.references: list[str] = []
        self.method_calls: list[tuple[str, str, bool, bool, bool, str]] = []
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
        if self.loads_only:  # a body of its own, its loads added where they are found
            saved = self.body
            self.body = _Body(node.name if not self.scopes else "", False, False)
            self._walk_body(node)
            self.body = saved
            return
        cls = self.scopes[-1] if self.scopes and isinstance(self.scopes[-1], ast.ClassDef) else None
        # A decorator does not cover a coroutine's body; a nested function runs where it is
        # defined as far as the evaluation facts go (they look at every enclosing block).
        decorated = isinstance(node, ast.FunctionDef) and any(self._grad_context(d) for d in node.decorator_list)
        inherited = self.body.grad or self.grad_withs > 0 or self.body.grad_statement if self.scopes else False
        saved = self.body, self.grad_withs
        owner = self._owned(node, cls)
        self.body = _Body(
            node.name if not self.scopes else "",
            self.body.owned or owner is not None,
            decorated or inherited,
            grad_owned=self.body.grad_owned or owner == "framework",
            returning=_returns_value(node),
        )
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
        self.body = _Body("", saved.owned, saved.grad or self.grad_withs > 0, grad_owned=saved.grad_owned)
        self.generic_visit(node)
        self.body = saved

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for item in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(item)
        self.scopes.append(node)
        for statement in node.body:
            self.visit(statement)
        self.scopes.pop()

    def _owned(self, function: ast.FunctionDef | ast.AsyncFunctionDef, cls: ast.ClassDef | None) -> str | None:
        """As ``EvaluationFacts._owner``, from what one file's ``ast`` shows: ``"framework"``
        (a hook, a framework's class, a test), ``"module"`` (an ``nn.Module`` subclass's
        method, which sets its own gradients), or None."""
        if function.name.startswith("test"):
            return "framework"
        if cls is None:
            return None
        if _FRAMEWORK_HOOKS.match(function.name) or cls.name.startswith("Test") or cls.name.endswith("TestCase"):
            return "framework"
        bases = [self.summarizer.qualify(b) or "" for b in cls.bases]
        if any(b.startswith(_FRAMEWORK_PACKAGES) or b.endswith("TestCase") for b in bases):
            return "framework"
        if any(b.startswith("torch.nn.") for b in bases):
            return "module"
        return "module" if any(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "forward" for s in cls.body) else None

    # --- gradients

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        grad = not self.loads_only and any(self._grad_context(item.context_expr) for item in node.items)
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
        if qname in _GRAD_CONTEXTS:
            if call is not None and call.args and isinstance(call.args[0], ast.Constant):
                value = call.args[0].value
                if (qname.endswith("set_grad_enabled") and value is True) or (qname.endswith("inference_mode") and value is False):
                    return False
            return True
        text = ast.unparse(expr)
        return any(word in text for word in _GRAD_CONTEXT_TEXT)

    def visit_Expr(self, node: ast.Expr) -> None:
        self.discarded.add(id(node.value))
        self.generic_visit(node)
        call = node.value
        if isinstance(call, ast.Call) and (self.summarizer.qualify(call.func) or "") in _GRAD_CONTEXTS:
            if len(call.args) == 1 and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, bool):
                self.body.grad_statement = not call.args[0].value  # torch.set_grad_enabled(False)

    # --- calls and references

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if self.body is self.module_body and not self.scopes and not self.loads_only:
            self._alias(node)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if not self.loads_only:
                self.body.built[node.targets[0].id] = self._built(node.value)
            key = self._loaded_key(node.value)
            if key is None:
                self.body.loaded.pop(node.targets[0].id, None)
            else:
                self.body.loaded[node.targets[0].id] = key
        elif any(not isinstance(target, ast.Name) for target in node.targets):
            self._unknown_read(node.value)  # self.model = torch.load(path), a, b = ckpt

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        """``net: Net = torch.load(path)``: the name holds the load as a plain assignment's
        does, and an annotation other than a mapping's declares it a module."""
        self.generic_visit(node)
        if node.value is None:
            return
        if not isinstance(node.target, ast.Name):
            self._unknown_read(node.value)  # self.model: Net = torch.load(path)
            return
        key = self._loaded_key(node.value)
        if key is None:
            self.body.loaded.pop(node.target.id, None)
            return
        self.body.loaded[node.target.id] = key
        if annotation_declares_module(node.annotation):
            self.module_loads.add(key)

    def visit_Return(self, node: ast.Return) -> None:
        self.generic_visit(node)
        if node.value is not None:
            self._unknown_read(node.value)  # its readers are the callers'

    def visit_Yield(self, node: ast.Yield | ast.YieldFrom) -> None:
        self.generic_visit(node)
        if node.value is not None:
            self._unknown_read(node.value)

    visit_YieldFrom = visit_Yield

    def visit_List(self, node: ast.List | ast.Tuple | ast.Set) -> None:
        self.generic_visit(node)
        if not isinstance(getattr(node, "ctx", ast.Load()), ast.Store):
            for element in node.elts:
                self._unknown_read(element)  # [torch.load(a), torch.load(b)]: read from the container

    visit_Tuple = visit_Set = visit_List

    def visit_Dict(self, node: ast.Dict) -> None:
        self.generic_visit(node)
        for value in node.values:
            self._unknown_read(value)

    def visit_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        self.generic_visit(node)
        self._unknown_read(node.value if isinstance(node, ast.DictComp) else node.elt)

    visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_ListComp

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

    def _unknown_read(self, expr: ast.expr) -> None:
        """``expr`` goes where the summary does not follow it (returned, stored in an
        attribute or a container): if it is a part of a load, the readers of that part are
        not all known."""
        if isinstance(expr, ast.Name) and not isinstance(expr.ctx, ast.Load):
            return
        key = self._loaded_key(expr)
        if key is not None:
            self.module_loads.add("?" + key)

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
        return self.summarizer._built_by(value, built, MODULE_RETURNS_SELF)

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
        if self.loads_only:
            return
        target = self.summarizer.callable_name(node.func)
        grad_off = self.body.grad or self.grad_withs > 0 or self.body.grad_statement
        if target is not None and not any(isinstance(a, ast.Starred) for a in node.args):
            self.calls.append(
                CallSite(
                    target=target,
                    function=self.body.function,
                    owned=self.body.owned,
                    grad_off=grad_off,
                    modes_before=tuple(self.body.modes),
                    args=tuple(self._built(a) for a in node.args),
                    keywords=tuple((k.arg, self._built(k.value)) for k in node.keywords if k.arg),
                    used=id(node) not in self.discarded,
                    returning=self.body.returning,
                )
            )
        func = node.func
        if target is None and isinstance(func, ast.Attribute):
            self.method_calls.append(
                (func.attr, self.body.function, id(node) not in self.discarded, bool(grad_off or self.body.grad_owned),
                 self.body.returning, self._self_class(func))
            )
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

    def _self_class(self, func: ast.Attribute) -> str:
        """For ``self.name`` in a method (the function right inside a class), that class's
        name; else ""."""
        if not (isinstance(func.value, ast.Name) and func.value.id == "self" and len(self.scopes) >= 2):
            return ""
        method, cls = self.scopes[-1], self.scopes[-2]
        return cls.name if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(cls, ast.ClassDef) else ""

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.called and not self.loads_only:
            self._reference(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load) and id(node) not in self.called and not self.loads_only:
            self.method_references.append(node.attr)
        if node.attr not in _MAPPING_METHODS:
            self._module_read(node.value)  # checkpoint["model"].eval()
        if isinstance(node.ctx, ast.Load) and id(node) not in self.called and _dotted(node) is not None and not self.loads_only:
            self._reference(node)
            return
        self.generic_visit(node)

    def _reference(self, node: ast.expr) -> None:
        target = self.summarizer.callable_name(node)
        if target is not None:
            self.references.append(target)


def _init_builds(cls: ast.ClassDef) -> bool:
    """Whether the class's own ``__init__`` calls anything but ``super().__init__(...)``
    (``super(Net, self).__init__()``): it may build layers or parameters; storing plain
    values (``self.alpha = alpha``) builds nothing."""
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == "__init__":
            for sub in _walk_function(statement):
                if isinstance(sub, ast.Call) and not _is_super_init(sub) and not _is_super_call(sub):
                    return True
    return False


def _is_super_call(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id == "super"


def _is_super_init(call: ast.Call) -> bool:
    func = call.func
    return isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call) and _is_super_call(func.value)


def _returns_value(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a ``return`` with a value (or a ``yield``) of the function's own runs."""
    return any(
        isinstance(sub, (ast.Yield, ast.YieldFrom))
        or (isinstance(sub, ast.Return) and sub.value is not None and not (isinstance(sub.value, ast.Constant) and sub.value.value is None))
        for sub in _walk_function(function)
    )


@dataclass
class _Body:
    function: str  # the top-level function it is, or ""
    owned: bool
    grad: bool  # gradients off (or deliberately on) around the whole body
    modes: list[str] = field(default_factory=list)
    built: dict[str, str] = field(default_factory=dict)  # local name -> the call that built it
    loaded: dict[str, str] = field(default_factory=dict)  # local name -> the part of a load it holds
    grad_statement: bool = False  # torch.set_grad_enabled(False) so far
    grad_owned: bool = False  # in code whose gradients a framework sets (a hook, a test), not a module's method
    returning: bool = False  # the function gives a value back (``CallSite.returning``)

    def copy(self) -> _Body:
        return replace(self, modes=list(self.modes), built=dict(self.built), loaded=dict(self.loaded))


# What a state dict (a mapping) answers: reading these of a loaded entry is no module use.
_MAPPING_METHODS = frozenset(
    {"keys", "items", "values", "get", "copy", "pop", "popitem", "update", "setdefault", "clear", "move_to_end",
     "__contains__", "__getitem__", "__len__", "__iter__"}
)
# The heads of annotations that do not declare a loaded object a module: a mapping (a state
# dict, a checkpoint), or anything at all.
_NOT_MODULE_ANNOTATIONS = frozenset({"dict", "Dict", "Mapping", "MutableMapping", "OrderedDict", "Any", "object", "None"})


def annotation_declares_module(annotation: ast.expr) -> bool:
    """Whether an annotation may declare a module (``Net``, ``nn.Module``, ``"Net"``,
    ``Optional[Net]``): anything but a mapping, ``Any`` or ``object`` (``dict[str, Tensor]``,
    ``Optional[OrderedDict]``, ``Dict | None``)."""
    if isinstance(annotation, ast.Constant):
        if annotation.value is None:
            return False
        if not isinstance(annotation.value, str):
            return True
        try:
            annotation = ast.parse(annotation.value.strip(), mode="eval").body
        except SyntaxError:
            return True
        return annotation_declares_module(annotation)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return annotation_declares_module(annotation.left) or annotation_declares_module(annotation.right)
    if isinstance(annotation, ast.Subscript):
        head = _dotted(annotation.value)
        if head is not None and head.rpartition(".")[2] in ("Optional", "Union"):
            inner = annotation.slice
            return any(annotation_declares_module(e) for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner]))
        return annotation_declares_module(annotation.value)
    head = _dotted(annotation) if isinstance(annotation, (ast.Name, ast.Attribute)) else None
    return head is None or head.rpartition(".")[2] not in _NOT_MODULE_ANNOTATIONS


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
    if _MODE_LAYERS.search(layer):
        return False
    recurrent = layer in ("RNN", "LSTM", "GRU")
    layers = next((k.value for k in call.keywords if k.arg == "num_layers"), call.args[2] if len(call.args) > 2 else None)
    one_layer = recurrent and (layers is None or isinstance(layers, ast.Constant) and layers.value == 1)
    for keyword in call.keywords:
        if keyword.arg == "dropout" and not one_layer:  # (between layers: none in a one-layer RNN)
            if not (isinstance(keyword.value, ast.Constant) and keyword.value.value == 0):
                return False
    return not (recurrent and len(call.args) >= 6 and not one_layer)


def _gives_no_graph(node: ast.FunctionDef | ast.AsyncFunctionDef, returned: list) -> bool:
    """``FunctionSummary.gives_no_graph``: ``def to_np(t): return t.cpu().detach().numpy()``."""
    from torchlint.semantic.gradflow import _DETACHING_ATTRIBUTES, _DETACHING_METHODS

    def no_graph(value: ast.expr | None) -> bool:
        if isinstance(value, ast.IfExp):
            return no_graph(value.body) and no_graph(value.orelse)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            return value.func.attr in _DETACHING_METHODS
        return isinstance(value, ast.Attribute) and value.attr in _DETACHING_ATTRIBUTES

    if isinstance(node, ast.AsyncFunctionDef) or not returned or not isinstance(node.body[-1], (ast.Return, ast.Raise)):
        return False
    for sub in _walk_function(node):
        if isinstance(sub, (ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)):
            return False
        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(not isinstance(t, ast.Name) for t in targets):
                return False  # `self.cache = t`, `out[i] = t`: kept beyond the call
        if isinstance(sub, ast.Expr) and isinstance(sub.value, ast.Call):
            return False  # `buffer.append(t)`: a call for what it does may keep it
    return all(no_graph(value) for value in returned)


def _returned_argument(node: ast.FunctionDef | ast.AsyncFunctionDef, returned: list, stored: set[str]) -> int:
    """``FunctionSummary.returns_argument``: from the values of the function's returns and
    the names it binds (its body ending in a ``return``, so that it never gives back None)."""

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
