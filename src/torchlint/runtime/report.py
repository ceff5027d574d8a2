"""Text and JSON reports of a verification run."""

from __future__ import annotations

import json
import math
from typing import Any

from torchlint.runtime.checks import notes
from torchlint.runtime.launcher import VerifyResult

STATUS_ORDER = ("FAIL", "WARN", "PASS", "NOT_EXERCISED")
SERIES_POINTS = 200  # longer series are thinned (evenly, keeping both ends) in reports


def target(result: VerifyResult) -> str:
    request = result.request
    if request.reference:
        return f"--reference {request.reference}"
    return " ".join([str(request.script), *request.args])


def series(facts: dict, *, thin: bool = True) -> dict:
    """The loss and learning-rate series per optimizer and the plateau scheduler's metrics."""
    named = {f"{o['name']}#{o['index']}": o for o in facts.get("optimizers", [])}
    return {
        "loss": {name: _thin(o["losses"]) if thin else o["losses"] for name, o in named.items() if o["losses"]},
        "lr": {name: o["lr"] for name, o in named.items() if o["lr"]},
        "metric": [call["metric"] for call in facts.get("plateau", [])],
    }


def to_json(result: VerifyResult) -> str:
    counts = {status: sum(1 for c in result.checks if c.status == status) for status in STATUS_ORDER}
    document = {
        "target": target(result),
        "script": str(result.request.script) if result.request.script else None,
        "args": list(result.request.args),
        "reference": result.request.reference,
        "device": result.facts["device"],
        "exit_code": 1 if result.failed else 0,
        "duration_s": round(result.duration_s, 3),
        "summary": counts,
        "notes": notes(result.facts),
        "checks": [check.to_json() for check in result.checks],
        "series": series(result.facts),
    }
    return json.dumps(_strict(document), indent=2, ensure_ascii=False)


def to_text(result: VerifyResult) -> str:
    device = result.facts["device"]
    where = "cpu, CUDA hidden" if device.get("cuda_hidden") else "CUDA visible"
    lines = [f"torchlint verify {target(result)}  ({where}, {result.duration_s:.1f} s)"]
    width = max(len(check.check) for check in result.checks)
    for check in result.checks:
        lines.append(f"  {check.status:<13} {check.check:<{width}}  {check.message}")
        for location in check.locations[:3]:
            lines.append(f"  {'':<13} {'':<{width}}    --> {location['file']}:{location['line']}  {location['code']}")
    lines += _series_lines(series(result.facts, thin=False))
    lines += [f"note: {note}" for note in notes(result.facts)]
    counts = {status: sum(1 for c in result.checks if c.status == status) for status in STATUS_ORDER}
    lines.append(
        f"{counts['FAIL']} failed, {counts['WARN']} warned, {counts['PASS']} passed, "
        f"{counts['NOT_EXERCISED']} not exercised."
    )
    return "\n".join(lines)


def _series_lines(data: dict) -> list[str]:
    lines = []
    for name, losses in data["loss"].items():
        lines.append(f"  loss   {name}: {_preview(losses)}")
    for name, changes in data["lr"].items():
        lines.append(f"  lr     {name}: " + ", ".join(f"{lr:.4g} from step {step}" for step, lr in changes[:8]))
    if data["metric"]:
        lines.append(f"  metric ReduceLROnPlateau: {_preview(data['metric'])}")
    return lines


def _preview(values: list) -> str:
    shown = values if len(values) <= 8 else [*values[:4], "…", *values[-3:]]
    text = " ".join(v if isinstance(v, str) else "None" if v is None else f"{v:.4g}" for v in shown)
    return f"{text}  ({len(values)} values)"


def _thin(values: list[float]) -> list[float]:
    if len(values) <= SERIES_POINTS:
        return values
    last = len(values) - 1
    return [values[round(i * last / (SERIES_POINTS - 1))] for i in range(SERIES_POINTS)]


def _strict(value: Any) -> Any:
    """JSON has no NaN or Infinity: write them as the strings "NaN", "Infinity", "-Infinity"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict(v) for v in value]
    return value
