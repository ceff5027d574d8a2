"""TrainingFacts on small snippets: iterations, backward targets, steps, clears, losses."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper

from torchlint.semantic import SemanticModel


def facts(source: str):
    model = SemanticModel(MetadataWrapper(cst.parse_module(textwrap.dedent(source))))
    return model.training


def code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def test_iteration_with_amp_steps_and_clears():
    training = facts(
        """
        for epoch in range(3):
            for x, y in loader:
                optimizer.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scheduler.step()
        """
    )
    [iteration] = training.iterations
    assert isinstance(iteration.loop, cst.For) and code(iteration.loop.target) == "x, y"
    assert [code(l) for l in iteration.losses] == ["loss"]
    assert [code(s) for s in iteration.steps] == ["scaler.step(optimizer)"]
    assert [code(o) for o in iteration.stepped_optimizers()] == ["optimizer"]
    assert [code(c) for c in iteration.clears] == ["optimizer.zero_grad(set_to_none=True)"]
    assert code(training.epoch_loop(iteration).target) == "epoch"


def test_framework_and_functional_backward_targets():
    training = facts(
        """
        import torch
        while step < n:
            accelerator.backward(loss_a)
            torch.autograd.backward(loss_b)
            model_engine.backward(loss_c)
            model_engine.step()
            out.backward(torch.ones_like(out))
        """
    )
    [iteration] = training.iterations
    assert isinstance(iteration.loop, cst.While)
    assert [code(l) for l in iteration.losses] == ["loss_a", "loss_b", "loss_c", "out"]
    assert iteration.steps == []  # a DeepSpeed engine's step clears gradients itself


def test_schedulers_closures_profilers_and_environments_are_not_optimizer_steps():
    training = facts(
        """
        import torch
        sched = torch.optim.lr_scheduler.StepLR(opt, 10)
        for x in data:
            loss.backward()
            sched.step()
            lr_scheduler.step()
            prof.step()
            env.step(action)
            opt.step(closure)
            self.step()
        """
    )
    [iteration] = training.iterations
    assert iteration.steps == []


def test_clears_by_module_grad_none_and_same_file_helper():
    training = facts(
        """
        def reset(m):
            for p in m.parameters():
                p.grad = None

        def wrapper(m):
            reset(m)

        for x in data:
            model.zero_grad()
            wrapper(model)
            del w.grad
            loss.backward()
            opt.step()
            model.train()
        """
    )
    [iteration] = [it for it in training.iterations if code(it.loop.target) == "x"]
    assert [code(c) for c in iteration.clears] == ["model.zero_grad()", "wrapper(model)", "del w.grad"]


def test_iteration_is_the_loop_holding_backward_and_step():
    training = facts(
        """
        for batch in loader:
            for micro in split(batch):
                loss = criterion(model(micro), target)
                loss.backward()
            opt.step()
            opt.zero_grad()
        """
    )
    [iteration] = training.iterations
    assert code(iteration.loop.target) == "batch"
    assert training.iteration_of(iteration.backward_calls[0]) is iteration


def test_backward_in_a_nested_function_belongs_to_no_loop_around_the_def():
    training = facts(
        """
        for x, y in loader:
            def closure():
                opt.zero_grad()
                loss = criterion(model(x), y)
                loss.backward()
                return loss
            opt.step(closure)
        """
    )
    assert training.iterations == []
    assert len(training.backward_calls) == 1


def test_step_function_called_from_a_loop():
    training = facts(
        """
        def train_step(model, opt, batch):
            loss = model(batch).mean()
            loss.backward()
            opt.step()

        for batch in loader:
            train_step(model, opt, batch)
        """
    )
    [step_function] = training.step_functions()
    assert step_function.function.name.value == "train_step"
    assert [code(c) for c in step_function.call_sites] == ["train_step(model, opt, batch)"]


def test_losses_aliases_terms_and_criterion_outputs():
    source = """
        import torch.nn as nn
        criterion = nn.CrossEntropyLoss()

        def train():
            for x, y in loader:
                ce = criterion(model(x), y)
                aux = helper(x)
                loss = ce + 0.1 * aux
                loss.backward()
                acc = (model(x).argmax(1) == y).float().mean()
                val = loss.item()

        def other():
            loss = compute(x)
            metric = criterion(out, y)
    """
    training = facts(source)
    names = {}

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.setdefault(node.value, node)

    training.model.module.visit(Names())
    assert training.is_loss(names["loss"]) and training.is_loss(names["ce"]) and training.is_loss(names["aux"])
    assert not training.is_loss(names["acc"])
    assert not training.is_loss(names["val"])
    assert not training.is_loss(names["x"])
    metric = [n for n in training.model.bound_values if n.value == "metric"][0]
    assert training.is_loss(metric)  # the output of a loss module
    other_loss = [n for n in training.model.bound_values if n.value == "loss"][-1]
    assert not training.is_loss(other_loss)  # no backward there, not a loss computation


def test_gradient_flow_through_numpy_and_detach():
    training = facts(
        """
        import numpy as np
        import torch
        for x, y in loader:
            out = model(x)
            a = torch.tensor(np.mean(out.detach().numpy()), requires_grad=True)
            b = torch.mean((out - y) ** 2)
            c = torch.from_numpy(np.stack(y.numpy()))
            a.backward()
        """
    )
    values = {n.value: v for n, v in training.model.bound_values.items()}
    assert training.from_model(values["a"]) and not training.carries_grad(values["a"])
    assert training.from_model(values["b"]) and training.carries_grad(values["b"])
    assert not training.from_model(values["c"])


def test_lightning_training_step_has_no_iteration():
    training = facts(
        """
        import pytorch_lightning as pl
        class Lit(pl.LightningModule):
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                loss = self(batch).mean()
                self.manual_backward(loss)
                opt.step()
        """
    )
    assert training.iterations == [] and training.step_functions() == []


def test_scaling_or_clipping_gradients_in_place_is_no_clear():
    training = facts(
        """
        for x in loader:
            loss.backward()
            for p in model.parameters():
                p.grad.mul_(0.5)
                p.grad *= scale
                p.grad = p.grad / world_size
                p.grad.data.clamp_(-1, 1)
                p.grad.fill_(1.0)
            opt.step()
        for x in loader:
            loss.backward()
            for p in model.parameters():
                p.grad.mul_(0)
                p.grad *= 0
                p.grad = torch.zeros_like(p)
                p.grad.fill_(0.0)
            opt.step()
        """
    )
    scaled, zeroed = training.iterations
    assert scaled.clears == []
    assert len(zeroed.clears) == 4


def test_known_optimizers_and_the_parameters_they_hold():
    training = facts(
        """
        import torch
        from torch import optim

        opt_g = optim.Adam(net_g.parameters())
        groups = [{"params": model.backbone.parameters(), "lr": 1e-4}, {"params": [p for n, p in head.named_parameters()]}]
        opt = torch.optim.SGD(groups)
        other = make_optimizer(model)

        def train(model, optimizer, loader):
            optimizer.step()
            other.step()

        train(model, opt, loader)
        train(model, optimizer=opt_g, loader=loader)
        """
    )
    names = {code(s.func.value): s.func.value for s in training._step_candidates}
    assert training.is_known_optimizer(names["optimizer"])
    assert not training.is_known_optimizer(names["other"])
    assert training.parameter_holders(names["optimizer"]) is None  # names of another scope
    assert training.parameter_holders(names["other"]) is None
    assert training.parameter_holders(cst.parse_expression("x")) is None
    stepped = facts(
        """
        import torch
        groups = [{"params": model.backbone.parameters(), "lr": 1e-4}, {"params": [p for n, p in head.named_parameters()]}]
        opt = torch.optim.SGD(groups + list(net_g.parameters()))
        for x in loader:
            loss.backward()
            opt.step()
        """
    )
    [step] = stepped.steps
    assert stepped.parameter_holders(step.func.value) == {"net_g", "model.backbone", "head"}


def test_unusual_callees_and_receivers_do_not_break_the_facts():
    # `.value` of a Name is a string; `.func` may be any expression.
    training = facts(
        """
        zero_(x)
        fill_(0)
        for x in loader:
            (lambda: loss)().backward()
            fns[0](x).backward()
            getattr(opt, "step")()
            optimizers[0].step()
            (a or b).zero_grad()
            make()().step()
            reset_grad()
        """
    )
    [iteration] = training.iterations
    # (`make()()` is stepped beside `optimizers[0]`, an optimizer by its name: another object.)
    assert [code(s) for s in iteration.steps] == ["optimizers[0].step()"]
    assert [code(c) for c in iteration.clears] == ["(a or b).zero_grad()", "reset_grad()"]
    assert not training.is_known_optimizer(iteration.steps[0].func.value)
    alone = facts(
        """
        for x in loader:
            fns[0](x).backward()
            make()().step()
        """
    )
    assert [code(s) for s in alone.iterations[0].steps] == ["make()().step()"]  # unknown, alone: a step


def _fix_of(source: str, code_: str):
    from torchlint.config import select_rules
    from torchlint.engine import lint_module_source

    [finding] = lint_module_source(textwrap.dedent(source), select_rules([code_], [], [])).findings
    return finding.fix


def test_tl101_fix_is_safe_only_for_a_known_optimizer():
    from torchlint.rule import Applicability

    loop = """
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            {receiver}.step()
        """
    known = "import torch\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n" + textwrap.dedent(loop.format(receiver="optimizer"))
    assert _fix_of(known, "TL101").applicability is Applicability.SAFE
    assert _fix_of(loop.format(receiver="optimizer"), "TL101").applicability is Applicability.UNSAFE
    assert _fix_of(loop.format(receiver="self.opt_g"), "TL101").applicability is Applicability.UNSAFE
    assert _fix_of(loop.format(receiver="solver"), "TL101") is None


def test_tl301_item_fix_is_safe_on_the_loss_a_scalar_backward_runs_on():
    from torchlint.rule import Applicability

    body = """
        losses = []
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward({argument})
            optimizer.step()
            losses.append(loss)
        {after}
        """
    safe = _fix_of(body.format(argument="", after="print(sum(losses))"), "TL301")
    assert safe.applicability is Applicability.SAFE
    assert _fix_of(body.format(argument="torch.ones_like(loss)", after=""), "TL301").applicability is Applicability.UNSAFE
    in_function = "def train():\n" + textwrap.indent(textwrap.dedent(body.format(argument="", after="return losses")), "    ")
    assert _fix_of(in_function, "TL301").applicability is Applicability.UNSAFE
    passed = "def plot(values):\n    pass\n" + textwrap.dedent(body.format(argument="", after="plot(losses)"))
    assert _fix_of(passed, "TL301").applicability is Applicability.UNSAFE


def test_code_of_a_name_is_its_rendering() -> None:
    """``code`` answers a bare name without a code generator: the same text."""
    from pathlib import Path

    import libcst as cst

    from torchlint.semantic import training

    names = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            names.append(node)

    for path in sorted((Path(__file__).parent.parent / "fixtures" / "rules").rglob("*.py")):
        cst.parse_module(path.read_bytes()).visit(Names())
    names.append(cst.parse_expression("(x)"))
    assert len(names) > 1000
    for name in names:
        assert training.code(name) == cst.Module(body=[]).code_for_node(name)
