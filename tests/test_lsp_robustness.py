"""The language server under a raw stdio client: it exits promptly while a lint is running,
answers malformed requests with JSON-RPC errors, and reports a failing rule."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("pygls")

BIG = "import torch\n" + "".join(f"x{i} = torch.zeros({i}).cuda()\n" for i in range(3000))
BAD = "import torch\nfrom torch import nn\nmodel = nn.Linear(2, 2)\nboom('amp.autocast')  # the words TL801 needs\ntorch.save(model, 'm.pt')\n"
# A server whose TL801 raises on `boom()`: a deliberately failing rule.
FAILING_SERVER = """
import libcst as cst
from torchlint.rules import rule_by_code
rule = rule_by_code("TL801")
original = rule.visit_Call
def visit_Call(self, node):
    if isinstance(node.func, cst.Name) and node.func.value == "boom":
        raise ValueError("deliberate failure")
    original(self, node)
rule.visit_Call = visit_Call
from torchlint.lsp.server import create_server
create_server().start_io()
"""


class RawClient:
    def __init__(self, command: list[str], stderr=subprocess.DEVNULL) -> None:
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        self.received: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stdout = self.process.stdout
        while True:
            line = stdout.readline()
            if not line:
                return
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
                while stdout.readline().strip():
                    pass
                self.received.append(json.loads(stdout.read(length)))

    def send(self, message: dict | str) -> None:
        body = (message if isinstance(message, str) else json.dumps(message)).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def wait_for(self, predicate, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in list(self.received):
                if predicate(message):
                    return message
            time.sleep(0.02)
        raise AssertionError(f"no such message within {timeout} s: {self.received}")

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
        self.wait_for(lambda m: m.get("id") == 1)
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})

    def open(self, uri: str, text: str) -> None:
        document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
        self.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": document}})


@pytest.fixture
def client():
    client = RawClient([sys.executable, "-m", "torchlint", "lsp"])
    client.initialize()
    yield client
    if client.process.poll() is None:
        client.process.kill()
        client.process.wait()


def _exit_time(client: RawClient, close) -> float:
    client.open("file:///tmp/torchlint_big.py", BIG)  # a lint of several seconds starts
    time.sleep(0.5)
    start = time.monotonic()
    close()
    client.process.wait(timeout=60)
    return time.monotonic() - start


def test_exit_is_prompt_while_a_lint_runs(client):
    client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    client.wait_for(lambda m: m.get("id") == 2)
    assert _exit_time(client, lambda: client.send({"jsonrpc": "2.0", "method": "exit"})) < 3
    assert client.process.returncode == 0


def test_closed_stdin_is_a_prompt_exit_while_a_lint_runs(client):
    assert _exit_time(client, client.process.stdin.close) < 3


def test_exit_without_shutdown_exits_1(client):
    client.send({"jsonrpc": "2.0", "method": "exit"})
    assert client.process.wait(timeout=10) == 1


def test_a_request_with_malformed_params_gets_invalid_params(client):
    client.send({"jsonrpc": "2.0", "id": 7, "method": "textDocument/codeAction", "params": {"bogus": 1}})
    reply = client.wait_for(lambda m: m.get("id") == 7)
    assert reply["error"]["code"] == -32602


def test_a_message_that_is_not_json_gets_a_parse_error_and_the_server_goes_on(client):
    client.send('{"jsonrpc": "2.0", "id": 8, "method": "shutdown", ')
    reply = client.wait_for(lambda m: "error" in m and m.get("id", "absent") is None)
    assert reply["error"]["code"] == -32700
    client.send({"jsonrpc": "2.0", "id": 9, "method": "shutdown"})
    assert client.wait_for(lambda m: m.get("id") == 9)["result"] is None


def test_a_malformed_message_is_logged_as_one_line_not_a_traceback(tmp_path):
    log = tmp_path / "stderr.txt"
    with log.open("wb") as stderr:
        client = RawClient([sys.executable, "-m", "torchlint", "lsp"], stderr=stderr)
        try:
            client.initialize()
            client.send({"jsonrpc": "2.0", "id": 7, "method": "textDocument/codeAction", "params": {"bogus": 1}})
            client.wait_for(lambda m: m.get("id") == 7)
            client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"bogus": 1}})
            client.send('{"jsonrpc": "2.0", "id": 8, "method": "shutdown", ')
            client.wait_for(lambda m: "error" in m and m.get("id", "absent") is None)
            client.send({"jsonrpc": "2.0", "id": 9, "method": "shutdown"})
            client.wait_for(lambda m: m.get("id") == 9)
            client.send({"jsonrpc": "2.0", "method": "exit"})
            client.process.wait(timeout=30)
        finally:
            if client.process.poll() is None:
                client.process.kill()
                client.process.wait()
    lines = log.read_text().splitlines()
    assert "Traceback" not in log.read_text()
    assert lines == [
        "torchlint lsp: a malformed message: textDocument/codeAction request 7: Invalid Params (answered with error -32602)",
        "torchlint lsp: a malformed message: textDocument/didOpen: Invalid Params",
        "torchlint lsp: a message that is not JSON: Expecting property name enclosed in double quotes: line 1 column 51 (char 50)",
    ], lines


def test_a_failing_rule_is_logged_and_shown_and_the_other_diagnostics_published():
    client = RawClient([sys.executable, "-c", FAILING_SERVER])
    try:
        client.initialize()
        client.open("file:///tmp/torchlint_failing.py", BAD)
        published = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics")
        assert [d["code"] for d in published["params"]["diagnostics"]] == ["TL501"]
        expected = "torchlint_failing.py: internal error in rule TL801: ValueError: deliberate failure"
        for method in ("window/logMessage", "window/showMessage"):
            message = client.wait_for(lambda m: m.get("method") == method)
            assert expected in message["params"]["message"] and message["params"]["type"] == 1
    finally:
        client.process.kill()
        client.process.wait()


def test_the_server_collects_garbage_after_each_lint_only_when_it_runs_the_collector_itself():
    """``torchlint lsp`` turns Python's automatic collector off and collects after each lint
    (the young generations, everything every FULL_EVERY times); with the collector on, the
    server leaves collection to Python."""
    import gc

    from torchlint.lsp.server import GarbageCollection

    collected: list[int] = []

    def record(phase: str, info: dict) -> None:
        if phase == "start":
            collected.append(info["generation"])

    garbage = GarbageCollection()
    gc.callbacks.append(record)
    was_enabled = gc.isenabled()
    try:
        gc.enable()
        garbage.collect()
        assert collected == []
        gc.disable()
        for _ in range(GarbageCollection.FULL_EVERY):
            garbage.collect()
    finally:
        gc.callbacks.remove(record)
        if was_enabled:
            gc.enable()
    assert collected == [1] * (GarbageCollection.FULL_EVERY - 1) + [2]


def test_the_lsp_command_runs_without_the_automatic_collector():
    """The server process collects after its lints itself (GarbageCollection)."""
    code = (
        "import gc, sys\n"
        "import torchlint.lsp.server as server\n"
        "server.TorchlintServer.start_io = lambda self: print(gc.isenabled())\n"
        "from torchlint.lsp import command\n"
        "command.main([], standalone_mode=False)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr


def test_a_change_after_a_pause_is_linted_at_once_and_stops_the_lint_of_the_version_before():
    """The server's schedule for changes: a change to a document left alone for IDLE_SECONDS
    is linted at once, the changes that follow it are debounced; each change tells a lint
    still running on the version before to stop (its result would never be published)."""
    import threading

    from torchlint.lsp import server as lsp

    ls = lsp.create_server()
    scheduled: list[tuple[str, float]] = []
    ls.schedule_lint = lambda uri, delay: scheduled.append((uri, delay))
    uri, other = "file:///a.py", "file:///b.py"

    ls.changed(uri)  # never changed before: at once
    ls.changed(uri)  # typing goes on: debounced
    ls.changed(other)  # another document is on its own
    assert scheduled == [(uri, 0), (uri, lsp.DEBOUNCE_SECONDS), (other, 0)]

    running = ls.running[uri] = threading.Event()
    ls.last_change[uri] -= lsp.IDLE_SECONDS  # left alone since
    ls.changed(uri)
    assert scheduled[-1] == (uri, 0) and running.is_set()

    ls.running[uri] = running = threading.Event()
    ls.close(uri)  # a closed document's lint stops too, and its history goes
    assert running.is_set() and uri not in ls.running and uri not in ls.last_change


def test_fix_all_starts_from_the_parse_of_the_documents_last_lint(tmp_path, monkeypatch):
    """The fix-all's first pass parses with the document's parse cache (under its lint lock):
    the pieces its last lint parsed are not parsed again, and the fixed text is the engine's
    own, from a parse of its own."""
    import libcst
    from pygls.workspace import Workspace

    from torchlint.config import select_rules
    from torchlint.engine import FixMode, lint_module_source
    from torchlint.lsp import server as lsp

    block = "def train_{i}(model, loader):\n    model.cuda()\n    torch.save(model, 'm.pt')\n\n\n"
    text = "import torch\n\n\n" + "".join(block.format(i=i) for i in range(40))
    path = tmp_path / "train.py"
    path.write_text(text)
    ls = lsp.create_server()
    ls.protocol._workspace = Workspace(tmp_path.as_uri())
    snapshot = lsp.Snapshot(path.as_uri(), 1, text, path)
    ls.lint(snapshot)
    cache = ls.parse_caches[snapshot.uri]
    pieces = dict(cache.pieces._last)  # (what the next lint may reuse)
    assert len(pieces) > 2

    parsed = []
    original = libcst.parse_module
    monkeypatch.setattr(libcst, "parse_module", lambda *args, **kwargs: parsed.append(args) or original(*args, **kwargs))
    fixed = ls.fix_safely(snapshot)
    monkeypatch.undo()
    assert parsed == []  # every piece came from the cache
    expected = lint_module_source(text, select_rules(None, [], []), FixMode.SAFE).fixed_source
    assert fixed == expected != text
