"""Start-up: import LibCST without compiling its node classes' methods on every run.

LibCST's node classes are dataclasses. When a dataclass is defined, ``dataclasses`` writes
the source of its ``__init__``, ``__eq__``, ``__repr__``... and compiles it with ``exec``:
about 1,000 compilations when LibCST is imported, 40% of the CPU time of a one-file run. The
source of each is the same on every run, so this module keeps the compiled code objects, as
Python keeps a module's in ``__pycache__``: in the user's cache folder, in one file per
interpreter bytecode version, keyed by the source text itself (a text never maps to stale
code). While LibCST is imported, ``dataclasses``' ``exec`` compiles only what the file does
not hold; nothing else is changed, and any problem with the file means compiling as usual.
The file is written (whole, or not at all) only when something had to be compiled. It is
not a ``.pyc`` file next to a source, so ``PYTHONDONTWRITEBYTECODE`` (set in many container
images) does not turn it off; ``$XDG_CACHE_HOME`` moves it.

The command line imports its modules (and so LibCST) and lints in ``compiled_dataclasses()``.
It knows nothing about PyTorch.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import functools
import gc
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from typing import Iterator


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchlint" / f"dataclasses-{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}.marshal"


def _load(path: Path) -> dict[str, object]:
    try:
        codes = marshal.loads(path.read_bytes())  # (``marshal.load`` reads a file in many small reads)
    except Exception:  # missing, unreadable, truncated or from elsewhere: compile as usual
        return {}
    if not isinstance(codes, dict):
        return {}
    return {k: v for k, v in codes.items() if isinstance(k, str) and type(v) is _CODE}


_CODE = type(_load.__code__)


def _store(path: Path, codes: dict[str, object]) -> None:
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temporary, "wb") as file:
            marshal.dump(codes, file)
        os.replace(temporary, path)  # whole or not at all, as another process may read it
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


class _Codes:
    """The file's code objects (read once per process) and those compiled since."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.known: dict[str, object] = {}
        self.compiled: dict[str, object] = {}
        self.counts = {"reused": 0, "compiled": 0}

    def exec(self, source, globals=None, locals=None, /):
        if isinstance(source, str):
            code = self.known.get(source)
            if code is None:
                # ``exec`` of a string inherits no ``__future__`` flag from dataclasses: nor may this.
                code = self.known[source] = self.compiled[source] = compile(source, "<string>", "exec", dont_inherit=True)
                self.counts["compiled"] += 1
            else:
                self.counts["reused"] += 1
            source = code
        return builtins.exec(source, globals, locals)


_codes = _Codes()
# Past this many, the file is started again from what one run compiles (LibCST upgrades).
_MOST = 5000


@contextlib.contextmanager
def compiled_dataclasses(path: Path | None = None) -> Iterator[dict[str, int]]:
    """While in the block, dataclasses defined (in any thread) reuse the code objects of the
    cache file (default ``cache_file()``), which gains those compiled, on leaving it. Only
    the linter's own code and its libraries may run in the block: it is a process-wide
    change. Re-entrant: an inner block changes nothing. Gives the counts of code objects
    reused and compiled."""
    if "exec" in vars(dataclasses):
        yield _codes.counts
        return
    path = cache_file() if path is None else path
    if _codes.path != path:
        _codes.path, _codes.known, _codes.compiled = path, _load(path), {}
    dataclasses.exec = _codes.exec  # found before the builtin by the functions of dataclasses
    try:
        yield _codes.counts
    finally:
        del dataclasses.exec
        if _codes.compiled:
            stored = _codes.known if len(_codes.known) <= _MOST else _codes.compiled
            _store(path, stored)
            _codes.compiled = {}


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused in the block (re-entrant): importing LibCST
    creates some hundred thousand objects, none of them garbage, and the collections they
    set off walked them again and again (a tenth of the import). The engine pauses it so
    while it lints a file (``cyclic_gc_paused``)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cyclic_gc_paused(function):
    """Run ``function`` with Python's cyclic garbage collector paused. A file's syntax tree is
    a million objects for 50,000 lines, none of them garbage until the file is done, and each
    collection that ran while it was built and analysed walked all of it again: a fifth of
    the time on large files. The garbage it leaves is collected once, after."""

    @functools.wraps(function)
    def paused(*args, **kwargs):
        with gc_paused():
            return function(*args, **kwargs)

    return paused
