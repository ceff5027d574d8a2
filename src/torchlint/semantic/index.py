"""The project index: the summaries of a project's files (``summary.py``), by path, the files
each imports, and the questions asked across them (who calls a function, who reads a
loaded checkpoint as a module). ``ProjectIndex.view(path)`` is what one file's lint sees
(``view.py``).

The index is plain data and reads no file itself: what it needs of the file system (a
file's summary read when first asked, the files beside the linted ones, the project's
loaders of a checkpoint) it asks its ``files`` (``ProjectFiles``), which the builder beside
the runner provides (``torchlint.project``).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Protocol

from torchlint.positions import LintMemo
from torchlint.semantic.supported_torch import marks_project
from torchlint.semantic.summary import CallSite, FunctionSummary, ModuleSummary, summarize
from torchlint.semantic.view import ProjectView


class ProjectFiles(Protocol):
    """What the index asks of the file system (``torchlint.project.DiskFiles``)."""

    def is_file(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def summary(self, index: ProjectIndex, path: Path) -> ModuleSummary | None:
        """The summary of a project file not in the index yet (a lazy index's question)."""

    def close(self, index: ProjectIndex) -> None:
        """Summarise every file the linted ones import, directly or not (within bounds)."""

    def add(self, index: ProjectIndex, path: Path, read: Callable[[Path], bytes | str | None] | None) -> None:
        """Add the files ``path`` (just summarised) imports, and those beside it that may call it."""

    def module_loads(self, index: ProjectIndex, path: Path) -> tuple[tuple[str, str], ...] | None:
        """What the files of ``path``'s project read as a module of what ``torch.load`` gives,
        each with a file that reads it (relative to ``path``)."""


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
    _module_loads: dict[Path, tuple[tuple[str, str], ...] | None] = field(default_factory=dict, repr=False)
    # A lazy index (a command-line run) summarises the files the linted ones import only when
    # a question reaches them (through ``files``).
    lazy: bool = False
    linted: tuple[Path, ...] = ()
    # The files whose calls count as callers: the linted files and the files beside them,
    # fixed when the index is built (so a question's answer never depends on what was
    # summarised before it); None: every summarised file.
    callers_from: frozenset[Path] | None = None
    # `target-torch` of the configuration, as (major, minor); None: each file's project
    # declares it (``ProjectView.oldest_torch``).
    target_torch: tuple[int, int] | None = None
    # What the index asks of the file system; None: nothing (an index of given summaries).
    files: ProjectFiles | None = field(default=None, repr=False)
    _closed: bool = field(default=False, repr=False)
    _loaded: dict[Path, ModuleSummary | None] = field(default_factory=dict, repr=False)
    _exists: dict[str, bool] = field(default_factory=dict, repr=False)
    _is_dir: dict[str, bool] = field(default_factory=dict, repr=False)

    def summary(self, path: Path) -> ModuleSummary | None:
        """The summary of an indexed file; in a lazy index, of any project file, read when
        first asked."""
        found = self.summaries.get(path)
        if found is not None or not self.lazy or self.files is None:
            return found
        if path not in self._loaded:
            self._loaded[path] = self.files.summary(self, path)
        summary = self._loaded[path]
        if summary is not None:
            self.summaries[path] = summary
        return summary

    def _close(self) -> None:
        """Summarise every file the linted ones import, directly or not (within the bounds)."""
        if self.lazy and not self._closed and self.files is not None:
            self._closed = True
            self.files.close(self)

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

    def module_loads(self, path: Path) -> tuple[tuple[str, str], ...] | None:
        """What the project's files (every Python file and notebook under the project's root
        folder, ``project_folder``) read as a module of what ``torch.load`` gives them
        (``ModuleSummary.module_loads``), whoever saved it, each with the first file that
        reads it (relative to that folder); None when unknown (too many files, or no files
        to ask)."""
        if self.files is None:
            return None
        top = project_folder(path)
        if top not in self._module_loads:
            self._module_loads[top] = self.files.module_loads(self, top)
        return self._module_loads[top]

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
        method_sites: dict[str, list[tuple[Path, str, bool, bool, bool, str]]] = {}
        method_refs: dict[str, set[Path]] = {}
        for path in sorted(sources):
            summary = self.summaries[path]
            for name, *site in summary.method_calls:
                method_sites.setdefault(name, []).append((path, *site))
            for name in summary.method_references:
                method_refs.setdefault(name, set()).add(path)
        self._method_sites, self._method_refs = method_sites, method_refs

    def method_callers(self, name: str) -> tuple[list[tuple[Path, str, bool, bool, bool, str]], set[Path]]:
        """The calls ``x.name(...)`` in the index, by file (with the calling body, whether the
        result is used, whether it runs with gradients off or in code a framework owns,
        whether the calling function returns a value, and the class of a call on ``self``),
        and the files that read ``.name`` other than by calling it."""
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
        the files it imports that are not indexed yet (``read``: how to read them, if not
        from the disk)."""
        path = Path(os.path.abspath(path))
        self._folders = self._callers = None
        summary = summarize(source, tree, memo)
        if summary is None:
            self.summaries.pop(path, None)
            self.imports.pop(path, None)
            return
        self.summaries[path] = summary
        if self.files is not None:
            self.files.add(self, path, read)

    def roots(self, path: Path) -> tuple[Path, ...]:
        if path not in self._roots:
            self._roots[path] = search_roots(path, self.root, self._file_exists)
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
            self._exists[path] = self.files is not None and self.files.is_file(path)
        return self._exists[path]

    def _folder_exists(self, path: str) -> bool:
        if path not in self._is_dir:
            self._is_dir[path] = self.files is not None and self.files.is_dir(path)
        return self._is_dir[path]


def project_folder(path: Path) -> Path:
    """The root of the project holding ``path``: the nearest folder above it that holds
    ``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``; the file's own folder when
    none does."""
    for folder in path.parents:
        if marks_project(folder):
            return folder
    return path.parent


# --- resolving modules to files --------------------------------------------------------


def _package_root(path: Path, is_file: Callable[[str], bool]) -> Path:
    """The folder above the outermost package that holds ``path``."""
    folder = path.parent
    while is_file(os.path.join(folder, "__init__.py")) and folder.parent != folder:
        folder = folder.parent
    return folder


def search_roots(path: Path, root: Path, is_file: Callable[[str], bool]) -> tuple[Path, ...]:
    """Where an absolute import in ``path`` is looked up, as Python would find it when the
    file runs as a script, as part of its package, or from the project root (``src/``
    layouts too)."""
    roots = [path.parent, _package_root(path, is_file), root, root / "src"]
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
