"""What one file's lint sees of its project: ``ProjectView`` answers the semantic model's
questions about names the file imports (what a class or function of another file is, who
calls a function and what holds there), from the project index's summaries
(``index.py``, ``summary.py``); ``AskedView`` records the questions asked and their answers,
so that a cached result is reused only while they still hold.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from torchlint.semantic.summary import BACKWARD_TARGET, CallSite, ClassSummary, FunctionSummary, ModuleSummary
from torchlint.semantic.vocabulary import _BASE_KINDS, _gpu_only_module, _MODE_LAYERS, _module_class_kind, _TORCHVISION_MODE_MODELS, EVAL, Kind, TRAIN

if TYPE_CHECKING:
    from torchlint.semantic.index import ProjectIndex

_MAX_RESOLUTION = 12  # re-export chains and class hierarchies followed in one question
_MAX_CUDA_IMPORT_FILES = 200  # project files one "does importing it need CUDA?" question visits
DEPENDENT, FREE = True, False  # a class's mode facts; None: unknown


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

    def parameter_free(self, qname: str) -> bool | None:
        """Whether an instance of the project class ``qname`` holds no parameters: its
        ``__init__`` and every base's build nothing, and its bases end at ``torch.nn.Module``
        (``ClassSummary.init_builds``). None when ``qname`` is no project class or a base is
        not known."""
        found = self.symbol(qname)
        if found is None or not isinstance(found.definition, ClassSummary):
            return None
        return self._parameter_free(found, 0)

    def _parameter_free(self, found: Symbol, depth: int) -> bool | None:
        definition = found.definition
        if definition.init_builds:
            return False
        if definition.unnamed_bases or not definition.bases or depth > _MAX_RESOLUTION:
            return None
        for base in definition.bases:
            if base in ("torch.nn.Module", "torch.nn.modules.module.Module"):
                continue
            parent = self.symbol(base, found.path) if base else None
            if parent is None or not isinstance(parent.definition, ClassSummary):
                return None
            answer = self._parameter_free(parent, depth + 1)
            if answer is not True:
                return answer
        return True

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
        found = self._symbol_or_star(qname)  # (`init_distributed()` from `from utils import *`)
        if found is None or not isinstance(found.definition, FunctionSummary):
            return None
        return self._requires_cuda(found, frozenset())

    def _requires_cuda(self, found: Symbol, seen: frozenset) -> str | None:
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

    # --- files that need CUDA to be imported

    def imports_cuda_only(self) -> str | None:
        """Why importing this file needs CUDA: it imports on every path (statements of its own
        top-level body) an extension the project builds from CUDA sources only
        (``CUDAExtension`` in a ``setup.py`` of a folder above it, with no ``CppExtension``), a
        compiled kernel (``roi_align_cuda``), or a project module that does so, at any depth;
        None otherwise. (A GPU-only library such as Triton installs and imports without a GPU:
        only the importing file's own use of it counts, ``DeviceFacts``.)"""
        summary = self.index.summary(self.path)
        if summary is None:
            return None
        return self._imports_cuda_only(self.path, summary, {self.path}, top=True)

    def _cuda_extensions(self) -> dict[str, str]:
        """The CUDA-only extensions of the project: their last name part ("_C",
        "roi_align_cuda") -> the setup.py that builds them, from the folders above this file."""
        found: dict[str, str] = {}
        folder = self.path.parent
        root = self.index.root
        while True:
            setup = folder / "setup.py"
            summary = self.index.summary(setup) if (self.index.files is None or self.index.files.is_file(str(setup))) else None
            if summary is not None:
                for name in summary.cuda_extensions:
                    found.setdefault(name.rpartition(".")[2], os.path.relpath(setup, root))
            if folder == root or folder.parent == folder or root not in folder.parents:
                break
            folder = folder.parent
        return found

    def _imports_cuda_only(self, path: Path, summary: ModuleSummary, seen: set, top: bool = False) -> str | None:
        """(``seen``: every module visited in this question, one set for the whole search: a
        package whose ``__init__``s re-export one another is walked once, not once per path.)"""
        extensions = self._cuda_extensions()
        for module in summary.required_imports:
            name = module.lstrip(".")
            if name and not top and any(part.endswith("_cuda") for part in name.split(".")):
                return f"it imports {name}, a compiled CUDA kernel"
            last = name.rpartition(".")[2]
            if last in extensions and (module.startswith(".") or "." in name or name == last):
                return f"it imports {module}, built from CUDA sources only by {extensions[last]}"
            if len(seen) > _MAX_CUDA_IMPORT_FILES:
                continue
            for found, rest in self.index.resolve_module(module, path):
                if found in seen or rest:
                    continue
                seen.add(found)
                inner = self.index.summary(found)
                if inner is None:
                    continue
                reason = self._imports_cuda_only(found, inner, seen)
                if reason is not None:
                    return f"it imports {module}, which needs CUDA ({reason})" if top else reason
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
        (or a method's, or module-level code's, where any backward pass there counts), or in
        a function that returns a value (it may give the result on to callers that do). None
        when no other file calls it; True when one passes it around by name."""
        if self.index.referenced(self.path, name):
            return True
        calls = [(p, c) for p, c in self.index.callers(self.path, name) if p != self.path]
        if not calls:
            return None
        for path, call in calls:
            if call.used and call.returning:
                return True  # given on to that function's callers, which are not followed
            summary = self.index.summary(path)
            if call.used and summary is not None and any(
                c.target == BACKWARD_TARGET and c.function == call.function for c in summary.calls
            ):
                return True
        return False

    def method_callers_backprop(self, name: str, bases: tuple[str, ...] = ()) -> bool | None:
        """As ``callers_backprop``, for a method of this file's classes: whether a call
        ``x.name(...)`` in another file may differentiate what it returns (its result used in
        a body that calls a backward pass, or in a function that returns a value). True when
        another file reads ``.name`` other than by calling it (a callback: its callers are
        unknown); None when no other file calls it.
        Calls of any object's method of that name count: which class a call reaches is not
        known, and more calls only make the answer less often False."""
        sites = self._method_sites_elsewhere(name, bases)
        if sites is None:
            return True
        if not sites:
            return None
        for path, body, used, _, returning, _ in sites:
            if used and returning:
                return True  # given on to that function's callers, which are not followed
            summary = self.index.summary(path)
            if used and summary is not None and any(c.target == BACKWARD_TARGET and c.function == body for c in summary.calls):
                return True
        return False

    def method_callers_hold(self, name: str, fact: str, bases: tuple[str, ...] = ()) -> bool | None:
        """As ``callers_hold``, for a method of this file's classes, for ``"grad"``: whether
        every call ``x.name(...)`` in another file runs with gradients off (or in code a
        framework owns). True when another file reads ``.name`` other than by calling it (its
        callers are unknown); None when no other file calls it, or for another fact. Calls of
        any object's method of that name count, as in ``method_callers_backprop``."""
        if fact != "grad":
            return None
        sites = self._method_sites_elsewhere(name, bases)
        if sites is None:
            return True
        return all(grad_off for _, _, _, grad_off, _, _ in sites) if sites else None

    def _method_sites_elsewhere(self, name: str, bases: tuple[str, ...]) -> list[tuple[Path, str, bool, bool, bool, str]] | None:
        """The calls ``x.name(...)`` in the project's other files (``ProjectIndex.method_callers``)
        that may reach a method of a class whose bases are named ``bases``: a call on
        ``self`` in another file's class reaches that class's method (or a subclass's), so
        only one from a class of one of those names counts; None when another file reads
        ``.name`` other than by calling it (a callback: its callers are unknown)."""
        sites, references = self.index.method_callers(name)
        if references - {self.path}:
            return None
        return [site for site in sites if site[0] != self.path and (not site[5] or site[5] in bases)]

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
                from torchlint.semantic.names import words

                ws = words(qname.rpartition(".")[2])
                effect = EVAL if EVAL in ws else TRAIN if ws and ws[0] in (TRAIN, "fit") else None
            if effect is not None:
                return effect
        return None

    def argument_kinds(self, name: str, position: int, param: str) -> list | None:
        """The kinds of what the project's other files pass to this file's top-level function
        ``name`` for a parameter (at ``position``, or by keyword): one per call, None for an
        argument of unknown kind; None in all when one of them passes the function around."""
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

    def argument_mode_layers(self, name: str, position: int, param: str) -> list | None:
        """Whether what each of the project's other files passes to this file's top-level
        function ``name`` for a parameter holds a layer that train mode changes (as
        ``mode_layers``; a torchvision model by its builder): one per call, None for unknown;
        None in all when a file passes the function around."""
        if self.index.referenced(self.path, name):
            return None
        answers = []
        for path, call in self.index.callers(self.path, name):
            if path == self.path:
                continue
            built = dict(call.keywords).get(param, call.args[position] if position < len(call.args) else "")
            if built.startswith("torchvision.models."):
                answers.append(True if _TORCHVISION_MODE_MODELS.match(built.rpartition(".")[2]) else None)
            else:
                answers.append(ProjectView(self.index, path).mode_layers(built) if built else None)
        return answers

    def module_loads(self) -> tuple[tuple[str, str], ...] | None:
        """What the project's files read as a module of what ``torch.load`` gives them, each
        with a file that reads it (``ProjectIndex.module_loads``); None: unknown."""
        return self.index.module_loads(self.path)

    def gives_no_graph(self, qname: str) -> bool | None:
        """Whether the project function ``qname`` gives back nothing that carries a graph of
        what it is given (``FunctionSummary.gives_no_graph``); None when it is not one that
        the index knows so."""
        found = self._symbol_or_star(qname)
        if found is None or not isinstance(found.definition, FunctionSummary) or not found.definition.gives_no_graph:
            return None
        return True

    def _symbol_or_star(self, qname: str) -> Symbol | None:
        """``symbol(qname)``, or for a bare name the file does not bind, what its star imports
        (``from .utils import *``) bind it to."""
        found = self.symbol(qname)
        own = self.index.summary(self.path)
        if found is None and "." not in qname and own is not None:
            for module in own.star_imports:
                named = self._star_binding(module, self.path, qname, 0)
                if named is not None:
                    return self.symbol(*named)
        return found

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
    "callers_backprop", "runs_forward", "method_callers_backprop", "method_callers_hold", "star_imports_torch", "module_loads",
    "oldest_torch", "newest_torch", "returns_argument", "gives_no_graph", "imports_cuda_only", "argument_mode_layers",
    "parameter_free",
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

    def parameter_free(self, qname: str) -> bool | None:
        return self._ask("parameter_free", qname)

    def mode_effect(self, qname: str) -> str | None:
        return self._ask("mode_effect", qname)

    def requires_cuda(self, qname: str) -> str | None:
        return self._ask("requires_cuda", qname)

    def imports_cuda_only(self) -> str | None:
        return self._ask("imports_cuda_only")

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

    def argument_mode_layers(self, name: str, position: int, param: str) -> list | None:
        return self._ask("argument_mode_layers", name, position, param)

    def callers_backprop(self, name: str) -> bool | None:
        return self._ask("callers_backprop", name)

    def runs_forward(self, qname: str, method: str) -> bool | None:
        return self._ask("runs_forward", qname, method)

    def method_callers_backprop(self, name: str, bases: tuple[str, ...] = ()) -> bool | None:
        return self._ask("method_callers_backprop", name, bases)

    def method_callers_hold(self, name: str, fact: str, bases: tuple[str, ...] = ()) -> bool | None:
        return self._ask("method_callers_hold", name, fact, bases)

    def star_imports_torch(self, module: str) -> bool | None:
        return self._ask("star_imports_torch", module)

    def module_loads(self) -> tuple[tuple[str, str], ...] | None:
        return self._ask("module_loads")

    def returns_argument(self, qname: str) -> int | None:
        return self._ask("returns_argument", qname)

    def gives_no_graph(self, qname: str) -> bool | None:
        return self._ask("gives_no_graph", qname)


def answers_hold(view: ProjectView | None, asked: dict[tuple, object]) -> bool:
    """Whether ``view`` answers each question as it was answered (a cached result's). A
    question that fails does not hold: the lint asks it again, and reports the failure."""
    if view is None:
        return not asked
    try:
        return all(question in QUESTIONS and getattr(view, question)(*args) == answer for (question, *args), answer in asked.items())
    except Exception:
        return False


def _definition(summary: ModuleSummary, name: str) -> ClassSummary | FunctionSummary | None:
    for cls in summary.classes:
        if cls.name == name:
            return cls
    for function in summary.functions:
        if function.name == name:
            return function
    return None


def _mode_layer_name(qname: str) -> bool:
    return bool(_MODE_LAYERS.search(qname.rpartition(".")[2]))
