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
