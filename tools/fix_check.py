"""The fixes on real code: torchlint's fixes applied to copies of corpora, then checked, and run.

    python tools/fix_check.py CORPUS [CORPUS ...] [--mode safe|unsafe|both] [--jobs N]
        [--keep DIR] [--report FILE.md|FILE.tsv] [--no-run] [--run-timeout S] [--max-steps N]
        [--max-runs N]

Each CORPUS is a folder of repository snapshots (as for tools/ecosystem.py); it is never
touched: everything happens on scratch copies (symlinks and .git left out). For each mode
(`safe`: `--fix`; `unsafe`: `--fix --unsafe-fixes`; `both`, the default, does the two on
separate copies) the copy is fixed with `torchlint check --select ALL` (this environment's
torchlint), and every file the fixes changed is checked:

- it still parses, if it parsed before (a notebook: its code cells in order, each magic or
  shell line read as `pass` at its indentation, its continued lines as blank ones);
- pyflakes finds no new undefined name and no new unused import (before against after;
  skipped when pyflakes is not installed): a fix that uses `torch` or `device` must find it
  bound, and a fix that replaces an import must leave none unused;
- a second run of the same command changes nothing (the fixes are idempotent).

Then the proof by running: each changed script (a `.py` file with a `__main__` block or
top-level statements that do something) is first run as it was, in a pristine copy, under
`torchlint verify --device cpu --max-steps N --output-format json` with the network cut where
`unshare -rn` works (and the usual offline switches of the hubs set in any case), within a
timeout. A script whose `runs` check does not PASS there is "not runnable here" and skipped
(missing packages, data, arguments, a GPU). A runnable one is run again from the fixed copy the
same way: a `runs` or `learns` check that now FAILs is a broken fix. The working folder of a
run is the script's own.

Every problem is then traced to its rule: the repository is fixed again, from a pristine copy,
with that one rule selected, and the file checked the same way; a rule alone reproducing the
problem is the broken fix ("together" when none alone does).

The report lists every fix applied (mode, file, rule, line, applicability) with its verdict:
`ok`, `ok, ran` (the fixed script ran as the original did), or the problem. `--report FILE`
writes it as Markdown (`.md`) or TSV (any other suffix); the summary is printed either way.
Exits 1 when a fix broke something.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

SUFFIXES = (".py", ".ipynb")
MODES = {"safe": ["--fix"], "unsafe": ["--fix", "--unsafe-fixes"]}
APPLIES = {"safe": {"safe"}, "unsafe": {"safe", "unsafe"}}
# What a run of a script must not newly fail.
RUN_CHECKS = ("runs", "learns")
# Offline switches of the model and data hubs, and proxies that lead nowhere: a script that
# would download is not runnable here (used in addition to `unshare -rn`, where it works).
OFFLINE = {
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled",
    "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
    "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": "",
    "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1",
}
# The address space a run may take (bytes): a script that loads a large model is stopped
# before it takes the memory of the machine.
RUN_MEMORY = 6 * 1024**3
NOT_SCRIPTS = frozenset({"setup.py", "conftest.py", "__init__.py"})


# --- reading files ----------------------------------------------------------------------------


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


def flakes(source: str) -> set[str] | None:
    """pyflakes' undefined-name and unused-import messages for the source, without their
    positions (None when pyflakes is not installed)."""
    try:
        from pyflakes import api, messages
        from pyflakes.reporter import Reporter
    except ImportError:
        return None
    kinds = {messages.UndefinedName: "undefined", messages.UndefinedLocal: "undefined", messages.UnusedImport: "unused"}

    class Collect(Reporter):
        def __init__(self) -> None:
            self.found: set[str] = set()

        def unexpectedError(self, filename, message) -> None:
            pass

        def syntaxError(self, filename, message, lineno, offset, text) -> None:
            pass

        def flake(self, message) -> None:
            kind = kinds.get(type(message))
            if kind is not None:
                self.found.add(f"{kind}: {message.message % message.message_args}")

    reporter = Collect()
    try:
        api.check(source, "<file>", reporter)
    except (RecursionError, ValueError):
        return set()
    return reporter.found


def undefined_names(source: str) -> set[str] | None:
    """pyflakes' undefined-name messages (None when pyflakes is not installed)."""
    found = flakes(source)
    return None if found is None else {m.split(": ", 1)[1] for m in found if m.startswith("undefined: ")}


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
    old, new = flakes(before), flakes(fixed)
    if old is None:
        return []
    problems = []
    for message in sorted(new - old):
        kind, text = message.split(": ", 1)
        problems.append(f"undefined after the fixes: {text}" if kind == "undefined" else f"unused after the fixes: {text}")
    return problems


def _parse_error(source: str) -> SyntaxError | ValueError | None:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError) as error:
        return error if not isinstance(error, RecursionError) else ValueError("too deep")
    return None


def is_script(source: str, name: str) -> bool:
    """Whether a file does something when run: a `__main__` block, or a top-level statement
    other than imports, definitions, assignments and docstrings (a call, a loop, a `with`)."""
    if name in NOT_SCRIPTS or name.startswith("test_") or name.endswith("_test.py"):
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return False
    for statement in tree.body:
        if isinstance(statement, ast.If) and "__main__" in ast.unparse(statement.test):
            return True
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            return True
        if isinstance(statement, (ast.For, ast.While, ast.With)):
            return True
    return False


# --- copies and fixing --------------------------------------------------------------------------


def files_of(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in SUFFIXES and p.is_file() and not p.is_symlink())


def digests(folder: Path) -> dict[Path, str]:
    return {p.relative_to(folder): hashlib.sha256(p.read_bytes()).hexdigest() for p in files_of(folder)}


def copy_tree(source: Path, target: Path) -> None:
    """A copy of ``source`` without symlinks and ``.git``."""

    def ignored(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n == ".git" or os.path.islink(os.path.join(folder, n))}

    shutil.copytree(source, target, ignore=ignored, dirs_exist_ok=True)


def lint(folder: Path, jobs: int, options: list[str], select: str = "ALL",
         paths: list[str] | None = None) -> tuple[list[dict], subprocess.CompletedProcess]:
    """The findings left after running torchlint with ``options`` in ``folder`` (on ``paths``
    in it, by default all of it)."""
    command = [sys.executable, "-m", "torchlint", "check", *options, "--select", select, "--no-cache",
               "--exit-zero", "--output-format", "json", "-j", str(jobs), *(paths or ["."])]
    run = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    try:
        findings = json.loads(run.stdout) if run.stdout.strip() else []
    except json.JSONDecodeError:
        findings = []
    return findings, run


def _failed(run: subprocess.CompletedProcess) -> bool:
    return run.returncode not in (0, 2) or "internal error" in run.stderr or "Traceback" in run.stderr


# --- running scripts ----------------------------------------------------------------------------


def _isolation() -> list[str]:
    """``unshare -rn`` where it works (no network for the runs), else nothing."""
    if shutil.which("unshare") is None:
        return []
    try:
        ok = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return ["unshare", "-rn"] if ok else []


ISOLATION: list[str] | None = None


# The key of a run's checks under which why it did not run is kept (the `runs` check's message).
WHY = "why"


def verify(script: Path, timeout: float, max_steps: int) -> dict[str, str]:
    """The status of each check of a run of ``script`` (``runs`` FAIL when the run gave no
    report), run from the script's folder; ``WHY``: why it did not run, when it did not."""
    global ISOLATION
    if ISOLATION is None:
        ISOLATION = _isolation()
    command = [*ISOLATION, sys.executable, "-m", "torchlint", "verify", "--device", "cpu", "--max-steps", str(max_steps),
               "--timeout", str(timeout), "--output-format", "json", script.name]
    env = {**os.environ, **OFFLINE, "PYTHONPATH": os.pathsep.join([*map(str, import_roots(script)), os.environ.get("PYTHONPATH", "")])}
    try:
        run = subprocess.run(command, cwd=script.parent, capture_output=True, text=True, timeout=timeout + 30,
                             env=env, stdin=subprocess.DEVNULL, preexec_fn=_limit_memory)
        report = json.loads(run.stdout[run.stdout.index("{"):]) if "{" in run.stdout else {}
    except subprocess.TimeoutExpired:
        return {"runs": "FAIL", WHY: f"no report within {timeout + 30:.0f} s"}
    except (json.JSONDecodeError, ValueError):
        report = {}
    checks = {c["check"]: c["status"] for c in report.get("checks", [])}
    if not checks:
        last = (run.stderr or run.stdout or "").strip().splitlines()
        return {"runs": "FAIL", WHY: f"no report ({last[-1][:200] if last else f'exit {run.returncode}'})"}
    runs = next((c for c in report["checks"] if c["check"] == "runs"), None)
    if runs is not None and runs["status"] != "PASS":
        checks[WHY] = " ".join(str(runs.get("message", "")).split())[:200]
    return checks


def import_roots(script: Path) -> list[Path]:
    """Where a script's imports are looked for: its folder, and the folder that holds the
    package it is part of (``model/msls/run.py`` in a package ``msls`` imports
    ``msls.utils``: ``model/`` is on the path, as when the project runs it)."""
    roots = [script.parent]
    package = script.parent
    while (package / "__init__.py").is_file() and package.parent != package:
        package = package.parent
    if package != script.parent:
        roots.append(package)
    return roots


def _limit_memory() -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (RUN_MEMORY, RUN_MEMORY))
    except (ImportError, ValueError, OSError):
        pass


def broken_by_run(original: dict[str, str], fixed: dict[str, str]) -> list[str]:
    """The checks of ``RUN_CHECKS`` that fail after the fixes and did not before."""
    return [f"`{c}` FAILs after the fixes" for c in RUN_CHECKS if fixed.get(c) == "FAIL" and original.get(c) != "FAIL"]


def runnable(original: dict[str, str]) -> bool:
    return original.get("runs") == "PASS"


# --- the check ----------------------------------------------------------------------------------


@dataclass
class Applied:
    mode: str
    file: str  # relative to the scratch root: corpus/owner+repo/path
    code: str
    line: int
    applicability: str
    verdict: str = "ok"


@dataclass
class Result:
    applied: list[Applied] = field(default_factory=list)
    changed: dict[str, list[str]] = field(default_factory=dict)  # mode -> changed files
    problems: list[str] = field(default_factory=list)  # (mode) file: problem (rule)
    runs: dict[str, str] = field(default_factory=dict)  # file -> what running it showed
    broken: list[tuple[str, str, str, int, str]] = field(default_factory=list)  # mode, file, rule, line, reason


def applied_fixes(mode: str, before: list[dict], after: list[dict], changed: set[str]) -> list[Applied]:
    """The fixes applied: findings with a fix of the mode's applicability in a changed file,
    less those still found after the fixes (matched by file, rule and message)."""
    left = Counter((f["filename"], f["code"], f["message"]) for f in after)
    applied = []
    for finding in sorted(before, key=lambda f: (f["filename"], f["location"]["row"], f["code"])):
        fix = finding.get("fix")
        if not fix or fix.get("applicability") not in APPLIES[mode] or finding["filename"] not in changed:
            continue
        key = (finding["filename"], finding["code"], finding["message"])
        if left[key]:
            left[key] -= 1
            continue
        applied.append(Applied(mode, finding["filename"], finding["code"], finding["location"]["row"], fix["applicability"]))
    return applied


def _repo_of(relative: str) -> str:
    parts = Path(relative).parts
    return str(Path(*parts[:2])) if len(parts) > 2 else parts[0]


def check(corpora: list[Path], scratch: Path, *, modes: tuple[str, ...] = ("safe", "unsafe"), jobs: int = 1,
          run: bool = True, run_timeout: float = 60.0, max_steps: int = 3, max_runs: int | None = None,
          log=lambda message: None) -> Result:
    """Fix copies of the corpora in ``scratch`` and check every changed file (see the module's
    docs)."""
    result = Result()
    pristine = scratch / "original"
    for corpus in corpora:
        copy_tree(corpus, pristine / corpus.name)
    before, lint_run = lint(pristine, jobs, [])
    if _failed(lint_run):
        result.problems.append(f"the linting run failed (exit {lint_run.returncode}): {lint_run.stderr.strip()[-500:]}")
    originals = digests(pristine)
    for mode in modes:
        log(f"{mode}: fixing")
        work = scratch / mode
        copy_tree(pristine, work)
        after, fix_run = lint(work, jobs, MODES[mode])
        if _failed(fix_run):
            result.problems.append(f"({mode}) the fixing run failed (exit {fix_run.returncode}): {fix_run.stderr.strip()[-500:]}")
        fixed = digests(work)
        changed = sorted(str(p) for p, digest in fixed.items() if originals.get(p) != digest)
        result.changed[mode] = changed
        applied = applied_fixes(mode, before, after, set(changed))
        result.applied += applied
        suspects: dict[str, list[str]] = {}
        for relative in changed:
            problems = problems_of(python_of(pristine / relative), work / relative)
            if problems:
                suspects[relative] = problems
        # The second run: on the repositories the first one changed (whole, for their
        # cross-file facts); the others it left as they were.
        repos = sorted({_repo_of(relative) for relative in changed})
        _, again = lint(work, jobs, MODES[mode], paths=repos) if repos else (None, subprocess.CompletedProcess([], 0, "", ""))
        for p, digest in digests(work).items():
            if fixed.get(p) != digest:
                suspects.setdefault(str(p), []).append("a second run changed it again")
        if _failed(again):
            result.problems.append(f"({mode}) the second run failed (exit {again.returncode}): {again.stderr.strip()[-500:]}")
        _trace(mode, suspects, applied, pristine, scratch, jobs, result, static=True)
    if run:
        _run_scripts(corpora, modes, scratch, pristine, jobs, run_timeout, max_steps, max_runs, result, log)
    return result


def _run_scripts(corpora, modes, scratch, pristine, jobs, run_timeout, max_steps, max_runs, result, log) -> None:
    """Run each changed script as it was and, where it runs, as fixed (see the module's docs)."""
    changed = sorted({f for mode in modes for f in result.changed[mode]})
    scripts = [f for f in changed if f.endswith(".py") and is_script(python_of(pristine / f), Path(f).name)]
    if max_runs is not None:
        scripts = scripts[:max_runs]
    # The runs write where they run: the pristine copy's own copy for the originals.
    ran = scratch / "ran-original"
    copy_tree(pristine, ran)
    log(f"running {len(scripts)} changed scripts as they were")
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        originals = dict(zip(scripts, pool.map(lambda f: verify(ran / f, run_timeout, max_steps), scripts)))
    applied = {}
    for fix in result.applied:
        applied.setdefault((fix.mode, fix.file), []).append(fix)
    for script, checks in originals.items():
        if not runnable(checks):
            result.runs[script] = f"not runnable here: {checks.get(WHY) or 'runs ' + checks.get('runs', '?')}"
            continue
        verdicts = []
        for mode in modes:
            if script not in result.changed[mode]:
                continue
            fixed = verify(scratch / mode / script, run_timeout, max_steps)
            broken = broken_by_run(checks, fixed)
            verdicts.append(f"{mode}: " + ("; ".join(broken) if broken else "ran as before"))
            if broken:
                _trace(mode, {script: broken}, result.applied, pristine, scratch, jobs, result, static=False,
                       original=checks, run_timeout=run_timeout, max_steps=max_steps)
            else:
                for fix in applied.get((mode, script), []):
                    if fix.verdict == "ok":
                        fix.verdict = "ok, ran"
        result.runs[script] = "; ".join(verdicts)
        log(f"{script}: {result.runs[script]}")


def _trace(mode, suspects, applied, pristine, scratch, jobs, result, *, static, original=None, run_timeout=60.0,
           max_steps=3) -> None:
    """For each file with problems, the rule whose fixes alone reproduce them."""
    for relative, problems in sorted(suspects.items()):
        fixes = [f for f in applied if f.mode == mode and f.file == relative]
        culprits = []
        for code in sorted({f.code for f in fixes}):
            alone = scratch / "trace" / mode / code
            if alone.exists():
                shutil.rmtree(alone)
            repo = _repo_of(relative)
            copy_tree(pristine / repo, alone / repo)
            lint(alone, jobs, MODES[mode], select=code)
            if static:
                again = problems_of(python_of(pristine / relative), alone / relative)
                reproduced = bool(again)
            else:
                reproduced = bool(broken_by_run(original, verify(alone / relative, run_timeout, max_steps)))
            if reproduced:
                culprits.append(code)
            shutil.rmtree(alone, ignore_errors=True)
        blamed = culprits or ["together"]
        for problem in problems:
            result.problems.append(f"({mode}) {relative}: {problem} ({', '.join(blamed)})")
        for fix in fixes:
            if fix.code in culprits or not culprits:
                fix.verdict = "; ".join(problems)
                result.broken.append((mode, relative, fix.code, fix.line, "; ".join(problems)))
        if not fixes:  # a change no reported fix accounts for (a fix of a finding that moved)
            result.broken.append((mode, relative, "?", 0, "; ".join(problems)))


# --- reports ------------------------------------------------------------------------------------


def summary(result: Result, modes: tuple[str, ...]) -> list[str]:
    lines = []
    for mode in modes:
        fixes = [f for f in result.applied if f.mode == mode]
        per_rule = Counter((f.code, f.applicability) for f in fixes)
        rules = ", ".join(f"{code} {applicability} {n}" for (code, applicability), n in sorted(per_rule.items()))
        broken = sum(1 for b in result.broken if b[0] == mode)
        lines.append(f"{mode}: {len(result.changed.get(mode, []))} files changed, {len(fixes)} fixes applied "
                     f"({rules or 'none'}); {broken} broken")
    runs = Counter("not runnable here" if v.startswith("not runnable here") else ("broken" if "FAIL" in v else "ran")
                   for v in result.runs.values())
    if result.runs:
        lines.append(f"runs: {len(result.runs)} changed scripts tried: {runs['ran']} ran before and after the fixes, "
                     f"{runs['broken']} broken by them, {runs['not runnable here']} not runnable here")
    return lines


def write_report(path: Path, result: Result, modes: tuple[str, ...]) -> None:
    if path.suffix == ".md":
        lines = ["# Fix check", "", *[f"- {line}" for line in summary(result, modes)], "", "## Problems", ""]
        lines += [f"- {p}" for p in result.problems] or ["None."]
        lines += ["", "## Scripts run", "", "| script | verdict |", "| --- | --- |"]
        lines += [f"| {s} | {v} |" for s, v in sorted(result.runs.items())]
        lines += ["", "## Fixes applied", "", "| mode | file | rule | line | applicability | verdict |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {f.mode} | {f.file} | {f.code} | {f.line} | {f.applicability} | {f.verdict} |" for f in result.applied]
    else:
        lines = ["mode\tfile\trule\tline\tapplicability\tverdict"]
        lines += [f"{f.mode}\t{f.file}\t{f.code}\t{f.line}\t{f.applicability}\t{f.verdict}" for f in result.applied]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, nargs="+")
    parser.add_argument("--mode", choices=("safe", "unsafe", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="leave the copies in this (new) folder")
    parser.add_argument("--report", type=Path, help="write every fix and its verdict here (.md: Markdown, else TSV)")
    parser.add_argument("--no-run", dest="run", action="store_false", help="do not run the changed scripts")
    parser.add_argument("--run-timeout", type=float, default=60.0, help="seconds per run of a script")
    parser.add_argument("--max-steps", type=int, default=3)
    parser.add_argument("--max-runs", type=int, help="run at most this many changed scripts")
    args = parser.parse_args(argv)
    modes = ("safe", "unsafe") if args.mode == "both" else (args.mode,)
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="torchlint-fix-check-"))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        result = check(args.corpus, scratch, modes=modes, jobs=args.jobs, run=args.run, run_timeout=args.run_timeout,
                       max_steps=args.max_steps, max_runs=args.max_runs, log=lambda m: print(m, file=sys.stderr, flush=True))
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.report:
        write_report(args.report, result, modes)
    pyflakes = "" if flakes("") is not None else " (pyflakes not installed: names not checked)"
    print(*summary(result, modes), sep="\n")
    print(f"{len(result.problems)} problems{pyflakes}")
    print(*result.problems, sep="\n")
    return 1 if result.problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
