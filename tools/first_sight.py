"""Score a run of torchlint on the first-sight repositories against their triage.

    python tools/first_sight.py --run SNAPSHOTS... --out RESULTS   # lint each snapshot (default set)
    python tools/first_sight.py --score RESULTS [--by-repo] [--missed]  # precision and core recall

A snapshot is a folder named ``owner+name`` (as tools/ecosystem.py's corpus). ``--run`` lints
each one from its own folder with this environment's torchlint (the default rule set, no
cache) and writes ``RESULTS/owner+name.json``. ``--score`` matches those findings with the
verdicts kept in ``ecosystem/first-sight/*findings.tsv`` (same file, row, notebook cell and
code) and the real instances of ``*instances.tsv`` (found when the code is reported in the same
file and cell within ``TOLERANCE`` rows), and prints per code: findings, true, false, not yet
triaged (each listed, to triage before a figure is quoted), and instances found. A round
measured after changes made for it is no longer first sight: say so where the figure is kept.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "ecosystem" / "first-sight"
CORE = ("TL101", "TL103", "TL201", "TL301", "TL401", "TL402", "TL501", "TL601")
TOLERANCE = 2
_CELL = re.compile(r"cell\s*(\d+):(\d+)")


def _place(path: str, line: str) -> tuple[str, int | None, int]:
    """(file, cell, row) of a triage row: ``line`` ``"cell10:4"`` or ``"25"``, or ``path``
    ``"a.ipynb#cell9"`` with ``line`` ``"3"``."""
    path, _, cell = path.partition("#cell")
    match = _CELL.fullmatch(line.strip())
    if match:
        return path, int(match.group(1)), int(match.group(2))
    return path, int(cell) if cell else None, int(line)


def _rows(pattern: str) -> list[dict]:
    rows = []
    for path in sorted(HERE.glob(pattern)):
        with path.open(newline="") as handle:
            rows += list(csv.DictReader(handle, delimiter="\t"))
    return rows


def run(snapshots: list[Path], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for snapshot in snapshots:
        result = subprocess.run(
            [sys.executable, "-m", "torchlint", "check", ".", "--no-cache", "--exit-zero", "--output-format", "json"],
            cwd=snapshot, capture_output=True, text=True,
        )
        (out / f"{snapshot.name}.json").write_text(result.stdout or "[]")
        if result.returncode not in (0, 1):
            print(f"{snapshot.name}: exit {result.returncode}: {result.stderr.strip()[-300:]}", file=sys.stderr)


def score(results: Path, missed: bool = False, by_repo: bool = False) -> int:
    verdicts = {}
    for row in _rows("*findings.tsv"):
        path, cell, line = _place(row["path"], row["line"])
        verdicts[(row["repo"], path, cell, line, row["code"])] = row["verdict"]
    found: dict[tuple, list] = {}
    untriaged = []
    counts: Counter[tuple[str, str]] = Counter()
    per_repo: dict[str, Counter] = {path.stem.replace("+", "/", 1): Counter() for path in sorted(results.glob("*.json"))}
    for path in sorted(results.glob("*.json")):
        repo = path.stem.replace("+", "/", 1)
        for finding in json.loads(path.read_text() or "[]"):
            file = finding["filename"]
            file = file[2:] if file.startswith("./") else file
            key = (repo, file, finding.get("cell"), finding["location"]["row"], finding["code"])
            found.setdefault((repo, file, finding.get("cell"), finding["code"]), []).append(key[3])
            verdict = verdicts.get(key)
            counts[(finding["code"], verdict or "untriaged")] += 1
            per_repo[repo][verdict or "untriaged"] += 1
            if verdict is None:
                untriaged.append(key)
    codes = sorted({code for code, _ in counts})
    print("| code | findings | TP | FP | untriaged |\n|---|---|---|---|---|")
    for code in codes:
        tp, fp, new = counts[(code, "TP")], counts[(code, "FP")], counts[(code, "untriaged")]
        print(f"| {code} | {tp + fp + new} | {tp} | {fp} | {new} |")
    tp, fp = sum(n for (c, v), n in counts.items() if v == "TP"), sum(n for (c, v), n in counts.items() if v == "FP")
    print(f"\nprecision over triaged findings: {tp}/{tp + fp} = {tp / max(tp + fp, 1):.3f}; untriaged: {len(untriaged)}")
    hits: Counter[str] = Counter()
    misses: list[tuple] = []
    totals: Counter[str] = Counter()
    linted = {path.stem.replace("+", "/", 1) for path in results.glob("*.json")}
    for row in _rows("*instances.tsv"):
        code = row["pattern"]
        if code not in CORE or row["repo"] not in linted:
            continue  # (the instances of the repositories this run linted)
        totals[code] += 1
        path, cell, line = _place(row["path"], row["line"])
        rows = found.get((row["repo"], path, cell, code), [])
        hit = any(abs(r - line) <= TOLERANCE for r in rows)
        hits[code] += hit
        per_repo[row["repo"]]["instances"] += 1
        per_repo[row["repo"]]["found"] += hit
        if missed and not hit:
            misses.append((code, row["repo"], row["path"], row["line"], row.get("shape", "")))
    print("\n| code | instances | found |\n|---|---|---|")
    for code in CORE:
        if totals[code]:
            print(f"| {code} | {totals[code]} | {hits[code]} |")
    print(f"\ncore recall: {sum(hits.values())}/{sum(totals.values())} = {sum(hits.values()) / max(sum(totals.values()), 1):.3f}")
    if by_repo:
        print("\n| repository | findings | TP | FP | instances found |\n|---|---:|---:|---:|---:|")
        for repo, c in per_repo.items():
            print(f"| {repo} | {c['TP'] + c['FP'] + c['untriaged']} | {c['TP']} | {c['FP']} | {c['found']} of {c['instances']} |")
    for key in untriaged:
        print("untriaged:", *key, sep="\t")
    for miss in sorted(misses):
        print("missed:", *miss, sep="\t")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", type=Path, nargs="+", metavar="SNAPSHOT")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--score", type=Path, metavar="RESULTS")
    parser.add_argument("--missed", action="store_true", help="with --score: list the instances not found")
    parser.add_argument("--by-repo", action="store_true", help="with --score: findings and instances found per repository")
    args = parser.parse_args()
    if args.run:
        if args.out is None:
            parser.error("--run needs --out")
        run(args.run, args.out)
    if args.score:
        return score(args.score, args.missed, args.by_repo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
