"""Exclusion, with ruff's semantics: the gitignore-style patterns of ``exclude`` and
``extend-exclude`` (relative to the configuration file's folder) and of ``--extend-exclude``
(relative to the current folder) leave files out of a folder's walk; a path named on the
command line is linted all the same, unless ``force-exclude`` is set (``--force-exclude``, as
the pre-commit hooks pass it, or ``force-exclude = true``). Each match says which pattern, of
which setting, excluded the path, so that a named file that is skipped can be explained."""

from __future__ import annotations

import os.path
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pathspec


@dataclass(frozen=True)
class PatternSet:
    """Patterns of one setting, relative to ``base``; ``origin`` names the setting and where
    it is set (`` `exclude` in pyproject.toml``)."""

    base: Path
    patterns: tuple[str, ...]
    origin: str

    @cached_property
    def _spec(self) -> pathspec.GitIgnoreSpec:
        import pathspec  # (only where some pattern is set)

        return pathspec.GitIgnoreSpec.from_lines(self.patterns)

    def match(self, path: Path, is_dir: bool = False) -> str | None:
        """The pattern that excludes ``path`` (a folder: ``is_dir``), or None; a path outside
        ``base`` is never excluded by it. The last pattern that matches decides, as in a
        ``.gitignore`` (``!keep.py`` after ``*.py`` keeps it)."""
        if not self.patterns:
            return None
        # abspath, not resolve: a symlink loop must not raise here (reading it reports TL000).
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(self.base))
        if rel in (".", "..") or rel.startswith(".." + os.sep):
            return None
        result = self._spec.check_file(Path(rel).as_posix() + ("/" if is_dir else ""))
        if not result.include or result.index is None:
            return None
        return self.patterns[result.index]


@dataclass(frozen=True)
class Exclusion:
    """Why a path is excluded: the pattern, and the setting that holds it."""

    pattern: str
    origin: str

    def __str__(self) -> str:
        return f"`{self.pattern}` of {self.origin}"


def excluded_by(sets: tuple[PatternSet, ...], path: Path, is_dir: bool = False) -> Exclusion | None:
    """The first setting (in ``sets``' order) whose patterns exclude ``path``."""
    for patterns in sets:
        pattern = patterns.match(path, is_dir)
        if pattern is not None:
            return Exclusion(pattern, patterns.origin)
    return None


def shown(path: Path | None) -> str:
    """A configuration file as a message names it: relative to the current folder, where it
    is below it."""
    if path is None:
        return "the command line"
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    return str(path) if rel.startswith("..") else rel
