"""Which files a run lints: explicit files, folders walked recursively honouring
``.gitignore`` and the configured ``exclude``, and reading and writing them safely."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

from torchlint.config import Settings
from torchlint.exclusion import Exclusion

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
    reading it fails, and the engine reports that as TL000. As ruff's: a path named here is
    linted (a folder walked) even when ``exclude`` matches it, unless ``force-exclude`` is
    set (``named_exclusions`` says which are then left out, and why)."""
    found: dict[str, Path] = {}
    skipped = {path for path, _ in named_exclusions(paths, settings)}
    for path in paths:
        if path in skipped:
            continue
        if path.is_dir():
            for file in _walk(path, _within_named(path, settings)):
                found.setdefault(os.path.normpath(file), file)
        else:
            found.setdefault(os.path.normpath(path), path)
    return [found[k] for k in sorted(found)]


def _within_named(folder: Path, settings: Settings) -> Settings:
    """The settings a named folder is walked with: without the patterns that exclude the
    folder itself, which is linted since it is named (``torchlint legacy/`` lints what is in
    it, as ruff's does; the patterns still hold inside, for what they match there)."""
    exclusion = settings.exclusion(folder, is_dir=True)
    while exclusion is not None:
        settings = settings.without_pattern(exclusion.pattern)
        exclusion = settings.exclusion(folder, is_dir=True)
    return settings


def named_exclusions(paths: Iterable[Path], settings: Settings) -> list[tuple[Path, Exclusion]]:
    """The paths named on the command line that ``force-exclude`` leaves out, each with the
    pattern and setting that exclude it (none without ``force-exclude``)."""
    if not settings.force_exclude:
        return []
    found = []
    for path in paths:
        exclusion = settings.exclusion(path, is_dir=path.is_dir())
        if exclusion is not None:
            found.append((path, exclusion))
    return found


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
    of one. With ``expected``, the file is replaced only if it still holds exactly those
    bytes (checked just before the replace, under an advisory lock that other torchlint
    processes take too), else ``FileChanged`` is raised.

    The file itself must be writable (``check_writable``: the folder's permission, which a
    rename needs, is not enough), else ``PermissionError``. Its mode and owner are kept. A
    file with other hard links, or whose owner a new file cannot be given, is written in
    place instead (``_write_in_place``), so that the links and the owner stay, as ruff's
    in-place write keeps them."""
    import tempfile

    target = Path(os.path.realpath(path))
    status = target.stat()
    check_writable(target, status, path)
    if status.st_nlink > 1:
        _write_in_place(target, data, expected, path)
        return
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".torchlint.tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if not _same_owner(tmp, status):
            os.unlink(tmp)
            _write_in_place(target, data, expected, path)
            return
        os.chmod(tmp, status.st_mode & 0o7777)  # (after the chown, which may clear set-id bits)
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


def check_writable(target: Path, status: os.stat_result, shown: Path | str) -> None:
    """Raise ``PermissionError`` (``Permission denied``) unless the file may be written: the
    user has write access to it, and it is not read-only for everyone (a file of mode 444
    is refused even to root, who could override it: the mode says it is not to be changed)."""
    if not os.access(target, os.W_OK) or not status.st_mode & 0o222:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(shown))


def _same_owner(tmp: str, status: os.stat_result) -> bool:
    """Give the temporary file the owner and group of the file it replaces; False where that
    is not allowed (the file belongs to another user)."""
    tmp_status = os.stat(tmp)
    if (tmp_status.st_uid, tmp_status.st_gid) == (status.st_uid, status.st_gid):
        return True
    try:
        os.chown(tmp, status.st_uid, status.st_gid)
    except (OSError, AttributeError):  # (AttributeError: no chown, on Windows)
        return False
    return True


def _write_in_place(target: Path, data: bytes, expected: bytes | None, shown: Path | str) -> None:
    """Overwrite the file's content through the file itself (its inode, links, mode and
    owner stay). A copy of the old content is written first beside it (or, where its folder
    is not writable, in the temporary folder) and removed once the new content is on disk:
    if the write fails, the old content is put back; if the process dies meanwhile, the copy
    is left, named ``.NAME.*.torchlint.bak``."""
    import tempfile

    with _locked(target):
        old = target.read_bytes()
        if expected is not None and old != expected:
            raise FileChanged(f"{shown} changed on disk")
        try:
            fd, backup = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".torchlint.bak")
        except OSError:
            fd, backup = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".torchlint.bak")
        with os.fdopen(fd, "wb") as f:
            f.write(old)
            f.flush()
            os.fsync(f.fileno())
        try:
            with target.open("r+b") as f:
                try:
                    f.write(data)
                    f.truncate()
                    f.flush()
                    os.fsync(f.fileno())
                except BaseException:
                    f.seek(0)
                    f.write(old)
                    f.truncate()
                    f.flush()
                    raise
        except BaseException:
            if target.read_bytes() != old:
                raise  # (the copy is left: it holds the file's old content)
            os.unlink(backup)
            raise
        os.unlink(backup)


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
