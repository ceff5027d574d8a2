"""TorchFix and torchlint side by side: every TorchFix finding torchlint does not report, and
the reverse.

    python tools/torchfix_compare.py INPUT... [--corpus DIR] [--out report.md]
        [--torchfix-venv DIR] [--torchfix-spec torchfix==0.7.0] [--tolerance 1] [--save F.json]
    python tools/torchfix_compare.py --load F.json [--out report.md]

Each INPUT is a folder (``label=path`` names it in the report; the label is the folder's name
otherwise); ``--corpus DIR`` adds every subfolder of DIR as one input, its label ``DIR``'s name
and its paths prefixed by the subfolder's name (the ecosystem corpus: one project per folder, so
each file's project settings are its own).

TorchFix pins an older LibCST, so it lives in its own virtual environment
(``--torchfix-venv``, created with ``--torchfix-spec`` installed on first use and reused after;
a spec may be a path to a source snapshot). Both tools see the same files: the Python files
torchlint's own discovery finds under each input (notebooks and stubs are left out, TorchFix
reads neither). TorchFix runs with ``--select ALL`` (one job), torchlint with ``--select ALL``
and JSON output. Codes are mapped by SPEC section 5's table (``TORCHFIX_TO_TORCHLINT``); a
finding of one tool is reported by the other when the other has a finding of a mapped code in
the same file at the same place: within ``--tolerance`` lines, in the same statement, or about
the same symbol where one of the two is its import (``same_place``). ``--torchfix-from
F.json`` takes TorchFix's findings from an earlier ``--save`` instead of running it again
(to re-run torchlint alone after changing a rule).

Labels end with ``@TAG`` (``--tag``, by default TorchFix's version). Differences already
triaged in ``ecosystem/torchfix.md`` (its ``## Triage`` table: input,
path, line, code, symbol, reason; ``*`` and shell patterns match any) carry their reason in
the report; the others are marked untriaged and counted, and ``--check`` exits 1 while any is
left.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRIAGE_FILE = ROOT / "ecosystem" / "torchfix.md"
DEFAULT_SPEC = "torchfix==0.7.0"
CHUNK = 500  # files per TorchFix invocation, to stay far below the argument limit

# SPEC section 5: each TorchFix code and the torchlint codes that report the same thing.
TORCHFIX_TO_TORCHLINT: dict[str, tuple[str, ...]] = {
    "TOR001": ("TL803",),
    "TOR004": ("TL803",),
    "TOR101": ("TL804", "TL801"),
    "TOR103": ("TL804", "TL801"),
    "TOR104": ("TL805",),
    "TOR105": ("TL805",),
    "TOR003": ("TL806",),
    "TOR201": ("TL807",),
    "TOR202": ("TL808",),
    "TOR203": ("TL809",),
    "TOR002": ("TL604",),
    "TOR106": ("TL605",),
    "TOR107": ("TL606",),
    "TOR108": ("TL607",),
    "TOR401": ("TL702",),
    "TOR402": ("TL109",),
    "TOR102": ("TL502",),
}

# The rules that report a name imported with `from` at its import (migration.ApiSymbolRule),
# where TorchFix reports each use: their messages name the symbol.
IMPORT_ANCHORED = {("TL803",), ("TL804", "TL801"), ("TL805",)}

_TORCHFIX_LINE = re.compile(r"^(?P<path>[^\s].*?):(?P<line>\d+):(?P<col>\d+): (?P<code>TOR\d{3})(?: \[\*\])? (?P<msg>.*)$")
_SYMBOL = re.compile(r"\b((?:torch|torchvision|functorch)(?:\.\w+)+)")


@dataclass(frozen=True)
class Finding:
    tool: str  # "torchfix" or "torchlint"
    input: str
    path: str  # posix, relative to the input (prefixed by the repository in a corpus)
    line: int
    code: str
    symbol: str = ""  # the torch name the message is about, when it names one
    statement: str = ""  # "first-last": the lines of the simple statement holding the finding
    at_import: bool = False  # that statement is an import


def groups() -> dict[tuple[str, ...], list[str]]:
    """The mapping grouped by torchlint side: (TL codes) -> the TorchFix codes mapped to them."""
    out: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for tor, tls in TORCHFIX_TO_TORCHLINT.items():
        out[tls].append(tor)
    return {k: sorted(v) for k, v in sorted(out.items(), key=lambda kv: kv[0])}


def torchlint_codes() -> set[str]:
    return {tl for tls in TORCHFIX_TO_TORCHLINT.values() for tl in tls}


def group_of(code: str) -> tuple[str, ...] | None:
    """The group (its torchlint codes) a TorchFix or torchlint code belongs to."""
    if code in TORCHFIX_TO_TORCHLINT:
        return TORCHFIX_TO_TORCHLINT[code]
    for tls in TORCHFIX_TO_TORCHLINT.values():
        if code in tls:
            return tls
    return None


def symbol_of(message: str) -> str:
    match = _SYMBOL.search(message)
    return match.group(1) if match else ""


def parse_torchfix(text: str, input_label: str, prefix: str = "", known: set[str] | None = None) -> list[Finding]:
    """TorchFix's findings from its standard output (``path:line:col: TORnnn [*] message``
    lines between its diffs). With ``known``, rows naming another file are dropped."""
    found = []
    for row in text.splitlines():
        m = _TORCHFIX_LINE.match(row)
        if not m:
            continue
        path = Path(m["path"]).as_posix().removeprefix("./")
        if known is not None and path not in known:
            continue
        found.append(Finding("torchfix", input_label, prefix + path, int(m["line"]), m["code"], symbol_of(m["msg"])))
    return found


def parse_torchlint(findings: list[dict], input_label: str, prefix: str = "", known: set[str] | None = None) -> list[Finding]:
    """torchlint's JSON findings of the mapped codes, in the files both tools read."""
    found = []
    wanted = torchlint_codes()
    for f in findings:
        path = Path(f["filename"]).as_posix().removeprefix("./")
        if f["code"] not in wanted or not path.endswith(".py") or (known is not None and path not in known):
            continue
        found.append(Finding("torchlint", input_label, prefix + path, int(f["location"]["row"]), f["code"],
                             symbol_of(f.get("message", ""))))
    return found


def statements(source: str) -> list[tuple[int, int, bool]]:
    """(first line, last line, is an import) of each simple statement (one without a body) of
    a Python source; none when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno, isinstance(n, (ast.Import, ast.ImportFrom)))
            for n in ast.walk(tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")]


def place(f: Finding, spans: list[tuple[int, int, bool]]) -> Finding:
    """``f`` with the innermost simple statement that holds its line."""
    holding = [s for s in spans if s[0] <= f.line <= s[1]]
    if not holding:
        return f
    first, last, is_import = min(holding, key=lambda s: s[1] - s[0])
    return replace(f, statement=f"{first}-{last}", at_import=is_import)


def same_place(f: Finding, g: Finding, tolerance: int) -> bool:
    """Two findings of one file are about the same code: within ``tolerance`` lines, in the
    same statement (a `from` import over several lines: TorchFix anchors at the statement,
    torchlint at the name), or about the same symbol where one of them is its import (a name
    imported with `from` is reported by torchlint at its import, by TorchFix at each use)."""
    if abs(f.line - g.line) <= tolerance:
        return True
    if f.statement and f.statement == g.statement:
        return True
    return (bool(f.symbol) and f.symbol == g.symbol and (f.at_import or g.at_import)
            and group_of(f.code) in IMPORT_ANCHORED and group_of(g.code) in IMPORT_ANCHORED)


def match(torchfix: list[Finding], torchlint: list[Finding], tolerance: int) -> tuple[list[Finding], list[Finding]]:
    """(TorchFix findings torchlint does not report, torchlint findings TorchFix does not
    report). A finding is reported by the other tool when that tool has a finding of a mapped
    code in the same input and file at the same place (``same_place``); unmapped TorchFix
    codes (TOR901) are left out of both lists."""
    by_file: dict[tuple[str, str], list[Finding]] = defaultdict(list)
    for f in torchfix + torchlint:
        by_file[f.input, f.path].append(f)

    def near(f: Finding, tool: str, ok) -> bool:
        return any(g.tool == tool and ok(g) and same_place(f, g, tolerance) for g in by_file[f.input, f.path])

    tf_only = [f for f in torchfix if f.code in TORCHFIX_TO_TORCHLINT
               and not near(f, "torchlint", lambda g: g.code in TORCHFIX_TO_TORCHLINT[f.code])]
    tl_only = [f for f in torchlint
               if not near(f, "torchfix", lambda g: f.code in TORCHFIX_TO_TORCHLINT.get(g.code, ()))]
    return tf_only, tl_only


# ---- triage -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class TriageRow:
    input: str
    path: str
    line: str
    code: str
    symbol: str
    reason: str

    def covers(self, f: Finding) -> bool:
        return (fnmatch.fnmatchcase(f.input, self.input) and fnmatch.fnmatchcase(f.path, self.path)
                and (self.line == "*" or self.line == str(f.line)) and fnmatch.fnmatchcase(f.code, self.code)
                and fnmatch.fnmatchcase(f.symbol, self.symbol))


def read_triage(text: str) -> list[TriageRow]:
    """The rows of the Markdown table under the ``## Triage`` heading (the header row and its
    rule are skipped); backticks around a cell are ignored."""
    rows: list[TriageRow] = []
    in_section = False
    for raw in text.splitlines():
        if raw.startswith("## "):
            in_section = raw.strip().lower() == "## triage"
            continue
        if not in_section or not raw.lstrip().startswith("|"):
            continue
        cells = [c.strip().strip("`").strip() for c in raw.strip().strip("|").split("|")]
        if len(cells) < 6 or cells[0].lower() == "input" or set(cells[0]) <= set("-: "):
            continue
        rows.append(TriageRow(*cells[:5], "|".join(cells[5:]).strip()))
    return rows


def reason_for(f: Finding, triage: list[TriageRow]) -> str | None:
    for row in triage:
        if row.covers(f):
            return row.reason
    return None


# ---- report -----------------------------------------------------------------------------------

def report(torchfix: list[Finding], torchlint: list[Finding], tolerance: int, triage: list[TriageRow],
           header: str = "") -> tuple[str, int]:
    """The Markdown report and the number of untriaged differences."""
    tf_only, tl_only = match(torchfix, torchlint, tolerance)
    inputs = list(dict.fromkeys(f.input for f in torchfix + torchlint))
    out = ["# TorchFix and torchlint, side by side", ""]
    if header:
        out += [header, ""]
    out += [f"A finding counts as reported by the other tool when that tool reports a mapped code in the same "
            f"file within {tolerance} line(s), in the same statement, or about the same symbol at its import. "
            "Reasons come from `ecosystem/torchfix.md`.", ""]
    untriaged = 0
    for label in inputs:
        out += [f"## {label}", "",
                "| TorchFix | torchlint | TorchFix findings | torchlint findings | TorchFix only | torchlint only | untriaged |",
                "|---|---|---:|---:|---:|---:|---:|"]
        for tls, tors in groups().items():
            n_tf = sum(1 for f in torchfix if f.input == label and f.code in tors)
            n_tl = sum(1 for f in torchlint if f.input == label and f.code in tls)
            only_tf = [f for f in tf_only if f.input == label and f.code in tors]
            only_tl = [f for f in tl_only if f.input == label and f.code in tls]
            open_ = sum(1 for f in only_tf + only_tl if reason_for(f, triage) is None)
            untriaged += open_
            per_code = ", ".join(f"{t} {sum(1 for f in torchfix if f.input == label and f.code == t)}" for t in tors)
            per_tl = ", ".join(f"{t} {sum(1 for f in torchlint if f.input == label and f.code == t)}" for t in tls)
            out.append(f"| {', '.join(tors)} | {', '.join(tls)} | {n_tf} ({per_code}) | {n_tl} ({per_tl}) | "
                       f"{len(only_tf)} | {len(only_tl)} | {open_} |")
        unmapped = defaultdict(int)
        for f in torchfix:
            if f.input == label and f.code not in TORCHFIX_TO_TORCHLINT:
                unmapped[f.code] += 1
        if unmapped:
            out += ["", "TorchFix codes with no torchlint counterpart (not compared): "
                    + ", ".join(f"{c} {n}" for c, n in sorted(unmapped.items())) + "."]
        for title, diff in (("TorchFix findings torchlint does not report", tf_only),
                            ("torchlint findings TorchFix does not report", tl_only)):
            mine = [f for f in diff if f.input == label]
            if not mine:
                continue
            out += ["", f"### {title} ({len(mine)})", ""]
            by_kind: dict[tuple[str, str], list[Finding]] = defaultdict(list)
            for f in mine:
                by_kind[f.code, f.symbol].append(f)
            for (code, symbol), fs in sorted(by_kind.items()):
                out.append(f"- **{code}** `{symbol or '-'}` ({len(fs)})")
                for f in sorted(fs, key=lambda f: (f.path, f.line)):
                    reason = reason_for(f, triage)
                    out.append(f"  - `{f.path}:{f.line}` " + (reason if reason else "**untriaged**"))
        out.append("")
    out += [f"Untriaged differences: {untriaged}.", ""]
    return "\n".join(out), untriaged


# ---- running the tools ------------------------------------------------------------------------

def default_venv(spec: str) -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "torchlint" / ("torchfix-" + re.sub(r"[^\w.=-]+", "_", spec).strip("_"))


def ensure_torchfix(venv: Path, spec: str) -> Path:
    """The ``torchfix`` executable of ``venv``, creating the venv with ``spec`` installed the
    first time."""
    exe = venv / "bin" / "torchfix"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", spec], check=True)
    return exe


def python_files(folder: Path) -> list[str]:
    """The ``.py`` files torchlint's discovery finds under ``folder``, relative to it."""
    from torchlint.config import resolve_settings
    from torchlint.files import discover

    return sorted(p.relative_to(folder).as_posix() for p in discover([folder], resolve_settings([folder]))
                  if p.suffix == ".py" and p.is_file())


def run_input(label: str, folder: Path, prefix: str, torchfix_exe: Path | None,
              saved: list[Finding] | None = None) -> tuple[list[Finding], list[Finding]]:
    """Both tools' findings on one input; TorchFix's come from ``saved`` when given."""
    files = python_files(folder)
    known = set(files)
    tf: list[Finding] = []
    if saved is not None:
        base = label.partition("@")[0]
        tf = [replace(f, input=label) for f in saved
              if f.input.partition("@")[0] == base and f.path.startswith(prefix) and f.path[len(prefix):] in known]
    for i in range(0, len(files) if saved is None else 0, CHUNK):
        proc = subprocess.run([str(torchfix_exe), "--select", "ALL", "-j", "1", *files[i:i + CHUNK]],
                              cwd=folder, capture_output=True, text=True)
        tf += parse_torchfix(proc.stdout, label, prefix, known)
    proc = subprocess.run([sys.executable, "-m", "torchlint", "check", "--no-cache", "--exit-zero", "-j", "1",
                           "--select", "ALL", "--output-format", "json", "."],
                          cwd=folder, capture_output=True, text=True)
    data = json.loads(proc.stdout or "[]")
    if isinstance(data, dict):
        data = data.get("findings", [])
    tl = parse_torchlint(data, label, prefix, known)
    spans: dict[str, list[tuple[int, int, bool]]] = {}
    for f in tf + tl:
        if f.path not in spans:
            source = (folder / f.path[len(prefix):]).read_text(encoding="utf-8", errors="replace")
            spans[f.path] = statements(source)
    return [place(f, spans[f.path]) for f in tf], [place(f, spans[f.path]) for f in tl]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="*", help="folders to compare, each `label=path` or `path`")
    ap.add_argument("--corpus", action="append", default=[], help="a folder of projects, one input per subfolder")
    ap.add_argument("--torchfix-venv", type=Path, help="the venv for TorchFix (created on first use)")
    ap.add_argument("--torchfix-spec", default=DEFAULT_SPEC, help=f"what pip installs there (default {DEFAULT_SPEC})")
    ap.add_argument("--tolerance", type=int, default=1, help="lines apart that still match (default 1)")
    ap.add_argument("--out", type=Path, help="write the Markdown report here (default: standard output)")
    ap.add_argument("--save", type=Path, help="save both tools' findings (JSON) for --load")
    ap.add_argument("--load", action="append", type=Path, default=[], help="report from saved findings instead of running")
    ap.add_argument("--tag", help="appended to each input's label as `label@TAG` (default: TorchFix's version), "
                    "so triage rows can name the TorchFix they are about")
    ap.add_argument("--torchfix-from", type=Path, help="TorchFix's findings from this --save file instead of running it")
    ap.add_argument("--check", action="store_true", help="exit 1 while any difference is untriaged")
    args = ap.parse_args(argv)

    torchfix: list[Finding] = []
    torchlint: list[Finding] = []
    version = ""
    for saved in args.load:
        data = json.loads(saved.read_text())
        torchfix += [Finding(**f) for f in data["torchfix"]]
        torchlint += [Finding(**f) for f in data["torchlint"]]
        version = data.get("torchfix_version", version)
    jobs: list[tuple[str, Path, str]] = []
    for item in args.inputs:
        label, _, path = item.rpartition("=") if "=" in item else ("", "", item)
        folder = Path(path).resolve()
        jobs.append((label or folder.name, folder, ""))
    for corpus in args.corpus:
        folder = Path(corpus).resolve()
        jobs += [(folder.name, sub, sub.name + "/") for sub in sorted(folder.iterdir()) if sub.is_dir()]
    saved = None
    if args.torchfix_from:
        data = json.loads(args.torchfix_from.read_text())
        saved = [Finding(**f) for f in data["torchfix"]]
        version = data.get("torchfix_version", version)
    if jobs:
        exe = None
        if saved is None:
            exe = ensure_torchfix(args.torchfix_venv or default_venv(args.torchfix_spec), args.torchfix_spec)
            version = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.strip()
        tag = args.tag or version
        for label, folder, prefix in jobs:
            label = f"{label}@{tag}" if tag else label
            print(f"{label}: {folder}", file=sys.stderr)
            tf, tl = run_input(label, folder, prefix, exe, saved)
            torchfix += tf
            torchlint += tl
    if args.save:
        args.save.write_text(json.dumps({"torchfix_version": version, "torchfix": [asdict(f) for f in torchfix],
                                         "torchlint": [asdict(f) for f in torchlint]}, indent=0))
    triage = read_triage(TRIAGE_FILE.read_text()) if TRIAGE_FILE.exists() else []
    text, untriaged = report(torchfix, torchlint, args.tolerance, triage, f"TorchFix {version or '?'} ({args.torchfix_spec}).")
    if args.out:
        args.out.write_text(text)
    else:
        print(text)
    print(f"untriaged differences: {untriaged}", file=sys.stderr)
    return 1 if args.check and untriaged else 0


if __name__ == "__main__":
    sys.exit(main())
