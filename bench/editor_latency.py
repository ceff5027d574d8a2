"""How quickly the language server answers in the editor (issue 12, point 3).

A generated training file of about 2,000 lines with about 100 findings (most of them
fixable) is opened in `torchlint lsp`, driven over stdio as an editor drives it. Measured:

- open: from `didOpen` to the first diagnostics;
- change: from a `didChange` (one line edited, the document left alone before it) to the
  diagnostics of the new version; the server lints such a change at once;
- typing: five `didChange`s 0.1 s apart (after a pause), from the last one to the diagnostics
  of its version; this includes the server's debounce (0.05 s), as in an editor;
- quick fix: a `textDocument/codeAction` request for the quick fixes of 10 diagnostics;
- fix all: the `source.fixAll.torchlint` action, resolved (the engine's fixes of the whole
  file).

Targets: fresh diagnostics within 1 s of a change, a code action within 200 ms.

    python bench/editor_latency.py [--lines 2000] [--repeat 3]

Run it with the checkout's environment active; to measure another version of torchlint, put
its sources first on PYTHONPATH (the server is started as `python -m torchlint lsp`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HEADER = """import torch
import numpy as np
from torch import nn
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


"""

# One block: about 40 lines, 2 findings (a `.cuda()` placement and a whole-module save), and a
# training loop written correctly.
BLOCK = '''def train_{i}(loader, epochs={i}):
    model = Net().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    history = []
    for epoch in range(epochs):
        model.train()
        for inputs, targets in loader:
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = loss_fn(outputs, targets)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        model.eval()
        with torch.no_grad():
            total = 0.0
            for inputs, targets in loader:
                total += loss_fn(model(inputs), targets).item()
        print(epoch, total / max(len(history), 1))
    torch.save(model, "model_{i}.pt")
    return history


def summarize_{i}(values):
    """Plain Python between the training functions."""
    result = {{}}
    for index, value in enumerate(values):
        key = "bucket_" + str(index % 7)
        result.setdefault(key, []).append(value)
    means = {{}}
    for key, items in result.items():
        means[key] = sum(items) / len(items)
    ordered = sorted(means.items(), key=lambda kv: kv[1])
    return ordered[:3], ordered[-3:]


'''


def training_file(lines: int) -> str:
    blocks = []
    i = 0
    while len(HEADER.splitlines()) + sum(b.count("\n") for b in blocks) < lines:
        blocks.append(BLOCK.format(i=i))
        i += 1
    return HEADER + "".join(blocks)


class Client:
    """A minimal LSP client over the server's stdio."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "torchlint", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        self.messages: list[tuple[float, dict]] = []
        self.lock = threading.Condition()
        self.next_id = 0
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
                message = json.loads(stdout.read(length))
                with self.lock:
                    self.messages.append((time.perf_counter(), message))
                    self.lock.notify_all()

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def wait(self, predicate, timeout: float = 300.0) -> tuple[float, dict]:
        deadline = time.perf_counter() + timeout
        with self.lock:
            while True:
                for arrived, message in self.messages:
                    if predicate(message):
                        return arrived, message
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError("no answer from the server")
                self.lock.wait(left)

    def request(self, method: str, params: dict) -> tuple[float, dict]:
        self.next_id += 1
        request_id = self.next_id
        start = time.perf_counter()
        self.send({"id": request_id, "method": method, "params": params})
        arrived, message = self.wait(lambda m: m.get("id") == request_id and "method" not in m)
        return arrived - start, message

    def close(self) -> None:
        self.request("shutdown", {})
        self.send({"method": "exit"})
        self.process.wait(timeout=30)


def diagnostics_of(client: Client, uri: str, version: int, start: float) -> tuple[float, list]:
    arrived, message = client.wait(
        lambda m: m.get("method") == "textDocument/publishDiagnostics"
        and m["params"]["uri"] == uri
        and m["params"].get("version") == version
    )
    return arrived - start, message["params"]["diagnostics"]


def measure(text: str, path: Path) -> dict[str, float]:
    client = Client()
    uri = path.as_uri()
    capabilities = {
        "textDocument": {"codeAction": {"resolveSupport": {"properties": ["edit"]}}},
        "workspace": {"workspaceEdit": {"documentChanges": True}},
    }
    client.request("initialize", {"capabilities": capabilities, "rootUri": path.parent.as_uri()})
    client.send({"method": "initialized", "params": {}})

    start = time.perf_counter()
    document = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    client.send({"method": "textDocument/didOpen", "params": {"textDocument": document}})
    opened, found = diagnostics_of(client, uri, 1, start)

    # Edit one line in the middle (a rename inside a string), as typing does.
    lines = text.splitlines(keepends=True)
    row = next(i for i in range(len(lines) // 2, len(lines)) if '"bucket_"' in lines[i])
    column = lines[row].index('"bucket_"') + 1
    change = {
        "range": {"start": {"line": row, "character": column}, "end": {"line": row, "character": column + 6}},
        "text": "group_",
    }
    start = time.perf_counter()
    client.send(
        {"method": "textDocument/didChange", "params": {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [change]}}
    )
    changed, found = diagnostics_of(client, uri, 2, start)

    # Typing after a pause (the server's IDLE_SECONDS): five keystrokes into the same string.
    time.sleep(1.5)
    for version in range(3, 8):
        insert = {"range": {"start": {"line": row, "character": column}, "end": {"line": row, "character": column}}, "text": "a"}
        start = time.perf_counter()
        client.send(
            {"method": "textDocument/didChange", "params": {"textDocument": {"uri": uri, "version": version}, "contentChanges": [insert]}}
        )
        if version < 7:
            time.sleep(0.1)
    typed, found = diagnostics_of(client, uri, 7, start)

    fixable = [d for d in found if isinstance(d.get("data"), dict) and "fix" in d["data"]][:10]
    context = {"diagnostics": fixable, "only": ["quickfix"]}
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
    quick, answer = client.request(
        "textDocument/codeAction", {"textDocument": {"uri": uri}, "range": whole, "context": context}
    )
    quick_fixes = len(answer.get("result") or [])

    listed, answer = client.request(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": whole, "context": {"diagnostics": [], "only": ["source.fixAll.torchlint"]}},
    )
    [fix_all] = answer["result"]
    resolved, answer = client.request("codeAction/resolve", fix_all)
    assert answer["result"]["edit"], "fix all gave no edit"
    client.close()
    return {
        "findings": len(found),
        "fixable": sum(1 for d in found if isinstance(d.get("data"), dict) and "fix" in d["data"]),
        "open_s": opened,
        "change_s": changed,
        "typing_s": typed,
        "quick_fix_s": quick,
        "quick_fixes": quick_fixes,
        "fix_all_listed_s": listed,
        "fix_all_resolved_s": resolved,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median of each figure is reported")
    args = parser.parse_args()

    from torchlint.lsp.server import DEBOUNCE_SECONDS  # the server measured is this torchlint

    text = training_file(args.lines)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.py"
        path.write_text(text)
        runs = [measure(text, path) for _ in range(args.repeat)]
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(f"file: {text.count(chr(10))} lines, {median['findings']:.0f} findings ({median['fixable']:.0f} fixable)")
    print(f"open -> diagnostics          {median['open_s'] * 1000:8.0f} ms")
    print(f"change -> fresh diagnostics  {median['change_s'] * 1000:8.0f} ms   (target 1000 ms)")
    print(f"typing -> fresh diagnostics  {median['typing_s'] * 1000:8.0f} ms   (the last of 5 changes 0.1 s apart; includes the {DEBOUNCE_SECONDS * 1000:.0f} ms debounce)")
    print(f"code action (10 quick fixes) {median['quick_fix_s'] * 1000:8.0f} ms   (target 200 ms)")
    print(f"fix all: listed              {median['fix_all_listed_s'] * 1000:8.0f} ms")
    print(f"fix all: resolved            {median['fix_all_resolved_s'] * 1000:8.0f} ms")
    print(f"(median of {args.repeat} runs; {sys.platform}, Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
