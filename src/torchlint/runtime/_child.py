"""The child process of `torchlint verify`.

`python -m torchlint.runtime._child RESULT CONFIG [ARGS...]` installs the instrumentation, runs
the script as `__main__` with `sys.argv = [SCRIPT, *ARGS]` (or the reference trainer), and
writes what it saw to the JSON file RESULT. CONFIG is a JSON object: `script` or `reference`,
`device`, `limit_batches`, `max_steps`. Exit status 2 means the run could not be set up (`setup_error`).

The facts are written as the run goes (each time replacing the file atomically), and a last
time with the run's `outcome`: a file without an outcome is the evidence of a run that died.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback
from pathlib import Path

from torchlint.runtime.locations import location

_OWN_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

class VerifierTimeout(BaseException):
    """Raised in the script when the parent's `--timeout` expires (it sends SIGTERM)."""


def _on_terminate(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process
    raise VerifierTimeout


def main(argv: list[str]) -> int:
    result_path, config, script_args = Path(argv[0]), json.loads(argv[1]), argv[2:]
    signal.signal(signal.SIGTERM, _on_terminate)
    try:
        import torch
    except ImportError as error:
        if error.name != "torch":
            raise
        _write(result_path, {"setup_error": "PyTorch is not installed; install the verify extra: pip install 'torchlint[verify]'"})
        return 2

    from torchlint.runtime.instrument import Recorder
    from torchlint.runtime.locations import UserCode

    cuda_available = torch.cuda.is_available()
    device = {"requested": config["device"], "cuda_available": cuda_available, "cuda_hidden": not cuda_available}
    if config["device"] == "cuda" and not cuda_available:
        _write(result_path, {"setup_error": "--device cuda: no CUDA device is available"})
        return 2
    script = config.get("script")
    roots = [Path(script).resolve().parent] if script else [Path.cwd()]
    user = UserCode(roots)
    publish = lambda facts: _write(result_path, {"device": device, "reference": None, **facts})  # noqa: E731
    recorder = Recorder(
        user, limit_batches=config.get("limit_batches"), cuda_hidden=not cuda_available, publish=publish,
        max_steps=config.get("max_steps"),
    )
    reference = None
    started = time.perf_counter()
    publish(recorder.facts())
    recorder.install()
    try:
        if script:
            outcome = _run_script(script, script_args, user, recorder)
        else:
            from torchlint.runtime.reference import FactoryError, run_reference

            try:
                reference, outcome = run_reference(config["reference"], cuda=cuda_available, user=user)
            except FactoryError as error:
                _write(result_path, {"setup_error": str(error)})
                return 2
        outcome["duration_s"] = round(time.perf_counter() - started, 3)
    finally:
        recorder.finish()
    sys.stdout.flush()
    _write(result_path, {"device": device, "outcome": outcome, "reference": reference, **recorder.facts()})
    return 0


def _run_script(script: str, args: list[str], user, recorder) -> dict:
    from torchlint.runtime.instrument import StepsDone

    sys.argv = [script, *args]
    sys.path[0] = str(Path(script).resolve().parent)  # as `python SCRIPT` would have it
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exit_:
        if exit_.code is None or exit_.code == 0:
            return {"status": "ok"}
        if not isinstance(exit_.code, int):
            print(exit_.code, file=sys.stderr)
        return {"status": "exit", "exit_code": exit_.code if isinstance(exit_.code, int) else 1}
    except VerifierTimeout as timeout:
        return {"status": "timeout", "location": _forget(timeout, user)}
    except StepsDone as done:  # --max-steps ended the run where it could not leave the loop
        return {"status": "ok", "ended": str(done), "location": _forget(done, user)}
    except BaseException as error:  # noqa: BLE001 - whatever the script raises is the finding
        recorder.library_cuda_request_reached_user(error)
        _print_user_traceback(error, script)
        message = f"{type(error).__name__}: {error}".splitlines()[0][:500]
        return {"status": "error", "message": message, "location": _forget(error, user)}
    return {"status": "ok"}


def _forget(error: BaseException, user) -> dict | None:
    """Where the user's code was, then drop the frames so their tensors and graphs can die. A
    syntax error in a user file has no frame there: its place is the error's own file and line."""
    where = user.in_traceback(error.__traceback__)
    if isinstance(error, SyntaxError) and error.filename and error.lineno and user.is_user_file(error.filename):
        where = location(error.filename, error.lineno)
    traceback.clear_frames(error.__traceback__)
    error.__traceback__ = None
    return where


def _print_user_traceback(error: BaseException, script: str) -> None:
    """Print the traceback as `python SCRIPT` would: starting at the script, not at runpy. An
    error raised before the script ran a line (a syntax error in it, found while runpy compiled
    it) has no frame of the user's: it prints as Python prints it, the file, line, caret and
    message, without torchlint's or runpy's frames."""
    script_path = os.path.realpath(script)
    tb = error.__traceback__
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename) != script_path:
        tb = tb.tb_next
    if tb is None:
        tb = error.__traceback__
        while tb is not None and _is_launch_frame(tb.tb_frame.f_code.co_filename):
            tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)
    sys.stderr.flush()


def _is_launch_frame(filename: str) -> bool:
    """A frame of what starts the script: this package, or runpy (frozen or not)."""
    if filename.startswith("<frozen"):
        return True
    path = os.path.realpath(filename)
    return path.startswith(_OWN_DIR + os.sep) or path == os.path.realpath(runpy.__file__)


def _write(path: Path, facts: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(facts), encoding="utf-8")
    os.replace(partial, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
