"""The torch versions a project supports: the oldest one, which decides whether a migration
fix is safe (its replacement must exist in every supported version, ``torch_api.available``).

It is ``target-torch`` in the configuration when set (``config.py``; the project index
carries it, ``ProjectIndex.target_torch``), else what the project declares it requires of
torch: ``pyproject.toml`` (``[project]`` dependencies and optional dependencies, Poetry's
dependencies and groups), ``requirements*.txt`` (and ``requirements/*.txt``), ``setup.cfg``
(``install_requires``, ``extras_require``), ``setup.py`` (the literal ``install_requires``
list, read with ``ast``, never run) and conda environment files (``environment.yml``, ``env.yml``,
``conda.yaml``). The oldest supported version is
the lower bound (``torch>=1.13``: 1.13; ``torch==2.0.1``: 2.0; ``torch~=2.1``: 2.1); with
several declarations, the lowest; a declaration with no lower bound (``torch``,
``torch<2``), or none at all: unknown (None).

The files are looked for from the linted file's folder upward: the first folder that
declares torch decides; the search stops at a project's root (a folder holding
``pyproject.toml``, ``setup.py``, ``setup.cfg`` or ``.git``). Each folder is read once per
process (``declared_oldest`` is cached), not once per file.
"""

from __future__ import annotations

import ast
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

Version = tuple[int, int]

_TARGET = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")
# A requirement on torch: its name (conda's `pytorch` too, a channel prefix allowed), extras,
# then the specifiers.
_REQUIREMENT = re.compile(r"^\s*(?:[\w.-]+::)?(?:torch|pytorch)(?![\w.-])\s*(?:\[[^\]]*\])?\s*(.*)$", re.IGNORECASE)
_SPECIFIER = re.compile(r"^\s*(===|~=|==|>=|<=|!=|<|>|=|\^|~)?\s*v?(\d+)(?:\.(\d+|\*))?")
_LOWER = ("===", "~=", "==", ">=", ">", "=", "^", "~", None)
_ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
# A conda environment file's names: `environment.yml`, `env.yml`, `environment-gpu.yaml`, `conda.yml`.
_CONDA_ENVIRONMENT = re.compile(r"(?:environment|env|conda)(?:[._-][\w.-]*)?\.ya?ml")


def marks_project(folder: Path) -> bool:
    """Whether ``folder`` is a project's root: it holds ``pyproject.toml``, ``setup.py``,
    ``setup.cfg`` or ``.git``."""
    return any((folder / marker).exists() for marker in _ROOT_MARKERS)


def parse_target(value: object) -> Version:
    """``target-torch`` (``"2.1"``, ``"2.1.2"``) as ``(2, 1)``; ValueError when it is not one."""
    if not isinstance(value, str) or not _TARGET.fullmatch(value.strip()):
        raise ValueError(f'`target-torch` must be a torch version as a string, like "2.1" (got {value!r})')
    match = _TARGET.fullmatch(value.strip())
    return int(match.group(1)), int(match.group(2))


def show(version: Version | None) -> str:
    return "unknown" if version is None else f"{version[0]}.{version[1]}"


Bounds = tuple["Version | None", "Version | None"]  # (oldest, newest) a declaration admits
_ANY_MINOR = 99  # `torch<2`, `torch==2.*`: every minor version of the last major


def lower_bound(specifiers: str) -> Version | None:
    """The oldest version a specifier set admits (``>=1.13,<3``: 1.13); None when it sets no
    lower bound. ``specifiers`` is what follows the name (an environment marker, a comment
    or a conda build string may follow)."""
    return bounds(specifiers)[0]


def bounds(specifiers: str) -> Bounds:
    """The oldest and the newest (major, minor) a specifier set admits (``>=1.13,<2.4``:
    1.13 and 2.3; ``==2.0.1``: 2.0 and 2.0; ``~=2.1``: 2.1 and 2.99, any 2.x); None for a side
    it does not bound, or a specifier this reader does not know."""
    text = specifiers.split(";")[0].split("#")[0].strip()
    if not text or text.startswith("@"):
        return None, None
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    lowers, uppers = [], []
    for part in re.split(r"[,|]|\s+(?=[<>=!~^])", text):
        part = part.strip()
        if not part:
            continue
        match = _SPECIFIER.match(part)
        if match is None:
            return None, None  # something this reader does not know: unknown, not a guess
        operator, major_text, minor_text = match.groups()
        major, wildcard = int(major_text), minor_text in (None, "*")
        minor = 0 if wildcard else int(minor_text)
        if operator in _LOWER:
            lowers.append((major, minor))
        if operator in ("==", "===", "=") or operator is None:
            uppers.append((major, _ANY_MINOR) if wildcard else (major, minor))
        elif operator == "<=":
            uppers.append((major, _ANY_MINOR) if wildcard else (major, minor))
        elif operator == "<":
            # `<2.4` admits 2.3 at most, `<2` / `<2.0` any 1.x; `<2.4.1` admits 2.4.0
            if part.count(".") >= 2:
                uppers.append((major, minor))
            elif minor > 0:
                uppers.append((major, minor - 1))
            else:
                uppers.append((major - 1, _ANY_MINOR))
        elif operator == "~=":
            uppers.append((major, _ANY_MINOR) if part.count(".") < 2 else (major, minor))
        if operator == "=" and "=" in part[1:]:
            break  # conda's `pytorch=2.0.1=py3.9_cuda...`: the rest is a build string
    return (max(lowers) if lowers else None), (min(uppers) if uppers else None)


def requirement_bound(line: str) -> tuple[bool, Bounds]:
    """(whether the line requires torch, the oldest and newest versions it admits)."""
    match = _REQUIREMENT.match(line)
    if match is None:
        return False, (None, None)
    return True, bounds(match.group(1))


def _oldest(found: list[Bounds]) -> Version | None:
    if not found or any(b[0] is None for b in found):
        return None
    return min(b[0] for b in found)  # type: ignore[type-var]


def _newest(found: list[Bounds]) -> Version | None:
    if not found or any(b[1] is None for b in found):
        return None
    return max(b[1] for b in found)  # type: ignore[type-var]


# --- the files ---------------------------------------------------------------------------


def _lines_bounds(lines: list[str]) -> list[Bounds]:
    found = []
    for line in lines:
        requires, bound = requirement_bound(line)
        if requires:
            found.append(bound)
    return found


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _from_pyproject(path: Path) -> list[Bounds]:
    text = _read_text(path)
    if text is None or not re.search(r"\btorch\b", text):
        return []
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    found: list[Bounds] = []
    project = data.get("project") if isinstance(data.get("project"), dict) else {}
    lists = [project.get("dependencies", [])]
    extras = project.get("optional-dependencies", {})
    if isinstance(extras, dict):
        lists += list(extras.values())
    for entries in lists:
        if isinstance(entries, list):
            found += _lines_bounds([e for e in entries if isinstance(e, str)])
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    if isinstance(poetry, dict):
        tables = [poetry.get("dependencies", {}), poetry.get("dev-dependencies", {})]
        groups = poetry.get("group", {})
        if isinstance(groups, dict):
            tables += [g.get("dependencies", {}) for g in groups.values() if isinstance(g, dict)]
        for table in tables:
            if isinstance(table, dict):
                for name, spec in table.items():
                    if name.lower() in ("torch", "pytorch"):
                        found += _poetry_bounds(spec)
    return found


def _poetry_bounds(spec: object) -> list[Bounds]:
    if isinstance(spec, str):
        return [(None, None) if spec.strip() == "*" else bounds(spec)]
    if isinstance(spec, dict):
        version = spec.get("version")
        return [bounds(version) if isinstance(version, str) else (None, None)]
    if isinstance(spec, list):
        return [b for item in spec for b in _poetry_bounds(item)]
    return [(None, None)]


def _from_requirements(path: Path) -> list[Bounds]:
    text = _read_text(path)
    return _lines_bounds(text.splitlines()) if text is not None else []


def _from_setup_cfg(path: Path) -> list[Bounds]:
    text = _read_text(path)
    if text is None or "torch" not in text:
        return []
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    found: list[Bounds] = []
    if parser.has_option("options", "install_requires"):
        found += _lines_bounds(parser.get("options", "install_requires").splitlines())
    if parser.has_section("options.extras_require"):
        for _, value in parser.items("options.extras_require"):
            found += _lines_bounds(value.splitlines())
    return found


def _from_setup_py(path: Path) -> list[Bounds]:
    text = _read_text(path)
    if text is None or "torch" not in text:
        return []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    # Module-level `NAME = [...]`, for `install_requires=NAME`.
    lists: dict[str, ast.expr] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            lists[statement.targets[0].id] = statement.value
    found: list[Bounds] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg not in ("install_requires", "extras_require"):
                continue
            value = keyword.value
            if isinstance(value, ast.Name):
                value = lists.get(value.id, value)
            values = value.values if isinstance(value, ast.Dict) else [value]
            for entries in values:
                if isinstance(entries, (ast.List, ast.Tuple)):
                    found += _lines_bounds([e.value for e in entries.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)])
    return found


def _from_environment(path: Path) -> list[Bounds]:
    text = _read_text(path)
    if text is None:
        return []
    # The items of its `dependencies:` (and their `- pip:` list), not of `channels:` (a
    # `- pytorch` channel is no requirement).
    items, section = [], None
    for line in text.splitlines():
        top = re.match(r"^([A-Za-z_][\w-]*)\s*:", line)
        if top:
            section = top.group(1)
            continue
        item = re.match(r"^\s*-\s*['\"]?([^'\"\n]+)", line)
        if item and section == "dependencies":
            items.append(item.group(1))
    # conda's single `=` (`pytorch=2.0`) reads as pip's `==`.
    return _lines_bounds(items)


def _declarations(folder: Path) -> list[Bounds]:
    """The lower bounds of every torch requirement the folder's files declare."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    found: list[Bounds] = []
    for name in names:
        path = folder / name
        lower = name.lower()
        if lower == "pyproject.toml":
            found += _from_pyproject(path)
        elif lower == "setup.cfg":
            found += _from_setup_cfg(path)
        elif lower == "setup.py":
            found += _from_setup_py(path)
        elif _CONDA_ENVIRONMENT.fullmatch(lower):
            found += _from_environment(path)
        elif lower.startswith("requirements") and lower.endswith(".txt"):
            found += _from_requirements(path)
        elif lower == "requirements" and path.is_dir():
            try:
                inner = sorted(os.listdir(path))
            except OSError:
                inner = []
            for file in inner:
                if file.endswith(".txt"):
                    found += _from_requirements(path / file)
    return found


def declared_oldest(folder: str) -> Version | None:
    """The oldest torch the project holding ``folder`` declares it supports (None: unknown)."""
    return _oldest(_declared(folder))


def declared_newest(folder: str) -> Version | None:
    """The newest torch the project holding ``folder`` declares it supports: every
    declaration pins or caps it (``torch==1.13.1``, ``torch<2.4``); None: unknown, or some
    version of every later release is allowed."""
    return _newest(_declared(folder))


@lru_cache(maxsize=4096)
def _declared(folder: str) -> tuple[Bounds, ...]:
    """The bounds of every torch requirement of the first folder from ``folder`` up that
    declares one (within the project). Each folder on the way up is read once (cached)."""
    current = Path(os.path.abspath(folder))
    found = _declarations(current)
    if found:
        return tuple(found)
    if current.parent == current or marks_project(current):
        return ()
    return _declared(str(current.parent))
