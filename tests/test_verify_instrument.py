"""The child's instrumentation, in process: what each hook records on small training steps."""

from __future__ import annotations

import io
from contextlib import contextmanager
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from torchlint.runtime.instrument import Recorder  # noqa: E402
from torchlint.runtime.locations import UserCode  # noqa: E402


@contextmanager
def recording(**options):
    recorder = Recorder(UserCode([Path(__file__).parent]), limit_batches=options.get("limit_batches"), cuda_hidden=True)
    recorder.install()
    try:
        yield recorder
    finally:
        recorder.finish()


def tiny():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 1))
    return model, torch.optim.SGD(model.parameters(), lr=0.01), torch.randn(8, 4), torch.randn(8, 1)


def train(model, optimizer, x, y, steps, clear=None, accumulate=1):
    for step in range(steps * accumulate):
        if clear == "start" and step % accumulate == 0:
            optimizer.zero_grad()
        (nn.functional.mse_loss(model(x), y) / accumulate).backward()
        if (step + 1) % accumulate == 0:
            optimizer.step()
            if clear == "end-zeros":
                optimizer.zero_grad(set_to_none=False)


@pytest.mark.parametrize(
    ("clear", "accumulate", "stale"),
    [(None, 1, 3), ("start", 1, 0), ("end-zeros", 1, 0), ("start", 3, 0), (None, 3, 3)],
)
def test_stale_gradients_are_counted_per_step(clear, accumulate, stale):
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        train(model, optimizer, x, y, steps=4, clear=clear, accumulate=accumulate)
    (record,) = recorder.facts()["optimizers"]
    assert (record["steps"], record["checked_steps"], record["stale"]["count"]) == (4, 3, stale)
    if stale:
        assert record["stale"]["sites"][0]["location"]["file"].endswith("test_verify_instrument.py")


def test_gan_generator_loss_reaching_the_discriminator_is_not_stale():
    with recording() as recorder:
        generator, discriminator = nn.Linear(2, 2), nn.Linear(2, 1)
        opt_g = torch.optim.SGD(generator.parameters(), lr=0.01)
        opt_d = torch.optim.SGD(discriminator.parameters(), lr=0.01)
        for _ in range(4):
            fake = generator(torch.randn(8, 2))
            opt_d.zero_grad()
            (discriminator(torch.randn(8, 2)).mean() - discriminator(fake.detach()).mean()).backward()
            opt_d.step()
            opt_g.zero_grad()
            discriminator(fake).mean().backward()
            opt_g.step()
    g, d = recorder.facts()["optimizers"]
    assert g["stale"]["count"] == d["stale"]["count"] == 0
    assert g["coupled"] == [d["index"]] and d["coupled"] == []
    assert len(g["losses"]) == len(d["losses"]) == 4


def test_loss_kept_with_its_graph_is_a_leak():
    kept = []
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        for _ in range(6):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            kept.append(loss)
    graphs = recorder.facts()["graphs"]
    assert graphs["leaks"]["count"] > 0 and graphs["oldest"] >= 2


def test_loss_items_keep_no_graph():
    kept = []
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        for _ in range(6):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            kept.append(loss.item())
    assert recorder.facts()["graphs"]["leaks"]["count"] == 0


def test_passes_are_told_apart_by_backward_mode_and_grad():
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        with torch.no_grad():
            model(x)  # inference in training mode
        model.eval()
        model(x)  # inference with grad: its graph dies unused
        nn.functional.mse_loss(model(x), y).backward()  # training in eval mode
        model.train()
        nn.functional.mse_loss(model(x), y).backward()  # a correct training pass
    passes = recorder.facts()["passes"]
    assert (passes["training"], passes["inference"]) == (2, 2)
    assert passes["inference_in_train_mode"]["count"] == 1
    assert passes["inference_in_train_mode"]["sites"][0]["layers"] == ["Dropout"]
    assert passes["inference_with_grad"]["count"] == 1
    assert passes["training_in_eval_mode"]["count"] == 1


def test_backward_that_reaches_no_parameter():
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        prediction = model(x).detach()
        torch.tensor(float(((prediction - y) ** 2).mean()), requires_grad=True).backward()
        nn.functional.mse_loss(model(x), y).backward()
    backward = recorder.facts()["backward"]
    assert (backward["judged"], backward["no_path"]["count"]) == (2, 1)
    # the detached pass lived through a backward() that did not reach it: not an inference pass
    assert recorder.facts()["passes"]["inference_with_grad"]["count"] == 0


def test_plateau_metric_is_recognised_as_the_training_loss():
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        for _ in range(2):
            running = 0.0
            for _ in range(3):
                optimizer.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
                running += loss.item()
            model.eval()
            with torch.no_grad():
                val_loss = nn.functional.mse_loss(model(x + 1), y).item()
            model.train()
            scheduler.step(running / 3)
        scheduler.step(val_loss)
    calls = recorder.facts()["plateau"]
    assert [(c["source"], c["validation"]) for c in calls] == [("training-loss", True), ("training-loss", True), ("other", False)]


def test_saves_are_judged_and_state_dicts_round_trip(tmp_path):
    with recording() as recorder:
        model, *_ = tiny()
        torch.save(model, tmp_path / "model.pt")
        torch.save(model.state_dict(), tmp_path / "weights.pt")
        torch.save({"model": model.state_dict(), "epoch": 3}, tmp_path / "checkpoint.pt")
        state = model.state_dict()
        state["stray"] = torch.zeros(1)
        torch.save(state, io.BytesIO())
    saves = recorder.facts()["saves"]
    assert [s["kind"] for s in saves] == ["module", "state_dict", "state_dict", "state_dict"]
    assert [s.get("roundtrip") for s in saves[1:3]] == ["ok", "ok"]
    assert "Unexpected key(s)" in saves[3]["roundtrip"]
    assert torch.save is torch.serialization.save and not hasattr(torch.save, "__wrapped__")


def test_limit_batches_caps_every_pass():
    loader = DataLoader(TensorDataset(torch.arange(40.0)), batch_size=4)
    with recording(limit_batches=3) as recorder:
        lengths = [len(loader), len(list(loader)), len(list(loader))]
    assert lengths == [3, 3, 3]
    assert recorder.facts()["loader_passes"] == 2
    assert len(list(loader)) == 10  # uninstalled


def test_cuda_requests_stay_on_the_cpu_when_cuda_is_hidden():
    with recording() as recorder:
        model = nn.Linear(2, 2).cuda()
        moved = torch.ones(2).to("cuda")
        kept = torch.ones(2).to(torch.float64)
    assert moved.device.type == model.weight.device.type == "cpu"
    assert kept.dtype == torch.float64
    requests = recorder.facts()["cuda_requests"]
    assert requests["count"] == 3  # the weight, the bias, the tensor
    assert [s["location"]["line"] for s in requests["sites"]] == sorted(s["location"]["line"] for s in requests["sites"])


@pytest.mark.parametrize(("clears", "stale"), [(True, 0), (False, 3)])
def test_closure_steps_are_judged_after_the_closure(clears, stale):
    with recording() as recorder:
        model, _, x, y = tiny()
        optimizer = torch.optim.LBFGS(model.parameters(), lr=0.1, max_iter=3)

        def closure():
            if clears:
                optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        returned = [optimizer.step(closure).item() for _ in range(4)]
    record = recorder.facts()["optimizers"][-1]
    assert (record["checked_steps"], record["stale"]["count"]) == (3, stale)
    if clears:  # the step's loss is the closure's first evaluation, as step() returns it
        assert record["losses"] == pytest.approx(returned)


def test_outputs_are_walked_like_pytree_and_dataclasses():
    from dataclasses import dataclass

    @dataclass
    class Output:
        logits: torch.Tensor
        extra: dict

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            return Output(self.drop(self.fc(x)), {"aux": [x]})

    with recording() as recorder:
        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.randn(8, 4)).logits.sum().backward()
            optimizer.step()
    passes = recorder.facts()["passes"]
    assert (passes["training"], passes["inference"]) == (3, 0)


def test_recomputation_in_backward_and_library_passes_are_not_inference():
    from torch.optim.swa_utils import update_bn
    from torch.utils.checkpoint import checkpoint

    with recording() as recorder:
        block = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
        head = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
        optimizer = torch.optim.SGD([*block.parameters(), *head.parameters()], lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            head(checkpoint(block, torch.randn(8, 4), use_reentrant=False)).sum().backward()
            optimizer.step()
        update_bn([torch.randn(8, 4)], head)  # runs batch norm in train mode under no_grad, on purpose
    passes = recorder.facts()["passes"]
    assert passes["inference"] == 0 and passes["inference_in_train_mode"]["count"] == 0


def test_a_guarded_library_probe_of_cuda_is_not_the_users_request(tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    (library / "probe.py").write_text(
        "import torch\n\ndef probe():\n    try:\n        torch.cuda.current_device()\n    except Exception:\n        return None\n"
    )
    sys_path = str(library)
    import sys

    sys.path.insert(0, sys_path)
    try:
        import probe

        with recording() as recorder:
            probe.probe()
            assert recorder.facts()["cuda_requests"]["count"] == 0
            with pytest.raises(Exception):  # noqa: B017, PT011 - whatever CUDA initialisation raises
                torch.cuda.current_device()
        assert recorder.facts()["cuda_requests"]["count"] == 1
    finally:
        sys.path.remove(sys_path)
        sys.modules.pop("probe", None)


def test_a_kept_loss_does_not_pile_up_but_a_list_of_outputs_does():
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        first_phase_loss = nn.functional.mse_loss(model(x), y)
        first_phase_loss.backward()
        optimizer.step()
        for _ in range(8):
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        assert recorder.facts()["graphs"]["leaks"]["count"] == 0
        outputs = []
        for _ in range(8):
            optimizer.zero_grad()
            output = model(x)
            nn.functional.mse_loss(output, y).backward()
            optimizer.step()
            outputs.append(output)
    leaks = recorder.facts()["graphs"]["leaks"]
    assert leaks["count"] > 0
    assert leaks["sites"][0]["location"]["code"] == "outputs.append(output)"


# -- TL103: which value reached ReduceLROnPlateau.step(), by provenance ------------------------


def zero_task():
    """A model that fits its targets exactly from the start: every loss is exactly 0.0."""
    model = nn.Linear(4, 1, bias=False)
    nn.init.zeros_(model.weight)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return model, optimizer, torch.randn(8, 4), torch.zeros(8, 1)


def plateau_sources(make_metrics) -> list[tuple[str, list[str]]]:
    """Train `zero_task` for two epochs, each with a validation pass; `make_metrics(loss,
    val_loss, val_tensor)` gives the metrics stepped after the epoch (all losses are 0.0)."""
    with recording() as recorder:
        model, optimizer, x, y = zero_task()
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        for _ in range(2):
            model.train()
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            model.eval()
            with torch.no_grad():
                val_tensor = nn.functional.mse_loss(model(x + 1), y)
            for metric in make_metrics(loss, val_tensor.item(), val_tensor):
                scheduler.step(metric)
    return [(call["source"], call["origins"]) for call in recorder.facts()["plateau"]]


def test_equal_values_are_told_apart_by_where_they_came_from():
    sources = plateau_sources(lambda loss, val_loss, val_tensor: [loss.item(), val_loss, val_tensor])
    assert sources[:3] == [("training-loss", []), ("other", ["no-graph"]), ("other", ["no-graph"])]


@pytest.mark.parametrize(
    "training_value",
    [
        lambda loss: loss.item(),
        lambda loss: loss.detach().item(),
        lambda loss: loss.data.item(),
        lambda loss: loss.cpu().clone().item(),
        lambda loss: (loss.item() * 8 + 0.0) / 8,  # a running, sample-weighted mean
        lambda loss: sum([loss.item(), loss.item()]) / 2,
        lambda loss: round(loss.item(), 4),
        lambda loss: loss,  # the tensor itself
        lambda loss: loss.detach(),
    ],
)
def test_the_training_loss_is_followed_through_detach_item_and_arithmetic(training_value):
    sources = plateau_sources(lambda loss, val_loss, val_tensor: [training_value(loss)])
    assert sources[0][0] == "training-loss"


def test_a_term_of_the_loss_and_an_item_taken_before_backward_are_the_training_loss():
    with recording() as recorder:
        model, optimizer, x, y = zero_task()
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        for _ in range(2):
            optimizer.zero_grad()
            data_term = nn.functional.mse_loss(model(x), y)
            early = data_term.item()  # read before the backward that makes it the training loss
            (data_term + 0.01 * model.weight.pow(2).sum()).backward()
            optimizer.step()
            model.eval()
            with torch.no_grad():
                model(x)
            model.train()
            scheduler.step(early)
    assert {call["source"] for call in recorder.facts()["plateau"]} == {"training-loss"}


def test_a_loss_the_model_returns_is_the_training_loss():
    class WithLoss(nn.Module):  # as Hugging Face models return `outputs.loss`
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 1)

        def forward(self, x, y):
            return {"loss": nn.functional.mse_loss(self.fc(x), y), "logits": self.fc(x)}

    with recording() as recorder:
        model = WithLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        x, y = torch.randn(8, 4), torch.randn(8, 1)
        outputs = model(x, y)
        outputs["loss"].backward()
        optimizer.step()
        with torch.no_grad():
            model(x, y)
        scheduler.step(outputs["loss"].item())
    assert [call["source"] for call in recorder.facts()["plateau"]] == ["training-loss"]


def test_a_validation_loss_with_a_graph_is_not_the_training_loss():
    with recording() as recorder:
        model, optimizer, x, y = zero_task()
        scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        val_loss = nn.functional.mse_loss(model(x + 1), y)  # gradients on, no backward
        scheduler.step(val_loss.item())
    assert [(c["source"], c["origins"]) for c in recorder.facts()["plateau"]] == [("other", ["graph"])]


def test_where_the_trail_is_lost_the_source_is_untraced_or_mixed():
    import statistics

    sources = plateau_sources(
        lambda loss, val_loss, val_tensor: [
            float(loss),  # float() of a tensor makes a plain float
            statistics.fmean([loss.item()]),
            loss.item() + val_loss,
        ]
    )
    assert [source for source, _ in sources[:3]] == ["untraced", "untraced", "mixed"]


def test_traced_numbers_save_as_plain_numbers(tmp_path):
    with recording():
        model, optimizer, x, y = zero_task()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        checkpoint = {"weights": model.state_dict(), "loss": loss.item(), "history": [loss.item() / 2]}
        torch.save(checkpoint, tmp_path / "checkpoint.pt")
    loaded = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert type(loaded["loss"]) is float and type(loaded["history"][0]) is float
    assert type(checkpoint["loss"]) is not float  # the user's own dict is left as it was


def test_library_code_gets_plain_numbers_from_item():
    with recording():
        values = [torch.tensor(0.5).item()]  # the user's: traced
        formatted = f"{torch.tensor(0.25):.2f}"  # Tensor.__format__ calls .item() itself
    assert type(values[0]) is not float and formatted == "0.25"


# -- TL301: every graph kept alive, whether or not a backward used it ------------------------


def test_validation_losses_kept_with_their_graphs_pile_up():
    val_losses = []
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        for _ in range(8):
            for _ in range(2):
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            model.eval()
            val_losses.append(nn.functional.mse_loss(model(x + 1), y))  # gradients on, never backward
            model.train()
    leaks = recorder.facts()["graphs"]["leaks"]
    assert leaks["count"] > 0
    assert leaks["sites"][0]["location"]["code"].startswith("val_losses.append(")


def test_the_last_validation_loss_kept_does_not_pile_up():
    with recording() as recorder:
        model, optimizer, x, y = tiny()
        for _ in range(8):
            for _ in range(2):
                optimizer.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                optimizer.step()
            val_loss = nn.functional.mse_loss(model(x + 1), y)  # replaced each epoch
    assert val_loss.grad_fn is not None
    assert recorder.facts()["graphs"]["leaks"]["count"] == 0


# -- TL401 / TL107: what depends on the mode, beyond PyTorch's layers -------------------------


class FunctionalDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return nn.functional.dropout(self.fc(x), p=0.5, training=self.training)


class TrainingBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        x = self.fc(x)
        if self.training:
            x = x + torch.randn_like(x)
        return x


class FunctionalBatchNorm(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("var", torch.ones(4))

    def forward(self, x):
        return nn.functional.batch_norm(self.fc(x), self.mean, self.var, training=self.training)


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.attention = nn.TransformerEncoderLayer(4, 1, dim_feedforward=8, dropout=0.0, batch_first=True)

    def forward(self, x):
        return self.attention(self.fc(x).unsqueeze(1)).squeeze(1)


def inference_facts(model: nn.Module, *, evaluate: bool) -> dict:
    with recording() as recorder:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randn(8, 4)
        for _ in range(2):
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
        if evaluate:
            model.eval()
        with torch.no_grad():
            model(x)
    return recorder.facts()["passes"]


@pytest.mark.parametrize(
    ("make", "seen"),
    [
        (FunctionalDropout, "code that reads FunctionalDropout.training"),
        (TrainingBranch, "code that reads TrainingBranch.training"),
        (FunctionalBatchNorm, "code that reads FunctionalBatchNorm.training"),
    ],
)
def test_functional_dropout_batch_norm_and_training_branches_make_the_mode_matter(make, seen):
    torch.manual_seed(0)
    passes = inference_facts(make(), evaluate=False)
    assert passes["inference_in_train_mode"]["count"] == 1
    assert passes["inference_in_train_mode"]["sites"][0]["layers"] == [seen]
    passes = inference_facts(make(), evaluate=True)
    assert passes["inference_in_train_mode"]["count"] == 0 and passes["inference_layers"] == [seen]


def test_pytorchs_own_reads_of_the_flag_are_not_the_users_mode_dependent_code():
    # A Transformer layer reads `training` to choose its fast path; with dropout 0 its result
    # does not depend on the mode.
    torch.manual_seed(0)
    passes = inference_facts(Plain(), evaluate=False)
    assert passes["inference"] == 1 and passes["inference_layers"] == []


def test_a_training_pass_in_eval_mode_through_a_training_branch_is_tl107():
    with recording() as recorder:
        model = TrainingBranch()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        model.eval()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
    assert recorder.facts()["passes"]["training_in_eval_mode"]["count"] == 1


def test_the_descriptors_are_removed_when_the_run_ends():
    with recording():
        assert "training" in nn.Module.__dict__ and "data" in torch.Tensor.__dict__
        scripted = torch.jit.script(TrainingBranch())
        scripted.eval()
        assert scripted.training is False
    assert "training" not in nn.Module.__dict__ and "data" not in torch.Tensor.__dict__
    module = TrainingBranch()
    assert module.training is True and module.eval().training is False
    assert type(torch.tensor(0.5).item()) is float
