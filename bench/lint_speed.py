"""How fast torchlint lints, against TorchFix on the same files in the same run.

Both tools run end to end through their command lines, single process, on one corpus of real
PyTorch code: the repository's fixtures plus the Python sources of an installed torch (found
without importing it) or the folders given with ``--corpus``. Only files that contain the
word ``torch`` are used, because TorchFix skips the others without parsing them: so both
tools parse exactly the same files. The reported ratio is ``torchfix_time / torchlint_time``
(above 1 means torchlint is faster).

``--profile`` instead runs torchlint in this process under cProfile and splits the time
between parsing, LibCST metadata, the semantic model's collecting pass and the rules.

Both tools must be installed with the same LibCST; bench/README.md says how.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
FIXTURE_DIRS = ("fixtures/rules", "fixtures/scripts", "fixtures/example")
# The parts of torch that look most like training code (modules, optimizers, data loading).
TORCH_SUBPACKAGES = ("nn", "optim", "utils/data")
# TorchFix reads each file for this marker and skips the file when it is absent.
TORCHFIX_MARKER = "torch"

TORCHLINT_FINDING = re.compile(r":\d+:\d+: TL\d{3}\b")
TORCHFIX_FINDING = re.compile(r":\d+:\d+: TOR\d{3}\b")


class BenchError(Exception):
    """A problem with the benchmark's set-up, printed without a traceback."""


# --- corpus ------------------------------------------------------------------------------


@dataclass
class Corpus:
    files: list[Path]
    sources: list[str]  # where the files came from, for the report
    skipped_without_marker: int

    @property
    def lines(self) -> int:
        return sum(_read(f).count(b"\n") for f in self.files)

    @property
    def bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def _read(path: Path) -> bytes:
    return path.read_bytes()


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if p.is_file())


def installed_torch_folders() -> list[Path]:
    """torch's training-like subpackages, located without importing torch."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(list(spec.submodule_search_locations)[0])
    return [root / sub for sub in TORCH_SUBPACKAGES if (root / sub).is_dir()]


def build_corpus(extra: list[Path] | None, limit: int | None) -> Corpus:
    folders = [REPO / d for d in FIXTURE_DIRS if (REPO / d).is_dir()]
    if extra:
        for folder in extra:
            if not folder.is_dir():
                raise BenchError(f"--corpus {folder}: not a folder")
        folders += extra
    else:
        folders += installed_torch_folders()
    candidates = [f for folder in folders for f in _python_files(folder)]
    files = [f for f in candidates if TORCHFIX_MARKER.encode() in _read(f)]
    if not files:
        raise BenchError("the corpus is empty: no .py file containing 'torch' in " + ", ".join(map(str, folders)))
    skipped = len(candidates) - len(files)
    if limit is not None and limit < len(files):
        # Evenly spaced, so that a small corpus still samples every folder.
        step = len(files) / limit
        files = [files[int(i * step)] for i in range(limit)]
    return Corpus(files, [str(f) for f in folders], skipped_without_marker=skipped)


# --- timing the command lines ------------------------------------------------------------


@dataclass
class Tool:
    name: str
    executable: Path
    finding: re.Pattern

    def command(self, paths: list[Path]) -> list[str]:
        if self.name == "torchlint":
            return [str(self.executable), "check", "--no-cache", "--exit-zero", "-j", "1", "--output-format", "concise", *map(str, paths)]
        # TorchFix has no separate check mode: without --fix it reports its findings (and a
        # diff of its fixes). -j 1 makes LibCST's codemod runner work in this one process.
        return [str(self.executable), "-j", "1", *map(str, paths)]

    @property
    def python(self) -> Path:
        return self.executable.parent / "python"


@dataclass
class Run:
    seconds: float
    returncode: int
    findings: int


def find_tool(name: str, given: str | None) -> Tool:
    pattern = TORCHLINT_FINDING if name == "torchlint" else TORCHFIX_FINDING
    if given:
        path = Path(given)
    else:
        beside = Path(sys.executable).parent / name  # the same virtual environment
        path = beside if beside.exists() else Path(shutil.which(name) or name)
    if not path.exists():
        raise BenchError(
            f"cannot find the `{name}` command (looked beside {sys.executable} and on PATH); "
            "build the benchmark environment as bench/README.md says, or pass --" + name
        )
    return Tool(name, path, pattern)


def time_command(tool: Tool, paths: list[Path], cwd: Path) -> Run:
    start = time.perf_counter()
    done = subprocess.run(tool.command(paths), cwd=cwd, capture_output=True, text=True, errors="replace")
    seconds = time.perf_counter() - start
    findings = sum(1 for line in done.stdout.splitlines() if tool.finding.search(line))
    return Run(seconds, done.returncode, findings)


def best_of(runs: list[Run]) -> float:
    return min(r.seconds for r in runs)


def package_versions(tool: Tool, packages: tuple[str, ...]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
    )
    done = subprocess.run([str(tool.python), "-c", code, *packages], capture_output=True, text=True)
    return json.loads(done.stdout) if done.returncode == 0 else {p: "unknown" for p in packages}


def torchlint_rules(tool: Tool) -> list[str]:
    """The rules of the installed torchlint that the benchmark runs (others may be added
    to the working tree while it runs)."""
    code = "from torchlint.rule import all_rules; print(' '.join(r.code for r in all_rules()))"
    done = subprocess.run([str(tool.python), "-c", code], capture_output=True, text=True)
    return done.stdout.split() if done.returncode == 0 else []


def compare(corpus: Corpus, repeat: int, torchlint: Tool, torchfix: Tool) -> dict:
    tools = (torchlint, torchfix)
    with tempfile.TemporaryDirectory(prefix="lint-speed-") as scratch:
        cwd = Path(scratch)
        empty = cwd / "empty.py"
        empty.write_bytes(b"")
        for tool in tools:  # warm the file cache and any byte-compilation
            time_command(tool, [empty], cwd)
        startup: dict[str, list[Run]] = {t.name: [] for t in tools}
        corpus_runs: dict[str, list[Run]] = {t.name: [] for t in tools}
        # Interleaved, so that load from other processes falls on both tools alike.
        for repetition in range(1, repeat + 1):
            for tool in tools:
                startup[tool.name].append(time_command(tool, [empty], cwd))
                corpus_runs[tool.name].append(time_command(tool, corpus.files, cwd))
                progress(f"repetition {repetition}/{repeat}: {tool.name} {corpus_runs[tool.name][-1].seconds:.2f}s")

    lines = corpus.lines
    results = {}
    for tool in tools:
        total, start = best_of(corpus_runs[tool.name]), best_of(startup[tool.name])
        net = max(total - start, 1e-9)
        results[tool.name] = {
            "executable": str(tool.executable),
            "versions": package_versions(tool, (tool.name, "libcst")),
            "startup_s": round(start, 4),
            "corpus_s": round(total, 4),
            "corpus_runs_s": [round(r.seconds, 4) for r in corpus_runs[tool.name]],
            "ms_per_file": round(1000 * net / len(corpus.files), 2),
            "files_per_s": round(len(corpus.files) / net, 1),
            "lines_per_s": round(lines / net),
            "findings": corpus_runs[tool.name][-1].findings,
            "returncodes": sorted({r.returncode for r in corpus_runs[tool.name]}),
        }
    tl, tf = results["torchlint"], results["torchfix"]
    return {
        "corpus": {"files": len(corpus.files), "lines": lines, "bytes": corpus.bytes, "sources": corpus.sources,
                   "skipped_without_marker": corpus.skipped_without_marker},
        "repeat": repeat,
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "torchlint_rules": torchlint_rules(torchlint),
        "tools": results,
        "ratio": round(tf["corpus_s"] / tl["corpus_s"], 3),
        "ratio_without_startup": round((tf["corpus_s"] - tf["startup_s"]) / max(tl["corpus_s"] - tl["startup_s"], 1e-9), 3),
    }


def print_comparison(result: dict) -> None:
    corpus = result["corpus"]
    print(f"corpus: {corpus['files']} files, {corpus['lines']} lines, {corpus['bytes'] // 1024} KiB "
          f"(best of {result['repeat']}, single process, load average {result['load_average'][0]})")
    print(f"torchlint rules: {' '.join(result['torchlint_rules']) or 'unknown'}")
    header = f"{'tool':<10} {'version':<8} {'libcst':<7} {'start-up':>9} {'corpus':>9} {'ms/file':>8} {'files/s':>8} {'lines/s':>8} {'findings':>8}"
    print(header)
    print("-" * len(header))
    for name, r in result["tools"].items():
        print(f"{name:<10} {r['versions'].get(name, '?'):<8} {r['versions'].get('libcst', '?'):<7} "
              f"{r['startup_s']:>8.3f}s {r['corpus_s']:>8.2f}s {r['ms_per_file']:>8.1f} {r['files_per_s']:>8.1f} "
              f"{r['lines_per_s']:>8} {r['findings']:>8}")
    print(f"\nratio torchfix/torchlint: {result['ratio']:.2f} end to end, "
          f"{result['ratio_without_startup']:.2f} without start-up (>1: torchlint is faster)")
    libcst_versions = {r["versions"].get("libcst") for r in result["tools"].values()}
    if len(libcst_versions) > 1:
        print(f"note: the tools ran on different LibCST versions ({', '.join(sorted(map(str, libcst_versions)))}); "
              "see bench/README.md for one environment holding both", file=sys.stderr)
    for name, r in result["tools"].items():
        if r["returncodes"] != [0]:
            print(f"note: {name} exited with {r['returncodes']}", file=sys.stderr)


# --- profiling torchlint in this process ---------------------------------------------------


def _timed(timings: dict[str, float], label: str, action: Callable):
    start = time.perf_counter()
    value = action()
    timings[label] = timings.get(label, 0.0) + time.perf_counter() - start
    return value


def stage_times(sources: list[bytes], rules) -> dict[str, float]:
    """Each stage of linting a file, timed without a profiler, in the engine's order.

    Metadata providers are resolved one at a time, as the semantic model does, so each has
    its own time (ScopeProvider's ExpressionContextProvider dependency is counted apart).
    QualifiedNameProvider computes names lazily: what rules and the collecting pass ask for
    is counted in their stages here, and in the profile's ``LazyValue`` entry."""
    import ast
    import warnings

    import libcst as cst
    from libcst.metadata import ExpressionContextProvider, MetadataWrapper

    from torchlint.engine import lint_module_source, parse
    from torchlint.rule import RuleContext
    from torchlint.semantic import SemanticModel

    timings: dict[str, float] = {}
    for source in sources:
        try:
            parse(source)
        except Exception:  # a file the engine reports as TL000 counts in the total only
            _timed(timings, "total (lint_module_source)", lambda: lint_module_source(source, rules))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _timed(timings, "parse: compile() pre-check", lambda: compile(source, "<file>", "exec", ast.PyCF_ONLY_AST))
        module = _timed(timings, "parse: libcst.parse_module", lambda: cst.parse_module(source))
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        for provider in dict.fromkeys((ExpressionContextProvider, *SemanticModel.METADATA)):
            _timed(timings, f"metadata: {provider.__name__}", lambda: wrapper.resolve(provider))
        context = RuleContext(wrapper)
        context.semantic = _timed(timings, "semantic: collecting pass", lambda: SemanticModel(wrapper))
        _timed(timings, "rules: batched traversal", lambda: wrapper.visit_batched([rule(context) for rule in rules]))
        _timed(timings, "total (lint_module_source)", lambda: lint_module_source(source, rules))
    return timings


def profile(corpus: Corpus, top: int, as_json: bool) -> dict:
    from torchlint.config import select_rules
    from torchlint.engine import lint_module_source
    from torchlint.rule import all_rules

    rules = select_rules(["TL"], [])
    sources = [_read(f) for f in corpus.files]
    lint_module_source(b"import torch\n", rules)  # import everything lazily imported first

    profiler = cProfile.Profile()
    profiler.enable()
    for source in sources:
        lint_module_source(source, rules)
    profiler.disable()
    stats = pstats.Stats(profiler)

    stages = stage_times(sources, rules)
    total = stages.pop("total (lint_module_source)")
    accounted = sum(stages.values())
    # Suppression comments, sorting findings, garbage collection, and noise between the runs.
    stages["rest of lint_module_source"] = max(total - accounted, 0.0)

    result = {
        "corpus": {"files": len(corpus.files), "lines": corpus.lines, "sources": corpus.sources},
        "torchlint_rules": [r.code for r in all_rules()],
        "libcst": _version("libcst"),
        "total_s": round(total, 3),
        "stages_s": {k: round(v, 3) for k, v in stages.items()},
        "lazy_qualified_names_share_in_profile": round(_lazy_share(stats), 3),
        "top_cumulative": _top(stats, "cumulative", top, lambda f: True),
        "top_torchlint_cumulative": _top(stats, "cumulative", top, _is_torchlint),
        "top_own_time": _top(stats, "tottime", top, lambda f: True),
    }
    if not as_json:
        print(f"corpus: {len(corpus.files)} files, {result['corpus']['lines']} lines; libcst {result['libcst']}")
        print(f"torchlint rules: {' '.join(result['torchlint_rules'])}\n")
        print(f"time per stage (no profiler), total {total:.2f}s:")
        for label, seconds in stages.items():
            print(f"  {label:<42} {seconds:>7.2f}s {100 * seconds / total:>5.1f}%")
        print(f"  (lazily computed qualified names, share of profiled time: {100 * result['lazy_qualified_names_share_in_profile']:.1f}%)")
        for title, key in (("top functions by cumulative time", "top_cumulative"),
                           ("top torchlint functions by cumulative time", "top_torchlint_cumulative"),
                           ("top functions by own time", "top_own_time")):
            print(f"\n{title} (profiled):")
            print(f"  {'calls':>9} {'own s':>7} {'cum s':>7}  function")
            for row in result[key]:
                print(f"  {row['calls']:>9} {row['own_s']:>7.2f} {row['cumulative_s']:>7.2f}  {row['function']}")
    return result


def _version(package: str) -> str:
    import importlib.metadata

    return importlib.metadata.version(package)


def _is_torchlint(func: tuple) -> bool:
    filename = func[0].replace(os.sep, "/")
    return "/torchlint/" in filename


def _describe(func: tuple) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    parts = Path(filename).parts
    for anchor in ("torchlint", "libcst", "torchfix"):
        if anchor in parts:
            filename = "/".join(parts[len(parts) - 1 - parts[::-1].index(anchor):])
            break
    return f"{filename}:{line}({name})"


def _top(stats: pstats.Stats, key: str, count: int, keep: Callable[[tuple], bool]) -> list[dict]:
    index = {"cumulative": 3, "tottime": 2}[key]
    rows = sorted(((func, data) for func, data in stats.stats.items() if keep(func)), key=lambda item: -item[1][index])
    return [
        {"function": _describe(func), "calls": data[1], "own_s": round(data[2], 3), "cumulative_s": round(data[3], 3)}
        for func, data in rows[:count]
    ]


def _lazy_share(stats: pstats.Stats) -> float:
    total = stats.total_tt or 1.0
    lazy = sum(data[3] for func, data in stats.stats.items() if func[2] == "__call__" and func[0].endswith("_metadata_dependent.py"))
    return lazy / total


# --- command line ------------------------------------------------------------------------


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, action="append", metavar="PATH",
                        help="a folder of Python code to lint besides the fixtures (repeatable; "
                             "default: torch/nn, torch/optim, torch/utils/data of an installed torch)")
    parser.add_argument("--files", type=int, metavar="N", help="use at most N files (evenly spaced)")
    parser.add_argument("--repeat", type=int, default=3, metavar="R", help="repetitions; the best counts (default 3)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--profile", action="store_true", help="profile torchlint in this process instead")
    parser.add_argument("--top", type=int, default=20, help="functions to list with --profile (default 20)")
    parser.add_argument("--torchlint", metavar="EXE", help="the torchlint command (default: beside this Python)")
    parser.add_argument("--torchfix", metavar="EXE", help="the torchfix command (default: beside this Python)")
    args = parser.parse_args(argv)
    if args.repeat < 1 or (args.files is not None and args.files < 1):
        parser.error("--repeat and --files must be at least 1")
    try:
        corpus = build_corpus(args.corpus, args.files)
        progress(f"corpus: {len(corpus.files)} files")
        if args.profile:
            result = profile(corpus, args.top, args.json)
        else:
            result = compare(corpus, args.repeat, find_tool("torchlint", args.torchlint), find_tool("torchfix", args.torchfix))
            if not args.json:
                print_comparison(result)
    except BenchError as error:
        print(f"lint_speed: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
