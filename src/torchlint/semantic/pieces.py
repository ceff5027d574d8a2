"""What the semantic layer tells the lint of a large file in pieces (``torchlint/pieces.py``)
about the file's top-level definitions, read from Python's ``ast`` tree a statement at a time
and erring wide:

- **shared**: the definitions that hold something the devices facts gather for the whole
  file (``devices.DeviceFacts``): CUDA-only signals (``set_device``, ``synchronize``, pins,
  NCCL, collectives, Triton, any import, a call of a project function that needs CUDA),
  device names and holders, device strings, availability checks, saves, ``exec``, global
  declarations; the functions connected through calls (or pytest fixtures asked for by
  name) to one that tests for the GPU, whose call graph decides which functions only ever
  run with one (``DeviceFacts.cuda_only_functions``); uses of `.require_grad` (TL604) and of
  names imported from ``torch.cuda.amp`` (TL801's fix drops the import once every use is
  rewritten). Every piece holds them, so its device facts are the whole file's.
- **independent**: the functions whose lint cannot depend on their callers. What a caller
  gives a function, in the facts: the modules its unannotated parameters receive, the mode
  and gradient state of the models it uses, whether it has callers at all and what runs
  after it returns (``EvaluationFacts.call_sites`` and what asks them). A function escapes
  all of them when it takes only scalars (``n: int``), has no decorator, reads no global but
  module imports, classes it builds and functions of the file, calls nothing it holds (no
  forward of a model), names nothing of modes, gradients or training steps, and calls only
  functions that escape them too: a ``make_loader(n: int = 64)`` that builds a
  ``DataLoader``.
"""

from __future__ import annotations

import ast
import builtins
import functools

from torchlint.pieces import Definition, walk
from torchlint.pieces import names as _walked_names  # (``names`` is many a local here)
from torchlint.semantic.summary import _dotted
from torchlint.semantic.vocabulary import _AVAILABILITY, _COLLECTIVES, _DEVICE_STRING, DEVICE_NAME

_FILE_WIDE_NAMES = frozenset(
    {"set_device", "synchronize", "pin_memory", "exec", "triton", "device",
     "require_grad"}  # (TL604: a file that reads `.require_grad` uses the name as its own)
    | {q.rpartition(".")[2] for q in _COLLECTIVES}
)
_SCALARS = frozenset({"int", "float", "str", "bool", "bytes"})
# What a caller's state reaches: modes, gradients, training steps, forwards.
_STATEFUL = frozenset(
    {
        "eval", "train", "training", "backward", "step", "zero_grad", "no_grad", "enable_grad", "inference_mode",
        "set_grad_enabled", "requires_grad", "requires_grad_", "grad", "forward", "detach", "item", "autocast",
        "state_dict", "load_state_dict", "parameters", "modules", "children", "apply", "register_forward_hook",
    }
)
_BUILTINS = frozenset(dir(builtins))
_HOLDERS = frozenset({ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal})  # (imports: GPU-only libraries)
_TESTS = frozenset({ast.If, ast.Assert, ast.IfExp, ast.While})
_LOCAL_NODES = (
    ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Yield, ast.YieldFrom, ast.Global,
    ast.Nonlocal, ast.Await,
)


class SemanticHooks:
    """``pieces.Hooks`` for a file linted with ``project`` (its project view, or None). Only
    ``finish`` asks the project: a process that has none can read the file's outline, and
    the one that has it set ``project`` and finish (``runner._Outlines``)."""

    def __init__(self, project: object = None) -> None:
        self.project = project
        self.aliases: dict[str, str] = {}  # module-level import bindings, by local name
        self.modules: set[str] = set()  # names bound by `import x` / `import x as y`
        self.imported: set[str] = set()  # names bound by `from x import y`
        self.available: set[str] = set()  # names bound to a test of the GPU (`ok = torch.cuda.is_available()`)

    def statement(self, node: ast.stmt) -> None:
        for child in ast.walk(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                self._import(child)
            elif isinstance(child, ast.Assign) and any(_AVAILABILITY.search(n) for n in _names(child.value)):
                for target in child.targets:
                    self.available |= _names(target)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                local = alias.asname or alias.name.partition(".")[0]
                self.modules.add(local)
                self.aliases.setdefault(local, alias.name if alias.asname else local)
            return
        base = "." * node.level + (node.module or "")
        for alias in node.names:
            local = alias.asname or alias.name
            self.imported.add(local)
            self.aliases.setdefault(local, f"{base}.{alias.name}" if node.module else base + alias.name)

    def definition(self, node, nodes: list[ast.AST], used: set[str]) -> tuple:
        """(whether it holds a fact of the whole file on its own, the names its tests read,
        the dotted names of the functions it calls, and, for a function that
        may be independent, the global names it reads and calls); ``nodes`` are every node
        in it, ``used`` the names and attribute names among them."""
        shared = any(map(_file_wide, used)) or any(
            self.aliases.get(n, "").startswith("torch.cuda.amp") for n in used
        )  # (TL801's fix drops a `from torch.cuda.amp import` name once every use of it is rewritten)
        tests: set[str] = set()
        chains: set[str] = set()  # the dotted names of the functions it calls
        for child in nodes:
            kind = type(child)
            if kind in _HOLDERS:
                shared = True
            elif kind is ast.Constant:
                value = child.value
                shared = shared or (type(value) is str and (value == "nccl" or bool(_DEVICE_STRING.match(value))))
            elif kind is ast.Call:  # (kept whether or not there is a project yet: see ``finish``)
                dotted = _dotted(child.func)
                if dotted is not None:
                    chains.add(dotted)
            elif kind in _TESTS:
                names = _names(child.test)
                tests |= names
                shared = shared or any(_AVAILABILITY.search(n) for n in names)
            elif kind is ast.Assign and any(_AVAILABILITY.search(n) for n in _names(child.value)):
                for target in child.targets:
                    tests |= {"\0available:" + n for n in _names(target)}
        independent = None if isinstance(node, ast.ClassDef) else _independent(node, nodes)
        if not isinstance(node, ast.ClassDef):
            # (a pytest test's parameters name the fixtures it runs: calls, for the call graph)
            arguments = node.args
            chains |= {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
        # A test or a decorator that asks for the GPU (`if not torch.cuda.is_available(): skip`).
        decorators = [n for d in getattr(node, "decorator_list", ()) for n in _names(d)]
        gpu_test = any(_AVAILABILITY.search(n) for n in [*tests, *decorators])
        return shared, frozenset(tests), frozenset(chains), independent, gpu_test

    def finish(self, definitions: list[Definition]) -> tuple[set[int], set[int]]:
        return self._shared(definitions), self._independent(definitions)

    def _shared(self, definitions: list[Definition]) -> set[int]:
        found = set()
        for index, d in enumerate(definitions):
            shared, tests, chains, _, _ = d.facts
            own = {t[len("\0available:"):] for t in tests if t.startswith("\0available:")}
            if shared or tests & (self.available | own) or self._requires_cuda(chains):
                found.add(index)
        return found | self._gpu_call_graph(definitions)

    @staticmethod
    def _gpu_call_graph(definitions: list[Definition]) -> set[int]:
        """The definitions connected, through calls of the file's functions (and pytest
        fixtures asked for by name), to one that tests for the GPU: the devices facts judge
        which functions only ever run with a GPU from that call graph
        (``DeviceFacts.cuda_only_functions``), so every piece holds all of it."""
        seeds = [i for i, d in enumerate(definitions) if d.facts[4]]
        if not seeds:
            return set()
        by_name = {d.name: i for i, d in enumerate(definitions)}
        edges: dict[int, set[int]] = {}
        for i, d in enumerate(definitions):
            for dotted in d.facts[2]:
                j = by_name.get(dotted.partition(".")[0])
                if j is not None and j != i:
                    edges.setdefault(i, set()).add(j)
                    edges.setdefault(j, set()).add(i)
        found, stack = set(seeds), list(seeds)
        while stack:
            for j in edges.get(stack.pop(), ()):
                if j not in found:
                    found.add(j)
                    stack.append(j)
        return found

    def _requires_cuda(self, chains: frozenset) -> bool:
        if self.project is None:
            return False
        for dotted in chains:
            head, _, rest = dotted.partition(".")
            target = self.aliases.get(head)
            if target is None:
                continue
            qname = f"{target}.{rest}" if rest else target
            # (torch's own names aside, as ``SemanticModel.imported_names`` does.)
            if qname != "torch" and not qname.startswith("torch.") and self.project.requires_cuda(qname):
                return True
        return False

    def _independent(self, definitions: list[Definition]) -> set[int]:
        names = {d.name for d in definitions}
        if len(names) != len(definitions):
            return set()  # (a name defined twice: which one a call reaches is not known here)
        functions = {d.name for d in definitions if not d.is_class}
        candidates = {}
        for index, d in enumerate(definitions):
            found = d.facts[3]
            if found is None:
                continue
            reads, called = found
            if all(
                n in names or n in self.modules or (n in self.imported and n[:1].isupper() and n in called) for n in reads
            ):
                candidates[index] = called & functions
        # One that calls a function of the file that is not one passes its callers' state on.
        while True:
            kept = {definitions[i].name for i in candidates}
            dropped = [i for i, called in candidates.items() if called - kept]
            if not dropped:
                return set(candidates)
            for i in dropped:
                del candidates[i]


@functools.lru_cache(maxsize=4096)  # (names repeat)
def _file_wide(name: str) -> bool:
    """A name the devices facts gather for the whole file: a CUDA-only call, a device name
    or holder, a save, process-group set-up."""
    return bool(
        name in _FILE_WIDE_NAMES or DEVICE_NAME.match(name) or "save" in name.lower()
        or name.startswith(("init_process_group", "init_distributed"))
    )


def _independent(function: ast.FunctionDef | ast.AsyncFunctionDef, nodes: list[ast.AST]) -> tuple[frozenset, frozenset] | None:
    """(the global names it reads, the names it calls), or None when its lint may depend on
    its callers whatever the module around it holds."""
    if function.decorator_list:
        return None
    arguments = function.args
    params = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    params += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    if not all(isinstance(p.annotation, ast.Name) and p.annotation.id in _SCALARS for p in params):
        return None
    local = {p.arg for p in params}
    loads: set[str] = set()
    called: set[str] = set()
    for node in nodes:
        if node is not function and isinstance(node, _LOCAL_NODES):
            return None
        if isinstance(node, ast.Attribute) and node.attr in _STATEFUL:
            return None
        if isinstance(node, ast.Name):
            if node.id in _STATEFUL:
                return None
            if isinstance(node.ctx, ast.Load):
                loads.add(node.id)
            else:
                local.add(node.id)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            local.add(node.name)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
    if called & local:
        return None  # a call of what it holds: a forward of a model, say
    return frozenset(loads - local - _BUILTINS), frozenset(called)


def _names(node: ast.AST) -> set[str]:
    """The names in an expression, attributes' included (as LibCST's ``Name`` nodes): what
    the outline counts as used (an expression declares nothing global)."""
    return _walked_names(walk(node))[0]
