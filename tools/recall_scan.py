"""Candidate instances of the core rules' bugs in real code, for judging by hand.

    python tools/recall_scan.py CORPUS [--code TL101] > candidates.tsv

A liberal scanner written with Python's ``ast``, independent of torchlint's logic: it lists
places that *may* be an instance of a core rule's bug, so that a person can read each one and
record the real ones in ecosystem/recall/<CODE>.tsv. It over-reports on purpose; the judging
decides. Output: ``repo  path  line  code  hint`` (tab-separated). Notebooks are scanned cell by
cell (line ``cell:row``, cells counted from 1 among all cells as Jupyter shows them; lines of
IPython magics and shell escapes are blanked), so what spans cells is not seen.

What each code's candidates are:
- TL101: a loop whose body runs a backward pass and an optimizer-like ``step()`` and clears
  no gradient (no ``zero_grad``, no ``.grad = None``), or clears only under an ``if`` while the
  step is unconditional.
- TL103: ``step()`` of a scheduler-like object in a file that mentions ``ReduceLROnPlateau``,
  given nothing, an epoch-like name or a training-loss-like name.
- TL201: ``.cuda()`` and ``"cuda"``/``"cuda:N"`` strings given as a device.
- TL301: inside a loop that runs a backward pass, a loss-like name or a model call appended,
  added with ``+=`` or stored, with no ``.item()``/``.detach()``/``float()``.
- TL401/TL402: functions named for evaluation (evaluate, validate, test, predict, infer,
  generate, sample, decode), loops over validation/test data, and code after loading weights
  that calls something, lacking ``.eval()`` (TL401) or ``no_grad``/``inference_mode`` (TL402).
- TL501: ``torch.save`` of something that is not a ``state_dict()`` call or a dict of them.
- TL601: NumPy (``np.``/``.numpy()``) in a function that runs a backward pass or is named
  for a loss, or in a ``forward``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

EVAL_NAMES = re.compile(r"(^|_)(eval|evaluate|evaluation|validate|validation|valid|val|test|predict|prediction|infer|inference|generate|sample|decode)(_|$)", re.I)
EVAL_DATA = re.compile(r"val|valid|test|eval|dev", re.I)
LOSS_NAME = re.compile(r"loss|err|cost|objective", re.I)
SCHEDULER_NAME = re.compile(r"sched|plateau|lr_", re.I)
DETACHED = re.compile(r"\.item\(|\.detach\(|float\(|\.data\b|\.cpu\(|\.tolist\(|\.numpy\(")


def source_of(node: ast.AST, text: str) -> str:
    return ast.get_source_segment(text, node) or ""


def calls(node: ast.AST):
    return [n for n in ast.walk(node) if isinstance(n, ast.Call)]


def attr_name(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(call.func, ast.Name) else None


def has_backward(node: ast.AST) -> bool:
    return any(attr_name(c) == "backward" for c in calls(node))


def optimizer_steps(node: ast.AST, text: str) -> list[ast.Call]:
    found = []
    for c in calls(node):
        if attr_name(c) == "step" and isinstance(c.func, ast.Attribute):
            owner = source_of(c.func.value, text)
            if not SCHEDULER_NAME.search(owner) and "env" not in owner.lower():
                found.append(c)
        elif attr_name(c) == "optimizer_step":
            found.append(c)
    return found


def clears(node: ast.AST, text: str) -> list[ast.AST]:
    found = [c for c in calls(node) if attr_name(c) in ("zero_grad", "clear_grad", "zero_grads")]
    found += [n for n in ast.walk(node) if isinstance(n, ast.Assign)
              and any(source_of(t, text).endswith(".grad") for t in n.targets)]
    return found


def under_if(target: ast.AST, loop: ast.AST) -> bool:
    for node in ast.walk(loop):
        if isinstance(node, ast.If) and any(target is n for n in ast.walk(node)) and node is not loop:
            return True
    return False


def scan_tl101(tree, text):
    for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))):
        if not has_backward(loop):
            continue
        steps = optimizer_steps(loop, text)
        if not steps:
            continue
        cleared = clears(loop, text)
        if not cleared:
            yield steps[0].lineno, "backward and step, no clear in the loop"
        elif all(under_if(c, loop) for c in cleared) and not all(under_if(s, loop) for s in steps):
            yield steps[0].lineno, "clear only under an if, step unconditional"


def scan_tl103(tree, text):
    if "ReduceLROnPlateau" not in text:
        return
    for c in calls(tree):
        if attr_name(c) != "step" or not isinstance(c.func, ast.Attribute):
            continue
        owner = source_of(c.func.value, text)
        if not SCHEDULER_NAME.search(owner):
            continue
        arg = source_of(c.args[0], text) if c.args else ""
        if not arg or "epoch" in arg.lower() or ("loss" in arg.lower() and not EVAL_DATA.search(arg)):
            yield c.lineno, f"{owner}.step({arg})"


def scan_tl201(tree, text):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and attr_name(node) == "cuda" and isinstance(node.func, ast.Attribute) \
                and not source_of(node.func.value, text).startswith("torch"):
            yield node.lineno, source_of(node, text)[:60]
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"cuda(:\d+)?", node.value):
            yield node.lineno, f"string {node.value!r}"


def scan_tl301(tree, text):
    seen = set()
    for loop in (n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))):
        if not has_backward(loop):
            continue
        for node in ast.walk(loop):
            value = None
            if isinstance(node, ast.Call) and attr_name(node) in ("append", "extend", "update", "add") and node.args:
                value = node.args[0]
            elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
                value = node.value
            elif isinstance(node, ast.Assign) and isinstance(node.targets[0], (ast.Subscript, ast.Attribute)):
                value = node.value
            if value is None:
                continue
            src = source_of(value, text)
            model_call = isinstance(value, ast.Call) and re.search(r"model|net", source_of(value.func, text), re.I)
            if (LOSS_NAME.search(src) or model_call) and not DETACHED.search(src) and node.lineno not in seen:
                seen.add(node.lineno)
                yield node.lineno, source_of(node, text)[:70]


def mentions(node, words) -> bool:
    return any(attr_name(c) in words for c in calls(node)) or any(
        isinstance(n, ast.Attribute) and n.attr in words for n in ast.walk(node))


def scan_eval(tree, text, code):
    def lacks(node):
        if code == "TL401":
            return not mentions(node, ("eval",)) and "train(False)" not in source_of(node, text)
        return not mentions(node, ("no_grad", "inference_mode", "set_grad_enabled"))

    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if EVAL_NAMES.search(fn.name) and not fn.name.startswith("test_") and not has_backward(fn) \
                and calls(fn) and lacks(fn) and not any(lacks_decorator(d, text, code) for d in fn.decorator_list):
            yield fn.lineno, f"def {fn.name}"
    for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For)):
        if EVAL_DATA.search(source_of(loop.iter, text)) and not has_backward(loop) and lacks(loop):
            yield loop.lineno, f"for over {source_of(loop.iter, text)[:40]}"
    body = [s for s in tree.body]
    for s in tree.body:  # if __name__ == "__main__": counts as module level
        if isinstance(s, ast.If) and "__main__" in source_of(s.test, text):
            body += s.body
    loads = [s for s in body if re.search(r"load_state_dict\(|torch\.load\(", source_of(s, text))]
    if loads and not any(isinstance(s, (ast.FunctionDef, ast.ClassDef)) is False and False for s in body):
        rest = [s for s in body if s.lineno > loads[0].lineno and not isinstance(s, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom))]
        module = ast.Module(body=rest, type_ignores=[])
        if rest and calls(module) and lacks(module) and not has_backward(module):
            yield loads[0].lineno, "module level after loading weights"


def lacks_decorator(decorator, text, code):
    src = source_of(decorator, text)
    return code == "TL402" and ("no_grad" in src or "inference_mode" in src)


def scan_tl501(tree, text):
    for c in calls(tree):
        if source_of(c.func, text) not in ("torch.save", "save", "th.save"):
            continue
        obj = c.args[0] if c.args else next((k.value for k in c.keywords if k.arg == "obj"), None)
        if obj is None:
            continue
        if isinstance(obj, ast.Dict):
            for value in obj.values:
                src = source_of(value, text)
                if re.search(r"model|net|module|encoder|decoder|generator|discriminator", src, re.I) and "state_dict" not in src:
                    yield c.lineno, f"dict value {src[:40]}"
                    break
        elif "state_dict" not in source_of(obj, text) and not isinstance(obj, (ast.Constant, ast.List, ast.Tuple)):
            yield c.lineno, f"save {source_of(obj, text)[:40]}"


def scan_tl601(tree, text):
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        if not (has_backward(fn) or LOSS_NAME.search(fn.name) or fn.name == "forward"):
            continue
        for c in calls(fn):
            src = source_of(c.func, text)
            if src.startswith(("np.", "numpy.")) or attr_name(c) == "numpy":
                inner = [a for a in ast.walk(c) if isinstance(a, ast.Call) and attr_name(a) == "numpy"]
                yield c.lineno, f"{fn.name}: {source_of(c, text)[:50]}" + (" (.numpy)" if inner else "")
                break


SCANNERS = {
    "TL101": scan_tl101, "TL103": scan_tl103, "TL201": scan_tl201, "TL301": scan_tl301,
    "TL401": lambda t, s: scan_eval(t, s, "TL401"), "TL402": lambda t, s: scan_eval(t, s, "TL402"),
    "TL501": scan_tl501, "TL601": scan_tl601,
}


def units(path: Path) -> list[tuple[str, str]]:
    """(line prefix, source) per unit to parse: the file, or each code cell of a notebook."""
    if path.suffix == ".py":
        return [("", path.read_text(errors="replace"))]
    try:
        cells = json.loads(path.read_bytes()).get("cells", [])
    except (ValueError, AttributeError):
        return []
    found = []
    for number, cell in enumerate(cells, 1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        lines = ["" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()]
        found.append((f"{number}:", "\n".join(lines) + "\n"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--code", action="append", choices=sorted(SCANNERS))
    args = parser.parse_args()
    for repo_dir in sorted(p for p in args.corpus.iterdir() if p.is_dir()):
        repo = repo_dir.name.replace("+", "/", 1)
        for path in sorted(p for p in repo_dir.rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file()):
            for prefix, text in units(path):
                try:
                    tree = ast.parse(text)
                except (SyntaxError, ValueError):
                    continue
                for code in args.code or sorted(SCANNERS):
                    for line, hint in sorted(set(SCANNERS[code](tree, text))):
                        hint = hint.replace("\t", " ").replace("\n", " ")
                        print(f"{repo}\t{path.relative_to(repo_dir)}\t{prefix}{line}\t{code}\t{hint}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
