"""Verdicts: turn the facts the child recorded into PASS / FAIL / WARN / NOT_EXERCISED.

Pure Python (no torch), so every verdict can be unit-tested on hand-made facts. Each check is
tied to the static rule whose fix it validates (SPEC section 6).

For the mutation test, `TORCHLINT_VERIFY_DISABLE=TL101,learns` switches checks off: their
verdict becomes NOT_EXERCISED. It exists to show that each check is what catches its bug.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

PASS, FAIL, WARN, NOT_EXERCISED = "PASS", "FAIL", "WARN", "NOT_EXERCISED"
DISABLE_ENV = "TORCHLINT_VERIFY_DISABLE"


@dataclass
class CheckResult:
    check: str
    status: str
    message: str
    locations: list[dict] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "check": self.check,
            "status": self.status,
            "message": self.message,
            "locations": self.locations,
            "evidence": self.evidence,
        }


def disabled_checks() -> set[str]:
    return {name.strip() for name in os.environ.get(DISABLE_ENV, "").split(",") if name.strip()}


def evaluate(facts: dict, disabled: set[str] | None = None) -> list[CheckResult]:
    """The verdicts. The facts of a run that died stop where it died: what they show is
    evidence, but a PASS on them could be wrong, so it is NOT_EXERCISED instead."""
    disabled = disabled_checks() if disabled is None else disabled
    results = []
    for name, check in CHECKS.items():
        result = check(facts)
        if facts.get("partial") and result.status == PASS:
            result = CheckResult(name, NOT_EXERCISED, f"not proven, the run died; until then: {result.message}", result.locations, result.evidence)
        if name in disabled:
            result = CheckResult(name, NOT_EXERCISED, f"switched off by {DISABLE_ENV} (for testing the checker)")
        results.append(result)
    for name, verdict in (facts.get("reference") or {}).items():
        status = NOT_EXERCISED if name in disabled else verdict["status"]
        results.append(CheckResult(name, status, verdict["message"], [], verdict.get("evidence", {})))
    return results


def notes(facts: dict) -> list[str]:
    """What a reader of the report must know about the run as a whole."""
    found = []
    if facts.get("partial"):
        found.append("the run died before it could report: the evidence stops there and proves no PASS")
    if not any(o["steps"] for o in facts.get("optimizers", [])):
        found.append("no optimizer step ran: nothing was trained, so the training checks say nothing")
    return found


def blank_facts(device: dict) -> dict:
    """The facts of a run that recorded nothing (the child was killed before it could report)."""
    nothing = {"count": 0, "sites": []}
    return {
        "device": device,
        "reference": None,
        "optimizers": [],
        "backward": {"calls": 0, "judged": 0, "no_path": nothing, "nonfinite": nothing},
        "graphs": {"clock": 0, "leaks": nothing, "oldest": 0, "most_alive": 0},
        "passes": {
            "training": 0,
            "inference": 0,
            "inference_layers": [],
            "inference_in_train_mode": nothing,
            "inference_with_grad": nothing,
            "training_in_eval_mode": nothing,
        },
        "plateau": [],
        "cuda_requests": nothing,
        "saves": [],
        "loader_passes": 0,
    }


def _sites(sightings: dict) -> list[dict]:
    return _distinct(site.get("location") for site in sightings["sites"])


def _distinct(locations) -> list[dict]:
    """The locations in order, each user line once."""
    seen: dict[tuple, dict] = {}
    for location in locations:
        if location:
            seen.setdefault((location["file"], location["line"]), location)
    return list(seen.values())


# -- runs -----------------------------------------------------------------------------------


def check_runs(facts: dict) -> CheckResult:
    outcome = facts["outcome"]
    where = [outcome["location"]] if outcome.get("location") else []
    duration = outcome.get("duration_s")
    status = outcome["status"]
    if status == "ok":
        finished = f"finished in {duration:.1f} s" if duration is not None else "finished"
        steps = facts.get("max_steps") or {}
        if outcome.get("ended"):
            return CheckResult("runs", PASS, f"ended by --max-steps {steps.get('limit')}: {outcome['ended']}", where)
        if steps.get("left_loop_at") is not None:
            finished += f", leaving the training loop after {steps['left_loop_at']} optimizer steps (--max-steps)"
        return CheckResult("runs", PASS, finished)
    if status == "timeout":
        return CheckResult("runs", FAIL, f"did not finish within the timeout ({outcome.get('timeout_s', '?')} s)", where)
    if status == "exit":
        return CheckResult("runs", FAIL, f"exited with status {outcome['exit_code']}", where)
    if status == "crash":
        how = f"was killed by {outcome['signal']}" if outcome.get("signal") else f"ended with status {outcome['exit_code']}"
        return CheckResult("runs", FAIL, f"the process {how} without finishing (a crash or os._exit): the report is partial", where)
    return CheckResult("runs", FAIL, f"raised {outcome['message']}", where)


# -- learns ---------------------------------------------------------------------------------


@dataclass
class Trend:
    direction: str  # "fell", "rose", "flat", "nonfinite", "short"
    first: float = math.nan
    last: float = math.nan
    window: int = 0


def loss_trend(losses: list[float]) -> Trend:
    """Compare the mean loss over the first and the last steps (a quarter of them, at most 50).

    A change counts only when it is larger than 1% of the first value and than twice the
    standard error of the two windows' difference, so batch-to-batch noise is not a trend.
    The noise is measured in the last window, where training has settled: the first one
    also holds the fast early fall, which is a trend, not noise.
    """
    if any(not math.isfinite(value) for value in losses):
        return Trend("nonfinite")
    if len(losses) < 2:
        return Trend("short")
    window = max(1, min(len(losses) // 4, 50))
    head, tail = losses[:window], losses[-window:]
    first, last = statistics.fmean(head), statistics.fmean(tail)
    noise = 2 * statistics.stdev(tail) * math.sqrt(2 / window) if window > 1 else 0.0
    tolerance = max(noise, 0.01 * abs(first), 1e-12)
    direction = "fell" if last < first - tolerance else "rose" if last > first + tolerance else "flat"
    return Trend(direction, first, last, window)


def check_learns(facts: dict) -> CheckResult:
    series = {o["index"]: o for o in facts.get("optimizers", []) if o["losses"]}
    if not series:
        return CheckResult("learns", NOT_EXERCISED, "no optimizer step followed a backward()")
    nonfinite = facts["backward"]["nonfinite"]
    if nonfinite["count"]:
        return CheckResult("learns", FAIL, f"the loss became NaN/Inf {nonfinite['count']} times", _sites(nonfinite))
    # Optimizers whose losses also reach another's parameters play a game (a GAN): their
    # losses need not fall, so a rise is only a warning.
    adversarial = any(set(o["coupled"]) & set(series) for o in series.values())
    trends = {index: loss_trend(o["losses"]) for index, o in series.items()}
    parts = []
    for index, trend in trends.items():
        optimizer = series[index]
        label = f"{optimizer['name']} #{index}: " if len(series) > 1 else ""
        if trend.direction == "short":
            parts.append(f"{label}only {len(optimizer['losses'])} step")
        else:
            parts.append(
                f"{label}loss {trend.first:.4g} → {trend.last:.4g} over {len(optimizer['losses'])} steps "
                f"(means of the first and last {trend.window})"
            )
    message = "; ".join(parts)
    evidence = {"adversarial": adversarial}
    directions = {trend.direction for trend in trends.values()}
    if "rose" in directions and not adversarial:
        return CheckResult("learns", FAIL, f"the loss rose: {message}", [], evidence)
    if directions == {"fell"}:
        return CheckResult("learns", PASS, message, [], evidence)
    if "rose" in directions:
        return CheckResult("learns", WARN, f"adversarial optimizers, a loss rose: {message}", [], evidence)
    return CheckResult("learns", WARN, f"the loss did not fall: {message}", [], evidence)


# -- TL101 ----------------------------------------------------------------------------------


def check_tl101(facts: dict) -> CheckResult:
    optimizers = facts.get("optimizers", [])
    checked = sum(o["checked_steps"] for o in optimizers)
    if not checked:
        return CheckResult("TL101", NOT_EXERCISED, "no optimizer stepped twice")
    stale = [o for o in optimizers if o["stale"]["count"]]
    if stale:
        count = sum(o["stale"]["count"] for o in stale)
        sites = [loc for o in stale for loc in _sites(o["stale"])]
        return CheckResult(
            "TL101",
            FAIL,
            f"at {count} of {checked} optimizer steps, gradients from before the previous step were still "
            "there: nothing cleared them (zero_grad) between steps",
            sites,
            {"stale_steps": count, "checked_steps": checked},
        )
    return CheckResult("TL101", PASS, f"gradients were cleared between steps ({checked} steps checked)")


# -- TL103 ----------------------------------------------------------------------------------


_ORIGIN_WORDS = {"graph": "a graph no backward ran on", "no-graph": "a tensor computed without gradients"}


def check_tl103(facts: dict) -> CheckResult:
    """Which value reached `ReduceLROnPlateau.step()`, by provenance: the object passed,
    followed back to the tensors that made it. FAIL only when it is, all of it, a loss a
    backward ran on (and a validation pass ran); where the trail is lost, say so."""
    calls = facts.get("plateau", [])
    if not calls:
        return CheckResult("TL103", NOT_EXERCISED, "ReduceLROnPlateau.step() was not called")
    evidence = {"metric": [c["metric"] for c in calls], "lr": [c.get("lr", [None])[0] for c in calls]}
    missing = [c for c in calls if c["source"] == "none"]
    if missing:
        return CheckResult(
            "TL103", FAIL, "ReduceLROnPlateau.step() received no metric", _distinct(c["location"] for c in missing), evidence
        )
    training = [c for c in calls if c["source"] == "training-loss" and c["validation"]]
    if training:
        return CheckResult(
            "TL103",
            FAIL,
            f"ReduceLROnPlateau.step() received the training loss in {len(training)} of {len(calls)} calls "
            "while a validation pass ran in the same epoch (the value passed was computed from the loss backward ran on)",
            _distinct(c["location"] for c in training),
            evidence,
        )
    unknown = [c for c in calls if c["source"] in ("untraced", "mixed")]
    cannot_tell = (
        f"cannot tell where the metric of {len(unknown)} of {len(calls)} calls came from "
        "(it left Python arithmetic on `.item()` values: float(), NumPy, statistics; or it mixes the training loss with other values)"
    )
    if len(unknown) == len(calls):
        return CheckResult("TL103", NOT_EXERCISED, cannot_tell, _distinct(c["location"] for c in unknown), evidence)
    kinds = sorted({kind for c in calls if c["source"] == "other" for kind in c.get("origins", [])})
    judged = len(calls) - len(unknown)
    message = f"{judged} ReduceLROnPlateau.step() calls received a metric that is not the training loss"
    if kinds:
        message += f" (it came from {' and '.join(_ORIGIN_WORDS.get(kind, kind) for kind in kinds)})"
    elif any(c["source"] == "training-loss" for c in calls):
        message += "; the training loss, where no validation pass ran, is the only metric there is"
    if unknown:
        message += f"; {cannot_tell}"
    return CheckResult("TL103", PASS, message, [], evidence)


# -- TL201 ----------------------------------------------------------------------------------


def _got_going(facts: dict) -> bool:
    """Did the run do any PyTorch work (a forward pass, a backward, an optimizer), or finish?"""
    passes = facts["passes"]
    return bool(
        facts["outcome"]["status"] == "ok" or passes["training"] or passes["inference"] or facts["backward"]["calls"] or facts.get("optimizers")
    )


def check_tl201(facts: dict) -> CheckResult:
    if not facts["device"]["cuda_hidden"]:
        return CheckResult("TL201", NOT_EXERCISED, "CUDA is visible: run with --device cpu to prove device independence")
    requests = facts.get("cuda_requests", {"count": 0, "sites": []})
    if requests["count"]:
        return CheckResult(
            "TL201",
            FAIL,
            f"the script asked for CUDA {requests['count']} times while CUDA was hidden; the verifier kept "
            "`.cuda()`/`.to(cuda)` tensors on the CPU to check the rest",
            _sites(requests),
            {"requests": requests["count"]},
        )
    if not _got_going(facts):
        return CheckResult("TL201", NOT_EXERCISED, "the script stopped before it ran any PyTorch model or optimizer")
    return CheckResult("TL201", PASS, "ran with CUDA hidden and never asked for it")


# -- TL301 ----------------------------------------------------------------------------------


def check_tl301(facts: dict) -> CheckResult:
    graphs = facts["graphs"]
    if graphs["clock"] < 3:
        return CheckResult("TL301", NOT_EXERCISED, "fewer than three optimizer steps")
    if graphs["leaks"]["count"]:
        return CheckResult(
            "TL301",
            FAIL,
            f"autograd graphs of up to {graphs['most_alive']} past steps piled up (the oldest "
            f"{graphs['oldest']} steps old): a loss or a model output is kept with its graph",
            _sites(graphs["leaks"]),
            {"most_alive": graphs["most_alive"], "oldest_steps": graphs["oldest"]},
        )
    return CheckResult("TL301", PASS, f"no graph of a loss or a model output outlived its iteration ({graphs['clock']} steps)")


# -- TL401 / TL402 / TL107 -------------------------------------------------------------------


def check_tl401(facts: dict) -> CheckResult:
    passes = facts["passes"]
    if not passes["inference"]:
        return CheckResult("TL401", NOT_EXERCISED, "no inference pass (one that no backward runs through)")
    bad = passes["inference_in_train_mode"]
    if bad["count"]:
        layers = sorted({layer for site in bad["sites"] for layer in site.get("layers", [])})
        return CheckResult(
            "TL401",
            FAIL,
            f"{bad['count']} of {passes['inference']} inference passes ran in training mode through what depends on the mode: "
            f"{', '.join(layers)}",
            _sites(bad),
            {"passes": bad["count"], "layers": layers},
        )
    if not passes["inference_layers"]:
        return CheckResult(
            "TL401",
            PASS,
            f"{passes['inference']} inference passes; nothing that depends on the mode ran (no dropout or batch norm, "
            "functional or not, and no read of a module's `training` flag), so the mode does not matter",
        )
    return CheckResult("TL401", PASS, f"{passes['inference']} inference passes ran in eval mode")


def check_tl402(facts: dict) -> CheckResult:
    passes = facts["passes"]
    if not passes["inference"]:
        return CheckResult("TL402", NOT_EXERCISED, "no inference pass (one that no backward runs through)")
    bad = passes["inference_with_grad"]
    if bad["count"]:
        return CheckResult(
            "TL402",
            FAIL,
            f"{bad['count']} of {passes['inference']} inference passes built autograd graphs that no backward() used",
            _sites(bad),
            {"passes": bad["count"]},
        )
    return CheckResult("TL402", PASS, f"{passes['inference']} inference passes ran without building graphs")


def check_tl107(facts: dict) -> CheckResult:
    passes = facts["passes"]
    if not passes["training"]:
        return CheckResult("TL107", NOT_EXERCISED, "no training pass (one that a backward runs through)")
    bad = passes["training_in_eval_mode"]
    if bad["count"]:
        return CheckResult(
            "TL107",
            FAIL,
            f"{bad['count']} of {passes['training']} training passes ran the model in eval mode",
            _sites(bad),
            {"passes": bad["count"]},
        )
    return CheckResult("TL107", PASS, f"{passes['training']} training passes ran in training mode")


# -- TL501 ----------------------------------------------------------------------------------


def check_tl501(facts: dict) -> CheckResult:
    saves = facts.get("saves", [])
    if not saves:
        return CheckResult("TL501", NOT_EXERCISED, "torch.save was not called")
    modules = [s for s in saves if s["kind"] == "module"]
    if modules:
        names = sorted({name for s in modules for name in s["modules"]})
        return CheckResult(
            "TL501", FAIL, f"torch.save received a whole nn.Module ({', '.join(names)})", _distinct(s["location"] for s in modules)
        )
    broken = [s for s in saves if s["kind"] == "state_dict" and s["roundtrip"] != "ok"]
    if broken:
        return CheckResult("TL501", FAIL, f"a saved state dict does not load back (weights_only=True, strict=True): {broken[0]['roundtrip']}", _distinct(s["location"] for s in broken))
    extras = [s for s in saves if s.get("extras")]
    if extras:
        return CheckResult(
            "TL501",
            WARN,
            f"the saved state dicts load back, but the saved object as a whole does not: {extras[0]['extras']}",
            _distinct(s["location"] for s in extras),
        )
    state_dicts = sum(1 for s in saves if s["kind"] == "state_dict")
    return CheckResult(
        "TL501", PASS, f"torch.save calls: {len(saves)}, state dicts among them that load back (weights_only=True, strict=True): {state_dicts}"
    )


# -- TL601 ----------------------------------------------------------------------------------


def check_tl601(facts: dict) -> CheckResult:
    backward = facts["backward"]
    if not backward["judged"]:
        return CheckResult("TL601", NOT_EXERCISED, "no backward() ran while an optimizer existed")
    no_path = backward["no_path"]
    if no_path["count"]:
        return CheckResult(
            "TL601",
            FAIL,
            f"{no_path['count']} of {backward['judged']} backward() calls reached none of the optimizers' parameters: "
            "the loss has no gradient path to the model",
            _sites(no_path),
        )
    return CheckResult("TL601", PASS, f"all {backward['judged']} backward() calls reached the optimizers' parameters")


CHECKS: dict[str, Callable[[dict], CheckResult]] = {
    "runs": check_runs,
    "learns": check_learns,
    "TL101": check_tl101,
    "TL103": check_tl103,
    "TL201": check_tl201,
    "TL301": check_tl301,
    "TL401": check_tl401,
    "TL402": check_tl402,
    "TL107": check_tl107,
    "TL501": check_tl501,
    "TL601": check_tl601,
}
