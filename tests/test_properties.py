"""Property tests: the engine never crashes on valid Python, and fixing is idempotent.

Training-shaped programs and notebooks are generated in tests/test_generated_training.py."""

from __future__ import annotations

import hypothesmith
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source

ALL_RULES = select_rules(["ALL"], [], [])
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


@PROPERTY_SETTINGS
@given(hypothesmith.from_grammar())
def test_engine_never_crashes_on_generated_python(source):
    result = lint_module_source(source, ALL_RULES, FixMode.UNSAFE)
    assert all(f.start.row >= 1 and f.start.column >= 1 for f in result.findings)
    again = lint_module_source(result.fixed_source, ALL_RULES, FixMode.UNSAFE)
    assert again.fixed_source == result.fixed_source


@PROPERTY_SETTINGS
@given(hypothesmith.from_node())
def test_engine_never_crashes_on_generated_syntax_trees(source):
    lint_module_source(source, ALL_RULES, FixMode.UNSAFE)
