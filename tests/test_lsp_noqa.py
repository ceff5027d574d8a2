"""The language server does what the command line does with `noqa` and `fixable` (issue 40):
TL001 unused-noqa with its quick fix, `unfixable` rules offered no fix, and a `Disable CODE for
this line` quick fix writing the `# noqa` that `--add-noqa` would."""

from __future__ import annotations

from lsprotocol import types
from pytest_lsp import LanguageClient

from test_lsp import BAD, FIX_ALL, GOOD, apply_edit, client, code_actions, diagnostics, lsp_test, open_document, write

__all__ = ["client"]  # (the shared server's fixture)


@lsp_test
async def test_an_unused_noqa_is_tl001_and_its_quick_fix_removes_it(client: LanguageClient, tmp_path):
    text = GOOD.replace("'m.pt')", "'m.pt')  # noqa: TL501, E501")
    uri = write(tmp_path, "train.py", text)
    open_document(client, uri, text)

    (diagnostic,) = await diagnostics(client, uri)
    assert diagnostic.code == "TL001"
    assert diagnostic.message == "unused `noqa` directive (unused: `TL501`)"

    (action,) = await code_actions(client, uri, [diagnostic], only=["quickfix"])
    assert action.title == "Remove unused `noqa` directive (TL001)"
    assert apply_edit(text, action.edit, uri) == GOOD.replace("'m.pt')", "'m.pt')  # noqa: E501")


@lsp_test
async def test_a_used_noqa_keeps_its_finding_out_of_the_editor(client: LanguageClient, tmp_path):
    text = BAD.replace("'m.pt')", "'m.pt')  # noqa: TL501")
    uri = write(tmp_path, "train.py", text)
    open_document(client, uri, text)

    assert await diagnostics(client, uri) == []


@lsp_test
async def test_an_unfixable_rule_gets_no_quick_fix_and_no_fix_all(client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.torchlint]\nunfixable = ["TL501"]\n')
    uri = write(tmp_path, "train.py", BAD)
    open_document(client, uri, BAD)

    (diagnostic,) = await diagnostics(client, uri)
    assert diagnostic.code == "TL501" and "fix" not in diagnostic.data
    assert await code_actions(client, uri, [diagnostic], only=["quickfix"]) == []
    assert await code_actions(client, uri, [], only=[FIX_ALL]) == []


@lsp_test
async def test_disable_for_this_line_writes_the_noqa_add_noqa_would(client: LanguageClient, tmp_path):
    text = BAD.replace("'m.pt')", "'m.pt')  # noqa: E501")
    uri = write(tmp_path, "train.py", text)
    open_document(client, uri, text)
    (diagnostic,) = await diagnostics(client, uri)

    actions = await code_actions(client, uri, [diagnostic], only=["quickfix"], noqa=True)
    (disable,) = [a for a in actions if a.title == "Disable TL501 for this line"]
    assert disable.kind == types.CodeActionKind.QuickFix and not disable.is_preferred
    assert apply_edit(text, disable.edit, uri) == BAD.replace("'m.pt')", "'m.pt')  # noqa: E501, TL501")


@lsp_test
async def test_no_disable_action_where_a_comment_cannot_go(client: LanguageClient, tmp_path):
    text = BAD.replace("torch.save(model, 'm.pt')", "torch.save(model, '''a\nb''')")
    uri = write(tmp_path, "train.py", text)
    open_document(client, uri, text)
    (diagnostic,) = await diagnostics(client, uri)

    actions = await code_actions(client, uri, [diagnostic], only=["quickfix"], noqa=True)
    assert [a.title for a in actions] == ["Save `state_dict()` instead (TL501)"]
