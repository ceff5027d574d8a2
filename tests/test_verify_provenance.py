"""Traced numbers (TL103's provenance): ordinary numbers that remember their origins through
Python arithmetic, and lose them honestly where the arithmetic leaves Python's numbers."""

from __future__ import annotations

import copy
import json
import math
import pickle

import pytest

from torchlint.runtime.provenance import (
    NO_GRAPH,
    Origin,
    TracedFloat,
    TracedInt,
    describe,
    kinds,
    origins_of,
    traced,
    untraced,
)


def trained() -> Origin:
    origin = Origin(graph=True)
    origin.trained = True
    return origin


def test_running_means_keep_their_origin():
    loss = trained()
    running = 0.0
    for value, samples in [(0.5, 32), (0.25, 32), (0.125, 8)]:
        running += traced(value, frozenset({loss})) * samples
    mean = running / 72
    assert isinstance(mean, TracedFloat) and origins_of(mean) == {loss}
    assert mean == (0.5 * 32 + 0.25 * 32 + 0.125 * 8) / 72
    assert origins_of(sum([traced(1.0, frozenset({loss}))] * 3) / 3) == {loss}
    assert origins_of(round(mean, 3)) == {loss} and origins_of(-mean) == {loss} and origins_of(abs(mean)) == {loss}


def test_counts_keep_their_origin_into_a_ratio():
    correct = 0
    for count in (3, 4):
        correct += traced(count, frozenset({NO_GRAPH}))
    assert isinstance(correct, TracedInt)
    accuracy = correct / 10
    assert isinstance(accuracy, TracedFloat) and accuracy == 0.7 and origins_of(accuracy) == {NO_GRAPH}


def test_mixing_origins_is_mixed_and_leaving_python_arithmetic_is_untraced():
    loss, val = trained(), Origin(graph=False)
    both = traced(0.5, frozenset({loss})) + traced(0.5, frozenset({val}))
    assert describe(origins_of(both)) == "mixed"
    assert describe(origins_of(traced(0.5, frozenset({loss})))) == "training-loss"
    assert describe(origins_of(traced(0.5, frozenset({val})))) == "other"
    assert kinds(origins_of(traced(0.5, frozenset({val, Origin(graph=True)})))) == ["graph", "no-graph"]
    for lost in (float(traced(0.5, frozenset({loss}))), math.fsum([traced(0.5, frozenset({loss}))]), 0.5):
        assert origins_of(lost) is None and describe(origins_of(lost)) == "untraced"


def test_a_traced_type_made_by_library_code_works_and_is_untraced():
    import statistics

    loss = trained()
    mean = statistics.mean([traced(0.5, frozenset({loss})), traced(0.25, frozenset({loss}))])
    assert type(mean) is TracedFloat  # statistics makes its result as type(data)(value)
    assert mean * 2 == 0.75 and origins_of(mean * 2) is None
    assert TracedInt(4) + 1 == 5 and origins_of(TracedInt(4)) is None


def test_other_number_types_answer_as_they_do_for_plain_numbers():
    numpy = pytest.importorskip("numpy")
    value = traced(0.5, frozenset({NO_GRAPH}))
    assert type(value + numpy.float64(1.0)) is numpy.float64
    assert type(numpy.float64(1.0) + value) is numpy.float64
    assert value + 1j == 0.5 + 1j


def test_traced_numbers_serialise_and_copy_as_plain_numbers():
    value, count = traced(0.5, frozenset({NO_GRAPH})), traced(3, frozenset({NO_GRAPH}))
    assert type(pickle.loads(pickle.dumps(value))) is float and type(copy.deepcopy(count)) is int
    assert json.dumps({"loss": value, "correct": count}) == '{"loss": 0.5, "correct": 3}'
    assert f"{value:.2f}" == "0.50" and repr(value) == "0.5" and str(count) == "3"
    assert hash(value) == hash(0.5) and value == 0.5 and count == 3


def test_untraced_copies_only_the_containers_that_hold_traced_numbers():
    plain_part = {"weights": [1, 2]}
    checkpoint = {"model": plain_part, "loss": traced(0.5, frozenset()), "history": [traced(1, frozenset()), 2.0]}
    saved = untraced(checkpoint)
    assert saved is not checkpoint and saved["model"] is plain_part
    assert type(saved["loss"]) is float and [type(v) for v in saved["history"]] == [int, float]
    assert type(checkpoint["loss"]) is TracedFloat  # the user's own dict is left as it was
    assert untraced(plain_part) is plain_part


def test_yaml_dumps_traced_numbers_as_numbers():
    yaml = pytest.importorskip("yaml")
    from torchlint.runtime.provenance import register_with_yaml

    register_with_yaml()
    assert yaml.safe_load(yaml.safe_dump({"loss": traced(0.5, frozenset()), "n": traced(3, frozenset())})) == {"loss": 0.5, "n": 3}
