"""The ecosystem check: torchlint over real repositories, as ruff has one.

    python tools/ecosystem.py CORPUS [--base REV] [--jobs N] [--out report.md]

CORPUS is a folder with one snapshot per repository, named ``owner+name`` (the repositories
of ``ecosystem/corpus.tsv``, fetched outside this repository). The report (Markdown) gives,
per repository, files, lines, time, internal errors and findings per rule; with ``--base``,
what the working tree's torchlint finds that REV's does not and the reverse, so every change
of a rule shows what it gained and lost on real code; and, from ``ecosystem/triage/*.tsv``,
each rule's precision on the findings reported now (TP / (TP + FP) over triaged findings),
with the true findings the working tree no longer reports.

    python tools/ecosystem.py --precision-only FINDINGS.json

recomputes the precision table (and the recall table) from a findings file written by ``--save``.

    python tools/ecosystem.py CORPUS --recall-only

lints only the files that hold the instances of ``ecosystem/recall`` (with this environment's
torchlint, every rule selected) and prints the recall table: seconds instead of a full run.

Recall comes from ``ecosystem/recall/*.tsv``: real instances of each core rule's bug, found by
an independent scanner (tools/recall_scan.py) and judged by hand (verdict ``REAL`` or ``NOT``).
An instance counts as found when torchlint reports its code in the same file (and notebook
cell) on its row or within ``RECALL_TOLERANCE`` rows of it: which row a rule anchors a finding
on (the step or the backward pass, the first or the second model call) is its own choice.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRIAGE = ROOT / "ecosystem" / "triage"
RECALL = ROOT / "ecosystem" / "recall"
RECALL_TOLERANCE = 2
CORPUS_LIST = ROOT / "ecosystem" / "corpus.tsv"
PRECISION_BAR, DEFAULT_SET_BAR = 0.9, 0.95
INVALID_FILE = "TL000"

Key = tuple[str, str, str, str]  # repo, path, line ("row" or "cell:row"), code


@dataclass
class RepoRun:
    repo: str
    files: int = 0
    lines: int = 0
    wall: float = 0.0
    cpu: float = 0.0
    exit_code: int = 0
    internal_errors: list[str] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)


def install(revision: str | None, target: Path) -> Path:
    """Install torchlint at ``revision`` (None: the working tree) into ``target``, with no
    dependencies (they come from this interpreter's environment)."""
    source = ROOT
    if revision is not None:
        source = target.parent / f"src-{revision}"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-f", str(source), revision],
                       check=True, capture_output=True)
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--target", str(target), str(source)], check=True, capture_output=True)
    finally:
        if revision is not None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(source)], capture_output=True)
    return target


def count_lines(repo_dir: Path) -> tuple[int, int]:
    files = lines = 0
    for path in repo_dir.rglob("*"):
        if path.suffix not in (".py", ".ipynb") or not path.is_file():
            continue
        files += 1
        try:
            if path.suffix == ".py":
                lines += path.read_bytes().count(b"\n")
            else:
                cells = json.loads(path.read_bytes()).get("cells", [])
                lines += sum(len(c.get("source", [])) for c in cells if c.get("cell_type") == "code")
        except (OSError, ValueError, AttributeError):
            pass
    return files, lines


def run_repo(install_dir: Path, repo_dir: Path, jobs: int) -> RepoRun:
    run = RepoRun(repo_dir.name.replace("+", "/", 1))
    run.files, run.lines = count_lines(repo_dir)
    env = dict(os.environ, PYTHONPATH=str(install_dir))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "torchlint", "check", "--no-cache", "--exit-zero", "--output-format", "json",
         "-j", str(jobs), "--select", "ALL", "."],
        cwd=repo_dir, env=env, capture_output=True, text=True,
    )
    run.wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run.exit_code = proc.returncode
    run.internal_errors = [line for line in proc.stderr.splitlines() if "internal error" in line or "Traceback" in line]
    if proc.returncode not in (0, 2) or (proc.returncode == 2 and not run.internal_errors):
        run.internal_errors.append(f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    try:
        run.findings = json.loads(proc.stdout or "[]")
    except ValueError:
        run.internal_errors.append("output is not JSON")
    if isinstance(run.findings, dict):  # a wrapper object around the findings
        run.findings = run.findings.get("findings", [])
    return run


def key(repo: str, finding: dict) -> Key:
    row = str(finding["location"]["row"])
    line = f"{finding['cell']}:{row}" if finding.get("cell") else row
    return repo, Path(finding["filename"]).as_posix().removeprefix("./"), line, finding["code"]


def read_triage() -> dict[Key, tuple[str, str]]:
    verdicts: dict[Key, tuple[str, str]] = {}
    for path in sorted(TRIAGE.glob("*.tsv")):
        with path.open(newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                verdict = row["verdict"].strip().upper()
                if verdict not in ("TP", "FP"):
                    raise SystemExit(f"{path}: verdict must be TP or FP, not {row['verdict']!r}")
                verdicts[(row["repo"], row["path"], row["line"], row["code"])] = (verdict, row["reason"])
    return verdicts


def opt_in_codes(install_dir: Path | None) -> set[str]:
    """The opt-in rules of the torchlint installed in ``install_dir`` (None: this environment's)."""
    env = dict(os.environ, PYTHONPATH=str(install_dir)) if install_dir else None
    code = (
        "try:\n    from torchlint.rules import all_rules\nexcept ImportError:\n    from torchlint.rule import all_rules\n"
        "print(*[r.code for r in all_rules() if r.opt_in])"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return set(proc.stdout.split())


def precision_table(found: set[Key], opt_in: set[str], repos: set[str] | None = None) -> str:
    """The precision per rule over the triaged findings; the true findings of the triage no
    longer reported, in the repositories linted (``repos``; None: those with a finding)."""
    triage = read_triage()
    repos = {k[0] for k in found} if repos is None else repos
    stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for k in found:
        if k[3] == INVALID_FILE:  # a file that does not parse: no rule's precision
            continue
        verdict = triage.get(k, ("untriaged", ""))[0]
        stats[k[3]][verdict] += 1
    lost = sorted(k for k, (v, _) in triage.items() if v == "TP" and k not in found and k[0] in repos)
    lines = [
        "| rule | default | findings | TP | FP | untriaged | precision | bar |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    default_tp = default_fp = 0
    for code in sorted(stats):
        s = stats[code]
        judged = s["TP"] + s["FP"]
        precision = s["TP"] / judged if judged else None
        default = code not in opt_in
        if default:
            default_tp, default_fp = default_tp + s["TP"], default_fp + s["FP"]
        bar = "-" if precision is None else ("ok" if precision >= PRECISION_BAR else "below")
        shown = "n/a" if precision is None else f"{precision:.2f}"
        lines.append(
            f"| {code} | {'yes' if default else 'opt-in'} | {sum(s.values())} | {s['TP']} | {s['FP']} "
            f"| {s['untriaged']} | {shown} | {bar} |"
        )
    total = default_tp + default_fp
    lines.append("")
    if total:
        lines.append(
            f"Default set: {default_tp} TP, {default_fp} FP, precision **{default_tp / total:.3f}** "
            f"(bar {DEFAULT_SET_BAR})."
        )
    lines.append(f"True findings in the triage that are no longer reported: {len(lost)}.")
    lines.extend(f"- {repo} `{path}:{line}` {code}" for repo, path, line, code in lost[:50])
    return "\n".join(lines)


def read_instances() -> list[tuple[Key, str]]:
    """The real instances of ``ecosystem/recall/*.tsv`` with the reason each was judged so."""
    instances = []
    for path in sorted(RECALL.glob("*.tsv")):
        with path.open(newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                verdict = row["verdict"].strip().upper()
                if verdict not in ("REAL", "NOT"):
                    raise SystemExit(f"{path}: verdict must be REAL or NOT, not {row['verdict']!r}")
                if verdict == "REAL":
                    instances.append(((row["repo"], row["path"], row["line"], row["code"]), row["reason"]))
    return instances


def _cell_and_row(line: str) -> tuple[str, int]:
    cell, _, row = line.rpartition(":")
    return cell, int(row)


def is_found(instance: Key, found: set[Key]) -> bool:
    repo, path, line, code = instance
    cell, row = _cell_and_row(line)
    for f_repo, f_path, f_line, f_code in found:
        if (f_repo, f_path, f_code) == (repo, path, code):
            f_cell, f_row = _cell_and_row(f_line)
            if f_cell == cell and abs(f_row - row) <= RECALL_TOLERANCE:
                return True
    return False


def recall_table(found: set[Key]) -> str:
    by_file = collections.defaultdict(set)
    for k in found:
        by_file[(k[0], k[1])].add(k)
    stats: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    missed = []
    for instance, reason in read_instances():
        hit = is_found(instance, by_file[(instance[0], instance[1])])
        stats[instance[3]]["found" if hit else "missed"] += 1
        if not hit:
            missed.append(instance)
    lines = ["| rule | real instances | found | recall |", "|---|---:|---:|---:|"]
    for code in sorted(stats):
        s = stats[code]
        lines.append(f"| {code} | {s['found'] + s['missed']} | {s['found']} | {s['found'] / (s['found'] + s['missed']):.2f} |")
    total_found = sum(s["found"] for s in stats.values())
    total = total_found + len(missed)
    if total:
        lines += ["", f"All core rules: {total_found} of {total} real instances found, recall **{total_found / total:.2f}**."]
    lines.append(f"Missed: {len(missed)}.")
    lines.extend(f"- {repo} `{path}:{line}` {code}" for repo, path, line, code in sorted(missed)[:100])
    return "\n".join(lines)


def lint_instance_files(corpus: Path) -> set[Key]:
    """What this environment's torchlint finds (every rule) in the files of ecosystem/recall."""
    files = collections.defaultdict(set)
    for (repo, path, _, _), _ in read_instances():
        files[repo].add(path)
    found = set()
    for repo, paths in sorted(files.items()):
        proc = subprocess.run(
            [sys.executable, "-m", "torchlint", "check", "--no-cache", "--exit-zero", "--output-format", "json",
             "-j", "1", "--select", "ALL", *sorted(paths)],
            cwd=corpus / repo.replace("/", "+", 1), capture_output=True, text=True,
        )
        found.update(key(repo, f) for f in json.loads(proc.stdout or "[]"))
    return found


def report(head: list[RepoRun], base: list[RepoRun] | None, base_rev: str | None, opt_in: set[str]) -> str:
    out = ["# torchlint ecosystem report", ""]
    total_lines = sum(r.lines for r in head)
    total_wall = sum(r.wall for r in head)
    total_cpu = sum(r.cpu for r in head)
    errors = [(r.repo, e) for r in head for e in r.internal_errors]
    codes = sorted({f["code"] for r in head for f in r.findings})
    out.append(
        f"{len(head)} repositories, {sum(r.files for r in head)} files, {total_lines} lines; "
        f"{total_wall:.1f} s wall, {total_cpu:.1f} CPU-s ({total_lines / max(total_cpu, 1e-9):.0f} lines per CPU-second); "
        f"{sum(len(r.findings) for r in head)} findings; internal errors: {len(errors)}."
    )
    out += ["", "## Internal errors", ""]
    out += [f"- {repo}: {error}" for repo, error in errors] or ["None."]
    out += ["", "## Per repository", "", "| repository | files | lines | wall s | CPU s | " + " | ".join(codes) + " |",
            "|---|---:|---:|---:|---:|" + "---:|" * len(codes)]
    for r in head:
        per = collections.Counter(f["code"] for f in r.findings)
        out.append(f"| {r.repo} | {r.files} | {r.lines} | {r.wall:.1f} | {r.cpu:.1f} | "
                   + " | ".join(str(per.get(c, "")) for c in codes) + " |")
    head_keys = {key(r.repo, f) for r in head for f in r.findings}
    if base is not None:
        base_keys = {key(r.repo, f) for r in base for f in r.findings}
        added, removed = sorted(head_keys - base_keys), sorted(base_keys - head_keys)
        out += ["", f"## Difference from {base_rev}", "",
                f"{len(added)} findings added, {len(removed)} removed.", ""]
        by_rule = collections.Counter(k[3] for k in added), collections.Counter(k[3] for k in removed)
        out += ["| rule | added | removed |", "|---|---:|---:|"]
        for code in sorted(set(by_rule[0]) | set(by_rule[1])):
            out.append(f"| {code} | +{by_rule[0][code]} | -{by_rule[1][code]} |")
        for title, keys in (("Added", added), ("Removed", removed)):
            if keys:
                out += ["", f"<details><summary>{title}</summary>", ""]
                out += [f"- {repo} `{path}:{line}` {code}" for repo, path, line, code in keys[:300]]
                out += ["", "</details>"]
    out += ["", "## Precision (from ecosystem/triage)", "", precision_table(head_keys, opt_in, {r.repo for r in head}), ""]
    out += ["", "## Recall (from ecosystem/recall)", "", recall_table(head_keys), ""]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=Path, nargs="?")
    parser.add_argument("--base", help="a git revision to compare with (its findings are the base)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--out", type=Path, help="write the Markdown report here (default: stdout)")
    parser.add_argument("--save", type=Path, help="also write the working tree's findings as JSON")
    parser.add_argument("--precision-only", type=Path, metavar="FINDINGS", help="precision table from a --save file")
    parser.add_argument("--recall-only", action="store_true", help="lint only the files of ecosystem/recall; print recall")
    args = parser.parse_args(argv)
    if args.recall_only:
        if args.corpus is None or not args.corpus.is_dir():
            parser.error("give the folder of repository snapshots")
        print(recall_table(lint_instance_files(args.corpus)))
        return 0
    if args.precision_only:
        data = json.loads(args.precision_only.read_text())
        found = {key(r["repo"], f) for r in data for f in r["findings"]}
        print(precision_table(found, opt_in_codes(None)))
        print()
        print(recall_table(found))
        return 0
    if args.corpus is None or not args.corpus.is_dir():
        parser.error("give the folder of repository snapshots")
    listed = {}
    with CORPUS_LIST.open(newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            listed[row["repo"].replace("/", "+", 1)] = row["commit"]
    repos = sorted(p for p in args.corpus.iterdir() if p.is_dir() and p.name in listed)
    missing = sorted(set(listed) - {p.name for p in repos})
    if missing:
        print(f"not in the corpus folder (skipped): {', '.join(missing)}", file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="torchlint-ecosystem-"))
    try:
        head_install = install(None, scratch / "head")
        opt_in = opt_in_codes(head_install)
        base_install = install(args.base, scratch / "base") if args.base else None
        head, base = [], [] if base_install else None
        for repo in repos:
            print(f"{repo.name} ...", file=sys.stderr, flush=True)
            head.append(run_repo(head_install, repo, args.jobs))
            if base_install is not None:
                base.append(run_repo(base_install, repo, args.jobs))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text = report(head, base, args.base, opt_in)
    if args.save:
        args.save.write_text(json.dumps([{"repo": r.repo, "findings": r.findings} for r in head]))
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    return 1 if any(r.internal_errors for r in head) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
