"""The options of ``torchlint check`` that a team adopting it on a large codebase looks for
first (issue 40), with ruff's names and meanings: ``--add-noqa``, ``--fix-only``,
``--show-fixes``, ``--output-file``, ``-q/--quiet``, ``--show-files`` and
``--show-settings``. ``cli.check`` takes them as ``**adoption`` and asks ``Adoption`` what to
do; the work itself is here."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import click

from torchlint.config import Settings

OPTIONS = (
    click.option("--add-noqa", is_flag=True, help="Write `# noqa: CODES` on every line with a finding (a baseline)."),
    click.option("--fix-only", is_flag=True, help="Apply fixes, without reporting what is left (exit 0 unless an error)."),
    click.option("--show-fixes", is_flag=True, help="List the fixes applied, per file and rule."),
    click.option(
        "--output-file", type=click.Path(path_type=Path, dir_okay=False), help="Write the report to this file instead of stdout."
    ),
    click.option("-q", "--quiet", is_flag=True, help="Print the findings only: no summary, no warnings."),
    click.option("--show-files", is_flag=True, help="Print the files that would be linted, one per line, and exit."),
    click.option(
        "--show-settings",
        type=click.Path(path_type=Path),
        metavar="PATH",
        help="Print the resolved configuration for PATH, and exit.",
    ),
)


def options(command: Callable) -> Callable:
    """Decorate ``command`` with the options above (in the order they are listed)."""
    for option in reversed(OPTIONS):
        command = option(command)
    return command


@dataclass(frozen=True)
class Adoption:
    add_noqa: bool = False
    fix_only: bool = False
    show_fixes: bool = False
    output_file: Path | None = None
    quiet: bool = False
    show_files: bool = False
    show_settings: Path | None = None

    def check_usage(self, fix: bool, diff: bool, stdin: bool) -> None:
        """Combinations that mean nothing are usage errors (exit 2), as in ruff."""
        if self.add_noqa:
            for given, name in ((fix, "--fix"), (self.fix_only, "--fix-only"), (diff, "--diff")):
                if given:
                    raise click.UsageError(f"--add-noqa cannot be combined with {name}")
            if stdin:
                raise click.UsageError("--add-noqa writes files: it cannot read standard input")
        if self.show_files and self.show_settings is not None:
            raise click.UsageError("--show-files and --show-settings cannot be combined")
        if self.show_files and stdin:
            raise click.UsageError("--show-files lists the files under the paths given: it cannot read standard input")

    def emit(self, text: str, err: bool = False, nl: bool = True) -> None:
        """Print the report (on stderr with ``err``: standard input's ``--fix`` prints the code
        on stdout), or with ``--output-file`` write it there, atomically (an empty report too:
        no stale one is left)."""
        if self.output_file is None:
            if text:
                click.echo(text, err=err, nl=nl)
            return
        try:
            write_report(self.output_file, text + ("\n" if text and nl else ""))
        except OSError as error:
            click.echo(f"torchlint: error: cannot write {self.output_file}: {error.strerror or error}", err=True)
            sys.exit(2)


def write_report(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``files.write_atomic``: a temporary file in its
    folder, then a rename): a crash leaves the old report or the new one, never half of one
    (a report that did not exist is made empty first). Its folder is made if missing; an
    existing file keeps its permissions."""
    from torchlint.files import write_atomic

    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.touch(exist_ok=True)
    write_atomic(target, text.encode("utf-8"))


# --- --show-files, --show-settings --------------------------------------------------------


def show_files(files: Sequence[Path]) -> str:
    """The files a run would lint, one per line, as its findings name them."""
    from torchlint.runner import display_path

    return "\n".join(display_path(f) for f in files)


def _toml_list(values) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def show_settings(path: Path, settings: Settings) -> str:
    """The configuration that applies to ``path``, resolved: where it comes from, the rules
    selected and every key, as ``key = value`` lines (TOML where a value is one)."""
    from torchlint.config import fixes_allowed

    rules = settings.rules_for(path)
    enabled = {r.code for r in settings.enabled}
    rel = settings.relative(path)
    applying = []
    if rel is not None and settings.per_file_ignores:
        import pathspec

        applying = [(p, c) for p, c in settings.per_file_ignores if pathspec.GitIgnoreSpec.from_lines([p]).match_file(rel)]
    lines = [
        f"Resolved settings for: {path}",
        f"Settings path: {settings.config_file if settings.config_file is not None else '(none: the defaults)'}",
        "",
        f'root = "{settings.root}"',
        f"select = {_toml_list(settings.select) if settings.select is not None else '(default: every rule that is not opt-in)'}",
        f"extend-select = {_toml_list(settings.extend_select)}",
        f"ignore = {_toml_list(settings.ignore)}",
        f"per-file-ignores = {_per_file(settings.per_file_ignores)}",
        f"per-file-ignores applying = {_per_file(applying)}",
        f"exclude = {_toml_list(settings.exclude)}",
        f"extend-exclude = {_toml_list(settings.extend_exclude)}",
        f"--extend-exclude = {_toml_list(line.patterns) if (line := settings.command_line_exclude) is not None else '[]'}",
        f"force-exclude = {'true' if settings.force_exclude else 'false'}",
        f"excluded = {_excluded(path, settings)}",
        f"target-torch = {_target_torch(path, settings)}",
        f"fixable = {_toml_list(settings.fixable) if settings.fixable is not None else '(default: every rule)'}",
        f"unfixable = {_toml_list(settings.unfixable)}",
        "",
        f"# Rules enabled for this file ({len(rules)}; [*]: --fix may apply its fixes)",
    ]
    for rule in rules:
        marker = "[*]" if fixes_allowed(rule.code, settings.fixable, settings.unfixable) else "   "
        lines.append(f"{rule.code} {marker} {rule.name}")
    ignored = sorted(enabled - {r.code for r in rules})
    if ignored:
        lines.append(f"# Selected but ignored here by per-file-ignores: {', '.join(ignored)}")
    return "\n".join(lines)


def _excluded(path: Path, settings: Settings) -> str:
    """Whether the exclusions match ``path``, and which pattern of which setting does."""
    exclusion = settings.exclusion(path)
    if exclusion is None:
        return "false"
    named = "" if settings.force_exclude else " (a file named on the command line is still linted: no force-exclude)"
    return f"true, by {exclusion}{named}"


def _per_file(entries) -> str:
    return "{" + ", ".join(f'"{pattern}" = {_toml_list(codes)}' for pattern, codes in entries) + "}"


def _target_torch(path: Path, settings: Settings) -> str:
    from torchlint.semantic.supported_torch import declared_oldest, show

    if settings.target_torch is not None:
        return f'"{show(settings.target_torch)}"'
    declared = declared_oldest(str(Path(os.path.abspath(path)).parent))
    if declared is None:
        return "(unknown: not set, and the project declares no lower bound on torch)"
    return f'"{show(declared)}" (not set: the lower bound the project declares on torch)'


# --- --show-fixes, --fix-only --------------------------------------------------------------


def fixed_listing(reports) -> str:
    """The fixes applied, as ruff's ``--show-fixes`` lists them: ``Fixed N errors:``, then per
    file its count per rule, the most fixed first."""
    from torchlint.rules import rule_by_code

    fixed = [(r.path, r.fixed_codes) for r in reports if getattr(r, "fixed_codes", None)]
    total = sum(sum(codes.values()) for _, codes in fixed)
    if not total:
        return ""
    width = len(str(max(n for _, codes in fixed for n in codes.values())))
    lines = [f"Fixed {total} error{'s' if total != 1 else ''}:"]
    for path, codes in sorted(fixed):
        lines.append(f"- {path}:")
        for code, count in sorted(codes.items(), key=lambda item: (-item[1], item[0])):
            lines.append(f"    {count:>{width}} × {code} ({rule_by_code(code).name})")
    return "\n".join(lines)


def fixed_summary(reports) -> str:
    """``--fix-only``'s summary line, as ruff's: ``Fixed N errors.`` (nothing when none was)."""
    total = sum(r.fixed_count for r in reports)
    return f"Fixed {total} error{'s' if total != 1 else ''}." if total else ""


def joined(*parts: str, separator: str = "\n\n") -> str:
    return separator.join(p for p in parts if p)


# --- --add-noqa ----------------------------------------------------------------------------


def add_noqa(files: Sequence[Path], reports, quiet: bool = False) -> int:
    """Write ``# noqa: CODES`` on the line of every finding of ``reports`` (the run's, of
    ``files`` in that order), each file replaced atomically and only if it still holds what
    was linted; ``Added N noqa directives.`` on stderr, as ruff says it. The exit status: 0,
    or 2 where a file could not be written."""
    from torchlint.files import FileChanged, write_atomic
    from torchlint.noqa import add_noqa_source

    added, status = 0, 0
    for path, report in zip(files, reports):
        findings = report.findings
        if not findings:
            continue
        try:
            source = path.read_bytes()
            result = add_noqa_source(source, findings, notebook=path.suffix == ".ipynb")
        except OSError as error:
            click.echo(f"torchlint: error: {report.path}: cannot read: {error.strerror or error}", err=True)
            status = 2
            continue
        except ValueError as error:  # (a notebook that is no longer one: it changed since)
            click.echo(f"torchlint: error: {report.path}: {error}", err=True)
            status = 2
            continue
        if result.data is not None:
            try:
                write_atomic(path, result.data, expected=source)
            except FileChanged:
                click.echo(f"torchlint: warning: {report.path}: changed on disk while noqa directives were added; left as it is", err=True)
                continue
            except OSError as error:
                click.echo(f"torchlint: error: {report.path}: cannot write: {error.strerror or error}", err=True)
                status = 2
                continue
            added += result.added
        if result.refused and not quiet:
            where = ", ".join(f"{report.path}:{place}" for place in result.refused)
            click.echo(
                f"torchlint: warning: no `# noqa` could be written at {where} (the line ends inside a string or "
                "continues with a backslash): those findings are left as they are",
                err=True,
            )
    if added and not quiet:
        click.echo(f"Added {added} noqa directive{'s' if added != 1 else ''}.", err=True)
    return status
