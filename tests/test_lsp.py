"""End to end tests of `torchlint lsp`: a real client talks to `python -m torchlint lsp` over stdio."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from torchlint.rules import rule_by_code

BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\ntorch.save(model, 'm.pt')\n"
GOOD = BAD.replace("torch.save(model,", "torch.save(model.state_dict(),")
FIX_ALL = "source.fixAll.torchlint"
SERVER = [sys.executable, "-m", "torchlint", "lsp"]
TIMEOUT = 20.0

# The tests share one server (and so one event loop) unless they need a client of their own.
lsp_test = pytest.mark.asyncio(loop_scope="module")


def recording_client() -> LanguageClient:
    """pytest-lsp's client, keeping every diagnostics notification (not just the last one
    per file) and every capability the server registers."""
    client = LanguageClient(converter_factory=default_converter)
    client.published = []
    client.registrations = []

    def publish_diagnostics(client: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        client.published.append(params)

    def register_capability(client: LanguageClient, params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    register_lsp_features(
        client,
        {
            **DEFAULT_CLIENT_FEATURES,
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish_diagnostics,
            types.CLIENT_REGISTER_CAPABILITY: register_capability,
        },
    )
    return client


CONFIG = ClientServerConfig(server_command=SERVER, client_factory=recording_client)


@pytest_lsp.fixture(config=CONFIG, scope="module")
async def client(lsp_client: LanguageClient, tmp_path_factory):
    root = tmp_path_factory.mktemp("workspace")
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=CONFIG, loop_scope="module")
async def minimal_client(lsp_client: LanguageClient, tmp_path):
    """A client offering UTF-8 columns, and neither codeAction/resolve nor versioned edits."""
    minimal = types.ClientCapabilities(general=types.GeneralClientCapabilities(position_encodings=["utf-8"]))
    await lsp_client.initialize_session(types.InitializeParams(capabilities=minimal, root_uri=tmp_path.as_uri()))
    yield
    await lsp_client.shutdown_session()


# --- helpers -----------------------------------------------------------------------------


def write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return path.as_uri()


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1, language: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=version, text=text)
        )
    )


def replace_text(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def publications(client: LanguageClient, uri: str, version: int | None = None) -> list[types.PublishDiagnosticsParams]:
    return [p for p in client.published if p.uri == uri and (version is None or p.version == version)]


async def diagnostics(client: LanguageClient, uri: str, version: int = 1, after: int = 0) -> list[types.Diagnostic]:
    """The diagnostics published for ``version`` of ``uri``, waiting for them (skipping the
    first ``after`` publications of that version)."""
    deadline = time.monotonic() + TIMEOUT
    while len(found := publications(client, uri, version)) <= after:
        assert time.monotonic() < deadline, f"no diagnostics for {uri} version {version} within {TIMEOUT} s"
        await asyncio.sleep(0.02)
    return list(found[after].diagnostics)


async def code_actions(
    client: LanguageClient, uri: str, diagnostics: list[types.Diagnostic], only: list[str] | None = None, noqa: bool = False
) -> list[types.CodeAction]:
    """The actions offered; the ``Disable ... for this line`` ones (``test_lsp_noqa.py``) only with ``noqa``."""
    whole = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=100, character=0))
    result = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diagnostics[0].range if diagnostics else whole,
            context=types.CodeActionContext(diagnostics=diagnostics, only=only),
        )
    )
    return [a for a in result or [] if noqa or not a.title.endswith("for this line")]


def apply_edit(text: str, edit: types.WorkspaceEdit, uri: str, encoding: str = "utf-16") -> str:
    """``text`` with the edits of ``edit`` for ``uri`` applied, as an editor counting columns
    in ``encoding`` would."""
    if edit.document_changes is not None:
        edits = [e for change in edit.document_changes if change.text_document.uri == uri for e in change.edits]
    else:
        edits = list(edit.changes[uri])
    lines = text.splitlines(keepends=True) + [""]
    codec, unit = {"utf-16": ("utf-16-le", 2), "utf-8": ("utf-8", 1)}[encoding]

    def offset(position: types.Position) -> int:
        line = lines[position.line].encode(codec)[: position.character * unit].decode(codec)
        return sum(len(line) for line in lines[: position.line]) + len(line)

    for e in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


# --- diagnostics ---------------------------------------------------------------------------


@lsp_test
async def test_open_publishes_a_diagnostic_with_code_source_and_docs_link(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)

    (diagnostic,) = await diagnostics(client, uri)

    assert diagnostic.code == "TL501"
    assert diagnostic.source == "torchlint"
    assert diagnostic.code_description.href == rule_by_code("TL501").url()
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    # `model` in `torch.save(model, 'm.pt')`, on the fourth line.
    assert diagnostic.range == types.Range(
        start=types.Position(line=3, character=11), end=types.Position(line=3, character=16)
    )
    assert "state_dict()" in diagnostic.message


@lsp_test
async def test_changes_are_debounced_and_the_latest_version_is_linted(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", GOOD)
    open_document(client, uri, GOOD)
    assert await diagnostics(client, uri) == []

    for version, text in ((2, BAD), (3, GOOD), (4, BAD), (5, GOOD), (6, BAD)):
        replace_text(client, uri, text, version)

    (diagnostic,) = await diagnostics(client, uri, version=6)
    assert diagnostic.code == "TL501"
    # The first change after a pause is linted at once (published if it finished before the
    # next change arrived); those typed in quick succession after it were debounced: the
    # intermediate versions were never linted, let alone published.
    assert publications(client, uri, 3) == publications(client, uri, 4) == publications(client, uri, 5) == []


@lsp_test
async def test_save_lints_again(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)
    await diagnostics(client, uri)

    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))

    (diagnostic,) = await diagnostics(client, uri, after=1)
    assert diagnostic.code == "TL501"


@lsp_test
async def test_closing_a_document_clears_its_diagnostics(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)
    await diagnostics(client, uri)

    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))

    deadline = time.monotonic() + TIMEOUT
    while publications(client, uri)[-1].diagnostics:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


@lsp_test
async def test_a_syntax_error_is_tl000_and_the_server_carries_on(client: LanguageClient, tmp_path):
    broken = "import torch\ndef f(:\n    pass\n"
    uri = write(tmp_path, "broken.py", broken)
    open_document(client, uri, broken)

    (diagnostic,) = await diagnostics(client, uri)
    assert diagnostic.code == "TL000"
    assert diagnostic.severity == types.DiagnosticSeverity.Error
    assert diagnostic.range.start.line == 1
    assert "SyntaxError" in diagnostic.message

    replace_text(client, uri, BAD, 2)
    (diagnostic,) = await diagnostics(client, uri, version=2)
    assert diagnostic.code == "TL501"


@lsp_test
async def test_columns_count_utf16_code_units(client: LanguageClient, tmp_path):
    # VS Code counts columns in UTF-16: the emoji takes two units, the other characters one.
    text = BAD.replace("torch.save(", "x = 'é😀'; torch.save(")
    uri = write(tmp_path, "unicode.py", text)
    open_document(client, uri, text)

    (diagnostic,) = await diagnostics(client, uri)
    start = len("x = 'é😀'; torch.save(") + 1
    assert (diagnostic.range.start.character, diagnostic.range.end.character) == (start, start + len("model"))


@lsp_test
async def test_a_slow_file_holds_up_nothing_and_its_outdated_result_is_dropped(client: LanguageClient, tmp_path):
    # Fifteen hundred lines take the engine seconds; a small file opened just after is
    # linted, and a request answered, while the big one is still being worked on.
    slow_text = BAD + "".join(f"x{i} = torch.zeros({i}).sum() + {i}\n" for i in range(1500))
    slow = write(tmp_path, "slow.py", slow_text)
    small = write(tmp_path, "small.py", BAD)
    open_document(client, slow, slow_text)
    open_document(client, small, BAD)

    (diagnostic,) = await diagnostics(client, small)
    actions = await code_actions(client, small, [diagnostic], only=["quickfix"])
    assert actions and publications(client, slow) == []

    # Edited while its lint runs: that lint's result is for text the editor no longer shows.
    replace_text(client, slow, BAD, 2)
    (diagnostic,) = await diagnostics(client, slow, version=2)
    assert diagnostic.code == "TL501"
    assert publications(client, slow, 1) == []


@lsp_test
async def test_a_notebook_or_another_language_is_not_linted(client: LanguageClient, tmp_path):
    notebook = write(tmp_path, "notes.ipynb", "{}")
    text_file = write(tmp_path, "notes.txt", BAD)
    marker = write(tmp_path, "marker.py", BAD)
    open_document(client, notebook, "{}", language="json")
    open_document(client, text_file, BAD, language="plaintext")
    open_document(client, marker, BAD)

    await diagnostics(client, marker)
    await asyncio.sleep(0.2)
    assert publications(client, notebook) == publications(client, text_file) == []


# --- configuration ----------------------------------------------------------------------------


@lsp_test
async def test_workspace_config_ignore_silences_the_rule(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nignore = ["TL501"]\n')
    (tmp_path / "pkg").mkdir()
    uri = write(tmp_path / "pkg", "train.py", BAD)
    open_document(client, uri, BAD)

    assert await diagnostics(client, uri) == []


@lsp_test
async def test_an_excluded_file_gets_no_diagnostics(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nexclude = ["generated/"]\n')
    (tmp_path / "generated").mkdir()
    excluded = write(tmp_path / "generated", "train.py", BAD)
    linted = write(tmp_path, "train.py", BAD)
    open_document(client, excluded, BAD)
    open_document(client, linted, BAD)

    assert await diagnostics(client, excluded) == []
    assert len(await diagnostics(client, linted)) == 1


@lsp_test
async def test_extend_exclude_and_force_exclude_hold_in_the_editor(client: LanguageClient, tmp_path):
    # As ruff's server: a document the editor opens is treated as a path named with
    # --force-exclude, whatever `force-exclude` says (it is false here).
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nextend-exclude = ["gen_*.py"]\nforce-exclude = false\n')
    excluded = write(tmp_path, "gen_model.py", BAD)
    linted = write(tmp_path, "model.py", BAD)
    open_document(client, excluded, BAD)
    open_document(client, linted, BAD)

    assert await diagnostics(client, excluded) == []
    assert len(await diagnostics(client, linted)) == 1


@lsp_test
async def test_a_noqa_prefix_suppresses_in_the_editor_as_on_the_command_line(client: LanguageClient, tmp_path):
    text = BAD.replace("'m.pt')", "'m.pt')  # noqa: TL5")
    uri = write(tmp_path, "train.py", text)
    open_document(client, uri, text)

    assert await diagnostics(client, uri) == []


@lsp_test
async def test_a_changed_config_file_applies_without_a_restart(client: LanguageClient, tmp_path):
    assert any(r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES for r in client.registrations)
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)
    assert len(await diagnostics(client, uri)) == 1

    config = tmp_path / "torchlint.toml"
    config.write_text('ignore = ["TL501"]\n')
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=config.as_uri(), type=types.FileChangeType.Created)])
    )

    assert await diagnostics(client, uri, after=1) == []


@lsp_test
async def test_an_invalid_config_is_shown_to_the_user(client: LanguageClient, tmp_path):
    (tmp_path / "torchlint.toml").write_text('select = ["XX9"]\n')
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)

    assert await diagnostics(client, uri) == []
    assert any("unknown rule selector `XX9`" in m.message for m in client.messages)


# --- code actions ---------------------------------------------------------------------------


@lsp_test
async def test_quick_fix_saves_the_state_dict(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)
    found = await diagnostics(client, uri)

    (action,) = await code_actions(client, uri, found, only=["quickfix"])

    assert action.kind == types.CodeActionKind.QuickFix
    assert "TL501" in action.title and "unsafe" not in action.title
    assert action.is_preferred
    assert list(action.diagnostics) == found
    assert apply_edit(BAD, action.edit, uri) == GOOD


@lsp_test
async def test_an_unsafe_fix_is_offered_and_labelled(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)
    (diagnostic,) = await diagnostics(client, uri)
    diagnostic.data["fix"]["applicability"] = "unsafe"

    (action,) = await code_actions(client, uri, [diagnostic], only=["quickfix"])

    assert "unsafe" in action.title and not action.is_preferred
    assert apply_edit(BAD, action.edit, uri) == GOOD


@lsp_test
async def test_no_quick_fix_from_a_diagnostic_of_an_older_version(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)
    old = await diagnostics(client, uri)
    edited = "\n" + BAD
    replace_text(client, uri, edited, 2)

    assert await code_actions(client, uri, old, only=["quickfix"]) == []
    (fresh,) = await diagnostics(client, uri, version=2)
    (action,) = await code_actions(client, uri, [fresh], only=["quickfix"])
    assert apply_edit(edited, action.edit, uri) == "\n" + GOOD


@lsp_test
async def test_fix_all_source_action_fixes_the_whole_file(client: LanguageClient, tmp_path):
    text = BAD + "torch.save(model, 'n.pt')\n"
    uri = write(tmp_path, "train.py", text)
    open_document(client, uri, text)
    assert len(await diagnostics(client, uri)) == 2

    (action,) = await code_actions(client, uri, [], only=["source.fixAll"])
    assert action.kind == FIX_ALL
    # VS Code resolves the edit when the action is picked, so it is not computed up front.
    assert action.edit is None
    resolved = await client.code_action_resolve_async(action)

    assert apply_edit(text, resolved.edit, uri) == GOOD + "torch.save(model.state_dict(), 'n.pt')\n"


@lsp_test
async def test_no_fix_all_for_a_file_without_fixes(client: LanguageClient, tmp_path):
    uri = write(tmp_path, "train.py", GOOD)
    open_document(client, uri, GOOD)
    assert await diagnostics(client, uri) == []

    assert await code_actions(client, uri, [], only=[FIX_ALL]) == []


# --- a client with fewer capabilities, and the command itself -----------------------------------


@lsp_test
async def test_a_client_without_resolve_or_versioned_edits_gets_plain_edits_in_its_units(minimal_client, tmp_path):
    text = BAD.replace("torch.save(", "x = 'é'; torch.save(")
    uri = write(tmp_path, "train.py", text)
    open_document(minimal_client, uri, text)

    (diagnostic,) = await diagnostics(minimal_client, uri)
    assert diagnostic.range.start.character == len("x = 'é'; torch.save(".encode())

    actions = {a.kind: a for a in await code_actions(minimal_client, uri, [diagnostic])}
    assert actions.keys() == {types.CodeActionKind.QuickFix, FIX_ALL}
    fixed = text.replace("torch.save(model,", "torch.save(model.state_dict(),")
    for action in actions.values():
        assert action.edit.document_changes is None
        assert apply_edit(text, action.edit, uri, encoding="utf-8") == fixed


def test_without_pygls_the_command_says_which_extra_to_install():
    hide_pygls = "import sys, runpy; sys.modules['pygls'] = None; sys.argv = ['torchlint', 'lsp']; runpy.run_module('torchlint', run_name='__main__')"
    result = subprocess.run([sys.executable, "-c", hide_pygls], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=60)

    assert result.returncode == 2
    assert "pip install 'torchlint[lsp]'" in result.stderr
    assert "Traceback" not in result.stderr


def test_linting_does_not_import_the_language_server(tmp_path):
    (tmp_path / "train.py").write_text(BAD)
    check = (
        "import sys, atexit; atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith(('pygls', 'lsprotocol', 'torchlint.lsp')))));"
        f"sys.argv = ['torchlint', 'check', '--no-cache', {str(tmp_path / 'train.py')!r}];"
        "from torchlint.cli import main; main()"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=60)

    assert "TL501" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "[]"


# --- the project index ---------------------------------------------------------------------


@lsp_test
async def test_the_project_index_follows_open_documents_and_relints_their_importers(client: LanguageClient, tmp_path):
    plain = "class Net:\n    pass\n"
    module = "import torch.nn as nn\n\n\nclass Net(nn.Module):\n    pass\n"
    models = write(tmp_path, "models.py", plain)
    train_text = "import torch\n\nfrom models import Net\n\ntorch.save(Net(), 'm.pt')\n"
    train = write(tmp_path, "train.py", train_text)
    open_document(client, train, train_text)
    assert await diagnostics(client, train) == []  # on disk, Net is not a module

    # The editor's unsaved text wins over the disk, and the importer is linted again.
    open_document(client, models, module)
    (diagnostic,) = await diagnostics(client, train, after=1)
    assert diagnostic.code == "TL501"

    # Closed without saving: the file on disk holds again.
    client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=models)))
    assert await diagnostics(client, train, after=2) == []


@lsp_test
async def test_a_change_of_a_caller_relints_the_open_file_it_calls(client: LanguageClient, tmp_path):
    metrics_text = "import torch\n\n\ndef evaluate(model, loader):\n    return [model(x).argmax(1) for x in loader]\n"
    guarded = "import torch\n\nfrom metrics import evaluate\n\nwith torch.no_grad():\n    evaluate(m, data)\n"
    metrics = write(tmp_path, "metrics.py", metrics_text)
    train = write(tmp_path, "train.py", guarded)
    open_document(client, metrics, metrics_text)
    assert await diagnostics(client, metrics) == []  # the only call, on disk, runs under no_grad

    # The caller's unsaved text no longer disables gradients: the function it calls is linted again.
    open_document(client, train, "from metrics import evaluate\n\nevaluate(m, data)\n")
    (diagnostic,) = await diagnostics(client, metrics, after=1)
    assert diagnostic.code == "TL402"
