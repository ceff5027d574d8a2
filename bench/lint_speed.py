"""How fast torchlint lints, against TorchFix (and ruff, the ceiling), in one run.

Every job is a list of files that each tool lints end to end through its command line, in a
fresh single process (``-j 1``), one after the other, so that load from other processes falls
on all tools alike. The jobs: torch's own ``nn``, ``optim`` and ``utils/data`` sources; the
ecosystem corpus (real training code, and its notebooks, which TorchFix does not read); one
training file in a fresh process (start-up included); generated training-style files of
growing size (``bench/gen_training.py``); and torchlint's cache, cold against warm.

Each run reports the child's CPU-seconds (user + system, from ``wait4``: the stable figure on
a shared machine), its wall time, lines per CPU-second, and its peak memory (``ru_maxrss``).
``--profile`` instead profiles torchlint in this process on the given files.

The tools must share one LibCST (TorchFix pins 1.5.x); bench/README.md says how.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib.util
import json
import os
import platform
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
from gen_training import generate  # noqa: E402

# The parts of torch that look most like training code (modules, optimizers, data loading).
TORCH_SUBPACKAGES = ("nn", "optim", "utils/data")
# TorchFix reads each file for this marker and skips the file when it is absent: only files
# holding it are used, so that every tool parses the same files.
TORCHFIX_MARKER = b"torch"
SINGLE_FILE = REPO / "fixtures" / "example" / "train.py"
FINDING = re.compile(r":\d+:\d+: [A-Z]+\d+\b")
TOOLS = ("torchlint", "torchfix", "ruff")
# TorchFix takes minutes on a file this large (its rate shows on the smaller ones): above it,
# only torchlint and ruff run, so that the whole benchmark fits in half an hour.
TORCHFIX_MAX_GENERATED_LINES = 20_000


class BenchError(Exception):
    """A problem with the benchmark's set-up, printed without a traceback."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- jobs --------------------------------------------------------------------------------


@dataclass
class Job:
    name: str
    files: list[Path]
    lines: int
    tools: tuple[str, ...] = TOOLS
    repeat: int = 1  # runs per tool; the median counts
    note: str = ""
    jobs: int = 1  # torchlint's and TorchFix's -j (ruff picks its own threads)


def _lines(path: Path) -> int:
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(path.read_bytes()).get("cells", [])
        except (ValueError, AttributeError):
            return 0
        return sum(len(c.get("source", [])) if isinstance(c.get("source"), list) else str(c.get("source", "")).count("\n") + 1
                   for c in cells if isinstance(c, dict) and c.get("cell_type") == "code")
    return path.read_bytes().count(b"\n")


def _job(name: str, files: list[Path], **kwargs) -> Job:
    if not files:
        raise BenchError(f"job {name!r} has no files")
    return Job(name, files, sum(map(_lines, files)), **kwargs)


def _sample(files: list[Path], limit: int) -> list[Path]:
    """At most ``limit`` files (0: all), evenly spaced so that every folder is sampled."""
    if not limit or limit >= len(files):
        return files
    step = len(files) / limit
    return [files[int(i * step)] for i in range(limit)]


def _with_marker(files) -> list[Path]:
    return sorted(f for f in files if f.is_file() and TORCHFIX_MARKER in f.read_bytes())


def torch_folders(given: Path | None) -> list[Path]:
    """torch's training-like subpackages, located without importing torch."""
    root = given
    if root is None:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            raise BenchError("torch is not installed beside this Python: pass --torch DIR (the torch package folder)")
        root = Path(list(spec.submodule_search_locations)[0])
    folders = [root / sub for sub in TORCH_SUBPACKAGES]
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise BenchError(f"--torch {root}: no {', '.join(missing)}")
    return folders


def build_jobs(args, scratch: Path) -> list[Job]:
    torch_files = _with_marker(f for d in torch_folders(args.torch) for f in d.rglob("*.py"))
    repeat = args.repeat
    jobs = [_job("torch nn+optim+utils/data", _sample(torch_files, args.torch_files), repeat=repeat)]
    if args.ecosystem is not None:
        if not args.ecosystem.is_dir():
            raise BenchError(f"--ecosystem {args.ecosystem}: not a folder")
        scripts = _sample(_with_marker(args.ecosystem.rglob("*.py")), args.ecosystem_files)
        notebooks = _sample(sorted(args.ecosystem.rglob("*.ipynb")), args.ecosystem_files)
        jobs.append(_job("ecosystem .py", scripts, repeat=repeat))
        if notebooks:
            jobs.append(_job("ecosystem .ipynb", notebooks, tools=("torchlint", "ruff"), note="TorchFix reads no notebooks",
                             repeat=repeat))
    jobs.append(_job("one file, fresh process", [SINGLE_FILE], repeat=args.repeat_single))
    for size in args.sizes:
        path = scratch / f"train_{size}.py"
        path.write_text(generate(size))
        if size > TORCHFIX_MAX_GENERATED_LINES:
            jobs.append(_job(f"generated {size:,} lines", [path], tools=("torchlint", "ruff"),
                             note=f"not run above {TORCHFIX_MAX_GENERATED_LINES:,} lines", repeat=repeat))
            if args.large_jobs > 1:  # a file this large is linted in pieces: side by side with -j
                jobs.append(_job(f"generated {size:,} lines, -j {args.large_jobs}", [path], tools=("torchlint",),
                                 repeat=repeat, jobs=args.large_jobs))
        else:
            jobs.append(_job(f"generated {size:,} lines", [path], repeat=repeat))
    return jobs


# --- running a tool ----------------------------------------------------------------------


@dataclass
class Run:
    cpu_s: float
    wall_s: float
    peak_mb: float
    findings: int
    returncode: int


def command(tool: str, executable: Path, files: list[Path], cache: bool = False, jobs: int = 1) -> list[str]:
    paths = list(map(str, files))
    if tool == "torchlint":
        return [str(executable), "check", *([] if cache else ["--no-cache"]), "--exit-zero", "-j", str(jobs),
                "--output-format", "concise", *paths]
    if tool == "torchfix":
        # No check mode: without --fix it reports its findings (and a diff of its fixes).
        # With -j 1 LibCST's codemod runner works in this one process.
        return [str(executable), "-j", str(jobs), *paths]
    # ruff: every rule, no cache; it is multi-threaded, so its CPU-seconds count all threads.
    return [str(executable), "check", "--no-cache", "--exit-zero", "--select", "ALL", "--output-format", "concise", *paths]


def run(argv: list[str], cwd: Path) -> Run:
    """Run ``argv`` and measure that child alone (``wait4`` gives its own resource usage)."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        child = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        findings = sum(1 for line in out.read().decode(errors="replace").splitlines() if FINDING.search(line))
    scale = 1024 if sys.platform != "darwin" else 1024 * 1024  # ru_maxrss: KiB on Linux
    return Run(usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss * 1024 / scale / 1024, findings, child.returncode)


def find_executable(name: str) -> Path:
    beside = Path(sys.executable).parent / name  # the same virtual environment
    path = beside if beside.exists() else Path(shutil.which(name) or name)
    if not path.exists():
        raise BenchError(f"cannot find `{name}` beside {sys.executable} or on PATH; build the benchmark "
                         "environment as bench/README.md says")
    return path


def median_run(runs: list[Run]) -> Run:
    ordered = sorted(runs, key=lambda r: r.cpu_s)
    return ordered[len(ordered) // 2]


@dataclass
class JobResult:
    job: str
    files: int
    lines: int
    note: str
    runs: dict[str, Run] = field(default_factory=dict)
    # TorchFix CPU / tool CPU: the median of the repetitions' ratios, each of runs made one
    # right after the other (the machine's speed drifts between repetitions).
    ratios: dict[str, float] = field(default_factory=dict)


def measure(jobs: list[Job], executables: dict[str, Path], cwd: Path) -> list[JobResult]:
    results = []
    for job in jobs:
        result = JobResult(job.name, len(job.files), job.lines, job.note)
        runs: dict[str, list[Run]] = {tool: [] for tool in job.tools}
        for repetition in range(job.repeat):
            for tool in job.tools:  # interleaved, so that load falls on every tool alike
                done = run(command(tool, executables[tool], job.files, jobs=job.jobs), cwd)
                runs[tool].append(done)
                progress(f"{job.name}: {tool} {done.cpu_s:.2f} CPU-s, {done.wall_s:.2f} s wall, "
                         f"peak {done.peak_mb:.0f} MB, {done.findings} findings")
        result.runs = {tool: median_run(r) for tool, r in runs.items()}
        if "torchfix" in runs:
            result.ratios = {
                tool: statistics.median(f.cpu_s / max(t.cpu_s, 1e-9) for f, t in zip(runs["torchfix"], r))
                for tool, r in runs.items() if tool != "torchfix"
            }
        results.append(result)
    return results


def measure_cache(job: Job, torchlint: Path, scratch: Path) -> dict:
    """torchlint on ``job``'s files with its cache: a cold run that fills it, then a warm one."""
    cwd = scratch / "cache-run"
    cwd.mkdir()
    cold = run(command("torchlint", torchlint, job.files, cache=True), cwd)
    warm = run(command("torchlint", torchlint, job.files, cache=True), cwd)
    progress(f"cache: cold {cold.cpu_s:.2f} CPU-s, warm {warm.cpu_s:.2f} CPU-s")
    return {"job": job.name, "cold": asdict(cold), "warm": asdict(warm), "ratio_cpu": cold.cpu_s / max(warm.cpu_s, 1e-9),
            "ratio_wall": cold.wall_s / max(warm.wall_s, 1e-9)}


# --- report ------------------------------------------------------------------------------


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def versions() -> dict[str, str]:
    import importlib.metadata as metadata

    found = {}
    for package in ("torchlint", "torchfix", "ruff", "libcst"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "missing"
    return found


def markdown(report: dict) -> str:
    out = [
        f"Machine: {report['machine']}; load average {report['load_start']} at the start, {report['load_end']} at the end.",
        f"Versions: {', '.join(f'{k} {v}' for k, v in report['versions'].items())}.",
        "",
        "| job | files | lines | tool | CPU s | wall s | lines / CPU-s | peak MB | findings | TorchFix CPU / tool CPU |",
        "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|",
    ]
    for job in report["jobs"]:
        torchfix = job["runs"].get("torchfix")
        for tool, r in job["runs"].items():
            rate = f"{job['lines'] / r['cpu_s']:,.0f}" if r["cpu_s"] > 0 else "-"
            ratio = f"{job['ratios'][tool]:.2f}x" if tool in job.get("ratios", {}) else ""
            flag = "" if r["returncode"] == 0 else f" (exit {r['returncode']})"
            out.append(f"| {job['job']} | {job['files']} | {job['lines']:,} | {tool}{flag} | {r['cpu_s']:.2f} | "
                       f"{r['wall_s']:.2f} | {rate} | {r['peak_mb']:.0f} | {r['findings']} | {ratio} |")
        if job["note"]:
            out.append(f"| {job['job']} | | | TorchFix | | | | | | {job['note']} |")
    cache = report.get("cache")
    if cache:
        out += ["", f"Cache, torchlint on {cache['job']}: cold {cache['cold']['cpu_s']:.2f} CPU-s "
                    f"({cache['cold']['wall_s']:.2f} s wall), warm {cache['warm']['cpu_s']:.2f} CPU-s "
                    f"({cache['warm']['wall_s']:.2f} s wall): **{cache['ratio_cpu']:.1f}x** in CPU, "
                    f"{cache['ratio_wall']:.1f}x in wall time."]
    out += ["", f"Command: `{report['command']}`"]
    return "\n".join(out)


# --- profiling torchlint in this process ---------------------------------------------------


def stage_times(sources: list[bytes], rules) -> dict[str, float]:
    """Each stage of linting the files, timed in CPU-seconds without a profiler, in the
    engine's order: parsing, the metadata the semantic model resolves, its collecting pass,
    the facets, and the rules' batched traversal."""
    from libcst.metadata import MetadataWrapper, PositionProvider

    from torchlint.engine import parse
    from torchlint.rule import RuleContext
    from torchlint.semantic import SemanticModel
    from torchlint.traversal import ScopeProvider, fast_walks, visit_batched

    timings: dict[str, float] = {}

    def timed(label, action):
        start = time.process_time()
        value = action()
        timings[label] = timings.get(label, 0.0) + time.process_time() - start
        return value

    def stages(source: bytes) -> None:
        try:
            module = timed("parse (compile() check + libcst.parse_module)", lambda: parse(source))
        except Exception:
            return
        wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
        timed("metadata: ScopeProvider (+ ExpressionContextProvider)", lambda: wrapper.resolve(ScopeProvider))
        timed("metadata: PositionProvider (the whole module)", lambda: wrapper.resolve(PositionProvider))
        context = RuleContext(wrapper)
        model = timed("semantic: collecting pass", lambda: SemanticModel(wrapper))
        context.__dict__["semantic"] = model
        for facet in ("training", "evaluation", "devices"):
            timed(f"semantic: {facet} facts", lambda: getattr(model, facet))
        timed("rules: batched traversal", lambda: visit_batched(wrapper, [rule(context) for rule in rules]))

    for source in sources:
        gc.disable()  # as the engine does while it lints a file (engine.py, `cyclic_gc_paused`)
        try:
            with fast_walks():  # as the engine's walks are
                stages(source)
        finally:
            gc.enable()
    return timings


def profile(files: list[Path], top: int) -> None:
    from torchlint.config import select_rules
    from torchlint.engine import lint_module_source

    rules = select_rules(None, [], [])
    sources = [f.read_bytes() for f in files]
    lines = sum(s.count(b"\n") for s in sources)
    lint_module_source(b"import torch\n", rules)  # import everything lazily imported first
    start = time.process_time()
    for source in sources:
        lint_module_source(source, rules)
    total = time.process_time() - start
    print(f"{len(files)} files, {lines:,} lines, {len(rules)} default rules: {total:.2f} CPU-s, "
          f"{lines / total:,.0f} lines per CPU-s\n\nCPU-seconds per stage (no profiler):")
    for label, seconds in stage_times(sources, rules).items():
        print(f"  {label:<55} {seconds:>7.2f}  {100 * seconds / total:>5.1f}%")
    profiler = cProfile.Profile(time.process_time)  # CPU time: wall time on a shared machine is noise
    profiler.enable()
    for source in sources:
        lint_module_source(source, rules)
    profiler.disable()
    stats = pstats.Stats(profiler)
    for title, key, keep in (("cumulative, torchlint's functions", 3, lambda f: "torchlint" in f[0] or "/rules/" in f[0]),
                             ("own time, all functions", 2, lambda f: True)):
        print(f"\ntop {top} by {title} (under cProfile, which slows Python code about threefold):")
        print(f"  {'calls':>10} {'own s':>7} {'cum s':>7}  function")
        rows = sorted(((f, d) for f, d in stats.stats.items() if keep(f)), key=lambda item: -item[1][key])
        for func, data in rows[:top]:
            print(f"  {data[1]:>10} {data[2]:>7.2f} {data[3]:>7.2f}  {_describe(func)}")


def _describe(func: tuple) -> str:
    filename, line, name = func
    if filename == "~":
        return name
    parts = Path(filename).parts
    for anchor in ("torchlint", "rules", "libcst"):
        if anchor in parts:
            filename = "/".join(parts[len(parts) - 1 - parts[::-1].index(anchor):])
            break
    return f"{filename}:{line}({name})"


# --- command line ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torch", type=Path, metavar="DIR", help="the torch package folder (default: the torch "
                        "installed beside this Python, found without importing it)")
    parser.add_argument("--torch-files", type=int, default=0, metavar="N",
                        help="lint at most N files of torch, evenly spaced (default 0: all)")
    parser.add_argument("--ecosystem", type=Path, metavar="DIR", help="the ecosystem corpus (e.g. /work/ecosystem)")
    parser.add_argument("--ecosystem-files", type=int, default=0, metavar="N",
                        help="lint at most N .py files and N notebooks of it, evenly spaced (default 0: all)")
    parser.add_argument("--sizes", default="1000,10000,100000", help="lines of the generated training files (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=1, metavar="R",
                        help="runs of each tool on each job but the one-file job, interleaved; the medians count")
    parser.add_argument("--large-jobs", type=int, default=2, metavar="N",
                        help="also lint the generated files above 20,000 lines with torchlint -j N (its pieces side by "
                             "side; default %(default)s; 1: not)")
    parser.add_argument("--repeat-single", type=int, default=5, metavar="R", help="runs of the one-file job; the median counts")
    parser.add_argument("--no-cache-job", action="store_true", help="skip measuring torchlint's cache")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON to FILE")
    parser.add_argument("--profile", type=Path, nargs="+", metavar="FILE",
                        help="profile torchlint in this process on these files instead")
    parser.add_argument("--top", type=int, default=25, help="functions listed with --profile (default 25)")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes takes numbers separated by commas")
    if args.repeat < 1 or args.repeat_single < 1 or args.ecosystem_files < 0 or args.torch_files < 0:
        parser.error("--repeat and --repeat-single must be at least 1, --torch-files and --ecosystem-files at least 0")
    try:
        if args.profile:
            profile(args.profile, args.top)
            return 0
        executables = {tool: find_executable(tool) for tool in TOOLS}
        report = {"machine": machine(), "versions": versions(), "load_start": round(os.getloadavg()[0], 1),
                  "command": " ".join(["python", "bench/lint_speed.py", *(argv if argv is not None else sys.argv[1:])])}
        with tempfile.TemporaryDirectory(prefix="lint-speed-") as name:
            scratch = Path(name)
            jobs = build_jobs(args, scratch)
            progress("jobs: " + "; ".join(f"{j.name} ({len(j.files)} files, {j.lines:,} lines)" for j in jobs))
            empty = scratch / "empty.py"
            empty.write_text("import torch\n")
            for tool in TOOLS:  # warm the file cache and any byte-compilation
                run(command(tool, executables[tool], [empty]), scratch)
            report["jobs"] = [asdict(r) for r in measure(jobs, executables, scratch)]
            if not args.no_cache_job:
                report["cache"] = measure_cache(jobs[0], executables["torchlint"], scratch)
        report["load_end"] = round(os.getloadavg()[0], 1)
    except BenchError as error:
        print(f"lint_speed: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
