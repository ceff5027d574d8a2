"""The instrumentation installed in the child process before the user's script starts.

Everything here records facts (counts, series, the user's file and line); `checks.py` turns the
facts into verdicts in the parent. Mechanisms, all public torch APIs:

- optimizer steps: the global step pre/post hooks; gradients: a hook on every parameter that an
  optimizer owns, which runs before the incoming gradient is added to `.grad`, so it sees
  whether the previous gradient was cleared (there is no `zero_grad` hook: we see its effect);
- losses: `torch.autograd.backward` is wrapped (`Tensor.backward` calls it);
- forward passes: global module forward hooks with a depth counter for the outermost call; a
  pass is "training" once a backward reaches its output (a pre-hook on the output's
  `grad_fn`), "inference" when its graph dies without one, or when it builds no graph. Outputs
  are walked as `torch.utils._pytree` walks them (plus dataclasses). Forward passes that run
  inside a backward (checkpoint recomputation) are not passes of their own, and passes that
  library code makes (`swa_utils.update_bn`) are not the user's inference. What runs
  differently by mode: PyTorch's dropout, batch-norm, RNN and attention layers (by type),
  and any read of a user module's `training` flag, which is how its own code asks for the mode
  (`F.dropout(x, p, training=self.training)`, `F.batch_norm(..., training=self.training)`,
  `if self.training:`): `nn.Module.training` is a data descriptor while the run lasts;
- graphs kept alive: a weak-referenceable marker in the `grad_fn.metadata` of each loss and
  each pass's output (from its forward on, whether or not a backward uses it) lives exactly
  as long as the graph (tracemalloc cannot see tensor memory); graphs of past steps piling up,
  in steps of the optimizer they trained, is a leak, and the user's variable that holds them
  names the line that keeps them;
- where values come from (TL103, `provenance.py`): each tensor's origin lives in its
  `grad_fn.metadata` (or, detached, in a map by identity); a backward marks its loss's origin
  trained; the user's `.item()` returns numbers that carry their origins through arithmetic;
- `ReduceLROnPlateau.step`, `torch.save`, `Module.state_dict`, `DataLoader.__iter__`,
  `Tensor.item`/`detach`/`cpu`/`to`/`clone`/`data` are wrapped.

Facts are published to the parent as the run goes (`publish`), so that a crash still leaves
the evidence gathered until then.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import functools
import gc
import inspect
import io
import linecache
import math
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _NormBase
from torch.nn.modules.dropout import _DropoutNd
from torch.nn.modules.loss import _Loss
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.optim.optimizer import Optimizer, register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils import _pytree as pytree
from torch.utils.data import DataLoader

from torchlint.runtime import provenance
from torchlint.runtime.locations import UserCode, location
from torchlint.runtime.provenance import NO_GRAPH, Origin

# A graph still alive this many steps (of the optimizers its backward reached) after that
# backward is old. One step is normal: `prev = loss` for logging, the generator loss of a GAN.
GRAPH_AGE_LIMIT = 2
# Old graphs from this many different steps alive at once are piling up: a leak (TL301). A
# fixed number of kept losses (one per training phase, the last loss of a loop) never grows.
GRAPH_PILE = 4
# Seconds between two publications of the facts to the parent while the script runs.
PUBLISH_INTERVAL_S = 1.0
# Tracking stops adding graph markers past this many alive ones: the leak is proven by then.
MAX_TRACKED_GRAPHS = 256
MAX_SERIES = 100_000
MISSING = object()
_MODULE_CALL_FILE = str(Path("torch", "nn", "modules", "module.py"))
_OWN_DIR = str(Path(__file__).resolve().parent.parent)
_CUDA_API_DIR = os.path.join("torch", "cuda", "")
# The nodes of a loss's graph marked as the training loss at its backward: the loss and what
# it was computed from, down to the model outputs (passes), at most this many.
LOSS_REGION_NODES = 64
# Tensors detached from a graph (`loss.detach()`, `.data`) whose origin is remembered at most.
MAX_DERIVED = 4096
_ABSENT = object()
_detach = torch._C.TensorBase.detach  # PyTorch's own, not the wrapper that follows origins
_compiling = torch.compiler.is_compiling


class Sightings:
    """How often something happened, and where (the first few user lines, with counts)."""

    MAX_SITES = 5

    def __init__(self) -> None:
        self.count = 0
        self.sites: dict[tuple, dict] = {}

    def see(self, where: dict | None, **details: Any) -> None:
        self.count += 1
        key = (where["file"], where["line"]) if where else None
        site = self.sites.get(key)
        if site is not None:
            site["count"] += 1
        elif len(self.sites) < self.MAX_SITES:
            self.sites[key] = {"location": where, "count": 1, **details}

    def to_json(self) -> dict:
        return {"count": self.count, "sites": list(self.sites.values())}


class Phase(enum.Enum):
    """Where a parameter's gradient stands relative to its optimizer's last step."""

    CLEAR = "clear"  # None or zeros since the last step (or never stepped)
    STEPPED = "stepped"  # the gradient an optimizer just stepped with is still in `.grad`
    DIRTY = "dirty"  # a new gradient was added on top of the stepped one


class ParamState:
    __slots__ = ("param", "phase", "optimizers")

    def __init__(self, param: torch.Tensor) -> None:
        self.param = weakref.ref(param)
        self.phase = Phase.CLEAR
        self.optimizers: set[int] = set()


class OptimizerRecord:
    def __init__(self, index: int, optimizer: Optimizer) -> None:
        self.index = index
        self.name = type(optimizer).__name__
        self.steps = 0
        self.checked_steps = 0
        self.stale = Sightings()
        self.losses: list[float] = []
        self.coupled: set[int] = set()
        self.lr: list[list[float]] = []  # [step, lr] whenever the learning rate changed
        self.closure_step = False  # the step in progress runs a closure

    def to_json(self) -> dict:
        return {
            "index": self.index,
            "name": self.name,
            "steps": self.steps,
            "checked_steps": self.checked_steps,
            "stale": self.stale.to_json(),
            "losses": self.losses,
            "coupled": sorted(self.coupled),
            "lr": self.lr,
        }


class PassInfo:
    """One outermost module call."""

    __slots__ = (
        "module",
        "module_id",
        "training",
        "grad",
        "train_layers",
        "eval_layers",
        "location",
        "backward",
        "backwards_before",
        "by_library",
        "marker",
        "graph",
    )

    def __init__(self, module: nn.Module, by_library: bool) -> None:
        self.module = type(module).__name__
        self.module_id = id(module)
        self.training = _mode(module)
        self.grad = torch.is_grad_enabled()
        self.train_layers: set[str] = set()
        self.eval_layers: set[str] = set()
        self.location: dict | None = None
        self.backward = False  # a backward reached its output
        self.backwards_before = 0  # backward() calls made before it
        self.by_library = by_library  # library code, not the user's, called the module
        self.marker: weakref.ref | None = None  # the marker in its output's graph
        self.graph: GraphRecord | None = None  # that graph, while TL301 follows it


class GraphRecord:
    """A graph a backward ran through (a loss's, a training pass's output), while it lives."""

    __slots__ = ("marker", "born", "clock")

    def __init__(self, marker: weakref.ref, born: dict[int, int], clock: int) -> None:
        self.marker = marker
        self.born = born  # optimizer index -> its steps when the backward ran
        self.clock = clock


class _GraphMarker:
    """Stored in a `grad_fn.metadata`; it dies with the graph, which a weak reference sees."""

    __slots__ = ("__weakref__",)


def _mode_dependent(module: nn.Module) -> bool:
    """Does this layer of PyTorch's compute something different in training and in eval mode?"""
    if isinstance(module, _DropoutNd):
        return module.p > 0
    if isinstance(module, _NormBase):
        return module.track_running_stats
    if isinstance(module, (nn.RNNBase, nn.MultiheadAttention)):
        return module.dropout > 0
    return False


def _judged_by_type(module: nn.Module) -> bool:
    """A layer `_mode_dependent` judges, or another of PyTorch's own: its reads of `training`
    are not the user's mode-dependent code (a Transformer layer reads it to choose a fast path)."""
    return isinstance(module, (_DropoutNd, _NormBase, nn.RNNBase, _Loss)) or type(module).__module__.startswith("torch.")


def _mode(module: nn.Module) -> bool:
    """The module's training flag, read without being seen as the module's own read."""
    return module.__dict__.get("training", True)


class _ModeFlag:
    """`nn.Module.training` as a data descriptor (not a `property`, which TorchScript would try
    to compile): the flag stays in the instance's `__dict__`, and each read is reported, so a
    module whose own code branches on `self.training` is seen to depend on its mode."""

    def __init__(self, on_read: Callable[[nn.Module, bool], None]) -> None:
        self.on_read = on_read

    def __get__(self, module, owner=None):
        if module is None:
            return self
        try:
            value = module.__dict__["training"]
        except KeyError:
            raise AttributeError("training") from None
        self.on_read(module, value)
        return value

    def __set__(self, module, value) -> None:
        module.__dict__["training"] = value

    def __delete__(self, module) -> None:
        # A TorchScript module deletes its own flag, to read the C++ module's through __getattr__.
        try:
            del module.__dict__["training"]
        except KeyError:
            raise AttributeError("training") from None


class _Data:
    """`Tensor.data`, passing reads through and remembering which tensor the result came from."""

    def __init__(self, original, follow: Callable[[Any, torch.Tensor], None]) -> None:
        self.original = original
        self.follow = follow

    def __get__(self, tensor, owner=None):
        if tensor is None:
            return self
        result = self.original.__get__(tensor, owner)
        self.follow(result, tensor)
        return result

    def __set__(self, tensor, value) -> None:
        self.original.__set__(tensor, value)

    def __delete__(self, tensor) -> None:
        self.original.__delete__(tensor)


def _is_cuda(device: Any) -> bool:
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


def _tensors(value: Any, limit: int = 8):
    """The tensors in a module's inputs or outputs, walked as PyTorch's pytree walks them
    (sequences, mappings, named tuples, registered types such as Hugging Face outputs) and
    into dataclasses; at most `limit` children of each container."""
    pending = [value]
    visited = 0
    while pending and visited < 64:
        item = pending.pop()
        visited += 1
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, (list, tuple)):
            pending.extend(reversed(item[:limit]))
        elif isinstance(item, Mapping):
            pending.extend(reversed(list(item.values())[:limit]))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            pending.extend(reversed([getattr(item, f.name, None) for f in dataclasses.fields(item)][:limit]))
        elif type(item) in pytree.SUPPORTED_NODES:
            children, _ = pytree.SUPPORTED_NODES[type(item)].flatten_fn(item)
            pending.extend(reversed(list(children)[:limit]))


def _graph_nodes(output: Any, limit: int = 8) -> list:
    """The distinct `grad_fn`s of the tensors in a module's output."""
    nodes: list = []
    for tensor in _tensors(output):
        if tensor.grad_fn is not None and all(tensor.grad_fn is not n for n in nodes):
            nodes.append(tensor.grad_fn)
            if len(nodes) >= limit:
                break
    return nodes


def _in_backward() -> bool:
    """Is the autograd engine running on this thread (a forward in it is a recomputation)?"""
    return torch._C._current_graph_task_id() != -1


def _kept_markers(value: Any, markers: set[int], budget: list[int]) -> set[int]:
    """Which of `markers` the graphs that `value` (a tensor, or a container of them) keeps alive hold."""
    found: set[int] = set()
    if isinstance(value, torch.Tensor):
        pending = [value.grad_fn] if value.grad_fn is not None else []
        seen: set[int] = set()
        while pending and budget[0] > 0:
            node = pending.pop()
            budget[0] -= 1
            if id(node) in seen:
                continue
            seen.add(id(node))
            metadata = getattr(node, "metadata", None)
            if metadata:
                found |= {id(m) for m in metadata.values()} & markers
            pending.extend(n for n, _ in getattr(node, "next_functions", ()) if n is not None)
    elif isinstance(value, (list, tuple)):
        for item in value[-64:]:
            found |= _kept_markers(item, markers, budget)
    elif isinstance(value, dict):
        for item in list(value.values())[-64:]:
            found |= _kept_markers(item, markers, budget)
    return found


def _keeping_line(frame: FrameType, name: str) -> dict | None:
    """The line of the frame's code that keeps what the variable `name` holds: where it is
    appended to or accumulated into, else where it is assigned."""
    if frame.f_code.co_name == "<module>":
        lines, first = linecache.getlines(frame.f_code.co_filename), 1
    else:
        try:
            lines, first = inspect.getsourcelines(frame.f_code)
        except (OSError, TypeError):
            return None
    word = re.escape(name)
    patterns = (
        rf"\b{word}\s*\.\s*(append|extend|insert|add|update)\s*\(",
        rf"\b{word}\s*(\[[^\]]*\])?\s*[-+*/]=",
        rf"\b{word}\s*\[[^\]]*\]\s*=[^=]",
        rf"^\s*{word}\s*=[^=].*\b{word}\b",
        rf"^\s*{word}\s*(:[^=]*)?=[^=]",
    )
    for pattern in patterns:
        for offset, text in enumerate(lines):
            if re.search(pattern, text.split("#")[0]):
                return location(frame.f_code.co_filename, first + offset)
    return None


class Recorder:
    """Installs the hooks and holds what they saw."""

    def __init__(
        self,
        user: UserCode,
        *,
        limit_batches: int | None,
        cuda_hidden: bool,
        publish: Callable[[dict], None] | None = None,
        max_steps: int | None = None,
    ) -> None:
        self.user = user
        # --max-steps: after that many steps of an optimizer, the DataLoaders that fed its
        # steps yield nothing more, so the training loop ends and what follows it runs.
        self.max_steps = max_steps
        self.left_training_at: int | None = None  # the clock when the training loop was left
        self.training_loaders: set[int] = set()  # loaders an iterator of which fed a step
        self.last_loader: int | None = None  # the loader whose iterator gave the last batch
        self.emptied_passes = 0  # passes over a training loader emptied since
        self.ended: str | None = None  # why the run was ended where it could not leave the loop
        self.publish = publish
        self.published = time.monotonic()
        self.publish_lock = threading.Lock()
        self.stop_publishing = threading.Event()
        self.publisher: threading.Thread | None = None
        self.limit_batches = limit_batches
        self.cuda_hidden = cuda_hidden
        self.handles: list = []
        self.restore: list[tuple[object, str, object]] = []
        # optimizers and parameters
        self.optimizers: dict[int, OptimizerRecord] = {}
        self.params: dict[int, ParamState] = {}
        self.clock = 0  # the most steps any optimizer has taken: one per training iteration
        # backward
        self.backward_depth = 0
        self.backward_calls = 0
        self.judged_backwards = 0
        self.reached: set[int] = set()
        self.pending_losses: list[float] = []
        self.pending_reached: set[int] = set()
        self.trained_passes: list[PassInfo] = []  # passes the backward in progress runs through
        self.no_path = Sightings()
        self.nonfinite = Sightings()
        self.scaled: tuple[weakref.ref, torch.Tensor] | None = None
        # graphs kept alive (TL301)
        self.graphs: list[GraphRecord] = []
        self.leaks = 0  # backward calls that found graphs piling up
        self.leak_site: dict | None = None
        self.leak_site_pile = 0  # the pile's size when the site was looked for
        self.oldest_leak = 0
        self.most_leaked = 0
        # forward passes
        self.depth = 0
        self.current: PassInfo | None = None
        self.open_passes: dict[weakref.ref, PassInfo] = {}
        self.unresolved: dict[int, list[PassInfo]] = {}  # dead graphs, by module, awaiting a verdict
        self.training_passes = 0
        self.inference_passes = 0
        self.inference_mode_layers: set[str] = set()
        self.inference_in_train_mode = Sightings()
        self.inference_with_grad = Sightings()
        self.training_in_eval_mode = Sightings()
        # ReduceLROnPlateau (TL103): the passes since its last step, and where values came from
        self.passes_since_plateau: dict[int, tuple[weakref.ref, list[PassInfo]]] = {}
        self.plateau_calls: list[dict] = []
        self.derived: dict[int, tuple[weakref.ref, Origin]] = {}  # detached tensors: their origin
        # the optimizers that hold a module's parameters (TL301's age of a pass's graph)
        self.watched = 0  # (parameter, optimizer) pairs watched: the cache below is stale when it grows
        self.holders: dict[int, tuple[weakref.ref, int, frozenset[int]]] = {}
        # devices (TL201), saving (TL501), data
        self.cuda_requests = Sightings()
        self.saves: list[dict] = []
        self.state_dict_owners: dict[int, tuple[weakref.ref, weakref.ref]] = {}
        self.loader_passes = 0

    # -- installation -------------------------------------------------------------------------

    def install(self) -> None:
        if self.publish is not None:
            self.publisher = threading.Thread(target=self._publish_regularly, name="torchlint-publisher", daemon=True)
            self.publisher.start()
        self.handles += [
            register_optimizer_step_pre_hook(self._before_step),
            register_optimizer_step_post_hook(self._after_step),
            register_module_forward_pre_hook(self._before_forward),
            register_module_forward_hook(self._after_forward, always_call=True),
        ]
        self._wrap(Optimizer, "add_param_group", self._wrap_add_param_group)
        self._wrap(torch.autograd, "backward", self._wrap_backward)
        self._wrap(torch.amp.GradScaler, "scale", self._wrap_scale)
        self._wrap(ReduceLROnPlateau, "step", self._wrap_plateau_step)
        self._wrap(torch.serialization, "save", self._wrap_save)
        torch.save = torch.serialization.save
        self._wrap(nn.Module, "state_dict", self._wrap_state_dict)
        self._wrap(DataLoader, "__iter__", self._wrap_loader_iter)
        # TL103: where the values that reach ReduceLROnPlateau.step() came from
        self._wrap(torch.Tensor, "item", self._wrap_item)
        for name in ("detach", "cpu", "to", "clone"):
            self._wrap(torch.Tensor, name, self._wrap_derive)
        self._override(torch.Tensor, "data", _Data(torch._C.TensorBase.data, self._follow))
        provenance.register_with_yaml()
        # TL401 / TL107: mode-dependent code beyond PyTorch's layers (`F.dropout(x, p,
        # training=self.training)`, `if self.training:`) reads the module's flag
        self._override(nn.Module, "training", _ModeFlag(self._on_mode_read))
        if self.limit_batches is not None:
            self._wrap(DataLoader, "__len__", self._wrap_loader_len)
        if self.cuda_hidden:
            self._wrap(torch.cuda, "_lazy_init", self._wrap_lazy_init)
            self._wrap(torch.Tensor, "to", self._wrap_to)
            self._wrap(torch.Tensor, "cuda", self._wrap_cuda)

    def _wrap(self, owner: object, name: str, make_wrapper) -> None:
        original = getattr(owner, name)
        wrapper = functools.wraps(original)(make_wrapper(original))
        self.restore.append((owner, name, original))
        setattr(owner, name, wrapper)

    def _override(self, owner: type, name: str, descriptor: object) -> None:
        """Put a descriptor on a class; `finish` puts back what was there (or nothing)."""
        self.restore.append((owner, name, owner.__dict__.get(name, _ABSENT)))
        setattr(owner, name, descriptor)

    # -- optimizers and gradients (TL101, learns) --------------------------------------------

    def _optimizer(self, optimizer: Optimizer) -> OptimizerRecord:
        record = self.optimizers.get(id(optimizer))
        if record is None:
            record = self.optimizers[id(optimizer)] = OptimizerRecord(len(self.optimizers), optimizer)
        return record

    def _watch(self, optimizer: Optimizer) -> None:
        index = self._optimizer(optimizer).index
        for group in optimizer.param_groups:
            for param in group["params"]:
                state = self.params.get(id(param))
                if state is None or state.param() is not param:
                    state = self.params[id(param)] = ParamState(param)
                    if param.requires_grad:
                        param.register_hook(functools.partial(self._on_gradient, state))
                if index not in state.optimizers:
                    state.optimizers.add(index)
                    self.watched += 1

    def _wrap_add_param_group(self, original):
        def add_param_group(optimizer, param_group):
            result = original(optimizer, param_group)
            self._watch(optimizer)
            return result

        return add_param_group

    def _on_gradient(self, state: ParamState, grad: torch.Tensor) -> None:
        # Runs before `grad` is added to `.grad`: what is there now is left from before.
        self.reached |= state.optimizers
        if state.phase is not Phase.CLEAR:
            param = state.param()
            held = None if param is None else param.grad
            state.phase = Phase.CLEAR if held is None or not bool(held.any()) else Phase.DIRTY

    def _params(self, optimizer: Optimizer):
        for group in optimizer.param_groups:
            for param in group["params"]:
                state = self.params.get(id(param))
                if state is not None and state.param() is param:
                    yield param, state

    def _before_step(self, optimizer: Optimizer, args, kwargs) -> None:
        record = self._optimizer(optimizer)
        if self.max_steps is not None and record.steps >= self.max_steps:
            # The loop goes on without a DataLoader to empty (a `while step < n:` loop):
            # the run ends here, as if the script had.
            self._end(f"optimizer {record.index} was about to take step {record.steps + 1} of a training loop that no DataLoader drives")
        # The hooks get step()'s arguments with the optimizer first: (optimizer, closure?).
        record.closure_step = (args[1] if len(args) > 1 else kwargs.get("closure")) is not None
        if record.steps == 0:
            self._watch(optimizer)  # an optimizer subclass that bypassed add_param_group
        elif not record.closure_step:
            self._check_stale(optimizer, record)
        # A closure computes the step's loss itself: its backward calls are this step's.
        if record.closure_step:
            self.pending_losses, self.pending_reached = [], set()

    def _check_stale(self, optimizer: Optimizer, record: OptimizerRecord) -> None:
        """Is a gradient from before the previous step still in `.grad`? For a step with a
        closure, this runs after the closure: a closure that cleared the gradients before its
        backward left them CLEAR, one that did not left them DIRTY."""
        record.checked_steps += 1
        stale = sum(
            1
            for param, state in self._params(optimizer)
            if state.phase is Phase.DIRTY
            or (
                not record.closure_step
                and state.phase is Phase.STEPPED
                and param.grad is not None
                and bool(param.grad.any())
            )
        )
        if stale:
            record.stale.see(self.user.caller(), step=record.steps + 1, params=stale)

    def _after_step(self, optimizer: Optimizer, args, kwargs) -> None:
        record = self._optimizer(optimizer)
        if record.closure_step and record.steps:
            self._check_stale(optimizer, record)
        record.steps += 1
        self.clock = max(self.clock, record.steps)
        if self.max_steps is not None:
            if self.last_loader is not None:
                self.training_loaders.add(self.last_loader)
            if record.steps >= self.max_steps and self.left_training_at is None:
                self.left_training_at = self.clock
        for param, state in self._params(optimizer):
            state.phase = Phase.CLEAR if param.grad is None else Phase.STEPPED
        if self.pending_losses:
            if len(record.losses) < MAX_SERIES:
                # A closure may run many times in one step (LBFGS): the step's loss is the
                # first evaluation, the one `step(closure)` returns. Without a closure the
                # step's loss is the sum of the backward calls since the last step
                # (gradient accumulation over micro-batches).
                value = self.pending_losses[0] if record.closure_step else math.fsum(self.pending_losses)
                record.losses.append(value)
            record.coupled |= self.pending_reached - {record.index}
            self.pending_losses, self.pending_reached = [], set()
        lr = optimizer.param_groups[0].get("lr") if optimizer.param_groups else None
        if isinstance(lr, (int, float, torch.Tensor)):
            lr = float(lr)
            if not record.lr or record.lr[-1][1] != lr:
                record.lr.append([record.steps, lr])
        self._publish(now=record.steps == 1)

    # -- backward (learns, TL301, TL601) ------------------------------------------------------

    def _wrap_backward(self, original):
        def backward(tensors, *args, **kwargs):
            if self.backward_depth:  # a backward inside a backward (reentrant checkpointing)
                return original(tensors, *args, **kwargs)
            loss = tensors if isinstance(tensors, torch.Tensor) else None
            if isinstance(tensors, (list, tuple)) and len(tensors) == 1 and isinstance(tensors[0], torch.Tensor):
                loss = tensors[0]
            where = self.user.caller()
            value = self._loss_value(loss)
            self._look_for_pile()
            marker = self._mark(loss.grad_fn) if loss is not None and loss.grad_fn is not None else None
            if loss is not None and loss.grad_fn is not None:
                self._mark_trained(loss.grad_fn)
            self.reached = set()
            self.trained_passes = []
            self.unresolved.clear()  # graphs that died just before this backward were cut off from it
            self.backward_depth += 1
            try:
                result = original(tensors, *args, **kwargs)
            finally:
                self.backward_depth -= 1
            self.backward_calls += 1
            if self.params:
                self.judged_backwards += 1
                if not self.reached:
                    self.no_path.see(where)
            self._track_graphs(marker, self.trained_passes)
            if value is not None:
                self.pending_losses.append(value)
                if not math.isfinite(value):
                    self.nonfinite.see(where, value=str(value))
            self.pending_reached |= self.reached
            self.trained_passes = []
            return result

        return backward

    def _loss_value(self, loss: torch.Tensor | None) -> float | None:
        if loss is None or loss.numel() != 1:
            return None
        if self.scaled is not None and self.scaled[0]() is loss:
            loss = self.scaled[1]  # the value before GradScaler multiplied it
        return float(_detach(loss))

    def _wrap_scale(self, original):
        def scale(scaler, outputs):
            scaled = original(scaler, outputs)
            if isinstance(outputs, torch.Tensor) and isinstance(scaled, torch.Tensor):
                self.scaled = (weakref.ref(scaled), _detach(outputs))
            return scaled

        return scale

    # -- graphs kept alive (TL301) ------------------------------------------------------------

    def _mark(self, node) -> weakref.ref | None:
        marker = _GraphMarker()
        try:
            node.metadata["torchlint.graph"] = marker
        except (AttributeError, RuntimeError, TypeError):  # a node type without metadata
            return None
        return weakref.ref(marker)

    def _track_graphs(self, marker: weakref.ref | None, passes: list[PassInfo]) -> None:
        """Record the graphs this backward ran through (the loss's, the passes' outputs'), with
        the steps of the optimizers it reached. A pass's graph is followed from its forward on
        (`_follow_pass`): it is now dated by this backward."""
        indices = self.reached or set(range(len(self.optimizers)))
        steps = {record.index: record.steps for record in self.optimizers.values() if record.index in indices}
        for info in passes:
            if info.graph is not None:
                info.graph.born, info.graph.clock = steps, self.clock
        for kept in [marker, *(info.marker for info in passes if info.graph is None)]:
            if kept is not None and kept() is not None and len(self.graphs) < MAX_TRACKED_GRAPHS:
                self.graphs.append(GraphRecord(kept, steps, self.clock))

    def _follow_pass(self, module: nn.Module, info: PassInfo) -> None:
        """Follow a pass's graph from its forward on, whether or not a backward ever uses it: a
        validation loss computed with gradients on and kept across epochs keeps the forward's
        graph alive as surely as a kept training loss does. Until a backward dates it, its age
        counts in the steps of the optimizers that hold the module's parameters (all of them
        when none does)."""
        if info.marker is None or len(self.graphs) >= MAX_TRACKED_GRAPHS:
            return
        holders = self._holders(module) or {record.index for record in self.optimizers.values()}
        steps = {record.index: record.steps for record in self.optimizers.values() if record.index in holders}
        info.graph = GraphRecord(info.marker, steps, self.clock)
        self.graphs.append(info.graph)
        self._look_for_pile()

    def _holders(self, module: nn.Module) -> frozenset[int]:
        """The optimizers that hold this module's parameters (cached while no parameter is added)."""
        entry = self.holders.get(id(module))
        if entry is None or entry[0]() is not module or entry[1] != self.watched:
            found: set[int] = set()
            for param in module.parameters():
                state = self.params.get(id(param))
                if state is not None and state.param() is param:
                    found |= state.optimizers
            entry = self.holders[id(module)] = (weakref.ref(module), self.watched, frozenset(found))
        return entry[2]

    def _age(self, graph: GraphRecord) -> int:
        """Steps taken since the graph's backward by the optimizers it trained (the fewest)."""
        steps = {record.index: record.steps for record in self.optimizers.values()}
        return min((steps[index] - born for index, born in graph.born.items()), default=0)

    def _look_for_pile(self) -> None:
        self.graphs = [graph for graph in self.graphs if graph.marker() is not None]
        old = [graph for graph in self.graphs if self._age(graph) >= GRAPH_AGE_LIMIT]
        iterations = {graph.clock for graph in old}
        if len(iterations) < GRAPH_PILE:
            return
        # The variable that keeps the pile is looked for again each time the pile doubled: early
        # on, a loss kept on purpose may hold as many of the old graphs as the pile does.
        if len(iterations) >= 2 * self.leak_site_pile:
            self.leak_site = self._keeper([graph.marker() for graph in old]) or self.leak_site or self.user.caller()
            self.leak_site_pile = len(iterations)
        self.leaks += 1
        self.oldest_leak = max(self.oldest_leak, max(self._age(graph) for graph in old))
        self.most_leaked = max(self.most_leaked, len(iterations))

    def _keeper(self, markers: list) -> dict | None:
        """The line that keeps the old graphs: a variable of a user frame on the stack (or of
        the script's module) holds them, and the line appends to it or accumulates into it."""
        ids = {id(marker) for marker in markers if marker is not None}
        best: tuple[int, FrameType, str] | None = None  # the variable that keeps the most of them
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            if self.user.is_user_file(frame.f_code.co_filename):
                budget = [20_000]
                for name, value in list(frame.f_locals.items()):
                    if not name.startswith("__"):
                        kept = len(_kept_markers(value, ids, budget))
                        if kept and (best is None or kept >= best[0]):
                            best = (kept, frame, name)
            frame = frame.f_back
        return _keeping_line(best[1], best[2]) if best else None

    # -- forward passes (TL401, TL402, TL107) -------------------------------------------------

    def _before_forward(self, module: nn.Module, args) -> None:
        self.depth += 1
        if self.depth == 1:
            if isinstance(module, _Loss) or self.backward_depth or _in_backward():
                self.current = None  # a loss, or a recomputation inside a backward (checkpointing)
                return
            self.current = info = PassInfo(module, self._called_by_library())
            for earlier in self.unresolved.pop(id(module), ()):
                self._close_pass(earlier, graph=True)  # the module ran again with no backward between
            self._remember_for_plateau(module, info)
        elif self.current is not None and _mode_dependent(module):
            layers = self.current.train_layers if _mode(module) else self.current.eval_layers
            layers.add(type(module).__name__)

    def _on_mode_read(self, module: nn.Module, training: bool) -> None:
        """A module's `training` flag was read: inside a pass, by the user's module (not one of
        PyTorch's layers, judged by type), the pass ran code that depends on the mode."""
        current = self.current
        if current is None or _compiling() or _judged_by_type(module):
            return
        (current.train_layers if training else current.eval_layers).add(f"code that reads {type(module).__name__}.training")

    def _after_forward(self, module: nn.Module, args, output) -> None:
        self.depth -= 1
        if self.depth or self.current is None:
            return
        info, self.current = self.current, None
        nodes = _graph_nodes(output) if info.grad else []
        if not nodes:  # no graph: nothing can backpropagate through this pass
            if info.training and info.train_layers:
                info.location = self.user.caller()
            self._close_pass(info, graph=False)
            return
        info.location = self.user.caller()
        info.backwards_before = self.backward_calls
        marker = _GraphMarker()
        for node in nodes:
            try:
                node.metadata["torchlint.pass"] = marker
                node.register_prehook(functools.partial(self._on_pass_backward, info))
            except (AttributeError, RuntimeError, TypeError):
                return
        info.marker = weakref.ref(marker, self._on_pass_freed)
        self.open_passes[info.marker] = info
        self._follow_pass(module, info)

    def _called_by_library(self) -> bool:
        """Did library code (not the user's, not the module machinery) call this module?"""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if self.user.is_user_file(filename):
                return False
            if not (filename.endswith(_MODULE_CALL_FILE) or filename.startswith(_OWN_DIR)):
                return True
            frame = frame.f_back
        return False

    def _remember_for_plateau(self, module: nn.Module, info: PassInfo) -> None:
        entry = self.passes_since_plateau.get(id(module))
        if entry is None or entry[0]() is not module:
            entry = self.passes_since_plateau[id(module)] = (weakref.ref(module), [])
        passes = entry[1]
        passes.append(info)
        if len(passes) > 32:  # keep a few passes that no backward ran through; that is all TL103 asks
            passes[:] = [p for p in passes if not p.backward][:16]

    def _on_pass_backward(self, info: PassInfo, grad_outputs) -> None:
        if info.backward:
            return
        info.backward = True
        self.trained_passes.append(info)
        self.training_passes += 1
        if not info.training and info.eval_layers:
            self.training_in_eval_mode.see(info.location, module=info.module, layers=sorted(info.eval_layers))

    def _on_pass_freed(self, ref: weakref.ref) -> None:
        info = self.open_passes.pop(ref, None)
        if info is not None:
            self._close_graph_pass(info)

    def _close_graph_pass(self, info: PassInfo) -> None:
        # A graph that no backward reached is an inference pass, unless a backward() ran in its
        # life or right after it, before the module ran again: then it is a training step whose
        # gradient path was cut (`model(x).detach().numpy()`), which is TL601's business.
        if not info.backward and self.backward_calls == info.backwards_before:
            self.unresolved.setdefault(info.module_id, []).append(info)

    def _close_pass(self, info: PassInfo, *, graph: bool) -> None:
        """An inference pass: its graph died (or never existed) with no backward through it.
        Library code that calls a module (`update_bn`) owns its mode: not the user's inference."""
        if info.by_library:
            return
        self.inference_passes += 1
        self.inference_mode_layers |= info.train_layers | info.eval_layers
        if info.training and info.train_layers:
            self.inference_in_train_mode.see(info.location, module=info.module, layers=sorted(info.train_layers))
        if graph:
            self.inference_with_grad.see(info.location, module=info.module)

    # -- ReduceLROnPlateau (TL103) ------------------------------------------------------------

    def _wrap_plateau_step(self, original):
        def step(scheduler, *args, **kwargs):
            metric = args[0] if args else kwargs.get("metrics", MISSING)
            call = {"location": self.user.caller(), **self._classify_metric(metric)}
            call["validation"] = self._validation_ran(scheduler.optimizer)
            self.passes_since_plateau = {}
            self.plateau_calls.append(call)
            result = original(scheduler, *args, **kwargs)
            call["lr"] = [float(group["lr"]) for group in scheduler.optimizer.param_groups][:1]
            self._publish(now=True)
            return result

        return step

    def _classify_metric(self, metric: Any) -> dict:
        """Where the metric came from, followed back to the tensors that made it (never
        compared with the training losses' values: equal values prove nothing)."""
        if metric is MISSING or metric is None:
            return {"metric": None, "source": "none"}
        if isinstance(metric, torch.Tensor):
            origins: frozenset[Origin] | None = frozenset((self._origin(metric),))
            value = float(_detach(metric)) if metric.numel() == 1 else None
        else:
            origins = provenance.origins_of(metric)
            try:
                value = float(metric)
            except (TypeError, ValueError, RuntimeError):
                value = None
        return {"metric": value, "source": provenance.describe(origins), "origins": provenance.kinds(origins)}

    # -- where values come from (TL103) ---------------------------------------------------------

    def _origin(self, tensor: torch.Tensor) -> Origin:
        """The origin of a tensor: its graph's, or for a tensor without one, the origin of the
        tensor it was detached from (`_follow`), else NO_GRAPH."""
        node = tensor.grad_fn
        if node is not None:
            return self._node_origin(node)
        entry = self.derived.get(id(tensor))
        if entry is not None and entry[0]() is tensor:
            return entry[1]
        return NO_GRAPH

    def _node_origin(self, node, origin: Origin | None = None) -> Origin:
        """The origin kept in an autograd node's metadata (made there, as `origin` or a new one,
        the first time it is asked for): it lives as long as the graph does."""
        try:
            metadata = node.metadata
            found = metadata.get("torchlint.origin")
            if found is None:
                found = metadata["torchlint.origin"] = origin or Origin(graph=True)
            return found
        except (AttributeError, RuntimeError, TypeError):  # a node type without metadata
            return origin or Origin(graph=True)

    def _mark_trained(self, root) -> None:
        """A backward runs on the loss whose node is `root`: mark it (even when the model
        returned it, as Hugging Face models do) and what it was computed from (its terms: `ce`
        of `loss = ce + kl`, the loss a GradScaler scaled) as the training loss, down to the
        outputs of the model's passes (or LOSS_REGION_NODES nodes)."""
        pending, seen = [root], set()
        while pending and len(seen) < LOSS_REGION_NODES:
            node = pending.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            try:
                if node is not root and "torchlint.pass" in node.metadata:
                    continue  # a model's output: the loss ends here (unless the model returned it)
            except (AttributeError, RuntimeError, TypeError):
                continue
            self._node_origin(node).trained = True
            pending.extend(child for child, _ in getattr(node, "next_functions", ()) if child is not None)

    def _wrap_item(self, original):
        # The user's `.item()` returns a number that remembers its tensor's origin through
        # Python arithmetic. Library code (an optimizer reading its step count, `Tensor.__format__`)
        # gets plain numbers, as it always did.
        def item(tensor):
            value = original(tensor)
            if type(value) not in (float, int) or _compiling() or not self.user.is_user_file(sys._getframe(1).f_code.co_filename):
                return value
            return provenance.traced(value, frozenset((self._origin(tensor),)))

        return item

    def _wrap_derive(self, original):
        # detach, cpu, to, clone: the result comes from the same computation as the tensor.
        def derive(tensor, *args, **kwargs):
            result = original(tensor, *args, **kwargs)
            self._follow(result, tensor)
            return result

        return derive

    def _follow(self, result: Any, source: torch.Tensor) -> None:
        """`result` was made from `source` without computing anything new (a detach, a copy):
        it gets `source`'s origin, in its own node's metadata or, without a graph, by identity."""
        if result is source or not isinstance(result, torch.Tensor) or _compiling():
            return
        if source.grad_fn is not None:
            origin = self._node_origin(source.grad_fn)
        else:
            entry = self.derived.get(id(source))
            if entry is None or entry[0]() is not source:
                return
            origin = entry[1]
        if result.grad_fn is not None:
            self._node_origin(result.grad_fn, origin)
            return
        if len(self.derived) >= MAX_DERIVED:
            self.derived = {key: entry for key, entry in self.derived.items() if entry[0]() is not None}
            if len(self.derived) >= MAX_DERIVED:
                return
        key = id(result)
        try:
            self.derived[key] = (weakref.ref(result, functools.partial(self._forget_derived, key)), origin)
        except TypeError:  # a tensor type without weak references
            pass

    def _forget_derived(self, key: int, ref: weakref.ref) -> None:
        entry = self.derived.get(key)
        if entry is not None and entry[0] is ref:
            del self.derived[key]

    def _validation_ran(self, optimizer: Optimizer) -> bool:
        """Did a pass that no backward ran through go through a module whose parameters this
        scheduler's optimizer holds (its own model, not a teacher), since its last step?"""
        held = {id(param) for group in optimizer.param_groups for param in group["params"]}
        for module_ref, passes in self.passes_since_plateau.values():
            module = module_ref()
            if module is not None and any(not p.backward for p in passes):
                if any(id(param) in held for param in module.parameters()):
                    return True
        return False

    # -- saving (TL501) -----------------------------------------------------------------------

    def _wrap_state_dict(self, original):
        def state_dict(module, *args, **kwargs):
            result = original(module, *args, **kwargs)
            if not args and kwargs.get("destination") is None and not kwargs.get("prefix"):
                if len(self.state_dict_owners) > 1000:
                    self.state_dict_owners = {k: v for k, v in self.state_dict_owners.items() if v[0]() is not None}
                try:
                    self.state_dict_owners[id(result)] = (weakref.ref(result), weakref.ref(module))
                except TypeError:  # a state dict type without weak references
                    pass
            return result

        return state_dict

    def _owner(self, value: Any) -> nn.Module | None:
        entry = self.state_dict_owners.get(id(value))
        if entry is None or entry[0]() is not value:
            return None
        return entry[1]()

    def _wrap_save(self, original):
        def save(obj, f, *args, **kwargs):
            where = self.user.caller()
            # The numbers the user's `.item()` made are saved plain: `weights_only=True` loads them.
            result = original(provenance.untraced(obj), f, *args, **kwargs)
            self.saves.append({"location": where, **self._judge_save(obj, original)})
            self._publish(now=True)
            return result

        return save

    def _judge_save(self, obj: Any, original_save) -> dict:
        items = list(obj.items()) if isinstance(obj, Mapping) else []
        modules = [type(v).__name__ for v in [obj, *(v for _, v in items)] if isinstance(v, nn.Module)]
        if modules:
            return {"kind": "module", "modules": modules}
        # Each state dict is round-tripped on its own: extras beside it (an epoch number as a
        # NumPy scalar) cannot break it, and are judged on their own below.
        state_dicts = [obj] if self._owner(obj) is not None else [value for _, value in items if self._owner(value) is not None]
        for state_dict in state_dicts:
            try:
                loaded = _round_trip(original_save, state_dict)
                with torch.no_grad():
                    copy.deepcopy(self._owner(state_dict)).load_state_dict(loaded, strict=True)
            except Exception as error:  # noqa: BLE001 - any failure to load back is the finding
                return {"kind": "state_dict", "roundtrip": f"{_short(error)}"}
        kind = "state_dict" if state_dicts else "other"
        if state_dicts == [obj]:
            return {"kind": kind, "roundtrip": "ok"}
        try:
            _round_trip(original_save, obj)
        except Exception as error:  # noqa: BLE001
            return {"kind": kind, "roundtrip": "ok", "extras": f"torch.load(weights_only=True) cannot load it: {_short(error)}"}
        return {"kind": kind, "roundtrip": "ok"}

    # -- devices (TL201) ----------------------------------------------------------------------

    def _wrap_lazy_init(self, original):
        # With CUDA hidden, initialising it raises. A request made by the user's code (directly
        # or through torch.cuda's own functions) counts; one that library code makes (the
        # guarded probe of torch.compile) counts only if its error reaches the user's code,
        # which `_child` sees as the script's own exception (`cuda_request_error`).
        def lazy_init():
            try:
                return original()
            except BaseException as error:
                if self._requested_by_user():
                    self.cuda_requests.see(self.user.caller(), what="CUDA initialisation")
                else:
                    error.torchlint_cuda_request = self.user.caller()  # type: ignore[attr-defined]
                raise

        return lazy_init

    def _requested_by_user(self) -> bool:
        frame: FrameType | None = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if self.user.is_user_file(filename):
                return True
            if not (_CUDA_API_DIR in filename or filename.startswith(_OWN_DIR)):
                return False
            frame = frame.f_back
        return False

    def library_cuda_request_reached_user(self, error: BaseException) -> None:
        """The script died of an exception: if a library's CUDA request raised it, count it."""
        seen: set[int] = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            where = getattr(error, "torchlint_cuda_request", MISSING)
            if where is not MISSING:
                self.cuda_requests.see(where, what="CUDA initialisation")
                return
            error = error.__cause__ or error.__context__

    def _wrap_to(self, original):
        # With CUDA hidden, `.to("cuda")` is recorded and kept on the CPU, so that the rest of
        # the script still runs and its other checks still say something.
        def to(tensor, *args, **kwargs):
            if args and _is_cuda(args[0]):
                self.cuda_requests.see(self.user.caller(), what=".to(cuda)")
                args = ("cpu", *args[1:])
            if _is_cuda(kwargs.get("device")):
                self.cuda_requests.see(self.user.caller(), what=".to(device=cuda)")
                kwargs["device"] = "cpu"
            return original(tensor, *args, **kwargs)

        return to

    def _wrap_cuda(self, original):
        def cuda(tensor, *args, **kwargs):
            self.cuda_requests.see(self.user.caller(), what=".cuda()")
            return tensor.to("cpu")

        return cuda

    # -- data ---------------------------------------------------------------------------------

    def _wrap_loader_iter(self, original):
        def iterate(loader):
            self.loader_passes += 1
            if self.left_training_at is not None and id(loader) in self.training_loaders:
                self.emptied_passes += 1
                if self.emptied_passes > MAX_EMPTIED_PASSES:
                    self._end(f"the loop around the training loop went on for {MAX_EMPTIED_PASSES} more passes after it was left")
            iterator = original(loader)
            limited = iterator if self.limit_batches is None else _Limited(iterator, self.limit_batches)
            return limited if self.max_steps is None else _Stepped(limited, loader, self)

        return iterate

    def _end(self, reason: str) -> None:
        self.ended = reason
        raise StepsDone(reason)

    def _wrap_loader_len(self, original):
        def length(loader):
            return min(original(loader), self.limit_batches)

        return length

    # -- publishing -----------------------------------------------------------------------------

    def _publish(self, *, now: bool = False) -> None:
        """Hand the facts so far to the parent: at once, or when the last time was a while ago."""
        if self.publish is None or not (now or time.monotonic() - self.published >= PUBLISH_INTERVAL_S):
            return
        with self.publish_lock:
            try:
                facts = self.facts()
            except RuntimeError:  # the script's thread changed a fact while it was read: next time
                return
            self.publish(facts)
            self.published = time.monotonic()

    def _publish_regularly(self) -> None:
        """A thread that publishes the facts every PUBLISH_INTERVAL_S, so that a script that
        dies between two steps, saves or plateau steps loses at most that much evidence."""
        while not self.stop_publishing.wait(PUBLISH_INTERVAL_S):
            self._publish()

    # -- the end ------------------------------------------------------------------------------

    def finish(self) -> None:
        """Let the script's graphs die, classify the passes still open, and remove the hooks."""
        self.stop_publishing.set()
        if self.publisher is not None:
            self.publisher.join()
        gc.collect()
        for info in list(self.open_passes.values()):
            self._close_graph_pass(info)
        self.open_passes.clear()
        for infos in self.unresolved.values():
            for info in infos:
                self._close_pass(info, graph=True)
        self.unresolved.clear()
        for handle in self.handles:
            handle.remove()
        for owner, name, original in reversed(self.restore):
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        torch.save = torch.serialization.save

    def facts(self) -> dict:
        return {
            "optimizers": [record.to_json() for record in self.optimizers.values()],
            "backward": {
                "calls": self.backward_calls,
                "judged": self.judged_backwards,
                "no_path": self.no_path.to_json(),
                "nonfinite": self.nonfinite.to_json(),
            },
            "graphs": {
                "clock": self.clock,
                "leaks": {"count": self.leaks, "sites": [{"location": self.leak_site, "count": self.leaks}] if self.leaks else []},
                "oldest": self.oldest_leak,
                "most_alive": self.most_leaked,
            },
            "passes": {
                "training": self.training_passes,
                "inference": self.inference_passes,
                "inference_layers": sorted(self.inference_mode_layers),
                "inference_in_train_mode": self.inference_in_train_mode.to_json(),
                "inference_with_grad": self.inference_with_grad.to_json(),
                "training_in_eval_mode": self.training_in_eval_mode.to_json(),
            },
            "plateau": self.plateau_calls,
            "cuda_requests": self.cuda_requests.to_json(),
            "saves": self.saves,
            "loader_passes": self.loader_passes,
            "max_steps": None if self.max_steps is None else {
                "limit": self.max_steps,
                "left_loop_at": self.left_training_at,
                "emptied_passes": self.emptied_passes,
                "ended": self.ended,
            },
        }


MAX_EMPTIED_PASSES = 2  # epochs run with an emptied training loader before the run ends


class StepsDone(BaseException):
    """Raised in the script where ``--max-steps`` ends a run that cannot leave its training
    loop: the run counts as finished there."""


class _Stepped:
    """A DataLoader iterator under ``--max-steps``: it says which loader gave the last batch
    (a step after it marks the loader as training data), and stops once the steps are done
    if its loader fed them."""

    def __init__(self, iterator, loader, recorder: Recorder) -> None:
        self.iterator = iterator
        self.loader = id(loader)
        self.recorder = recorder

    def __iter__(self):
        return self

    def __next__(self):
        recorder = self.recorder
        if recorder.left_training_at is not None and self.loader in recorder.training_loaders:
            raise StopIteration
        batch = next(self.iterator)
        recorder.last_loader = self.loader
        return batch

    def __len__(self) -> int:
        return len(self.iterator)


class _Limited:
    """A DataLoader iterator that stops after `limit` batches (`--limit-batches`)."""

    def __init__(self, iterator, limit: int) -> None:
        self.iterator = iterator
        self.left = limit
        self.limit = limit

    def __iter__(self):
        return self

    def __next__(self):
        if self.left <= 0:
            raise StopIteration
        self.left -= 1
        return next(self.iterator)

    def __len__(self) -> int:
        return min(len(self.iterator), self.limit)


def _round_trip(save, obj: Any) -> Any:
    buffer = io.BytesIO()
    save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True, map_location="cpu")


def _short(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= 300 else text[:297] + "..."
