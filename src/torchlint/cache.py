"""A content-keyed result cache, as ruff keeps one: a file whose bytes, rule selection and
torchlint code are unchanged is not linted again. Kept in ``.torchlint_cache`` next to the
configuration (or in the current directory)."""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import torchlint
from torchlint.rule import Finding, Rule

DIRNAME = ".torchlint_cache"


def sha256(data: bytes = b""):
    """``hashlib.sha256``, imported on first use: a run without the cache does not load OpenSSL."""
    import hashlib

    return hashlib.sha256(data)


@lru_cache(maxsize=None)
def code_version() -> str:
    """torchlint's version, and for code run from a source tree (an editable install, changed
    in place under an unchanged version number) a digest of its own Python files, the
    package's and the rules': a result or a summary that older code wrote is never read. An
    installed release is its version (no files read)."""
    package = Path(torchlint.__file__).parent
    if {"site-packages", "dist-packages"} & set(package.parts):
        return torchlint.__version__
    digest = sha256(torchlint.__version__.encode())
    folders = [package]
    spec = importlib.util.find_spec("torchlint.rules")  # (found, not imported: the rules sit above)
    folders += [Path(p) for p in (spec.submodule_search_locations or ())] if spec is not None else []
    for folder in dict.fromkeys(folders):
        for path in sorted(folder.rglob("*.py")):
            try:
                digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
            except OSError:
                continue
    return digest.hexdigest()[:16]


@dataclass
class Entry:
    """A file's findings, and what its lint asked of the rest of the project with the answers
    (the questions are opaque here: ``semantic.view.AskedView``)."""

    findings: list[Finding]
    asked: dict[tuple, object]


def key(source: bytes, rules: Sequence[type[Rule]], with_edits: bool, suffix: str, depends: str = "") -> str:
    """The key of a file's findings; ``depends`` names what else they depend on, as far as it
    is known before linting."""
    digest = sha256()
    # (A rule whose fixes are withheld, `unfixable`, reports its findings without them.)
    codes = ",".join(r.code + ("-" if getattr(r, "fix_withheld", False) else "") for r in rules)
    digest.update(f"{code_version()}|{codes}|{with_edits}|{suffix}|{depends}|".encode())
    digest.update(source)
    return digest.hexdigest()


def summary_key(source: bytes, suffix: str, kind: str = "summary") -> str:
    """The key of a file's project-index summary (``kind`` "loads": its reads of what it
    loads alone): its content (and kind) alone."""
    digest = sha256()
    digest.update(f"{code_version()}|{kind}|{suffix}|".encode())
    digest.update(source)
    return digest.hexdigest()


def _path(root: Path, key: str) -> Path:
    return root / DIRNAME / key[:2] / key[2:]


def load(root: Path, key: str) -> object | None:
    try:
        with _path(root, key).open("rb") as f:
            import pickle

            return pickle.load(f)
    except Exception:  # missing, unreadable or from another version: lint afresh
        return None


def store(root: Path, key: str, findings: object) -> None:
    """Write one entry atomically (a temporary file, then a rename), so that runs at the same
    time over the same tree never see half an entry."""
    target = _path(root, key)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with (root / DIRNAME / ".gitignore").open("x") as ignore:
                ignore.write("# Created by torchlint automatically.\n*\n")
        except FileExistsError:
            pass
        import tempfile  # only a run that stores results needs it

        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
    except OSError:
        return  # a read-only checkout still lints; it just is not cached
    try:
        with os.fdopen(fd, "wb") as f:
            import pickle

            pickle.dump(findings, f)
        os.replace(tmp, target)
    except Exception:
        try:
            os.unlink(tmp)
        except OSError:
            pass
