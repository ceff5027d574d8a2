"""Where in the user's code something happened: the innermost frame that belongs to the user."""

from __future__ import annotations

import linecache
import os
import sys
import sysconfig
from pathlib import Path
from types import FrameType, TracebackType

_OWN_PACKAGE = str(Path(__file__).resolve().parent.parent)
_LIBRARY_DIRS = tuple(
    {str(Path(p).resolve()) for key in ("stdlib", "platstdlib", "purelib", "platlib") if (p := sysconfig.get_paths().get(key))}
)


class UserCode:
    """Tells the user's files (under the project roots) from libraries, and finds user frames."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = tuple(str(root.resolve()) for root in roots)
        self._verdicts: dict[str, bool] = {}

    def is_user_file(self, filename: str) -> bool:
        verdict = self._verdicts.get(filename)
        if verdict is None:
            verdict = self._verdicts[filename] = self._judge(filename)
        return verdict

    def _judge(self, filename: str) -> bool:
        if filename.startswith("<"):
            return False
        path = os.path.realpath(filename)
        if path.startswith(_OWN_PACKAGE + os.sep) or any(path.startswith(lib + os.sep) for lib in _LIBRARY_DIRS):
            return False
        if f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path:
            return False
        return any(path == root or path.startswith(root + os.sep) for root in self.roots)

    def caller(self) -> dict | None:
        """The innermost user frame on the current stack, as a location."""
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if self.is_user_file(frame.f_code.co_filename):
                return location(frame.f_code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None

    def in_traceback(self, tb: TracebackType | None) -> dict | None:
        """The innermost user frame of a traceback: where the user's code raised or called in."""
        found = None
        while tb is not None:
            if self.is_user_file(tb.tb_frame.f_code.co_filename):
                found = location(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
            tb = tb.tb_next
        return found


def location(filename: str, line: int) -> dict:
    return {"file": display_path(filename), "line": line, "code": linecache.getline(filename, line).strip()}


def display_path(filename: str) -> str:
    try:
        return os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
