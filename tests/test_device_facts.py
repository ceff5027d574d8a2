"""The device facet of the semantic model: whether a CUDA placement was chosen on purpose,
which expression already holds a device, and where a new device definition goes."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.semantic import SemanticModel
from torchlint.semantic.devices import cuda_index, cuda_string


def facts(source: str):
    wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(source)))
    return SemanticModel(wrapper).devices


def marked(devices, marker: str = "HERE") -> cst.CSTNode:
    """What the rule checks on the line holding ``# HERE``: its first ``"cuda"`` string,
    else its outermost call."""
    module = devices.model.module
    row = next(i for i, line in enumerate(module.code.splitlines(), 1) if f"# {marker}" in line)
    strings, calls = [], []

    class Nodes(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            if devices.model.wrapper.resolve(PositionProvider)[node].start.line == row and cuda_string(node):
                strings.append(node)

        def visit_Call(self, node: cst.Call) -> None:
            if devices.model.wrapper.resolve(PositionProvider)[node].start.line == row:
                calls.append(node)

    module.visit(Nodes())
    return min(strings or calls, key=devices.model.start_key)


def guarded(source: str) -> bool:
    devices = facts(source)
    return devices.guarded(marked(devices))


# --- strings ---------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [('"cuda"', True), ("'cuda:0'", True), ('"cuda:12"', True), ('"cpu"', False), ('"cudas"', False), ('f"cuda"', False)])
def test_cuda_string(text, expected):
    assert cuda_string(cst.parse_expression(text)) is expected


def test_cuda_index():
    assert cuda_index(cst.parse_expression('"cuda"')) is None
    assert cuda_index(cst.parse_expression('"cuda:1"')) == 1


# --- guards ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        """
        if torch.cuda.is_available():
            model.cuda()  # HERE
        """,
        """
        if args.cuda:
            data, target = data.cuda(), target.cuda()  # HERE
        """,
        """
        use_cuda = not args.no_cuda and torch.cuda.is_available()
        if use_cuda:
            model.cuda()  # HERE
        """,
        """
        flag = torch.cuda.is_available()
        if flag:
            model.cuda()  # HERE
        """,
        """
        if args.cpu:
            pass
        else:
            model.cuda()  # HERE
        """,
        """
        model = model.cuda() if torch.cuda.is_available() else model  # HERE
        """,
        """
        device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")  # HERE
        """,
        """
        x = x.to("cuda:0" if flag else "cpu")  # HERE
        """,
        """
        use_gpu and model.cuda()  # HERE
        """,
        """
        def main():
            if not torch.cuda.is_available():
                sys.exit("needs a GPU")
            x = torch.ones(3, device="cuda")  # HERE
        """,
        """
        def train():
            x = x.cuda()  # HERE

        def main():
            assert torch.cuda.is_available(), "GPU only"
            train()
        """,
        """
        def to_gpu(x):
            return x.cuda()  # HERE
        """,
        """
        @pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU")
        def test_forward():
            model.cuda()  # HERE
        """,
        """
        try:
            model = model.cuda()  # HERE
        except RuntimeError:
            pass
        """,
        """
        import cupy
        x = torch.ones(3).cuda()  # HERE
        """,
    ],
)
def test_choices_made_on_purpose_are_guarded(source):
    assert guarded(source)


@pytest.mark.parametrize(
    "source",
    [
        """
        model = Net().cuda()  # HERE
        """,
        """
        if args.resume:
            model.cuda()  # HERE
        """,
        """
        if x.cuda().sum() > 0:  # HERE
            pass
        """,
        """
        y = x.cuda() if x is not None else None  # HERE
        """,
        """
        if torch.cuda.is_available():
            print("GPU found")
        model.cuda()  # HERE
        """,
        """
        model.cuda()  # HERE
        if not torch.cuda.is_available():
            raise SystemExit("needs a GPU")
        """,
        """
        def evaluate():
            if not torch.cuda.is_available():
                return
        def train():
            x = x.cuda()  # HERE
        """,
        """
        try:
            for x in loader:
                x = x.cuda()  # HERE
        except KeyboardInterrupt:
            print("Exiting from training early")
        """,
        """
        import torch

        @torch.autocast("cuda")
        def step(x):
            return model(x.cuda())  # HERE
        """,
    ],
)
def test_unguarded_cuda_is_not_guarded(source):
    assert not guarded(source)


# --- devices in scope ----------------------------------------------------------------------


def device_at(source: str):
    devices = facts(source)
    found = devices.device_at(marked(devices))
    return (found.expression, found.known_cuda) if found else None


def test_device_parameter_known_to_hold_a_device():
    assert device_at(
        """
        import torch

        def train(model, loader, device: torch.device):
            model.cuda()  # HERE
        """
    ) == ("device", False)
    assert device_at(
        """
        import torch

        def train(model, loader, device="cuda"):
            model.cuda()  # HERE
        """
    ) == ("device", False)


@pytest.mark.parametrize(
    "source",
    [
        # A parameter whose value is not seen, or is no torch device.
        """
        import torch

        def train(model, loader, device):
            model.cuda()  # HERE
        """,
        """
        import torch

        def report(model, device="stdout"):
            model.cuda()  # HERE
        """,
        # A count of devices.
        """
        import torch

        device = 3
        model = Net().cuda()  # HERE
        """,
        # The input's device in forward: its type is not known (and `x.to(x.device)` is no move).
        """
        import torch
        import torch.nn as nn

        class Net(nn.Module):
            def forward(self, x, mask=None):
                h = torch.zeros(3, device="cuda")  # HERE
        """,
        # `self.device` set to something other than a device.
        """
        import torch

        class Trainer:
            def __init__(self, config):
                self.device = config.device
                self.model = Net().cuda()  # HERE
        """,
    ],
)
def test_no_device_unless_known_to_hold_one(source):
    assert device_at(source) is None


def test_local_device_before_but_not_after():
    assert device_at(
        """
        import torch

        def main():
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model.cuda()  # HERE
        """
    ) == ("device", True)
    assert device_at(
        """
        def main():
            model.cuda()  # HERE
            device = torch.device("cpu")
        """
    ) is None


def test_module_level_device_in_main_block_serves_functions():
    assert device_at(
        """
        import torch

        def train(x):
            return x.cuda()  # HERE

        if __name__ == "__main__":
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        """
    ) == ("device", True)


def test_module_level_device_must_come_first_at_module_level():
    assert device_at(
        """
        model = Net().cuda()  # HERE
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        """
    ) is None


def test_other_device_names():
    assert device_at(
        """
        import torch

        DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        x = torch.ones(3).cuda()  # HERE
        """
    ) == ("DEVICE", True)


def test_self_device_set_in_init():
    source = """
        import torch

        class Trainer:
            def __init__(self, model):
                self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                self.model = model.cuda()  # HERE

            def step(self, x):
                return self.model(x.cuda())  # THERE
        """
    devices = facts(source)
    assert devices.device_at(marked(devices)).expression == "self.device"
    assert devices.device_at(marked(devices, "THERE")).expression == "self.device"


def test_self_device_set_elsewhere_is_not_used():
    assert device_at(
        """
        class Trainer:
            def setup(self):
                self.device = torch.device("cuda")

            def step(self, x):
                return x.cuda()  # HERE
        """
    ) is None


def test_lightning_module_has_self_device():
    assert device_at(
        """
        import lightning as L

        class Lit(L.LightningModule):
            def training_step(self, batch, batch_idx):
                noise = torch.randn(3).cuda()  # HERE
        """
    ) == ("self.device", False)


def test_args_device():
    assert device_at(
        """
        import torch

        def evaluate(args, model):
            model.cuda()  # HERE

        def main():
            args = parse()
            args.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        """
    ) == ("args.device", False)


# --- defining a device ----------------------------------------------------------------------


def test_definition_goes_after_the_torch_import_block():
    devices = facts(
        """
        '''Docstring.'''
        import os
        import sys
        sys.path.insert(0, "..")
        import torch
        from torch import nn
        LR = 0.1
        import numpy as np
        """
    )
    assert devices.code(devices.definition_anchor()).strip() == "from torch import nn"


def test_no_definition_without_import_torch():
    assert facts("from torch import nn\nx = nn.Linear(2, 2).cuda()\n").definition_anchor() is None


def test_a_later_local_device_forbids_a_module_definition():
    devices = facts(
        """
        import torch

        def warmup(model):
            x = torch.randn(3).cuda()  # HERE
            device = next(model.parameters()).device
        """
    )
    assert not devices.can_define_device(marked(devices))
    devices = facts("import torch\n\ndef f(x):\n    return x.cuda()  # HERE\n")
    assert devices.can_define_device(marked(devices))


def test_overridden_device_default():
    devices = facts(
        """
        device = "cuda"
        if not torch.cuda.is_available():
            device = "cpu"
        other = "cuda"
        other = torch.device(other)
        """
    )
    targets = [s.body[0].targets[0].target for s in devices.model.module.body if isinstance(s, cst.SimpleStatementLine)]
    assert devices.overridden(targets[0])
    assert not devices.overridden(targets[1])


def test_a_check_of_the_users_device_string_is_no_gpu_exit():
    assert not guarded(
        """
        def main(args):
            if args.device not in ("cpu", "mps"):
                raise ValueError(f"unknown device {args.device}")

        def train(x):
            return x.cuda()  # HERE
        """
    )


def test_code_expected_to_fail_is_guarded():
    assert guarded(
        """
        def test_remote_module_has_no_cuda(remote_module):
            with pytest.raises(ValueError, match="not supported"):
                remote_module.cuda()  # HERE
        """
    )


# --- CUDA-only by design --------------------------------------------------------------------


@pytest.mark.parametrize(
    "source,reason",
    [
        (
            """
            import torch
            import torch.distributed as dist

            def setup(rank, world_size):
                dist.init_process_group("nccl", rank=rank, world_size=world_size)
            """,
            "it trains on NCCL",
        ),
        (
            """
            import torch

            def main(args):
                torch.distributed.init_process_group(backend="nccl", init_method="env://")
            """,
            "it trains on NCCL",
        ),
        (
            """
            import torch

            def main(local_rank):
                torch.cuda.set_device(local_rank)
            """,
            "it calls torch.cuda.set_device",
        ),
        (
            """
            import torch
            from apex import amp
            """,
            "it imports a GPU-only library",
        ),
        (
            """
            import torch
            import triton.language as tl
            """,
            "it imports a GPU-only library",
        ),
        (
            """
            import torch
            from deepspeed.ops.op_builder import GDSBuilder
            """,
            "it imports a GPU-only library",
        ),
    ],
)
def test_cuda_only_files(source, reason):
    assert facts(source).cuda_only == reason


@pytest.mark.parametrize(
    "source",
    [
        # The backend follows the hardware.
        """
        import torch
        import torch.distributed as dist

        backend = "nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
        """,
        # set_device only when a GPU was asked for.
        """
        import torch

        if args.gpu is not None:
            torch.cuda.set_device(args.gpu)
        """,
        # An optional GPU-only library.
        """
        import torch

        try:
            from apex import amp
        except ImportError:
            amp = None
        """,
        # Libraries with CPU code paths.
        """
        import torch
        import deepspeed
        import bitsandbytes as bnb
        import xformers.ops
        """,
    ],
)
def test_files_that_are_not_cuda_only(source):
    assert facts(source).cuda_only is None


def test_a_function_running_a_collective_is_cuda_only():
    assert guarded(
        """
        import torch
        import torch.distributed as dist

        def synchronize(count, total):
            if not dist.is_initialized():
                return
            t = torch.tensor([count, total], device="cuda")  # HERE
            dist.barrier()
            dist.all_reduce(t)
        """
    )
    assert not guarded(
        """
        import torch
        import torch.distributed as dist

        def synchronize(count, total):
            dist.all_reduce(torch.tensor([count, total]))

        def train(x):
            return x.cuda()  # HERE
        """
    )


def test_an_is_cpu_check_is_a_device_choice():
    assert guarded(
        """
        import torch

        def gather(param):
            if param.is_cpu:
                param = param.to(torch.device("cuda"))  # HERE
            return param
        """
    )
