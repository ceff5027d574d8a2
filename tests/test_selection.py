"""Default selection: opt-in rules are selected only by a selector that names them."""

import pytest

from torchlint.config import select_rules
from torchlint.rules import rule_by_code


@pytest.fixture
def tl502_opt_in(monkeypatch):
    monkeypatch.setattr(rule_by_code("TL502"), "opt_in", True)


def codes(rules):
    return {r.code for r in rules}


def test_default_set_leaves_out_opt_in_rules(tl502_opt_in):
    chosen = codes(select_rules(None, [], []))
    assert "TL502" not in chosen and "TL501" in chosen


@pytest.mark.parametrize("selector", ["TL502", "TL5", "TL", "ALL"])
def test_a_selector_that_names_an_opt_in_rule_selects_it(tl502_opt_in, selector):
    assert "TL502" in codes(select_rules([selector], [], []))
    assert "TL502" in codes(select_rules(None, [selector], []))


def test_extend_select_adds_to_the_default_set(tl502_opt_in):
    chosen = codes(select_rules(None, ["TL502"], []))
    assert {"TL101", "TL502"} <= chosen


def test_ignore_still_wins_over_a_less_specific_select(tl502_opt_in):
    assert "TL502" not in codes(select_rules(["TL"], [], ["TL50"]))


def test_rule_docs_say_opt_in(tl502_opt_in):
    assert rule_by_code("TL502").selection_note().startswith("Opt-in")
    assert rule_by_code("TL501").selection_note() == "Selected by default."
