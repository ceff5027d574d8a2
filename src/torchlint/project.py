"""The project index's builder, beside the runner: it reads the project's files (from the
disk or an editor's buffers, through the result cache, notebooks as their kernel code) and
fills the index (``semantic.index.ProjectIndex``) with their summaries.

``build_index`` summarises the files being linted and the project files they import,
transitively and bounded, resolving module names to files as Python would from the project
root; ``DiskFiles`` is what an index asks of the file system later (a lazy index's files,
an editor's new imports, the project's loaders of a checkpoint).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Callable, Iterable

from torchlint.semantic.index import ProjectIndex, module_files
from torchlint.semantic.summary import ModuleSummary, module_loads_of, summarize
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
# What a file that calls `torch.load` spells (`torch.load`, `load` imported from torch under
# any name, torch imported under another name): only such a file can read a checkpoint; most
# files that name a load (`DataLoader`, `load_state_dict`, `json.load`) spell none of these.
_MAY_LOAD = re.compile(rb"torch\.load\b|from\s+torch\s+import\b(?:[^\n(]*|\s*\([^)]*)\bload\b|import\s+torch\s+as\b")
# Folders under a project root that hold no code of the project.
_NOT_PROJECT_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages", "venv", "env", "build", "dist"})


def _read_file(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


class DiskFiles:
    """What an index asks of the file system (``semantic.index.ProjectFiles``): files read
    from the disk, summarised through the result cache under ``cache_root`` if any."""

    def __init__(self, cache_root: Path | None = None) -> None:
        self.cache_root = cache_root
        self._cached = cached_summarize(cache_root) if cache_root is not None else None

    def _summarize(self, source: bytes, suffix: str) -> ModuleSummary | None:
        return self._cached(source, suffix) if self._cached is not None else summarize_file_source(source, suffix)

    def _loads(self, source: bytes, suffix: str) -> tuple[str, ...] | None:
        if self.cache_root is None:
            return module_loads_of_file_source(source, suffix)
        from torchlint import cache

        key = cache.summary_key(source, suffix, kind="loads")
        found = cache.load(self.cache_root, key)
        if isinstance(found, tuple):
            return found
        loads = module_loads_of_file_source(source, suffix)
        if loads is not None:
            cache.store(self.cache_root, key, loads)
        return loads

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def summary(self, index: ProjectIndex, path: Path) -> ModuleSummary | None:
        if len(index._loaded) >= MAX_EXTRA_FILES:
            return None
        source = _read_file(path)
        return self._summarize(source, path.suffix) if source is not None else None

    def close(self, index: ProjectIndex) -> None:
        builder = _Builder(index, _read_file, self._summarize)
        builder.add_imports(index.linted)
        builder.add_imports(sorted(index.callers_from - set(index.linted)), follow=False)  # the files beside them

    def add(self, index: ProjectIndex, path: Path, read: Callable[[Path], bytes | str | None] | None) -> None:
        builder = _Builder(index, read or _read_file, summarize_file_source)
        builder.add_imports([path])
        builder.add_siblings([path])

    def module_loads(self, index: ProjectIndex, top: Path) -> tuple[tuple[str, str], ...] | None:
        """(``ProjectIndex.module_loads``.) Under a folder that marks a project's root
        (``pyproject.toml``, ``setup.py``, ``setup.cfg``, ``.git``) every file below it; under
        any other folder (a file opened in ``/tmp`` or a home folder) only the files beside
        it, and unknown when it holds folders, which may hold more readers than are worth
        walking; unknown too past ``MAX_LOADER_FILES``. Each part read comes with the first
        file (in the walk's sorted order) that reads it, relative to ``top``."""
        found: dict[str, str] = {}
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
                summary = index.summaries.get(path)
                if summary is not None:
                    loads = summary.module_loads
                else:
                    source = _read_file(path)
                    if source is None or not _MAY_LOAD.search(source):
                        continue
                    loads = self._loads(source, path.suffix) or ()  # (its reads alone, not a summary)
                for read in loads:
                    found.setdefault(read, path.relative_to(top).as_posix())
        return tuple(sorted(found.items()))


class _Builder:
    def __init__(
        self,
        index: ProjectIndex,
        read: Callable[[Path], bytes | str | None],
        summarize: Callable[[bytes | str, str], ModuleSummary | None],
    ) -> None:
        self.index = index
        self.read = read
        self.summarize = summarize  # a file's content and suffix -> its summary (cached or not)
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
        return self.summarize(source, path.suffix)

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
                summary = self.summarize(source, sibling.suffix)
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
    lazy: bool = False,
    cache_root: Path | None = None,
    target_torch: tuple[int, int] | None = None,
) -> ProjectIndex:
    """The index of the linted Python files and the project files they import (``lazy``:
    those only when asked, through ``ProjectIndex.summary``); summaries go through the result
    cache under ``cache_root``, if any."""
    disk = DiskFiles(cache_root)
    index = ProjectIndex(Path(os.path.abspath(root)), lazy=lazy, target_torch=target_torch, files=disk)
    builder = _Builder(index, _read_file, disk._summarize)
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
    """The summary of a file's content: a module's, or a notebook's kernel code, with what
    its ``%%writefile`` cells' modules read of the loads they make, and "?" among its
    ``module_loads`` where code the kernel runs but no summary reads (a masked IPython line,
    a cell that is not valid Python) may load a checkpoint."""
    if suffix != ".ipynb":
        return summarize(source)
    parts = _notebook_parts(source)
    if parts is None:
        return None
    kernel, written, hidden = parts
    summary = summarize(kernel)
    if summary is None:
        return None
    loads = _notebook_loads(summary.module_loads, written, hidden)
    return dataclasses.replace(summary, module_loads=loads) if set(loads) != set(summary.module_loads) else summary


def module_loads_of_file_source(source: bytes | str, suffix: str) -> tuple[str, ...] | None:
    """``summarize_file_source(source, suffix).module_loads``, without the rest of the
    summary (``summary.module_loads_of``)."""
    if suffix != ".ipynb":
        return module_loads_of(source)
    parts = _notebook_parts(source)
    if parts is None:
        return None
    loads = module_loads_of(parts[0])
    return _notebook_loads(loads, parts[1], parts[2]) if loads is not None else None


def _notebook_parts(source: bytes | str) -> tuple[str, list[str], list[str]] | None:
    """``notebook.notebook_code``: a notebook's kernel code, ``%%writefile`` modules and
    hidden text."""
    from torchlint.notebook import notebook_code

    return notebook_code(source if isinstance(source, bytes) else source.encode())


def _notebook_loads(kernel: tuple[str, ...], written: list[str], hidden: list[str]) -> tuple[str, ...]:
    """A notebook's reads of its loads: its kernel code's, its ``%%writefile`` cells'
    modules', and "?" where code the kernel runs but no summary reads (a masked IPython
    line, a cell that is not valid Python) may load a checkpoint."""
    loads = set(kernel)
    for module in written:
        found = module_loads_of(module)
        loads.update(found if found is not None else ("?",) if "load" in module else ())
    if any("load" in text for text in hidden):
        loads.add("?")
    return tuple(sorted(loads))


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
