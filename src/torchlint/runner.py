"""Linting files: read, lint (or fix), write back atomically, in parallel when asked."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from torchlint import cache
from torchlint.config import Settings
from torchlint.engine import INVALID_FILE, FixMode, SourceResult, lint_module_source, unified_diff
from torchlint.files import write_atomic
from torchlint.rule import Applicability, Finding, Location


@dataclass(frozen=True)
class RunOptions:
    fix_mode: frozenset[Applicability] = FixMode.NONE
    write: bool = False  # write fixes back (``--fix``); otherwise fixes are only computed
    diff: bool = False  # render a unified diff of the fixes
    with_edits: bool = False  # render each fix's text edits (JSON, SARIF, editor)
    use_cache: bool = True


@dataclass
class FileReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    fixed_count: int = 0
    diff: str = ""
    errors: list[str] = field(default_factory=list)


def display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _unreadable(path: str, error: OSError) -> FileReport:
    reason = error.strerror or str(error)
    finding = Finding(INVALID_FILE, f"cannot read file: {reason}", Location(1, 1), Location(1, 1))
    return FileReport(path, [finding])


def lint_source(source: bytes, path: Path | None, settings: Settings, options: RunOptions) -> SourceResult:
    """Lint one file's bytes under the settings that apply to ``path``."""
    rules = settings.rules_for(path)
    if path is not None and path.suffix == ".ipynb":
        from torchlint.notebook import lint_notebook

        return lint_notebook(source, rules, options.fix_mode, options.with_edits)
    return lint_module_source(source, rules, options.fix_mode, options.with_edits)


def check_file(path: Path, settings: Settings, options: RunOptions) -> FileReport:
    shown = display_path(path)
    try:
        source = path.read_bytes()
    except OSError as error:
        return _unreadable(shown, error)
    key = None
    if options.use_cache and options.fix_mode == FixMode.NONE and not options.diff:
        key = cache.key(source, settings.rules_for(path), options.with_edits, path.suffix)
        cached = cache.load(settings.root, key)
        if cached is not None:
            return FileReport(shown, cached)
    result = lint_source(source, path, settings, options)
    report = FileReport(shown, result.findings, result.fixed_count)
    if result.fixed_source != source:
        if options.diff:
            report.diff = unified_diff(_text(source), _text(result.fixed_source), shown)
        if options.write:
            try:
                write_atomic(path, result.fixed_source)
            except OSError as error:
                report.errors.append(f"{shown}: cannot write the fixed file: {error.strerror or error}")
    elif key is not None:
        cache.store(settings.root, key, result.findings)
    return report


def _text(data: bytes | str) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _check_one(args: tuple[Path, Settings, RunOptions]) -> FileReport:
    path, settings, options = args
    try:
        return check_file(*args)
    except Exception as error:  # a bug of ours must not hide the other files' findings
        return FileReport(display_path(path), errors=[f"{display_path(path)}: internal error: {type(error).__name__}: {error}"])


def check_files(files: Sequence[Path], settings: Settings, options: RunOptions, jobs: int | None) -> list[FileReport]:
    jobs = jobs or os.cpu_count() or 1
    tasks = [(f, settings, options) for f in files]
    if jobs <= 1 or len(files) < 2 * jobs:
        return [_check_one(t) for t in tasks]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_check_one, tasks, chunksize=max(1, len(tasks) // (jobs * 4))))
