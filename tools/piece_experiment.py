"""How much of a file's lint depends on the rest of the file, and whether the engine's lint
in pieces (``engine.plan_pieces``, for files of 20,000 lines or more) is the whole file's.

    python tools/piece_experiment.py CORPUS [--files N] [--pieces K] [--seed S] [--shard K/N]
    python tools/piece_experiment.py CORPUS --planned [--shard K/N]

``--planned`` cuts every file as the engine's lint in pieces does, with every definition a
piece of its own, every chunk of the parse as small as the cuts allow and no limit on the
context (``engine.lint_in_pieces(..., piece_lines=1, min_lines=0, max_context=1.0,
chunk_lines=1)``), and compares its findings (rows, columns, codes, messages, fixes) with
the whole file's lint: a difference is a context the plan got wrong. It also counts the
pieces that needed no context, and those whose context was the whole file.

Without ``--planned``, a plain cut, with no context: for each Python file under CORPUS (a random sample of N, all by default) whose top-level
definitions (functions and classes, with their decorators) number two or more, the
definitions are cut into K runs of consecutive ones; each run is linted together with the
module-level statements that are not definitions (imports, assignments, ``if __name__``
blocks: the "prelude"), the other definitions blanked out line for line (so rows and columns
stay), and the findings inside the run's own lines kept. The prelude's own findings come
from a lint of the prelude alone. The union is compared with the whole file's lint (no
project: only what the file itself knows), and every finding one has and the other lacks is
listed: a finding the pieces miss depends on a definition in another piece; one they add, on
a fact of the whole file that suppresses it (a file that is CUDA-only by design, say).
"""

from __future__ import annotations

import argparse
import ast
import collections
import random
from pathlib import Path

from torchlint.config import select_rules
from torchlint.engine import INVALID_FILE, lint_in_pieces, lint_module_source
from torchlint.pieces import outline, plan
from torchlint.semantic.pieces import SemanticHooks

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def findings(text: str, rules) -> set[tuple[int, int, str]]:
    result = lint_module_source(text.encode("utf-8"), rules)
    return {(f.start.row, f.start.column, f.code) for f in result.findings if f.code != INVALID_FILE}


def definition_rows(tree: ast.Module) -> list[tuple[int, int]]:
    """The first and last row of each top-level definition, its decorators included."""
    return [
        (min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.end_lineno)
        for node in tree.body
        if isinstance(node, DEFINITIONS)
    ]


def blanked(lines: list[str], spans: list[tuple[int, int]]) -> str:
    out = list(lines)
    for first, last in spans:
        for index in range(first - 1, last):
            out[index] = "\n" if out[index].endswith("\n") else ""
    return "".join(out)


def compare(text: str, pieces: int, rules) -> tuple[set, set] | None:
    """(the whole file's findings, the pieces' findings), or None for a file not cut."""
    tree = ast.parse(text)
    spans = definition_rows(tree)
    if len(spans) < 2:
        return None
    lines = text.splitlines(True)
    size = -(-len(spans) // pieces)
    runs = [spans[i:i + size] for i in range(0, len(spans), size)]
    got: set = set()
    owned_rows: set[int] = set()
    for run in runs:
        rows = {row for first, last in run for row in range(first, last + 1)}
        owned_rows |= rows
        got |= {f for f in findings(blanked(lines, [s for s in spans if s not in run]), rules) if f[0] in rows}
    got |= {f for f in findings(blanked(lines, spans), rules) if f[0] not in owned_rows}
    return findings(text, rules), got


COUNTS: collections.Counter = collections.Counter()


def _key(f) -> tuple:
    fix = None if f.fix is None else (f.fix.applicability, f.fix.message)
    return (f.start.row, f.start.column, f.end.row, f.end.column, f.code, f.message, fix)


def compare_planned(source: bytes, rules) -> tuple[set, set] | None:
    """(the whole file's findings, ``engine.lint_in_pieces``'s with every definition a piece
    of its own and no limit on the context), or None for a file not cut."""
    pieces = lint_in_pieces(source, rules, None, SemanticHooks(), piece_lines=1, min_lines=0, max_context=1.0, chunk_lines=1)
    if pieces is None:
        return None
    found = outline(iter([ast.parse(source).body]), SemanticHooks())
    cuts = plan(found, 1, 1.0)
    COUNTS["pieces"] += len(cuts)
    COUNTS["pieces with no context"] += sum(not c.context for c in cuts)
    COUNTS["pieces holding the whole file"] += sum(len(c.context) + len(c.own) == len(found.definitions) for c in cuts)
    whole = lint_module_source(source, rules)
    return {_key(f) for f in whole.findings}, {_key(f) for f in pieces.findings}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--files", type=int, default=0, help="a random sample of this many files (0: all)")
    parser.add_argument("--pieces", type=int, default=4, help="runs of definitions per file (default 4)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shard", default="0/1", help="K/N: every Nth file from the Kth (to run N at once)")
    parser.add_argument("--planned", action="store_true",
                        help="cut as the engine's lint in pieces does (its context), every definition a piece")
    options = parser.parse_args()
    rules = select_rules(None, (), ())
    files = sorted(options.corpus.rglob("*.py"))
    if options.files:
        random.Random(options.seed).shuffle(files)
        files = files[:options.files]
    shard, shards = map(int, options.shard.split("/"))
    files = files[shard::shards]
    counts: collections.Counter = collections.Counter()
    differences: list[str] = []
    for path in files:
        try:
            if options.planned:
                compared = compare_planned(path.read_bytes(), rules)
            else:
                compared = compare(path.read_text(encoding="utf-8"), options.pieces, rules)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            counts["files not parsed"] += 1
            continue
        if compared is None:
            counts["files not cut (under two definitions)"] += 1
            continue
        whole, pieces = compared
        counts["files cut"] += 1
        counts["findings of the whole files"] += len(whole)
        counts["findings of the pieces"] += len(pieces)
        counts["missed by the pieces"] += len(whole - pieces)
        counts["added by the pieces"] += len(pieces - whole)
        counts["files that differ"] += whole != pieces
        for label, keys in (("missed", whole - pieces), ("added", pieces - whole)):
            differences += [f"{label}\t{path.relative_to(options.corpus)}:{key[0]}:{key[1]}\t{key[4] if len(key) > 3 else key[2]}" for key in sorted(keys, key=str)]
    counts.update(COUNTS)
    for label, count in counts.items():
        print(f"{label}: {count}")
    print(*differences, sep="\n")


if __name__ == "__main__":
    main()
