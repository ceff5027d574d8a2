"""A safe fix knows every reader of what it changes (issue 39): each case's fixes have the
applicability listed, and a run with safe fixes only gives the fixture's expected output
where they are safe and leaves the file alone where none is (the fixture's `.fixed.py` is
the output with unsafe fixes too)."""

import pytest

from torchlint.config import select_rules
from torchlint.engine import FixMode, lint_module_source
from torchlint.rule import Applicability

from rule_fixtures import RULES_DIR

SAFE, UNSAFE = Applicability.SAFE, Applicability.UNSAFE

CASES = {
    # Every reader of the total (or list) known: one needs a tensor (.detach()), or none does (.item()).
    ("TL301", "bad_total_read_as_tensor"): SAFE,
    ("TL301", "bad_total_read_as_number"): SAFE,
    ("TL301", "bad_append"): SAFE,
    # A reader that is not known: given to a parameter, returned, kept in an attribute.
    ("TL301", "bad_total_given_away"): UNSAFE,
    ("TL301", "bad_running_loss_reset_every_n"): UNSAFE,
    ("TL301", "bad_trainer_history"): UNSAFE,
    # A load annotated as a mapping and read by load_state_dict alone.
    ("TL501", "bad_loaded_annotated_as_mapping"): SAFE,
    # Validation inside the batch loop: train() restored at the start of each step, in one go.
    ("TL107", "bad_validation_in_batch_loop"): SAFE,
    # A demonstration that reads the tensor's device after the discarded move.
    ("TL203", "bad_device_inspected"): UNSAFE,
    ("TL203", "bad_discarded"): SAFE,
    # The compiled model's keys: loaders that resume into a compiled model are not all seen.
    ("TL802", "bad_compiled"): UNSAFE,
    ("TL802", "bad_in_checkpoint_dict"): UNSAFE,
    # A running total of a model-derived expression, read only by a print: .detach() is safe.
    ("TL301", "bad_eval_total_of_model_expression"): SAFE,
}


@pytest.mark.parametrize("case", sorted(CASES), ids=lambda c: "/".join(c))
def test_each_fix_has_the_applicability_its_readers_allow(case):
    code, name = case
    source = (RULES_DIR / code / f"{name}.py").read_bytes()
    rules = select_rules([code], [], [])
    findings = [f for f in lint_module_source(source, rules, FixMode.NONE).findings if f.code == code]
    assert findings and all(f.fix is not None for f in findings)
    assert {f.fix.applicability for f in findings} == {CASES[case]}
    safe_only = lint_module_source(source, rules, FixMode.SAFE).fixed_source
    expected = (RULES_DIR / code / f"{name}.fixed.py").read_bytes() if CASES[case] is SAFE else source
    assert safe_only == expected


def _findings_with_target_torch(tmp_path, code, name, target, fix_mode=FixMode.NONE):
    from torchlint.project import build_index

    source = (RULES_DIR / code / f"{name}.py").read_bytes()
    path = tmp_path / "train.py"
    path.write_bytes(source)
    view = build_index([path], tmp_path, target_torch=target).view(path)
    return lint_module_source(source, select_rules([code], [], []), fix_mode, project=view)


def test_tl801_rewrites_the_scaler_s_class_tests_with_its_calls(tmp_path):
    """In a project on torch 2.3 or later the `GradScaler` fix is safe where it rewrites every
    `isinstance` test of the old class too; a test it cannot rewrite (`type(s) is ...`) makes
    it unsafe, and its message says what still refers to the old class."""
    findings = _findings_with_target_torch(tmp_path, "TL801", "bad_isinstance_test", (2, 3)).findings
    assert len(findings) == 2 and {f.fix.applicability for f in findings} == {SAFE}
    result = _findings_with_target_torch(tmp_path, "TL801", "bad_isinstance_test", (2, 3), FixMode.SAFE)
    assert result.fixed_source == (RULES_DIR / "TL801" / "bad_isinstance_test.fixed.py").read_bytes()
    [finding] = _findings_with_target_torch(tmp_path, "TL801", "bad_class_compared", (2, 3)).findings
    assert finding.fix.applicability is UNSAFE
    assert "`type(scaler) is torch.cuda.amp.GradScaler` still refers to `torch.cuda.amp.GradScaler`" in finding.fix.message


# --- what the readers of a kept value need (semantic/readers.py) ---------------------------


def _needs(code: str, holder: str, level: int) -> set[str]:
    import textwrap

    import libcst as cst
    import libcst.matchers as m
    from libcst.metadata import MetadataWrapper

    from torchlint.semantic import SemanticModel
    from torchlint.semantic.readers import readers_need

    wrapper = MetadataWrapper(cst.parse_module("import numpy as np\nimport torch\n\n" + textwrap.dedent(code)))
    model = SemanticModel(wrapper)
    # The holder as the first statement binds it (`total = 0`, `losses = []`).
    target = m.findall(model.module, m.AssignTarget(target=m.Name(holder)))[0].target
    return readers_need(model, target, level)


@pytest.mark.parametrize(
    "code, holder, level, expected",
    [
        ("total = 0\nprint(total, f'{total / n:.3f}', float(total) < 1)\n", "total", 0, set()),
        ("total = 0\nmean = total / n\nwriter.add_scalar('loss', mean, step)\n", "total", 0, set()),
        ("total = 0\nprint(total.data.numpy())\n", "total", 0, {"tensor"}),
        ("total = 0\nmean = total / n\nprint(mean.cpu())\n", "total", 0, {"tensor"}),
        ("total = 0\nboth = torch.stack([total, other])\n", "total", 0, {"tensor"}),
        ("total = 0\nreport(total)\n", "total", 0, {"unknown"}),
        ("def f():\n    total = 0\n    return total / n\n", "total", 0, {"unknown"}),
        ("total = 0\nself.epoch_loss = total\n", "total", 0, {"unknown"}),
        ("losses = []\nprint(np.mean(losses), sum(losses) / len(losses), losses[-1] > 2)\n", "losses", 1, set()),
        ("losses = []\nfor value in losses[-5:]:\n    print(value.item())\n", "losses", 1, {"tensor"}),
        ("losses = []\nprint(torch.stack(losses).mean())\n", "losses", 1, {"tensor"}),
        ("losses = []\nprint([l.item() for l in losses])\n", "losses", 1, {"tensor"}),
        ("losses = []\nepochs = []\nepochs.append(sum(losses))\ntorch.save(epochs, 'l.pt')\n", "losses", 1, {"unknown"}),
        ("meter = AverageMeter()\nprint(meter.avg, meter.count)\n", "meter", -1, set()),
        ("meter = AverageMeter()\nprogress = [meter]\n", "meter", -1, {"unknown"}),
    ],
)
def test_what_the_readers_of_a_kept_value_need(code, holder, level, expected):
    assert _needs(code, holder, level) == expected


@pytest.mark.parametrize("reader, expected", [("return total", {"unknown"}), ("print(total.item())", {"tensor"}), ("print(total)", set())])
def test_a_total_declared_global_is_read_in_every_function(reader, expected):
    """`global total` then `total += loss` in a step function: the total's readers are the
    module's, in any function."""
    import libcst as cst
    import libcst.matchers as m
    from libcst.metadata import MetadataWrapper

    from torchlint.semantic import SemanticModel
    from torchlint.semantic.readers import readers_need

    code = f"total = 0\n\n\ndef step(loss):\n    global total\n    total += loss\n\n\ndef report():\n    {reader}\n"
    model = SemanticModel(MetadataWrapper(cst.parse_module(code)))
    target = m.findall(model.module, m.AugAssign())[0].target
    assert readers_need(model, target, 0) == expected
