"""Real PyTorch code from the package index: torch's own sources and pytorch-ignite's (both
installed by the dev extra) are linted and fixed with every rule.

For each file: linting raises no exception and reports no internal error, the result of
`--fix --unsafe-fixes` compiles, and a second run changes nothing. The torch files are those
that hold training idioms (a backward pass, `zero_grad`, `torch.save`, `.cuda()`, `no_grad`,
`.eval()`, an optimizer step), up to 100 kB each, in path order: a fixed subset, so the test
takes about the same time on every run. The files are shared between two worker processes.

Marked `corpus`: `pytest -m "not corpus"` leaves it out locally; CI runs it.
"""

from __future__ import annotations

import importlib.util
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

pytestmark = pytest.mark.corpus

TRAINING_IDIOMS = re.compile(rb"\.backward\(|zero_grad|torch\.save\(|\.cuda\(|no_grad|\.eval\(\)|optimizer\.step")
MAX_BYTES = 100_000
# Files where a rule is known to break a property, with the minimal reproducer: reported to
# be fixed in the rule, expected to fail here until then.
KNOWN_BROKEN: dict[str, str] = {}  # file -> why it is known not to settle (none now)


def package_folder(name: str) -> Path:
    """Where an installed package's sources are (without importing it: torch is slow to)."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        pytest.skip(f"{name} is not installed (the dev extra installs it)")
    return Path(spec.origin).parent


def corpus() -> list[tuple[Path, str]]:
    torch_root = package_folder("torch")
    files = [
        (path, f"torch/{path.relative_to(torch_root)}")
        for path in sorted(torch_root.rglob("*.py"))
        if path.stat().st_size <= MAX_BYTES and TRAINING_IDIOMS.search(path.read_bytes())
    ]
    ignite_root = package_folder("ignite")
    files += [(path, f"ignite/{path.relative_to(ignite_root)}") for path in sorted(ignite_root.rglob("*.py"))]
    return files


def check_file(path: Path) -> list[str]:
    """What is wrong with linting and fixing ``path`` (nothing, when all is well)."""
    from torchlint.config import select_rules
    from torchlint.engine import FixMode, lint_module_source

    rules = select_rules(["ALL"], [], [])
    source = path.read_bytes()
    try:
        result = lint_module_source(source, rules, FixMode.UNSAFE)
    except Exception as error:  # an exception that escaped the engine
        return [f"internal error: {type(error).__name__}: {error}"]
    problems = [f"internal error: {failure}" for failure in getattr(result, "failures", ())]
    if result.fixed_count:
        try:
            compile(result.fixed_source, str(path), "exec")
        except SyntaxError as error:
            problems.append(f"the fixed file does not compile: {error} ({', '.join(f.code for f in result.findings)})")
        again = lint_module_source(result.fixed_source, rules, FixMode.UNSAFE)
        if again.fixed_source != result.fixed_source:
            problems.append(f"a second --fix --unsafe-fixes changes the file ({again.fixed_count} fixes)")
    return problems


def test_real_code_lints_and_fixes_soundly():
    files = corpus()
    assert len(files) > 300
    with ProcessPoolExecutor(max_workers=2) as pool:
        outcomes = dict(zip((name for _, name in files), pool.map(check_file, [path for path, _ in files], chunksize=4)))
    broken = {name: problems for name, problems in outcomes.items() if problems and name not in KNOWN_BROKEN}
    assert not broken, "\n".join(f"{name}: {'; '.join(problems)}" for name, problems in sorted(broken.items()))
    settled = [name for name in KNOWN_BROKEN if name in outcomes and not outcomes[name]]
    assert not settled, f"fixed now, remove from KNOWN_BROKEN: {settled}"
