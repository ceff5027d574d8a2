"""Configuration: ``[tool.torchlint]`` in the nearest ``pyproject.toml``, or ``torchlint.toml``.

Resolved once per run into ``Settings``; the per-file question "which rules apply here" is
answered by ``Settings.rules_for``.
"""

from __future__ import annotations

import os.path
import sys
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

if TYPE_CHECKING:
    import pathspec

from torchlint.engine import INVALID_FILE
from torchlint.exclusion import Exclusion, PatternSet, excluded_by, shown
from torchlint.rule import Rule
from torchlint.rules import all_rules

KEYS = ("select", "ignore", "extend-select", "exclude", "per-file-ignores", "target-torch")
KEYS += ("extend-exclude", "force-exclude")  # (exclusion.py)
KEYS += ("extend-per-file-ignores", "fixable", "unfixable")  # (issue 40: below)


class ConfigError(Exception):
    """A configuration or selector that cannot be used; the CLI exits 2 with this message."""


@dataclass(frozen=True)
class Settings:
    root: Path
    config_file: Path | None = None
    select: tuple[str, ...] | None = None  # None: the default set (every rule that is not opt-in)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # `target-torch`: the oldest torch the project supports, as (major, minor); None: read
    # from the project's declared requirement on torch (semantic/supported_torch.py).
    target_torch: tuple[int, int] | None = None
    # `extend-exclude` (relative to ``root``, as `exclude`), `--extend-exclude` (relative to
    # the folder the command ran in), and `force-exclude` / `--force-exclude` (exclusion.py).
    extend_exclude: tuple[str, ...] = ()
    command_line_exclude: PatternSet | None = None
    force_exclude: bool = False
    # `fixable` / `unfixable`: the codes (or prefixes) whose fixes `--fix` may apply (None:
    # all) and never applies; a finding of a code that is not fixable is reported without fix.
    fixable: tuple[str, ...] | None = None
    unfixable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for selector in (*(self.select or ()), *self.extend_select, *(self.fixable or ()), *self.unfixable):
            validate_selector(selector, self.config_file)
        for selector in (*self.ignore, *(c for _, cs in self.per_file_ignores for c in cs)):
            validate_selector(selector, self.config_file, deselecting=True)

    # The patterns are compiled on first use (pathspec is imported only when some are set).
    @cached_property
    def _per_file(self) -> tuple[tuple[pathspec.GitIgnoreSpec, tuple[str, ...]], ...]:
        import pathspec

        return tuple((pathspec.GitIgnoreSpec.from_lines([pattern]), codes) for pattern, codes in self.per_file_ignores)

    @property
    def enabled(self) -> tuple[type[Rule], ...]:
        return with_fixability(select_rules(self.select, self.extend_select, self.ignore), self.fixable, self.unfixable)

    def relative(self, path: Path) -> str | None:
        # abspath, not resolve: a symlink loop must not raise here (reading it reports TL000).
        rel = os.path.relpath(os.path.abspath(path), os.path.abspath(self.root))
        return None if rel.startswith("..") else Path(rel).as_posix()

    def is_excluded(self, path: Path, is_dir: bool = False) -> bool:
        return self.exclusion(path, is_dir) is not None

    def exclusion(self, path: Path, is_dir: bool = False) -> Exclusion | None:
        """The pattern, and the setting holding it, that excludes ``path``; None: not excluded."""
        return excluded_by(self._exclusions, path, is_dir)

    def without_pattern(self, pattern: str) -> Settings:
        """These settings without the exclusion pattern ``pattern`` (in any of its settings)."""
        import dataclasses

        def drop(patterns: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(p for p in patterns if p != pattern)

        line = self.command_line_exclude
        return dataclasses.replace(
            self, exclude=drop(self.exclude), extend_exclude=drop(self.extend_exclude),
            command_line_exclude=dataclasses.replace(line, patterns=drop(line.patterns)) if line is not None else None,
        )

    @cached_property
    def _exclusions(self) -> tuple[PatternSet, ...]:
        where = f" in {shown(self.config_file)}"
        found = [
            PatternSet(self.root, self.exclude, f"`exclude`{where}"),
            PatternSet(self.root, self.extend_exclude, f"`extend-exclude`{where}"),
        ]
        if self.command_line_exclude is not None:
            found.append(self.command_line_exclude)
        return tuple(p for p in found if p.patterns)

    def rules_for(self, path: Path | None) -> tuple[type[Rule], ...]:
        rules = self.enabled
        rel = self.relative(path) if path is not None and self.per_file_ignores else None
        if rel is None:
            return rules
        ignored = [c for spec, codes in self._per_file if spec.match_file(rel) for c in codes]
        if not ignored:
            return rules
        return tuple(r for r in rules if not any(_matches(r.code, c) for c in ignored))

    def fingerprint(self) -> str:
        """What the findings of a file depend on, besides its content (for the cache)."""
        return repr((self.select, self.extend_select, self.ignore, self.per_file_ignores, self.target_torch, self.fixable, self.unfixable))


def _matches(code: str, selector: str) -> bool:
    return selector == "ALL" or code.startswith(selector)


def validate_selector(selector: str, source: Path | None = None, deselecting: bool = False) -> None:
    where = f" in {source}" if source else ""
    matched = [r.code for r in all_rules() if r.code.startswith(selector)]
    if deselecting and INVALID_FILE in matched and set(matched) <= {INVALID_FILE, "TL001"}:  # (TL0, TL00: say TL001)
        raise ConfigError(
            f"`{selector}`{where}: {INVALID_FILE} (a file that cannot be read or parsed) is always reported "
            "and cannot be ignored; exclude the file instead"
        )
    if selector == "ALL" or matched:
        return
    raise ConfigError(f"unknown rule selector `{selector}`{where}")


def select_rules(
    select: Iterable[str] | None, extend_select: Iterable[str], ignore: Iterable[str]
) -> tuple[type[Rule], ...]:
    """Rules picked by ``select`` and ``extend_select`` minus ``ignore``; the more specific
    selector wins (as in ruff). With no ``select``, the default set is selected: every rule
    that is not opt-in. An opt-in rule is selected only by a selector that names it (its
    code, a prefix of it, or ``ALL``)."""
    ignore = list(ignore)
    selectors = list(extend_select) + (list(select) if select is not None else [])
    chosen = []
    for rule in all_rules():
        best_select = max((len(s) for s in selectors if _matches(rule.code, s)), default=-1)
        if select is None and not rule.opt_in:
            best_select = max(best_select, 0)
        best_ignore = max((len(s) for s in ignore if _matches(rule.code, s)), default=-1)
        if best_select >= 0 and best_select > best_ignore:
            chosen.append(rule)
    return tuple(chosen)


def find_config(start: Path) -> Path | None:
    """The nearest ``torchlint.toml``, or ``pyproject.toml`` with a ``[tool.torchlint]`` table."""
    for directory in (start, *start.parents):
        own = directory / "torchlint.toml"
        if own.is_file():
            return own
        pyproject = directory / "pyproject.toml"
        if pyproject.is_file() and _mentions_torchlint(pyproject) and "torchlint" in _read_toml(pyproject).get("tool", {}):
            return pyproject
    return None


def _mentions_torchlint(path: Path) -> bool:
    """Whether the file may hold a ``[tool.torchlint]`` table: most ``pyproject.toml`` files
    do not even name it, and are not parsed."""
    try:
        return b"torchlint" in path.read_bytes()
    except OSError:
        return True  # let the parse say why it cannot be read


def _read_toml(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot parse {path}: {e}") from None


def _codes(value: object, key: str, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: `{key}` must be a list of strings")
    return tuple(v.strip() for v in value)


def _torchlint_table(config_file: Path, data: dict) -> object:
    """The torchlint settings in a TOML document: its ``[tool.torchlint]`` table, whatever the
    file is called, or the top-level keys of a file of torchlint's own (``torchlint.toml``).
    None when the document holds no torchlint settings (a ``pyproject.toml`` without the
    table, or any file whose top level is another tool's)."""
    tool = data.get("tool")
    if isinstance(tool, dict) and "torchlint" in tool:
        return tool["torchlint"]
    if config_file.name == "torchlint.toml":
        return data
    if config_file.name == "pyproject.toml" or not set(data) & set(KEYS):
        return None
    return data


def load_settings(config_file: Path | None) -> Settings:
    """Settings from a config file (``None``: defaults rooted at the current directory). A
    file without torchlint settings gives the defaults rooted at its folder, and no
    ``config_file``."""
    if config_file is None:
        return Settings(root=Path.cwd())
    table = _torchlint_table(config_file, _read_toml(config_file))
    if table is None:
        return Settings(root=config_file.parent.resolve())
    if not isinstance(table, dict):
        raise ConfigError(f"{config_file}: [tool.torchlint] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{config_file}: unknown option `{unknown[0]}` (known: {', '.join(KEYS)})")
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{config_file}: `per-file-ignores` must be a table of pattern = [codes]")
    force_exclude = table.get("force-exclude", False)
    if not isinstance(force_exclude, bool):
        raise ConfigError(f"{config_file}: `force-exclude` must be true or false")
    target_torch = None
    if "target-torch" in table:
        from torchlint.semantic.supported_torch import parse_target

        try:
            target_torch = parse_target(table["target-torch"])
        except ValueError as error:
            raise ConfigError(f"{config_file}: {error}") from None
    return _with_adoption_keys(table, config_file, Settings(
        root=config_file.parent,
        config_file=config_file,
        target_torch=target_torch,
        select=_codes(table["select"], "select", config_file) if "select" in table else None,
        extend_select=_codes(table.get("extend-select", []), "extend-select", config_file),
        ignore=_codes(table.get("ignore", []), "ignore", config_file),
        exclude=_codes(table.get("exclude", []), "exclude", config_file),
        extend_exclude=_codes(table.get("extend-exclude", []), "extend-exclude", config_file),
        force_exclude=force_exclude,
        per_file_ignores=tuple(
            (pattern, _codes(codes, f"per-file-ignores.{pattern}", config_file)) for pattern, codes in sorted(per_file.items())
        ),
    ))


def resolve_settings(
    paths: Sequence[Path],
    config: Path | None = None,
    select: Sequence[str] | None = None,
    extend_select: Sequence[str] = (),
    ignore: Sequence[str] = (),
    extend_exclude: Sequence[str] = (),
    force_exclude: bool | None = None,
) -> Settings:
    """The run's settings: the config file (given, or the nearest one), then the CLI's
    overrides (``extend_exclude``: patterns relative to the current folder; ``force_exclude``:
    None keeps the configuration's)."""
    if config is None:
        # A path that does not exist (standard input's --stdin-filename) is looked up from
        # its folder.
        existing = [p.resolve() for p in (p if p.exists() else p.parent for p in paths) if p.exists()]
        start = Path(_common_dir(existing)) if existing else Path.cwd()
        config = find_config(start)
    settings = load_settings(config)
    return _keeping_adoption_keys(settings, Settings(
        root=settings.root,
        config_file=settings.config_file,
        select=tuple(select) if select else settings.select,
        extend_select=settings.extend_select + tuple(extend_select),
        ignore=settings.ignore + tuple(ignore),
        exclude=settings.exclude,
        per_file_ignores=settings.per_file_ignores,
        target_torch=settings.target_torch,
        extend_exclude=settings.extend_exclude,
        command_line_exclude=PatternSet(Path.cwd(), tuple(extend_exclude), "`--extend-exclude`") if extend_exclude else None,
        force_exclude=settings.force_exclude if force_exclude is None else force_exclude,
    ))


def _common_dir(paths: list[Path]) -> str:
    dirs = [str(p if p.is_dir() else p.parent) for p in paths]
    return os.path.commonpath(dirs)


# --- the keys a team adopting torchlint on a large codebase looks for first (issue 40) ----

def _with_adoption_keys(table: dict, config_file: Path, settings: Settings) -> Settings:
    """``settings`` with the table's ``fixable``, ``unfixable`` and ``extend-per-file-ignores``
    (its patterns added to ``per-file-ignores``', as ruff's key adds to the inherited ones)."""
    import dataclasses

    extend = table.get("extend-per-file-ignores", {})
    if not isinstance(extend, dict):
        raise ConfigError(f"{config_file}: `extend-per-file-ignores` must be a table of pattern = [codes]")
    added = tuple(
        (pattern, _codes(codes, f"extend-per-file-ignores.{pattern}", config_file)) for pattern, codes in sorted(extend.items())
    )
    return dataclasses.replace(
        settings,
        per_file_ignores=settings.per_file_ignores + added,
        fixable=_codes(table["fixable"], "fixable", config_file) if "fixable" in table else None,
        unfixable=_codes(table.get("unfixable", []), "unfixable", config_file),
    )


def _keeping_adoption_keys(loaded: Settings, resolved: Settings) -> Settings:
    """``resolved`` (the command line's overrides applied) with the keys ``loaded`` read."""
    import dataclasses

    return dataclasses.replace(resolved, fixable=loaded.fixable, unfixable=loaded.unfixable)


def fixes_allowed(code: str, fixable: Sequence[str] | None, unfixable: Sequence[str]) -> bool:
    """Whether ``--fix`` may apply the fixes of rule ``code``: it is ``fixable`` (default: every
    rule) and not ``unfixable`` (which wins, as in ruff)."""
    allowed = fixable is None or any(_matches(code, s) for s in fixable)
    return allowed and not any(_matches(code, s) for s in unfixable)


def with_fixability(
    rules: tuple[type[Rule], ...], fixable: Sequence[str] | None, unfixable: Sequence[str]
) -> tuple[type[Rule], ...]:
    """The rules, those whose fixes are not allowed (``fixes_allowed``) replaced by a version
    that reports its findings without fix."""
    if fixable is None and not unfixable:
        return rules
    return tuple(r if fixes_allowed(r.code, fixable, unfixable) else without_fix(r) for r in rules)


@lru_cache(maxsize=None)
def without_fix(rule: type[Rule]) -> type[Rule]:
    """``rule``, reporting its findings without their fixes (``unfixable``): no ``[*]``, no
    fix in JSON or in the editor, nothing for ``--fix`` to apply; the help line says what the
    fix would have done, and why it is not applied. ``fix_withheld`` tells the
    engine (TL001's fix is the engine's) and the cache."""

    def report(self: Rule, node, message: str | None = None, *, fix=None, help: str | None = None) -> None:
        if fix is not None and help is None:
            from torchlint.noqa import WITHHELD

            help = f"{fix.message} ({WITHHELD})"
        rule.report(self, node, message, fix=None, help=help)

    return type(rule.__name__, (rule,), {"report": report, "fix_withheld": True, "__module__": rule.__module__, "__doc__": rule.__doc__})
