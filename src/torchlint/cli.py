"""The ``torchlint`` command line (SPEC section 3)."""

from __future__ import annotations

import gc
import importlib
import sys
import time
from pathlib import Path
from typing import Sequence

import click

from torchlint._startup import compiled_dataclasses, gc_paused

with compiled_dataclasses(), gc_paused():  # LibCST's node classes and ours: see torchlint/_startup.py
    from torchlint import cli_options
    from torchlint.config import ConfigError, resolve_settings
    from torchlint.engine import FixMode
    from torchlint.rule import Rule
    from torchlint.rules import all_rules, rule_by_code
    from torchlint.runner import RunError

# Subcommands whose modules import heavy dependencies (torch, pygls) load only when used.
LAZY_COMMANDS: dict[str, str] = {"lsp": "torchlint.lsp:command", "verify": "torchlint.runtime.cli:command"}


class TorchlintGroup(click.Group):
    """``torchlint PATHS`` and ``torchlint --fix PATHS`` mean ``torchlint check ...``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in LAZY_COMMANDS:
            module, attr = LAZY_COMMANDS[name].split(":")
            try:
                return getattr(importlib.import_module(module), attr)
            except ImportError as error:
                raise click.UsageError(f"`torchlint {name}` needs an extra that is not installed: {error}") from None
        return super().get_command(ctx, name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and _unknown_command(args[0], self.list_commands(ctx)):
            raise _no_such_command(ctx, args[0], self.list_commands(ctx))
        if not args or (args[0] not in self.list_commands(ctx) and args[0] not in ("--version", "--help", "-h")):
            args = ["check", *args]
        return super().parse_args(ctx, args)


def _unknown_command(word: str, commands: list[str]) -> bool:
    """Whether the first argument is a mistyped subcommand rather than a path (``torchlint
    chekc t.py``): a bare word (no folder, no suffix, not an option) that names no command
    and no existing file or folder. (A path that exists is linted, whatever its name.)"""
    import os
    import re

    return word not in commands and re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", word) is not None and not os.path.lexists(word)


def _no_such_command(ctx: click.Context, word: str, commands: list[str]) -> click.UsageError:
    """Click's "No such command" usage error, with its suggestion of the closest commands."""
    from difflib import get_close_matches

    close = get_close_matches(word, commands)
    message = f"No such command {word!r}."
    if len(close) == 1:
        message += f" Did you mean {close[0]!r}?"
    elif close:
        message += f" (Possible commands: {', '.join(sorted(close))})"
    return click.UsageError(message, ctx)


def _codes(value: str | None) -> list[str]:
    return [c.strip() for c in value.split(",") if c.strip()] if value else []


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from torchlint import __version__

        click.echo(f"torchlint {__version__}")
        ctx.exit()


@click.group(cls=TorchlintGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version, help="Show the version and exit.")
def main() -> None:
    """A linter for PyTorch training code. `torchlint PATHS` is `torchlint check PATHS`."""


def run() -> None:
    """The ``torchlint`` command (``[project.scripts]``, ``python -m torchlint``): ``main``,
    with the objects the process holds moved out of reach of Python's cyclic garbage
    collector (``gc.freeze``) after start-up and again on the way out. What start-up imports
    (click, LibCST's node classes) is never garbage, and at exit the interpreter's final
    collections walked all of it once more: about a sixth of the CPU time of a one-file run.
    The objects are still freed, and every exit handler runs, as usual."""
    gc.freeze()
    try:
        main()
    finally:
        gc.freeze()


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
@click.option("--fix", is_flag=True, help="Apply safe fixes in place, then report what is left.")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes marked unsafe.")
@click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; change nothing.")
@click.option("--select", help="Comma-separated rule codes or prefixes to enable (replaces the config's).")
@click.option("--ignore", help="Comma-separated rule codes or prefixes to disable.")
@click.option("--extend-select", help="Comma-separated rule codes or prefixes to enable in addition.")
@click.option(
    "--output-format",
    type=click.Choice(["text", "concise", "json", "sarif", "github"]),
    default="text",
    show_default=True,
)
@click.option("--statistics", is_flag=True, help="Count findings per rule.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even with findings.")
@click.option("--no-cache", is_flag=True, help="Do not read or write the result cache.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Worker processes (default: all cores).")
@click.option(
    "--config",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Use this file's [tool.torchlint] table (or, in a torchlint.toml, its top-level keys).",
)
@click.option(
    "--stdin-filename",
    type=click.Path(path_type=Path, dir_okay=False),
    help="The path of the file read from standard input (for configuration, exclude and per-file-ignores).",
)
@click.option(
    "--extend-exclude",
    metavar="PATTERNS",
    help="Comma-separated gitignore-style patterns (relative to the current folder) to exclude, besides `exclude`.",
)
@click.option(
    "--force-exclude/--no-force-exclude",
    default=None,
    help="Apply the exclusions to paths named on the command line too (as the pre-commit hooks do).",
)
@click.option("--watch", is_flag=True, help="Lint again whenever a linted file or the configuration changes (Ctrl-C stops).")
@cli_options.options
@compiled_dataclasses()
def check(
    paths: tuple[Path, ...],
    fix: bool,
    unsafe_fixes: bool,
    diff: bool,
    select: str | None,
    ignore: str | None,
    extend_select: str | None,
    output_format: str,
    statistics: bool,
    exit_zero: bool,
    no_cache: bool,
    jobs: int | None,
    config: Path | None,
    stdin_filename: Path | None,
    extend_exclude: str | None,
    force_exclude: bool | None,
    watch: bool,
    **adoption: object,
) -> None:
    """Lint files, folders (recursively) and notebooks; `-` reads standard input."""
    if watch:
        _watch(click.get_current_context())
    from torchlint.runner import FileReport, RunOptions, check_files, lint_source

    extra = cli_options.Adoption(**adoption)  # --add-noqa, --fix-only, --show-*, --output-file, -q
    stdin = any(str(p) == "-" for p in paths) or (stdin_filename is not None and not paths)
    paths = paths or (Path("."),)
    if stdin and len(paths) > 1:
        raise click.UsageError("`-` (standard input) cannot be combined with other paths")
    extra.check_usage(fix, diff, stdin)
    fix = fix or extra.fix_only
    try:
        settings = resolve_settings(
            [stdin_filename] if stdin and stdin_filename else [] if stdin else list(paths),
            config,
            _codes(select),
            _codes(extend_select),
            _codes(ignore),
            _codes(extend_exclude),
            force_exclude,
        )
    except ConfigError as error:
        click.echo(f"torchlint: error: {error}", err=True)
        sys.exit(2)
    if config is not None and settings.config_file is None:
        click.echo(f"torchlint: warning: {config} has no [tool.torchlint] settings; using the defaults", err=True)
    if extra.show_settings is not None:
        try:
            shown = resolve_settings(
                [extra.show_settings], config, _codes(select), _codes(extend_select), _codes(ignore), _codes(extend_exclude),
                force_exclude,
            )
        except ConfigError as error:
            click.echo(f"torchlint: error: {error}", err=True)
            sys.exit(2)
        extra.emit(cli_options.show_settings(extra.show_settings, shown))
        sys.exit(0)

    fix_mode = FixMode.UNSAFE if (fix or diff) and unsafe_fixes else FixMode.SAFE if (fix or diff) else FixMode.NONE
    options = RunOptions(
        fix_mode=fix_mode,
        write=fix and not diff,
        diff=diff,
        with_edits=output_format in ("json", "sarif") and not statistics,
        use_cache=not no_cache,
    )

    if stdin:
        data = sys.stdin.buffer.read()
        shown = str(stdin_filename) if stdin_filename else "-"
        if stdin_filename is not None and _skipped_named([stdin_filename], settings):
            report, fixed_source = FileReport(shown), data
        else:
            result = lint_source(data, stdin_filename, settings, options)
            report, fixed_source = FileReport(shown, result.findings, result.fixed_count), result.fixed_source
            report.fixed_codes = dict(result.fixed_codes)
            report.errors = [RunError(shown, f.describe(), f.code) for f in result.failures]
        if diff:
            from torchlint.engine import unified_diff

            report.diff = unified_diff(_decode(data), _decode(fixed_source), shown)
        elif fix:
            sys.stdout.buffer.write(fixed_source if isinstance(fixed_source, bytes) else fixed_source.encode())
            sys.stdout.flush()
        else:
            report.fixed_count, report.fixed_codes = 0, {}
        reports = [report]
        from torchlint.output import source_lines

        sources = {shown: source_lines(str(stdin_filename or shown), data)}
    else:
        from torchlint.files import discover

        if not extra.quiet:
            _skipped_named(paths, settings)
        files = discover(paths, settings)
        if extra.show_files:
            extra.emit(cli_options.show_files(files))
            sys.exit(0)
        if not files and not extra.quiet:
            # As ruff says it (and then, as ruff does, "All checks passed!").
            click.echo("warning: No Python files found under the given path(s)", err=True)
        progress = Progress() if sys.stderr.isatty() else None
        reports = check_files(files, settings, options, jobs, progress)
        if progress is not None:
            progress.clear()
        sources = None
        if extra.add_noqa:
            for error in (e for r in reports for e in r.errors):
                click.echo(f"torchlint: error: {error}", err=True)
            status = cli_options.add_noqa(files, reports, extra.quiet)
            sys.exit(status or (2 if any(r.errors for r in reports) else 0))

    errors = [e for r in reports for e in r.errors]
    for warning in (w for r in reports for w in r.warnings if not extra.quiet):
        click.echo(f"torchlint: warning: {warning}", err=True)
    for error in errors:
        click.echo(f"torchlint: error: {error}", err=True)

    # With --fix on standard input the fixed code goes to stdout, so findings go to stderr.
    to_stderr = stdin and fix and not diff
    if diff:
        text = "".join(r.diff for r in reports)
        extra.emit(text, nl=False)
        fixable = sum(1 for r in reports if r.diff)
        if not extra.quiet:
            click.echo(f"Would fix {fixable} file{'s' if fixable != 1 else ''}." if fixable else "No fixes available.", err=True)
        sys.exit(2 if errors else (1 if fixable and not exit_zero else 0))

    # Only what the chosen output needs is imported (start-up time of a one-file run).
    listing = cli_options.fixed_listing(reports) if extra.show_fixes and output_format in ("text", "concise") else ""
    plain = not (extra.quiet or listing)  # (else the summary is left out, or said after the listing)
    if extra.fix_only:  # as ruff's: what was fixed, in text formats; never what is left
        text = cli_options.joined(listing, "" if extra.quiet else cli_options.fixed_summary(reports))
        text = text if output_format in ("text", "concise") else ""
    elif statistics:
        from torchlint.output import format_statistics

        text = format_statistics(reports, "json" if output_format == "json" else "text", unsafe_fixes, not extra.quiet)
    elif output_format in ("text", "concise"):
        from torchlint.output import format_concise, format_text

        if output_format == "concise":
            text = format_concise(reports, unsafe_fixes, plain)
        else:
            if sources is None:
                from torchlint.output import read_sources

                sources = read_sources(r.path for r in reports if r.findings)
            text = format_text(reports, sources, unsafe_fixes, plain)
    elif output_format == "github":
        from torchlint.output import format_github

        text = format_github(reports)
    elif output_format == "json":
        from torchlint.output_json import format_json

        text = format_json(reports)
    else:
        from torchlint.output_json import format_sarif

        text = format_sarif(reports)
    if listing and not extra.fix_only and not statistics:
        from torchlint.output import summary

        text = cli_options.joined(text, listing, "" if extra.quiet else summary(reports, unsafe_fixes))
    extra.emit(text, err=to_stderr)

    remaining = sum(len(r.findings) for r in reports)
    if errors:
        sys.exit(2)
    sys.exit(1 if remaining and not exit_zero and not extra.fix_only else 0)


def _skipped_named(paths: Sequence[Path], settings) -> bool:
    """Say on stderr which paths named on the command line ``force-exclude`` leaves out, and
    the pattern and setting that exclude each; whether any is."""
    from torchlint.files import named_exclusions

    skipped = named_exclusions(paths, settings)
    for path, exclusion in skipped:
        click.echo(f"torchlint: warning: {path} is excluded by {exclusion} (force-exclude): not linted", err=True)
    return bool(skipped)


WATCH_INTERVAL_SECONDS = 0.5


def _watch(ctx: click.Context) -> None:
    """``--watch``, as ruff's: lint, then poll the files the run would lint and the
    configuration every ``WATCH_INTERVAL_SECONDS``, and lint again when one is added, removed
    or changed (after a ``--fix`` run, what it wrote is the new state), until Ctrl-C."""
    params = {**ctx.params, "watch": False}
    if any(str(p) == "-" for p in params["paths"]) or params["stdin_filename"] is not None:
        raise click.UsageError("--watch cannot read standard input")
    click.echo(f"[{time.strftime('%H:%M:%S')}] Starting linter in watch mode...", err=True)
    seen = None
    try:
        while True:
            state = _watched_state(params)
            if state != seen:
                if seen is not None:
                    click.echo(f"[{time.strftime('%H:%M:%S')}] File change detected...", err=True)
                try:
                    ctx.invoke(check, **params)
                except SystemExit:
                    pass
                seen = _watched_state(params)
            time.sleep(WATCH_INTERVAL_SECONDS)
    except KeyboardInterrupt:
        ctx.exit(0)


def _watched_state(params: dict) -> object:
    """What ``--watch`` compares between polls: each file to lint and the configuration file,
    with its size and modification time (a broken configuration: its message)."""
    from torchlint.files import discover

    paths = list(params["paths"]) or [Path(".")]
    try:
        settings = resolve_settings(
            paths, params["config"], extend_exclude=_codes(params["extend_exclude"]), force_exclude=params["force_exclude"]
        )
    except ConfigError as error:
        return str(error)
    state = []
    for path in [*discover(paths, settings), *([settings.config_file] if settings.config_file else [])]:
        try:
            status = path.stat()
            state.append((str(path), status.st_mtime_ns, status.st_size))
        except OSError:
            state.append((str(path), None, None))
    return state


class Progress:
    """``torchlint: 120/480 files`` on a terminal's stderr, once a run has taken a while; while
    a large file is linted, how far it has got (``torchlint: 0/1 files; big.py: 12/36
    pieces``, or with ``--fix`` the top-level statements of each pass)."""

    DELAY_SECONDS = 2.0
    INTERVAL_SECONDS = 0.1

    def __init__(self) -> None:
        self.clock = time.monotonic
        self.start = self.clock()
        self.last = 0.0
        self.shown = False
        self.files = ""
        self.within_shown = False

    def __call__(self, done: int, total: int) -> None:
        self.files = f"{done}/{total} files"
        # (Erase what is left of a longer line about one file's lint.)
        self._show(f"torchlint: {self.files}" + ("\033[K" if self.within_shown else ""))

    def within(self, path: str, done: int, total: int, unit: str) -> None:
        """How the lint of one large file goes: ``torchlint: 0/1 files; big.py: 12/36 pieces``."""
        files = f"{self.files}; " if self.files else ""
        self.within_shown = self._show(f"torchlint: {files}{path}: {done}/{total} {unit}\033[K") or self.within_shown

    def _show(self, line: str) -> bool:
        now = self.clock()
        if now - self.start < self.DELAY_SECONDS or now - self.last < self.INTERVAL_SECONDS:
            return False
        self.last, self.shown = now, True
        sys.stderr.write(f"\r{line}")
        sys.stderr.flush()
        return True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _decode(data: bytes | str) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _rule_doc(rule: type[Rule]) -> str:
    return f"# {rule.name} ({rule.code})\n\n{rule.selection_note()}\n\n{rule.documentation()}\n"


@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule's documentation.")
def rule_command(code: str | None, show_all: bool) -> None:
    """Print a rule's documentation."""
    if show_all:
        click.echo("\n".join(_rule_doc(r) for r in all_rules()), nl=False)
        return
    if code is None:
        raise click.UsageError("give a rule code (e.g. `torchlint rule TL501`) or --all")
    try:
        rule = rule_by_code(code.upper())
    except KeyError:
        click.echo(f"torchlint: error: unknown rule code `{code}`", err=True)
        sys.exit(2)
    click.echo(_rule_doc(rule), nl=False)
