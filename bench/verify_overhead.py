"""What `torchlint verify` costs over running a training script bare.

For each runnable script of fixtures/scripts/correct/ and fixtures/scripts/buggy/, it times `python SCRIPT` and `torchlint verify --device cpu SCRIPT` end to end, in
the same environment (CUDA hidden, the same OMP_NUM_THREADS), alternating the two, and takes
the median of `--repeat` runs. It prints the per-script ratio verify/bare and the overall
overhead (total verify time over total bare time, minus one). The target is under 50%.

Scripts that fail bare (tl201_bad.py needs CUDA, runs_raises.py raises) are skipped: a bare
run that crashes early is no baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from torchlint.runtime.launcher import child_environment

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "fixtures" / "scripts"


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    started = time.perf_counter()
    code = subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    return time.perf_counter() - started, code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each command per script (median)")
    parser.add_argument("scripts", nargs="*", type=Path, help="scripts to time (default: fixtures/scripts/*/*.py)")
    options = parser.parse_args()
    scripts = options.scripts or sorted(SCRIPTS.glob("*/*.py"))
    env = child_environment("cpu")
    torchlint = [sys.executable, "-m", "torchlint", "verify", "--device", "cpu"]
    total_bare = total_verify = 0.0
    print(f"{'script':<40} {'bare s':>8} {'verify s':>9} {'ratio':>6}   (OMP_NUM_THREADS={env['OMP_NUM_THREADS']}, {os.cpu_count()} cores)")
    for script in scripts:
        bare, verify = [], []
        for _ in range(options.repeat):
            seconds, code = timed([sys.executable, str(script)], env, script.parent)
            if code != 0:
                break
            bare.append(seconds)
            verify.append(timed([*torchlint, str(script)], env, script.parent)[0])
        if not bare:
            print(f"{script.name:<40} skipped: fails when run bare")
            continue
        bare_s, verify_s = statistics.median(bare), statistics.median(verify)
        total_bare += bare_s
        total_verify += verify_s
        print(f"{script.name:<40} {bare_s:>8.2f} {verify_s:>9.2f} {verify_s / bare_s:>6.2f}")
    if not total_bare:
        return 1
    print(f"overall: bare {total_bare:.1f} s, verify {total_verify:.1f} s, overhead {100 * (total_verify / total_bare - 1):.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
