"""The README's rule table and docs/rules.md are generated from the rules' code: keep them current."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_rule_docs_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_docs.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_readme_has_both_setup_blocks_that_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    for marker in ("setup-lint", "setup-test"):
        assert f"<!-- {marker} -->\n```bash\n" in readme
        assert marker in ci
