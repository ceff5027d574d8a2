"""Which files a run lints: explicit files, folders walked recursively honouring
``.gitignore`` and the configured ``exclude``, and reading and writing them safely."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from torchlint.config import Settings

if TYPE_CHECKING:
    import pathspec

SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb")
# Folders no one wants linted, skipped as ruff skips them.
SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "node_modules", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".torchlint_cache", "site-packages", "build", "dist", ".eggs", ".ipynb_checkpoints"}
)


def discover(paths: Iterable[Path], settings: Settings) -> list[Path]:
    """The files to lint, sorted, without duplicates. A path that does not exist is kept:
    reading it fails, and the engine reports that as TL000."""
    found: dict[str, Path] = {}
    for path in paths:
        if path.is_dir():
            for file in _walk(path, settings):
                found.setdefault(os.path.normpath(file), file)
        elif not settings.is_excluded(path):
            found.setdefault(os.path.normpath(path), path)
    return [found[k] for k in sorted(found)]


def _gitignore_spec(directory: Path) -> pathspec.GitIgnoreSpec | None:
    try:
        lines = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    import pathspec  # only where a .gitignore exists

    return pathspec.GitIgnoreSpec.from_lines(lines)


def _ancestor_ignores(top: Path) -> list[tuple[Path, pathspec.GitIgnoreSpec]]:
    """``.gitignore`` files above ``top`` up to the repository root, outermost first."""
    specs = []
    top = top.resolve()
    for directory in (top.parent, *top.parent.parents) if top.parent != top else ():
        spec = _gitignore_spec(directory)
        if spec is not None:
            specs.append((directory, spec))
        if (directory / ".git").exists():
            break
    return specs[::-1]


def _ignored(path: Path, is_dir: bool, specs: list[tuple[Path, pathspec.GitIgnoreSpec]]) -> bool:
    ignored = False
    for base, spec in specs:
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            continue
        result = spec.check_file(rel + "/" if is_dir else rel)
        if result.include is not None:
            ignored = result.include
    return ignored


def _template_name(name: str) -> bool:
    """A file or folder named by a template expression (cookiecutter's
    ``{{cookiecutter.module_name}}.py``): what it holds is a template that renders to Python,
    not Python, and no import can name it. Skipped in a folder's walk; named explicitly, it is
    linted."""
    return "{{" in name and "}}" in name


def _walk(top: Path, settings: Settings) -> Iterator[Path]:
    # os.walk does not follow symlinked folders, so a symlink loop cannot trap it.
    base_specs = _ancestor_ignores(top)
    specs_at: dict[str, list[tuple[Path, pathspec.GitIgnoreSpec]]] = {}
    for dirpath, dirnames, filenames in os.walk(top):
        directory = Path(dirpath)
        parent_specs = specs_at.get(os.path.dirname(dirpath), base_specs) if directory != top else base_specs
        own = _gitignore_spec(directory)
        specs = parent_specs + [(directory.resolve(), own)] if own is not None else parent_specs
        specs_at[dirpath] = specs
        resolved = directory.resolve()
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIPPED_DIRS
            and not _template_name(d)
            and not _ignored(resolved / d, True, specs)
            and not settings.is_excluded(directory / d, is_dir=True)
        )
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIXES) or _template_name(name):
                continue
            file = directory / name
            if _ignored(resolved / name, False, specs) or settings.is_excluded(file):
                continue
            yield file


class FileChanged(OSError):
    """The file on disk is no longer what was read: another program changed it meanwhile."""


def write_atomic(path: Path, data: bytes, expected: bytes | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never half
    of one; the file's permissions are kept. With ``expected``, the file is replaced only if
    it still holds exactly those bytes (checked just before the replace, under an advisory lock
    that other torchlint processes take too), else ``FileChanged`` is raised."""
    import tempfile

    target = Path(os.path.realpath(path))
    mode = target.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".torchlint.tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        with _locked(target):
            # Read by name, under the lock: a process that replaced the file before we got
            # the lock has left new content there, which is then not what we read.
            if expected is not None and target.read_bytes() != expected:
                raise FileChanged(f"{path} changed on disk")
            os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    if fcntl is None:  # Windows: the content check alone
        yield
        return
    with target.open("rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
