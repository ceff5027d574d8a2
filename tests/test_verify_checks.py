"""Verdicts of `torchlint verify` on hand-made facts (no torch, no child process)."""

from __future__ import annotations

import math

import pytest

from torchlint.runtime.checks import (
    CHECKS,
    DISABLE_ENV,
    FAIL,
    NOT_EXERCISED,
    PASS,
    WARN,
    blank_facts,
    evaluate,
    loss_trend,
    notes,
)

HERE = {"file": "train.py", "line": 12, "code": "optimizer.step()"}


def facts(**changes) -> dict:
    base = blank_facts({"requested": "cpu", "cuda_available": False, "cuda_hidden": True})
    base["outcome"] = {"status": "ok", "duration_s": 1.0}
    base.update(changes)
    return base


def verdict(name: str, data: dict):
    return next(check for check in evaluate(data, disabled=set()) if check.check == name)


def optimizer(losses, index=0, coupled=(), checked=0, stale=0) -> dict:
    return {
        "index": index,
        "name": "SGD",
        "steps": len(losses),
        "checked_steps": checked,
        "stale": {"count": stale, "sites": [{"location": HERE, "count": stale}] if stale else []},
        "losses": losses,
        "coupled": list(coupled),
        "lr": [[1, 0.1]],
    }


def sighted(count: int) -> dict:
    return {"count": count, "sites": [{"location": HERE, "count": count}]}


# -- learns ---------------------------------------------------------------------------------


def test_loss_trend_fell_rose_flat():
    falling = [1.0 - 0.05 * i for i in range(16)]
    assert loss_trend(falling).direction == "fell"
    assert loss_trend(falling[::-1]).direction == "rose"
    assert loss_trend([0.5] * 16).direction == "flat"


def test_loss_trend_treats_noise_as_flat():
    noisy = [5.0 + (1.5 if i % 2 else -1.5) for i in range(24)]
    noisy[-1] += 0.4  # the last window's mean ends a little higher: noise, not a rise
    assert loss_trend(noisy).direction == "flat"


def test_loss_trend_nonfinite_and_short():
    assert loss_trend([1.0, math.nan, 0.5]).direction == "nonfinite"
    assert loss_trend([1.0]).direction == "short"


def test_learns_pass_warn_fail():
    assert verdict("learns", facts(optimizers=[optimizer([1.0 - 0.05 * i for i in range(16)])])).status == PASS
    assert verdict("learns", facts(optimizers=[optimizer([0.7] * 16)])).status == WARN
    assert verdict("learns", facts(optimizers=[optimizer([0.5 + 0.1 * i for i in range(16)])])).status == FAIL
    assert verdict("learns", facts()).status == NOT_EXERCISED


def test_learns_fails_on_nan():
    data = facts(optimizers=[optimizer([1.0, math.nan])])
    data["backward"]["nonfinite"] = sighted(1)
    check = verdict("learns", data)
    assert check.status == FAIL
    assert check.locations == [HERE]


def test_learns_only_warns_when_coupled_optimizers_rise():
    rising = [0.5 + 0.01 * i for i in range(40)]
    falling = [1.5 - 0.01 * i for i in range(40)]
    gan = [optimizer(rising, index=0, coupled=[1]), optimizer(falling, index=1)]
    assert verdict("learns", facts(optimizers=gan)).status == WARN
    independent = [optimizer(rising, index=0), optimizer(falling, index=1)]
    assert verdict("learns", facts(optimizers=independent)).status == FAIL


# -- the rules' checks ----------------------------------------------------------------------


def test_tl101():
    assert verdict("TL101", facts(optimizers=[optimizer([0.5], checked=0)])).status == NOT_EXERCISED
    assert verdict("TL101", facts(optimizers=[optimizer([0.5] * 9, checked=8)])).status == PASS
    check = verdict("TL101", facts(optimizers=[optimizer([0.5] * 9, checked=8, stale=8)]))
    assert (check.status, check.locations) == (FAIL, [HERE])
    assert check.evidence == {"stale_steps": 8, "checked_steps": 8}


def plateau(source, validation=True, metric=0.5, origins=()):
    return {"location": HERE, "metric": metric, "source": source, "validation": validation, "lr": [0.1], "origins": list(origins)}


def test_tl103():
    assert verdict("TL103", facts()).status == NOT_EXERCISED
    assert verdict("TL103", facts(plateau=[plateau("other")])).status == PASS
    assert verdict("TL103", facts(plateau=[plateau("none", metric=None)])).status == FAIL
    assert verdict("TL103", facts(plateau=[plateau("training-loss")] * 3)).status == FAIL
    # The training loss is the only metric there is when no validation pass ran.
    assert verdict("TL103", facts(plateau=[plateau("training-loss", validation=False)])).status == PASS
    assert verdict("TL103", facts(plateau=[plateau("training-loss")] * 3)).locations == [HERE]


def test_tl103_says_so_where_it_cannot_tell():
    # The metric's trail was lost (float(), NumPy) or it mixes the training loss with others:
    # no FAIL, whatever the values are.
    for source in ("untraced", "mixed"):
        check = verdict("TL103", facts(plateau=[plateau(source)] * 3))
        assert check.status == NOT_EXERCISED and check.message.startswith("cannot tell where the metric of 3 of 3 calls came from")
    check = verdict("TL103", facts(plateau=[plateau("other", origins=["no-graph"]), plateau("untraced")]))
    assert check.status == PASS
    assert "1 ReduceLROnPlateau.step() calls received a metric that is not the training loss" in check.message
    assert "a tensor computed without gradients" in check.message and "cannot tell where the metric of 1 of 2 calls" in check.message
    # one proven training loss is enough, traced or not the others
    mixed = facts(plateau=[plateau("untraced"), plateau("training-loss")])
    assert verdict("TL103", mixed).status == FAIL


def test_tl201():
    assert verdict("TL201", facts()).status == PASS
    assert verdict("TL201", facts(cuda_requests=sighted(3))).status == FAIL
    visible = facts(device={"requested": "auto", "cuda_available": True, "cuda_hidden": False})
    assert verdict("TL201", visible).status == NOT_EXERCISED


def test_tl301():
    assert verdict("TL301", facts()).status == NOT_EXERCISED
    assert verdict("TL301", facts(graphs={"clock": 10, "leaks": sighted(0), "oldest": 0, "most_alive": 0})).status == PASS
    leaking = facts(graphs={"clock": 10, "leaks": sighted(8), "oldest": 9, "most_alive": 8})
    assert verdict("TL301", leaking).status == FAIL


def passes(**changes) -> dict:
    nothing = {"count": 0, "sites": []}
    data = {
        "training": 10,
        "inference": 4,
        "inference_layers": ["Dropout"],
        "inference_in_train_mode": nothing,
        "inference_with_grad": nothing,
        "training_in_eval_mode": nothing,
    }
    return {**data, **changes}


def test_mode_and_grad_checks():
    clean = facts(passes=passes())
    assert {verdict(name, clean).status for name in ("TL401", "TL402", "TL107")} == {PASS}
    assert verdict("TL401", facts(passes=passes(inference_in_train_mode=sighted(4)))).status == FAIL
    assert verdict("TL402", facts(passes=passes(inference_with_grad=sighted(4)))).status == FAIL
    assert verdict("TL107", facts(passes=passes(training_in_eval_mode=sighted(2)))).status == FAIL
    idle = facts(passes=passes(training=0, inference=0))
    assert {verdict(name, idle).status for name in ("TL401", "TL402", "TL107")} == {NOT_EXERCISED}


def test_tl501():
    assert verdict("TL501", facts()).status == NOT_EXERCISED
    ok = {"location": HERE, "kind": "state_dict", "roundtrip": "ok"}
    assert verdict("TL501", facts(saves=[ok])).status == PASS
    assert verdict("TL501", facts(saves=[{"location": HERE, "kind": "module", "modules": ["Net"]}])).status == FAIL
    broken = {**ok, "roundtrip": "load_state_dict(strict=True) failed: RuntimeError: Missing key(s)"}
    assert verdict("TL501", facts(saves=[broken])).status == FAIL
    extras = {**ok, "extras": "torch.load(weights_only=True) cannot load it: UnpicklingError: numpy"}
    assert verdict("TL501", facts(saves=[extras])).status == WARN


def test_tl601():
    assert verdict("TL601", facts()).status == NOT_EXERCISED
    data = facts()
    data["backward"].update(judged=5, no_path=sighted(0))
    assert verdict("TL601", data).status == PASS
    data["backward"]["no_path"] = sighted(5)
    assert verdict("TL601", data).status == FAIL


# -- runs, switches, reference checks -------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        ({"status": "ok", "duration_s": 2.0}, PASS),
        ({"status": "error", "message": "ValueError: bad", "location": HERE}, FAIL),
        ({"status": "exit", "exit_code": 3}, FAIL),
        ({"status": "timeout", "timeout_s": 5}, FAIL),
    ],
)
def test_runs(outcome, status):
    assert verdict("runs", facts(outcome=outcome)).status == status


def test_disabled_check_is_not_exercised(monkeypatch):
    data = facts(cuda_requests=sighted(3))
    monkeypatch.setenv(DISABLE_ENV, "TL201, learns")
    found = {check.check: check.status for check in evaluate(data)}
    assert found["TL201"] == NOT_EXERCISED
    monkeypatch.delenv(DISABLE_ENV)
    assert {check.check: check.status for check in evaluate(data)}["TL201"] == FAIL


def test_reference_checks_follow_the_core_checks():
    reference = {"overfit": {"status": PASS, "message": "fit", "evidence": {}}}
    names = [check.check for check in evaluate(facts(reference=reference), disabled=set())]
    assert names == [*CHECKS, "overfit"]


def test_a_run_that_died_proves_no_pass_but_keeps_its_failures():
    data = facts(optimizers=[optimizer([1.0, 0.5, 0.2, 0.1], checked=3, stale=1)], partial=True)
    data["outcome"] = {"status": "crash", "exit_code": -11, "signal": "SIGSEGV"}
    found = {check.check: check for check in evaluate(data, disabled=set())}
    assert found["runs"].status == FAIL and "SIGSEGV" in found["runs"].message
    assert found["TL101"].status == FAIL
    assert found["learns"].status == NOT_EXERCISED and "the run died" in found["learns"].message
    assert PASS not in {check.status for check in found.values()}
    assert any("died" in note for note in notes(data))


def test_tl201_is_not_exercised_when_the_script_never_got_going():
    stopped = facts(outcome={"status": "exit", "exit_code": 3})
    assert verdict("TL201", stopped).status == NOT_EXERCISED
    assert verdict("TL201", facts(outcome={"status": "exit", "exit_code": 3}, cuda_requests=sighted(1))).status == FAIL
    assert notes(stopped) == ["no optimizer step ran: nothing was trained, so the training checks say nothing"]
