"""The fixes on real code: every fix of every rule applied to a copy of a corpus, then checked.

    python tools/fix_check.py CORPUS [--jobs N] [--keep DIR]

CORPUS is a folder of repository snapshots (as for tools/ecosystem.py). A scratch copy of its
Python files and notebooks is fixed with `torchlint check --fix --unsafe-fixes --select ALL`
(with this environment's torchlint), and each file the fixes changed is checked:

- it still parses, if it parsed before (a notebook: its code cells, each magic or shell line
  read as `pass` at its indentation, its continued lines as blank ones);
- no name is undefined that was defined before (pyflakes' "undefined name" and "referenced
  before assignment" messages, before against after; skipped when pyflakes is not installed):
  a fix that uses `torch` or `device` must find it bound;
- a second run of the same command changes nothing (the fixes are idempotent on the corpus).

Prints how many files the fixes changed, and every problem; exits 1 when there is one. `--keep DIR` leaves the fixed copy there (for reading the diffs) instead of removing it.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SUFFIXES = (".py", ".ipynb")


def python_of(path: Path) -> str:
    """The Python source of a file; a notebook's code cells joined, magics and shell lines
    replaced by `pass` (rows kept)."""
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    if path.suffix != ".ipynb":
        return text
    cells = []
    for cell in json.loads(text).get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        lines, magic = [], False
        for line in source.splitlines():
            stripped = line.lstrip()
            if magic:  # (a magic continues after a backslash)
                lines.append("")
            elif stripped.startswith(("%", "!")):
                lines.append(line[: len(line) - len(stripped)] + "pass")
            else:
                lines.append(line)
            magic = (magic or stripped.startswith(("%", "!"))) and line.endswith("\\")
        cells.append("\n".join(lines))
    return "\n\n".join(cells)


def undefined_names(source: str) -> set[str] | None:
    """pyflakes' undefined-name messages for the source, without their positions (None when
    pyflakes is not installed)."""
    try:
        from pyflakes import api, messages
        from pyflakes.reporter import Reporter
    except ImportError:
        return None

    class Collect(Reporter):
        def __init__(self) -> None:
            self.found: set[str] = set()

        def unexpectedError(self, filename, message) -> None:
            pass

        def syntaxError(self, filename, message, lineno, offset, text) -> None:
            pass

        def flake(self, message) -> None:
            if isinstance(message, (messages.UndefinedName, messages.UndefinedLocal)):
                self.found.add(message.message % message.message_args)

    reporter = Collect()
    api.check(source, "<file>", reporter)
    return reporter.found


def problems_of(before: str, after: Path) -> list[str]:
    """What is wrong with a fixed file, given its source before the fixes (one that did not
    parse before, as this reads notebooks, is judged by its names alone)."""
    try:
        fixed = python_of(after)
    except ValueError as error:
        return [f"is no notebook after the fixes: {error}"]
    error = _parse_error(fixed)
    if error is not None and _parse_error(before) is None:
        return [f"does not parse after the fixes: {error}"]
    old, new = undefined_names(before), undefined_names(fixed)
    if old is None:
        return []
    return [f"undefined after the fixes: {name}" for name in sorted(new - old)]


def _parse_error(source: str) -> SyntaxError | ValueError | None:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError) as error:
        return error
    return None


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file() and not p.is_symlink())


def digests(folder: Path) -> dict[Path, str]:
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest() for p in files_of(folder)}


def fix(folder: Path, jobs: int) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torchlint", "check", "--fix", "--unsafe-fixes", "--select", "ALL", "--no-cache",
               "--exit-zero", "--output-format", "json", "-j", str(jobs), "."]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True)


def check(corpus: Path, scratch: Path, jobs: int) -> tuple[list[str], int]:
    """The problems found, and the number of files the fixes changed."""
    for path in files_of(corpus):
        target = scratch / path.relative_to(corpus)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    originals = digests(scratch)
    problems: list[str] = []
    run = fix(scratch, jobs)
    if run.returncode not in (0, 2) or "internal error" in run.stderr or "Traceback" in run.stderr:
        problems.append(f"the fixing run failed (exit {run.returncode}): {run.stderr.strip()[-500:]}")
    fixed = digests(scratch)
    changed = sorted(p for p, digest in fixed.items() if originals.get(p) != digest)
    for relative in changed:
        before = python_of(corpus / relative)
        problems += [f"{relative}: {problem}" for problem in problems_of(before, scratch / relative)]
    again = fix(scratch, jobs)
    problems += [f"{p}: a second run changed it again" for p, digest in digests(scratch).items() if fixed.get(p) != digest]
    if again.returncode not in (0, 2):
        problems.append(f"the second run failed (exit {again.returncode}): {again.stderr.strip()[-500:]}")
    return problems, len(changed)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="leave the fixed copy in this (new) folder")
    args = parser.parse_args(argv)
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="torchlint-fix-check-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        problems, changed = check(args.corpus, scratch, args.jobs)
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    pyflakes = "" if undefined_names("") is not None else " (pyflakes not installed: undefined names not checked)"
    print(f"{changed} files changed by the fixes; {len(problems)} problems{pyflakes}")
    print(*problems, sep="\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
