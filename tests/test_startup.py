"""The start-up cache of dataclass methods (torchlint/_startup.py): the classes it builds are
the classes ``dataclasses`` builds, and a missing or broken file only means compiling."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap

import pytest

from torchlint import _startup


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(_startup, "_codes", _startup._Codes())


def _define():
    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int = 2
        tags: list = dataclasses.field(default_factory=list)

    return Point


def _behaviour(cls) -> tuple:
    p = cls(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3
    return (
        repr(p).split(".")[-1],
        p == cls(1),
        p == cls(1, 3),
        hash(cls(1, 2, ())) == hash(cls(1, 2, ())),
        cls.__init__.__annotations__,
        [f.name for f in dataclasses.fields(cls)],
    )


def test_classes_built_from_the_file_behave_as_those_compiled(tmp_path, fresh):
    path = tmp_path / "codes.marshal"
    expected = _behaviour(_define())
    with _startup.compiled_dataclasses(path) as counts:
        compiled = _behaviour(_define())
    assert counts["compiled"] > 3 and counts["reused"] == 0
    assert path.exists()
    assert "exec" not in vars(dataclasses)
    # ``exec`` of a string inherits no ``from __future__ import annotations`` (this module has
    # it): the return annotation is the object, not a string.
    assert compiled == expected and compiled[4]["return"] is None

    _startup._codes = _startup._Codes()  # another process: only the file is shared
    before = path.stat().st_mtime_ns
    with _startup.compiled_dataclasses(path) as counts:
        reused = _behaviour(_define())
    assert counts["reused"] > 3 and counts["compiled"] == 0
    assert reused == expected
    assert path.stat().st_mtime_ns == before  # nothing compiled: not written


@pytest.mark.parametrize("content", [b"", b"\x00garbage", b"\xe3\x00\x00\x00"])
def test_a_broken_file_means_compiling(tmp_path, fresh, content):
    path = tmp_path / "codes.marshal"
    path.write_bytes(content)
    with _startup.compiled_dataclasses(path) as counts:
        assert _behaviour(_define()) == _behaviour(_define())
    assert counts["compiled"] > 0
    _startup._codes = _startup._Codes()
    with _startup.compiled_dataclasses(path) as counts:
        _define()
    assert counts["compiled"] == 0  # it was written again, whole


def test_blocks_nest_and_an_unwritable_folder_is_no_error(tmp_path, fresh):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with _startup.compiled_dataclasses(blocker / "codes.marshal"):
        with _startup.compiled_dataclasses(tmp_path / "other.marshal"):
            _define()
        assert "exec" in vars(dataclasses)
    assert "exec" not in vars(dataclasses)
    assert not (tmp_path / "other.marshal").exists()


def test_the_command_line_fills_the_file_once(tmp_path):
    # Two fresh processes: the first compiles LibCST's dataclass methods and ours and writes
    # them, the second compiles none and leaves the file alone.
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    script = textwrap.dedent(
        """
        import sys
        from torchlint import _startup, cli
        from torchlint.rules import all_rules
        with _startup.compiled_dataclasses() as counts:
            all_rules()
        print(counts["reused"], counts["compiled"], "libcst" in sys.modules)
        """
    )
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True) for _ in range(2)]
    first, second = (tuple(run.stdout.split()) for run in runs)
    assert int(first[1]) > 500 and first[2] == "True"
    assert int(second[0]) == int(first[0]) + int(first[1]) and second[1] == "0"
    [written] = (tmp_path / "torchlint").iterdir()
    assert written.name.startswith(f"dataclasses-{sys.implementation.cache_tag}-")
