"""The torchlint language server: a pygls client of the engine.

Diagnostics are published on open, on save and on change: at once for a change to a document
left alone a while, debounced for the changes that follow it. Linting runs in a worker
thread so a slow file never blocks the protocol; a lint of a version the editor has moved
past stops at its next statement, and its result is never published. Each diagnostic
carries its fix as text edits, so a quick fix needs no second lint; "fix all" runs the
engine's safe fixes on the whole document. Settings come from the same configuration files
as the command line, resolved once per configuration file and reloaded when one changes. The
project index (facts about the other files of the project) is kept per project root: a
document's summary is replaced whenever it is linted (open documents' text wins over the
disk), and the open documents that import it are linted again when its summary changes.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import re
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence
from urllib.parse import urlparse

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException, JsonRpcParseError
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from torchlint import __version__
from torchlint.config import ConfigError, Settings, find_config, resolve_settings
from torchlint._startup import cyclic_gc_paused
from torchlint.engine import INVALID_FILE, Cancelled, FixMode, ParseCache, RuleFailure, lint_module_source
from torchlint.positions import LintMemo
from torchlint.rule import Applicability, Finding, Location
from torchlint.rules import rule_by_code
from torchlint.text import syntax_tree
from torchlint.project import DiskFiles
from torchlint.semantic.index import ProjectIndex
from torchlint.semantic.view import ProjectView

SOURCE = "torchlint"
FIX_ALL = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
# A change is linted once typing pauses this long: the changes of one edit (a rename, a
# paste, an editor's formatting) arrive together, and only the last is linted. Keystrokes come
# 0.1 to 0.2 s apart: each is linted, and each stops the lint of the one before at its next
# cancellation point (a statement, or a stage of the semantic facts), so the last keystroke's
# diagnostics come a lint after it, not a lint and a longer debounce.
DEBOUNCE_SECONDS = 0.05
# A change to a document that has not changed for this long is linted at once: an edit made
# after reading (a typo fixed) shows its diagnostics a debounce sooner. If more keystrokes
# follow, that lint stops at the next one, and they are debounced.
IDLE_SECONDS = 1.0
CONFIG_FILE_NAMES = ("pyproject.toml", "torchlint.toml")
# Notebook cells arrive under their own schemes; notebooks are linted whole, elsewhere.
LINTED_SCHEMES = ("file", "untitled")
PYTHON_SUFFIXES = (".py", ".pyi")
# Python ends lines at \n, \r\n and \r only; str.splitlines would also split at \f and others.
_LINE_BREAK = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")

_converter = get_converter()


@dataclass(frozen=True)
class Snapshot:
    """One version of a document, as one lint sees it."""

    uri: str
    version: int | None
    text: str
    path: Path | None  # None for a document never saved


class SettingsCache:
    """Settings per configuration file, the file found once per directory: resolving them
    reads and parses TOML, which must not happen on every keystroke."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # lints of several documents run in parallel threads
        self._config_files: dict[Path, Path | None] = {}
        self._settings: dict[Path | None, Settings] = {}

    def for_directory(self, directory: Path) -> Settings:
        with self._lock:
            if directory not in self._config_files:
                self._config_files[directory] = find_config(directory)
            config_file = self._config_files[directory]
            if config_file not in self._settings:
                self._settings[config_file] = resolve_settings([directory], config_file)
            return self._settings[config_file]

    def clear(self) -> None:
        with self._lock:
            self._config_files.clear()
            self._settings.clear()


class ProjectIndexes:
    """The project index of each project root, shared by the lints of its documents."""

    def __init__(self, open_text) -> None:
        self._lock = threading.Lock()
        self._indexes: dict[Path, ProjectIndex] = {}
        self._open_text = open_text  # path -> the text of the open document, or None

    def _read(self, path: Path) -> str | bytes | None:
        text = self._open_text(path)
        if text is not None:
            return text
        try:
            return path.read_bytes()
        except OSError:
            return None

    def update(
        self, root: Path, path: Path, text: str, tree=None, memo: LintMemo | None = None, target_torch: tuple[int, int] | None = None
    ) -> tuple[ProjectView | None, bool]:
        """Summarise the document's text (``tree``: its ``ast`` tree, if parsed; ``memo``: what
        the summary of its last version kept) into its root's index: what its lint sees of the
        project, and whether its summary changed."""
        with self._lock:
            index = self._indexes.setdefault(root, ProjectIndex(root, files=DiskFiles()))
            before = index.summaries.get(path)
            index.update(path, text, self._read, tree, memo)
            changed = index.summaries.get(path) != before
            # The lint runs in its own thread while other documents update the index: it gets
            # a copy of the tables (the summaries themselves never change).
            snapshot = ProjectIndex(
                index.root, dict(index.summaries), dict(index.imports), dict(index._roots), target_torch=target_torch,
                files=index.files,
            )
        return snapshot.view(path), changed

    def dependents(self, root: Path, path: Path, candidates: list[Path]) -> list[Path]:
        """Those of ``candidates`` whose lint depends on ``path``: they import it, directly or
        not, or it calls their functions (what holds at its calls)."""
        with self._lock:
            index = self._indexes.get(root)
            if index is None:
                return []
            called = set(index.imports.get(path, ()))
            return [c for c in candidates if c != path and (c in called or path in index.dependencies(c))]

    def clear(self) -> None:
        with self._lock:
            self._indexes.clear()


def _syntax_tree(text: str):
    """The document's ``ast`` tree, parsed once for the project index's summary and the lint;
    None if it does not parse (the lint reports what is wrong)."""
    try:
        return syntax_tree(text)
    except Exception:
        return None


# --- findings as LSP objects ------------------------------------------------------------


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` with their line breaks; the last one may be empty."""
    return _LINE_BREAK.split(text)


def to_position(location: Location, lines: Sequence[str], codec: PositionCodec) -> types.Position:
    """A 1-based row and column (counted in characters) as a 0-based LSP position in the
    client's units (UTF-16 unless it asked for another encoding)."""
    if location.row > len(lines):  # a parse error at the end of the file
        last = len(lines) - 1
        return types.Position(line=last, character=codec.client_num_units(lines[last]))
    line = lines[location.row - 1].rstrip("\r\n")
    return types.Position(line=location.row - 1, character=codec.client_num_units(line[: location.column - 1]))


def to_range(start: Location, end: Location, lines: Sequence[str], codec: PositionCodec) -> types.Range:
    return types.Range(start=to_position(start, lines, codec), end=to_position(end, lines, codec))


def to_diagnostic(finding: Finding, lines: Sequence[str], codec: PositionCodec, version: int | None) -> types.Diagnostic:
    # ``data`` comes back with a code action request: it holds the fix, already as LSP edits,
    # and the document version they apply to.
    data: dict = {"version": version}
    if finding.fix is not None:
        edits = [
            types.TextEdit(range=to_range(edit.start, edit.end, lines, codec), new_text=edit.content)
            for edit in finding.fix.edits
        ]
        data["fix"] = {
            "message": finding.fix.message,
            "applicability": finding.fix.applicability.value,
            "edits": _converter.unstructure(edits),
        }
    return types.Diagnostic(
        range=to_range(finding.start, finding.end, lines, codec),
        message=finding.message,
        severity=types.DiagnosticSeverity.Error if finding.code == INVALID_FILE else types.DiagnosticSeverity.Warning,
        code=finding.code,
        code_description=types.CodeDescription(href=rule_by_code(finding.code).url()),
        source=SOURCE,
        data=data,
    )


def whole_document_edit(text: str, new_text: str, codec: PositionCodec) -> types.TextEdit:
    lines = split_lines(text)
    end = types.Position(line=len(lines) - 1, character=codec.client_num_units(lines[-1]))
    return types.TextEdit(range=types.Range(start=types.Position(line=0, character=0), end=end), new_text=new_text)


def _fix_data(diagnostic: types.Diagnostic) -> dict | None:
    data = diagnostic.data
    if diagnostic.source != SOURCE or not isinstance(data, dict) or not isinstance(data.get("fix"), dict):
        return None
    return data


def _wanted(kind: str, only: Sequence[str] | None) -> bool:
    """Whether the client asked for actions of ``kind``; kinds are hierarchical
    (asking for ``source`` includes ``source.fixAll.torchlint``)."""
    if only is None:
        return True
    return any(kind == str(k) or kind.startswith(f"{k}.") for k in (getattr(k, "value", k) for k in only))


# --- the server ------------------------------------------------------------------------


class GarbageCollection:
    """When the cyclic garbage a lint leaves (its semantic model, LibCST's scopes) is
    collected. Left to Python, the collection comes with the first allocation after a lint
    re-enables the collector (``engine.cyclic_gc_paused``): before its diagnostics are
    published, on the path from a keystroke to them. The server runs with the automatic
    collector off (``torchlint lsp``) and collects here, after each lint is published or a
    fix-all done, while the editor waits for the next change: the young generations each time,
    everything every ``FULL_EVERY`` times. With the collector on (a test, a host process),
    Python's own collections stand and this does nothing."""

    FULL_EVERY = 16

    def __init__(self) -> None:
        self.count = 0

    def collect(self) -> None:
        if gc.isenabled():
            return
        self.count += 1
        gc.collect() if self.count % self.FULL_EVERY == 0 else gc.collect(1)


async def in_thread(function, *args):
    """``function(*args)`` in a daemon thread: unlike ``asyncio.to_thread``, a lint still
    running when the editor says ``exit`` (or closes the pipe) does not hold up the exit."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result, error) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def work() -> None:
        try:
            result, error = function(*args), None
        except BaseException as exc:  # handed to the awaiting task
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass  # the loop is closed: the server is exiting

    threading.Thread(target=work, name="torchlint-lint", daemon=True).start()
    return await future


class _Malformed(Exception):
    """A message whose params do not fit its method."""


class _Answered(_Malformed):
    """A malformed request that has already been answered with a JSON-RPC error."""


class OneLineMalformed(logging.Filter):
    """pygls logs a malformed message with its traceback (a hundred lines of cattrs' exception
    groups for one missing field). A malformed message is the client's mistake, not a bug of
    the server: it is logged as one line, and pygls' report of the failed structuring (always
    followed by the raise that ``run_async`` logs) is dropped. Other errors keep their
    traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if message.startswith("Unable to deserialize message"):
            return False
        error = record.exc_info[1] if record.exc_info else None
        if message.startswith("Unable to handle message") and isinstance(error, (_Malformed, JsonRpcException, json.JSONDecodeError)):
            kind = "a message that is not JSON" if isinstance(error, json.JSONDecodeError) else "a malformed message"
            record.msg, record.args = f"torchlint lsp: {kind}: %s", (_describe(error),)
            record.exc_info = record.exc_text = None
        return True


def _describe(error: BaseException) -> str:
    return str(error) or type(error).__name__


def quiet_malformed_messages() -> None:
    """Install ``OneLineMalformed`` on the pygls loggers that report malformed messages."""
    for name in ("pygls.protocol.json_rpc", "pygls.io_", "pygls.server"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, OneLineMalformed) for f in logger.filters):
            logger.addFilter(OneLineMalformed())


class TorchlintProtocol(LanguageServerProtocol):
    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            # A request whose params do not fit its method: answer it, as JSON-RPC asks,
            # rather than only logging it and leaving the client waiting.
            if "method" in data and data.get("id") is not None:
                self._send_response(data["id"], error=error.to_response_error())
                raise _Answered(
                    f"{data['method']} request {data['id']!r}: {error.message} (answered with error {error.code})"
                ) from error
            raise _Malformed(f"{data.get('method', 'a message')}: {error.message}") from error


class TorchlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchlint",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=TorchlintProtocol,
        )
        self.settings = SettingsCache()
        self.projects = ProjectIndexes(self.open_text)
        self.pending: dict[str, asyncio.Task] = {}  # debounced lints not started yet, by uri
        self.running: dict[str, threading.Event] = {}  # set to stop the lint running, by uri
        self.last_change: dict[str, float] = {}  # when each document last changed (monotonic)
        self.garbage = GarbageCollection()
        self.lint_locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)  # one lint per document at a time
        self.safe_fix_known: dict[str, tuple[int | None, bool]] = {}  # uri -> (version, has a safe fix)
        self.shown_errors: set[str] = set()  # so a broken config is not announced on every keystroke
        # Per document, the pieces of its last lint's parse (used under its lint lock only).
        self.parse_caches: defaultdict[str, ParseCache] = defaultdict(ParseCache)
        # Per document, what the summary of its last version found in each definition (ditto).
        self.summary_memos: defaultdict[str, LintMemo] = defaultdict(LintMemo)

    # --- documents

    def snapshot(self, uri: str) -> Snapshot | None:
        """The document's current text, or None when it is closed or not Python."""
        document: TextDocument | None = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        scheme = urlparse(uri).scheme
        path = Path(document.path) if scheme == "file" else None
        is_python = document.language_id == "python" or (path is not None and path.suffix in PYTHON_SUFFIXES)
        if scheme not in LINTED_SCHEMES or not is_python:
            return None
        return Snapshot(uri, document.version, document.source, path)

    def open_text(self, path: Path) -> str | None:
        """The text of the open document at ``path``, or None."""
        for document in list(self.workspace.text_documents.values()):
            if document.path is not None and Path(document.path) == path and document.uri.startswith("file:"):
                return document.source
        return None

    def project_root(self, settings: Settings) -> Path:
        if settings.config_file is not None:
            return settings.root
        return Path(self.workspace.root_path or settings.root)

    def settings_for(self, path: Path | None) -> Settings:
        if path is not None:
            return self.settings.for_directory(path.parent)
        return self.settings.for_directory(Path(self.workspace.root_path or os.getcwd()))

    # --- linting

    def changed(self, uri: str) -> None:
        """A change of the document: the lint of the version before is no longer wanted, and
        the new one is linted at once if the document had been left alone, else debounced."""
        now = time.monotonic()
        idle = now - self.last_change.get(uri, -IDLE_SECONDS) >= IDLE_SECONDS
        self.last_change[uri] = now
        running = self.running.get(uri)
        if running is not None:
            running.set()
        self.schedule_lint(uri, 0 if idle else DEBOUNCE_SECONDS)

    def schedule_lint(self, uri: str, delay: float) -> None:
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self._lint_later(uri, delay))

    async def _lint_later(self, uri: str, delay: float) -> None:
        await asyncio.sleep(delay)
        async with self.lint_locks[uri]:
            if self.pending.get(uri) is asyncio.current_task():
                del self.pending[uri]  # started: a newer change waits for it instead of cancelling it
            snapshot = self.snapshot(uri)
            if snapshot is None:
                return
            stop = self.running[uri] = threading.Event()  # (set by the next change)
            try:
                diagnostics, failures, changed = await in_thread(self.lint, snapshot, stop.is_set)
            except ConfigError as error:
                self.show_error(f"torchlint: {error}")
                diagnostics, failures, changed = [], [], False
            except Exception as error:  # a bug of ours must not take the server down
                self.show_error(f"torchlint: internal error on {snapshot.path or uri}: {type(error).__name__}: {error}")
                return
            finally:
                if self.running.get(uri) is stop:
                    del self.running[uri]
        if diagnostics is None:  # stopped for a newer version, whose lint follows
            if changed:
                self.lint_dependents(snapshot.path)
            return
        for failure in failures:
            # As ruff's server does with a panic: the details in the log, the user told once.
            self.show_error(f"torchlint: {snapshot.path or uri}: {failure.describe()}")
        if changed:
            self.lint_dependents(snapshot.path)
        current = self.workspace.text_documents.get(uri)
        if current is not None and current.version == snapshot.version:  # (else the newer version's lint publishes)
            self.safe_fix_known[uri] = (snapshot.version, any(_is_safe_fix(d) for d in diagnostics))
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=snapshot.version)
            )
        self.garbage.collect()

    @cyclic_gc_paused  # as the engine's lint: the trees built are no garbage
    def lint(
        self, snapshot: Snapshot, cancelled: Callable[[], bool] | None = None
    ) -> tuple[list[types.Diagnostic] | None, list[RuleFailure], bool]:
        """The document's diagnostics (None: ``cancelled()`` became true and the lint stopped),
        the rules that failed on it, and whether its summary in the project index changed;
        runs in a worker thread."""
        settings = self.settings_for(snapshot.path)
        tree = _syntax_tree(snapshot.text)
        if cancelled is not None and cancelled():
            return None, [], False
        project, changed = self.project_view(snapshot, settings, tree)
        # A document is a path named with --force-exclude (as ruff's server and ruff-lsp treat
        # it): `exclude` and `extend-exclude` hold for it, whatever `force-exclude` says.
        if snapshot.path is not None and settings.is_excluded(snapshot.path):
            return [], [], changed
        try:
            result = lint_module_source(
                snapshot.text, settings.rules_for(snapshot.path), FixMode.NONE, True, project,
                parse_cache=self.parse_caches[snapshot.uri], tree=tree, cancelled=cancelled,
            )
        except Cancelled:
            return None, [], changed
        lines = split_lines(snapshot.text)
        diagnostics = [to_diagnostic(f, lines, self.workspace.position_codec, snapshot.version) for f in result.findings]
        return diagnostics, result.failures, changed

    def project_view(self, snapshot: Snapshot, settings: Settings, tree=None) -> tuple[ProjectView | None, bool]:
        if snapshot.path is None or snapshot.path.suffix not in PYTHON_SUFFIXES:
            return None, False
        memo = self.summary_memos[snapshot.uri]
        try:
            return self.projects.update(
                self.project_root(settings), Path(os.path.abspath(snapshot.path)), snapshot.text, tree, memo,
                settings.target_torch,
            )
        finally:
            memo.next_lint()  # what this version did not use is dropped

    def lint_dependents(self, path: Path | None) -> None:
        """Lint again the open documents whose lint depends on ``path`` (they import it, or it
        calls their functions), whose summary just changed."""
        if path is None:
            return
        path = Path(os.path.abspath(path))
        root = self.project_root(self.settings_for(path))
        documents = {Path(os.path.abspath(d.path)): uri for uri, d in list(self.workspace.text_documents.items()) if d.path and uri.startswith("file:")}
        for dependent in self.projects.dependents(root, path, list(documents)):
            self.schedule_lint(documents[dependent], DEBOUNCE_SECONDS)

    def fix_safely(self, snapshot: Snapshot) -> str:
        """The document with every safe fix applied; runs in a worker thread, under the
        document's lint lock: its first pass parses with the document's parse cache (the
        pieces and positions of the version its diagnostics came from)."""
        settings = self.settings_for(snapshot.path)
        if snapshot.path is not None and settings.is_excluded(snapshot.path):
            return snapshot.text
        tree = _syntax_tree(snapshot.text)
        project, _ = self.project_view(snapshot, settings, tree)
        result = lint_module_source(
            snapshot.text, settings.rules_for(snapshot.path), FixMode.SAFE, False, project,
            parse_cache=self.parse_caches[snapshot.uri], tree=tree,
        )
        return result.fixed_source  # text in, text out

    def reload_settings(self) -> None:
        self.settings.clear()
        self.projects.clear()
        self.shown_errors.clear()
        for uri in list(self.workspace.text_documents):
            self.schedule_lint(uri, 0)

    def close(self, uri: str) -> None:
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        running = self.running.pop(uri, None)
        if running is not None:
            running.set()
        self.last_change.pop(uri, None)
        self.safe_fix_known.pop(uri, None)
        self.lint_locks.pop(uri, None)
        self.parse_caches.pop(uri, None)
        self.summary_memos.pop(uri, None)
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        self.forget_unsaved(uri)

    def forget_unsaved(self, uri: str) -> None:
        """A closed document is what its file holds again, for the documents importing it."""
        if urlparse(uri).scheme != "file":
            return
        path = Path(to_fs_path(uri))
        if path.suffix not in PYTHON_SUFFIXES:
            return
        try:
            text = path.read_bytes()
            settings = self.settings_for(path)
        except (OSError, ConfigError):
            return
        _, changed = self.projects.update(self.project_root(settings), Path(os.path.abspath(path)), text)
        if changed:
            self.lint_dependents(path)

    def show_error(self, message: str) -> None:
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Error, message=message))
        if message not in self.shown_errors:
            self.shown_errors.add(message)
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))

    # --- code actions

    def workspace_edit(self, uri: str, version: int | None, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        """Versioned where the client allows it, so an edit computed for an older version is
        refused rather than applied to text it was not made for."""
        if get_capability(self.client_capabilities, "workspace.workspace_edit.document_changes", False):
            document = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=document, edits=edits)])
        return types.WorkspaceEdit(changes={uri: edits})

    def quick_fixes(self, uri: str, version: int | None, diagnostics: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
        actions = []
        for diagnostic in diagnostics:
            data = _fix_data(diagnostic)
            if data is None or data.get("version") != version:
                continue  # not ours, no fix, or computed for text the editor no longer shows
            fix = data["fix"]
            safe = fix["applicability"] == Applicability.SAFE.value
            title = f"{fix['message']} ({diagnostic.code})" if safe else f"{fix['message']} ({diagnostic.code}, unsafe fix)"
            edits = _converter.structure(fix["edits"], list[types.TextEdit])
            actions.append(
                types.CodeAction(
                    title=title,
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=self.workspace_edit(uri, version, edits),
                    is_preferred=safe,
                )
            )
        return actions

    def noqa_actions(self, snapshot: Snapshot, diagnostics: Sequence[types.Diagnostic]) -> list[types.CodeAction]:
        """``Disable TL501 for this line`` for each of our diagnostics of this version: the
        ``# noqa: CODE`` that ``--add-noqa`` would write on its line (merged into a ``# noqa``
        there). None for TL000 (it cannot be suppressed), TL001, or a line that cannot take a
        comment (it ends inside a string or continues with a backslash)."""
        from torchlint.noqa import UNUSED_NOQA, line_with_codes, open_rows

        ours = [
            d for d in diagnostics
            if d.source == SOURCE and isinstance(d.data, dict) and d.data.get("version") == snapshot.version
            and d.code not in (INVALID_FILE, UNUSED_NOQA)
        ]
        read = open_rows(snapshot.text) if ours else None
        if read is None:
            return []
        lines = split_lines(snapshot.text)
        actions = []
        for diagnostic in ours:
            row = diagnostic.range.start.line + 1
            if row not in read[0] or row > len(lines):
                continue
            body = lines[row - 1].rstrip("\r\n")
            new = line_with_codes(body, read[1].get(row), [str(diagnostic.code)])
            if new is None or new == body:
                continue
            where = to_range(Location(row, 1), Location(row, len(body) + 1), lines, self.workspace.position_codec)
            actions.append(
                types.CodeAction(
                    title=f"Disable {diagnostic.code} for this line",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diagnostic],
                    edit=self.workspace_edit(snapshot.uri, snapshot.version, [types.TextEdit(range=where, new_text=new)]),
                )
            )
        return actions

    def may_fix_all(self, uri: str, version: int | None) -> bool:
        """False only when this version's diagnostics are known and none has a safe fix."""
        known = self.safe_fix_known.get(uri)
        return known is None or known[0] != version or known[1]

    async def fix_all_edit(self, uri: str) -> types.WorkspaceEdit | None:
        snapshot = self.snapshot(uri)
        if snapshot is None:
            return None
        async with self.lint_locks[uri]:  # (the parse cache is used under it only)
            fixed = await in_thread(self.fix_safely, snapshot)
        self.garbage.collect()
        current = self.workspace.text_documents.get(uri)
        if fixed == snapshot.text or current is None or current.version != snapshot.version:
            return None  # nothing to fix, or the text changed while it was being fixed
        edit = whole_document_edit(snapshot.text, fixed, self.workspace.position_codec)
        return self.workspace_edit(uri, snapshot.version, [edit])

    def report_server_error(self, error: Exception, source) -> None:
        if isinstance(error, _Answered):
            return
        if isinstance(error, json.JSONDecodeError):
            # Not JSON at all: no id can be known, so the error response has none.
            error = JsonRpcParseError()
            self.protocol._send_data({"jsonrpc": "2.0", "id": None, "error": {"code": error.code, "message": error.message}})
            return
        super().report_server_error(error, source)

    @property
    def resolves_edits(self) -> bool:
        properties = get_capability(self.client_capabilities, "text_document.code_action.resolve_support.properties", [])
        return "edit" in properties


def _is_safe_fix(diagnostic: types.Diagnostic) -> bool:
    data = _fix_data(diagnostic)
    return data is not None and data["fix"]["applicability"] == Applicability.SAFE.value


def create_server() -> TorchlintServer:
    quiet_malformed_messages()
    server = TorchlintServer()

    @server.feature(types.EXIT)
    def exit(ls: TorchlintServer, params: None) -> None:
        # Exit now, even while a lint is running: what is left of it is of no use to anyone.
        sys.stdout.flush()
        os._exit(0 if ls.protocol._shutdown else 1)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: TorchlintServer, params: types.InitializedParams) -> None:
        # Editors do not send configuration files they have not opened; watching them lets
        # an edit of [tool.torchlint] take effect without a restart.
        if get_capability(ls.client_capabilities, "workspace.did_change_watched_files.dynamic_registration", False):
            watcher = types.FileSystemWatcher(glob_pattern="**/{" + ",".join(CONFIG_FILE_NAMES) + "}")
            registration = types.Registration(
                id="torchlint-config-files",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[watcher]),
            )
            await ls.client_register_capability_async(types.RegistrationParams(registrations=[registration]))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TorchlintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.schedule_lint(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TorchlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: TorchlintServer, params: types.DidSaveTextDocumentParams) -> None:
        if Path(urlparse(params.text_document.uri).path).name in CONFIG_FILE_NAMES:
            ls.reload_settings()
        else:
            ls.schedule_lint(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TorchlintServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.close(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: TorchlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.reload_settings()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL], resolve_provider=True),
    )
    async def code_action(ls: TorchlintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
        uri = params.text_document.uri
        snapshot = ls.snapshot(uri)
        if snapshot is None:
            return None
        actions = []
        if _wanted(types.CodeActionKind.QuickFix.value, params.context.only):
            actions += ls.quick_fixes(uri, snapshot.version, params.context.diagnostics)
            actions += ls.noqa_actions(snapshot, params.context.diagnostics)
        if _wanted(FIX_ALL, params.context.only) and ls.may_fix_all(uri, snapshot.version):
            fix_all = types.CodeAction(title="Fix all safe torchlint problems", kind=FIX_ALL, data={"uri": uri})
            if ls.resolves_edits:  # computed only if the user picks it
                actions.append(fix_all)
            else:
                fix_all.edit = await ls.fix_all_edit(uri)
                if fix_all.edit is not None:
                    actions.append(fix_all)
        return actions or None

    @server.feature(types.CODE_ACTION_RESOLVE)
    async def resolve_code_action(ls: TorchlintServer, action: types.CodeAction) -> types.CodeAction:
        if action.kind == FIX_ALL and isinstance(action.data, dict) and action.edit is None:
            action.edit = await ls.fix_all_edit(action.data["uri"]) or types.WorkspaceEdit(changes={})
        return action

    return server
