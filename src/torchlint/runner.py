"""Linting files: read, lint (or fix), write back atomically, in parallel when asked."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from torchlint import cache, pieces
from torchlint.config import Settings
from torchlint.engine import (
    INVALID_FILE, FixMode, PiecePlan, SourceResult, lint_in_pieces, lint_module_source, plan_pieces, read_outline, unified_diff,
)
from torchlint.files import FileChanged, write_atomic
from torchlint.rule import Applicability, Finding, Location


@dataclass(frozen=True)
class RunOptions:
    fix_mode: frozenset[Applicability] = FixMode.NONE
    write: bool = False  # write fixes back (``--fix``); otherwise fixes are only computed
    diff: bool = False  # render a unified diff of the fixes
    with_edits: bool = False  # render each fix's text edits (JSON, SARIF, editor)
    use_cache: bool = True


@dataclass(frozen=True)
class RunError:
    """Something that kept a file from being fully checked or fixed (exit status 2)."""

    path: str
    message: str
    code: str | None = None  # the rule that raised, for an internal error in a rule
    unwritten: bool = False  # the file was checked, but its fixes could not be written

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class FileReport:
    path: str
    findings: list[Finding] = field(default_factory=list)
    fixed_count: int = 0  # fixes written (or, on standard input, printed)
    diff: str = ""
    errors: list[RunError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    fixed_codes: dict[str, int] = field(default_factory=dict)  # the fixes written, per rule code


def display_path(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def _unreadable(path: str, error: OSError) -> FileReport:
    reason = error.strerror or str(error)
    finding = Finding(INVALID_FILE, f"cannot read file: {reason}", Location(1, 1), Location(1, 1))
    return FileReport(path, [finding])


def lint_source(
    source: bytes, path: Path | None, settings: Settings, options: RunOptions, project=None, view=None, progress=None
) -> SourceResult:
    """Lint one file's bytes under the settings that apply to ``path``; ``project`` is the
    project index (semantic/index.py, built by project.py), or None; ``view``, the file's view of it when the
    caller has one; ``progress(done, total, unit)``, told how far the lint of a large file
    has got (``engine.StepProgress``; not for notebooks)."""
    if progress is not None and source.count(b"\n") + 1 < PROGRESS_LINES:
        progress = None  # (a small file is done before anyone could read it)
    rules = settings.rules_for(path)
    if view is None and project is not None:
        view = project.view(path)
    if path is not None and path.suffix == ".ipynb":
        from torchlint.notebook import lint_notebook

        return lint_notebook(source, rules, options.fix_mode, options.with_edits, view)
    if _in_pieces(path, options):  # a large file: in pieces, one after the other
        from torchlint.semantic.pieces import SemanticHooks

        result = lint_in_pieces(source, rules, view, SemanticHooks(view), options.with_edits, progress)
        if result is not None:
            return result
    return lint_module_source(source, rules, options.fix_mode, options.with_edits, view, progress=progress)


# A file of this many lines or more tells the progress display how its lint goes.
PROGRESS_LINES = 2_000


def _in_pieces(path: Path | None, options: RunOptions) -> bool:
    """Whether a large file may be linted in pieces (``engine.plan_pieces``): findings (and
    their fixes' edits) only, no fix applied."""
    return options.fix_mode == FixMode.NONE and (path is None or path.suffix != ".ipynb")


def check_file(path: Path, settings: Settings, options: RunOptions, project=None, progress=None) -> FileReport:
    """``progress``: as ``check_files``' (its ``within``, for this file, is told how its lint goes)."""
    shown = display_path(path)
    try:
        source = path.read_bytes()
    except OSError as error:
        return _unreadable(shown, error)
    cached, key, view = _cached(path, source, settings, options, project)
    if cached is not None:
        return FileReport(shown, cached)
    result = lint_source(source, path, settings, options, project, view, _within(progress, shown))
    report = FileReport(shown, result.findings, result.fixed_count if options.write else 0)
    report.fixed_codes = dict(result.fixed_codes) if options.write else {}
    report.errors = [RunError(shown, failure.describe(), failure.code) for failure in result.failures]
    if result.fixed_source != source:
        if options.diff:
            report.diff = unified_diff(_text(source), _text(result.fixed_source), shown)
        if options.write:
            try:
                write_atomic(path, result.fixed_source, expected=source)
            except FileChanged:
                report.warnings.append(f"{shown}: changed on disk while it was being fixed; left as it is")
                _unfixed(report, source, path, settings, options, project)
            except OSError as error:
                report.errors.append(RunError(shown, f"cannot write: {error.strerror or error}", unwritten=True))
                _unfixed(report, source, path, settings, options, project)
    elif key is not None and not result.failures:
        cache.store(settings.root, key, cache.Entry(result.findings, view.asked if view is not None else {}))
    return report


def _cached(path: Path, source: bytes, settings: Settings, options: RunOptions, project) -> tuple:
    """(the cached findings or None, the cache key or None, the view to lint with)."""
    key = view = None
    if options.use_cache and options.fix_mode == FixMode.NONE and not options.diff:
        # The findings depend on the file, the settings, and what the other project files
        # answer to the questions its lint asks (``AskedView``): a cached result holds while
        # they answer the same, however many files the answers come from.
        from torchlint.semantic.view import AskedView, answers_hold

        view = project.view(path) if project is not None else None
        key = cache.key(source, settings.rules_for(path), options.with_edits, path.suffix, "project" if view is not None else "")
        cached = cache.load(settings.root, key)
        if isinstance(cached, cache.Entry) and answers_hold(view, cached.asked):
            return cached.findings, key, view
        if view is not None:
            view = AskedView(view)
    return None, key, view


def _unfixed(report: FileReport, source: bytes, path: Path, settings: Settings, options: RunOptions, project) -> None:
    """The file was not written: report what it still holds, and no fix as done."""
    result = lint_source(source, path, settings, dataclasses.replace(options, fix_mode=FixMode.NONE), project)
    report.findings, report.fixed_count = result.findings, 0
    report.fixed_codes = {}


def _text(data: bytes | str) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


# The project index of the run, given once to each worker process rather than with every file.
_project = None


def _set_project(project) -> None:
    global _project
    _project = project


def _within(progress, shown: str):
    """``progress.within`` for the file shown as ``shown`` (``engine.StepProgress``), or None."""
    within = getattr(progress, "within", None)
    return None if within is None else (lambda done, total, unit: within(shown, done, total, unit))


def _check_one(args: tuple[Path, Settings, RunOptions], progress=None) -> FileReport:
    path, settings, options = args
    try:
        return check_file(path, settings, options, _project, progress)
    except Exception as error:  # a bug of ours must not hide the other files' findings
        shown = display_path(path)
        return FileReport(shown, errors=[RunError(shown, f"internal error: {type(error).__name__}: {error}")])


def check_files(
    files: Sequence[Path],
    settings: Settings,
    options: RunOptions,
    jobs: int | None,
    progress: Callable[[int, int], None] | None = None,
) -> list[FileReport]:
    """Each file's report, in order; ``progress(done, total)`` is called as files finish,
    and ``progress.within(path, done, total, unit)``, where it has one, as a large file's
    lint goes on (its pieces done, or the statements of a pass walked: what a run of one
    large file can show). With more than one job, a large file's pieces
    (``engine.plan_pieces``) are linted by the workers side by side."""
    jobs = jobs or os.cpu_count() or 1
    tasks = [(f, settings, options) for f in files]
    reports: list[FileReport] = []
    large = [f for f in files if _may_be_cut(f)] if jobs > 1 and _in_pieces(None, options) else []
    outlines = _Outlines(large, settings, options) if large else None  # (read while the project is summarised)
    pool = None
    if progress is not None:
        progress(0, len(tasks))
    try:
        project = _build_project(files, settings, options)
        if jobs <= 1 or (len(files) < 2 * jobs and not large):
            _set_project(project)
            results: Iterable[FileReport] = (_check_one(task, progress) for task in tasks)
        else:
            from concurrent.futures import ProcessPoolExecutor

            pool = ProcessPoolExecutor(max_workers=jobs, initializer=_set_project, initargs=(project,))
            if large:
                results = _check_in_pieces(pool, tasks, project, outlines, progress)
            else:
                results = pool.map(_check_one, tasks, chunksize=max(1, len(tasks) // (jobs * 4)))
        for report in results:
            reports.append(report)
            if progress is not None:
                progress(len(reports), len(tasks))
    finally:
        _set_project(None)
        if pool is not None:
            pool.shutdown(cancel_futures=True)
        if outlines is not None:
            outlines.close()
    return reports


def _may_be_cut(path: Path) -> bool:
    """Whether the file may be large enough to lint in pieces side by side (a cheap first
    test: a file of ``pieces.MIN_LINES`` lines holds some eight bytes a line or more; one
    that holds fewer goes to one job, whose lint still cuts it in pieces)."""
    try:
        return path.suffix != ".ipynb" and path.stat().st_size >= 8 * pieces.MIN_LINES
    except OSError:
        return False


class _Outlines:
    """The outlines (``engine.read_outline``) of a run's large files, read by a process of
    their own while this one summarises the project: a file's plan needs both, each a few
    seconds of a 100,000-line file, and they took turns while the workers waited. A file
    whose findings the cache holds is not read (nor is any file, where the process cannot
    start: ``take`` then answers None, and the plan reads the file itself)."""

    def __init__(self, paths: list[Path], settings: Settings, options: RunOptions) -> None:
        import multiprocessing

        self._read: dict[Path, tuple] = {}
        self._waiting = [path for path in paths if not _held(path, settings, options)]
        self._process = None
        if not self._waiting:
            return
        try:
            context = multiprocessing.get_context()
            self._connection, sending = context.Pipe(duplex=False)
            self._process = context.Process(target=_read_outlines, args=(self._waiting, sending), daemon=True)
            self._process.start()
            sending.close()
        except (OSError, ValueError):
            self._process = None

    def take(self, path: Path, source: bytes) -> tuple | None:
        """(the outline of ``source``, the hooks that read it: ``SemanticHooks`` without a
        project), or None where it was not read (or the file changed since)."""
        while self._process is not None and path in self._waiting and path not in self._read:
            try:
                read, digest, found, hooks = self._connection.recv()
            except (EOFError, OSError):  # (the process died: the plans read the files themselves)
                self.close()
                return None
            self._read[read] = (digest, found, hooks)
        digest, found, hooks = self._read.pop(path, (None, None, None))
        if found is None or digest != cache.sha256(source).hexdigest():
            return None
        return found, hooks

    def close(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.terminate()
            self._process.join()
            self._connection.close()
            self._process = None


def _held(path: Path, settings: Settings, options: RunOptions) -> bool:
    """Whether the cache holds findings for the file as it is (whether the project still
    answers as they need is not asked: the file is then planned without its outline read)."""
    if not options.use_cache:
        return False
    try:
        source = path.read_bytes()
    except OSError:
        return True
    key = cache.key(source, settings.rules_for(path), options.with_edits, path.suffix, "project")
    return isinstance(cache.load(settings.root, key), cache.Entry)


def _read_outlines(paths: list[Path], connection) -> None:
    """``_Outlines``' process: each file's outline, sent as it is read."""
    from torchlint.semantic.pieces import SemanticHooks

    for path in paths:
        digest = found = hooks = None
        try:
            source = path.read_bytes()
            hooks = SemanticHooks()
            found = read_outline(source, hooks)
            digest = cache.sha256(source).hexdigest()
        except Exception:  # (the plan reads the file itself, and reports what is wrong)
            found = None
        connection.send((path, digest, found, hooks if found is not None else None))
    connection.close()


def _check_in_pieces(pool, tasks: list, project, outlines: _Outlines | None = None, progress=None) -> Iterator[FileReport]:
    """The reports of ``tasks``, in order, each file a task of the pool but a large one,
    whose pieces are: planned here (with its outline read by ``outlines``, where it was),
    linted by the workers, merged here."""
    from torchlint.semantic.pieces import SemanticHooks

    pending: list = []
    for task in tasks:
        path, settings, options = task
        planned = None
        if _may_be_cut(path):
            try:
                source = path.read_bytes()
            except OSError:
                source = None
            if source is not None and source.count(b"\n") + 1 >= pieces.MIN_LINES:
                cached, key, view = _cached(path, source, settings, options, project)
                if cached is not None:
                    pending.append(FileReport(display_path(path), cached))
                    continue
                if view is None and project is not None:
                    view = project.view(path)  # (not cached: still the view the lint asks)
                try:
                    read = outlines.take(path, source) if outlines is not None else None
                    if read is None:
                        planned = plan_pieces(source, SemanticHooks(view))
                    else:
                        found, hooks = read
                        hooks.project = view
                        planned = plan_pieces(source, hooks, found=found)
                except Exception:  # a bug of ours: the file's own task reports it
                    planned = None
        if isinstance(planned, PiecePlan):
            jobs = [(pool.submit(_lint_piece, path, text, settings, options), rows) for text, rows in planned.sources()]
            pending.append((path, settings, options, key, view, planned, jobs))
        else:
            pending.append(pool.submit(_check_one, task))
    for entry in pending:
        if isinstance(entry, FileReport):
            yield entry
        elif isinstance(entry, tuple):
            yield _merged(*entry, project=project, progress=_within(progress, display_path(entry[0])))
        else:
            yield entry.result()


def _lint_piece(path: Path, text: bytes, settings: Settings, options: RunOptions) -> tuple:
    """(findings, failures, the project questions asked) of a large file's piece, in a worker."""
    view = None
    if _project is not None:
        from torchlint.semantic.view import AskedView

        view = AskedView(_project.view(path))
    result = lint_module_source(text, settings.rules_for(path), with_edits=options.with_edits, project=view)
    return result.findings, result.failures, view.asked if view is not None else {}


def _merged(path: Path, settings: Settings, options: RunOptions, key, view, planned: PiecePlan, jobs: list, project, progress=None) -> FileReport:
    try:
        return _merge(path, settings, options, key, view, planned, jobs, project, progress)
    except Exception as error:  # a bug of ours must not hide the other files' findings
        shown = display_path(path)
        return FileReport(shown, errors=[RunError(shown, f"internal error: {type(error).__name__}: {error}")])


def _merge(path: Path, settings: Settings, options: RunOptions, key, view, planned: PiecePlan, jobs: list, project, progress=None) -> FileReport:
    from concurrent.futures import FIRST_COMPLETED, wait

    from torchlint.semantic.view import AskedView

    shown = display_path(path)
    asked: dict = dict(view.asked) if isinstance(view, AskedView) else {}  # (the plan's questions)
    if progress is not None:  # the pieces done of the pieces, as the workers finish them
        waiting = {job for job, _ in jobs}
        progress(sum(job.done() for job, _ in jobs), len(jobs), "pieces")
        while waiting:
            waiting = wait(waiting, timeout=1.0, return_when=FIRST_COMPLETED).not_done
            progress(len(jobs) - len(waiting), len(jobs), "pieces")
    results = []
    for job, rows in jobs:  # (each piece's job, and the file's row of each of its rows)
        findings, failures, piece_asked = job.result()
        asked.update(piece_asked)
        results.append((findings, failures, rows))
    result = planned.merge(results)
    if result is None:  # a piece that does not parse: the whole file's lint says why
        return check_file(path, settings, options, project)
    report = FileReport(shown, result.findings)
    report.errors = [RunError(shown, failure.describe(), failure.code) for failure in result.failures]
    if key is not None and not result.failures:
        cache.store(settings.root, key, cache.Entry(result.findings, asked))
    return report


def _build_project(files: Sequence[Path], settings: Settings, options: RunOptions):
    """The project index over the files and the project files they import (what the semantic
    layer knows of other files), built once per run."""
    from torchlint.project import build_index

    # Lazy: the imported files are summarised when a question reaches them.
    return build_index(
        files, settings.root, lazy=True, cache_root=settings.root if options.use_cache else None,
        target_torch=settings.target_torch,
    )
