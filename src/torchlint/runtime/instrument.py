"""The instrumentation installed in the child process before the user's script starts.

Everything here records facts (counts, series, the user's file and line); `checks.py` turns the
facts into verdicts in the parent. Mechanisms, all public torch APIs:

- optimizer steps: the global step pre/post hooks; gradients: a hook on every parameter that an
  optimizer owns, which runs before the incoming gradient is added to `.grad`, so it sees
  whether the previous gradient was cleared (there is no `zero_grad` hook: we see its effect);
- losses: `torch.autograd.backward` is wrapped (`Tensor.backward` calls it);
- forward passes: global module forward hooks with a depth counter for the outermost call; a
  pass is "training" once a backward reaches its output (a pre-hook on the output's
  `grad_fn`), "inference" when its graph dies without one, or when it builds no graph;
- graphs kept alive: a weak-referenceable marker in `loss.grad_fn.metadata` lives exactly as
  long as the graph (tracemalloc cannot see tensor memory);
- `ReduceLROnPlateau.step`, `torch.save`, `Module.state_dict`, `DataLoader.__iter__` are wrapped.
"""

from __future__ import annotations

import copy
import enum
import functools
import gc
import io
import math
import weakref
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _NormBase
from torch.nn.modules.dropout import _DropoutNd
from torch.nn.modules.loss import _Loss
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.optim.optimizer import Optimizer, register_optimizer_step_post_hook, register_optimizer_step_pre_hook
from torch.utils.data import DataLoader

from torchlint.runtime.locations import UserCode

# A loss graph still alive this many optimizer steps after its backward is a leak (TL301).
# One step is normal: `prev = loss` for logging, or the generator loss of a GAN iteration.
GRAPH_AGE_LIMIT = 2
# Tracking stops adding graph markers past this many alive ones: the leak is proven by then.
MAX_TRACKED_GRAPHS = 256
MAX_SERIES = 100_000
MISSING = object()


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

    __slots__ = ("module", "module_id", "training", "grad", "train_layers", "eval_layers", "location", "backward", "backwards_before")

    def __init__(self, module: nn.Module) -> None:
        self.module = type(module).__name__
        self.module_id = id(module)
        self.training = module.training
        self.grad = torch.is_grad_enabled()
        self.train_layers: set[str] = set()
        self.eval_layers: set[str] = set()
        self.location: dict | None = None
        self.backward = False  # a backward reached its output
        self.backwards_before = 0  # backward() calls made before it


class _GraphMarker:
    """Stored in a `grad_fn.metadata`; it dies with the graph, which a weak reference sees."""

    __slots__ = ("__weakref__",)


def _mode_dependent(module: nn.Module) -> bool:
    """Does this layer compute something different in training and in eval mode?"""
    if isinstance(module, _DropoutNd):
        return module.p > 0
    if isinstance(module, _NormBase):
        return module.track_running_stats
    if isinstance(module, nn.RNNBase):
        return module.dropout > 0
    return False


def _is_cuda(device: Any) -> bool:
    if isinstance(device, str):
        return device.split(":")[0] == "cuda"
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, int) and not isinstance(device, bool)


def _graph_nodes(output: Any, limit: int = 8) -> list:
    """The distinct `grad_fn`s of the tensors in a module's output (tensor, sequence or mapping)."""
    nodes: list = []
    pending = [output]
    while pending and len(nodes) < limit:
        item = pending.pop()
        if isinstance(item, torch.Tensor):
            if item.grad_fn is not None and all(item.grad_fn is not n for n in nodes):
                nodes.append(item.grad_fn)
        elif isinstance(item, (list, tuple)):
            pending.extend(item[:limit])
        elif isinstance(item, Mapping):
            pending.extend(list(item.values())[:limit])
    return nodes


class Recorder:
    """Installs the hooks and holds what they saw."""

    def __init__(self, user: UserCode, *, limit_batches: int | None, cuda_hidden: bool) -> None:
        self.user = user
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
        self.no_path = Sightings()
        self.nonfinite = Sightings()
        self.scaled: tuple[weakref.ref, torch.Tensor] | None = None
        # graphs kept alive (TL301)
        self.graphs: list[tuple[weakref.ref, int, dict | None]] = []
        self.leaks = Sightings()
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
        # ReduceLROnPlateau (TL103)
        self.losses_since_plateau: list[float] = []
        self.validation_since_plateau = 0
        self.plateau_calls: list[dict] = []
        # devices (TL201), saving (TL501), data
        self.cuda_requests = Sightings()
        self.saves: list[dict] = []
        self.state_dict_owners: dict[int, tuple[weakref.ref, weakref.ref]] = {}
        self.loader_passes = 0

    # -- installation -------------------------------------------------------------------------

    def install(self) -> None:
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
                state.optimizers.add(index)

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
        if record.steps == 0:
            self._watch(optimizer)  # an optimizer subclass that bypassed add_param_group
            return
        record.checked_steps += 1
        stale = sum(
            1
            for param, state in self._params(optimizer)
            if state.phase is Phase.DIRTY
            or (state.phase is Phase.STEPPED and param.grad is not None and bool(param.grad.any()))
        )
        if stale:
            record.stale.see(self.user.caller(), step=record.steps + 1, params=stale)

    def _after_step(self, optimizer: Optimizer, args, kwargs) -> None:
        record = self._optimizer(optimizer)
        record.steps += 1
        self.clock = max(self.clock, record.steps)
        for param, state in self._params(optimizer):
            state.phase = Phase.CLEAR if param.grad is None else Phase.STEPPED
        if self.pending_losses:
            if len(record.losses) < MAX_SERIES:
                record.losses.append(math.fsum(self.pending_losses))
            record.coupled |= self.pending_reached - {record.index}
            self.pending_losses, self.pending_reached = [], set()
        lr = optimizer.param_groups[0].get("lr") if optimizer.param_groups else None
        if isinstance(lr, (int, float, torch.Tensor)):
            lr = float(lr)
            if not record.lr or record.lr[-1][1] != lr:
                record.lr.append([record.steps, lr])

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
            if loss is not None:
                self._track_graph(loss, where)
            self.reached = set()
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
            if value is not None:
                self.pending_losses.append(value)
                self.losses_since_plateau.append(value)
                if not math.isfinite(value):
                    self.nonfinite.see(where, value=str(value))
            self.pending_reached |= self.reached
            return result

        return backward

    def _loss_value(self, loss: torch.Tensor | None) -> float | None:
        if loss is None or loss.numel() != 1:
            return None
        if self.scaled is not None and self.scaled[0]() is loss:
            loss = self.scaled[1]  # the value before GradScaler multiplied it
        return float(loss.detach())

    def _wrap_scale(self, original):
        def scale(scaler, outputs):
            scaled = original(scaler, outputs)
            if isinstance(outputs, torch.Tensor) and isinstance(scaled, torch.Tensor):
                self.scaled = (weakref.ref(scaled), outputs.detach())
            return scaled

        return scale

    def _track_graph(self, loss: torch.Tensor, where: dict | None) -> None:
        self.graphs = [(ref, clock, site) for ref, clock, site in self.graphs if ref() is not None]
        leaked = [(self.clock - clock, site) for _, clock, site in self.graphs if self.clock - clock >= GRAPH_AGE_LIMIT]
        if leaked:
            self.leaks.see(leaked[0][1])
            self.oldest_leak = max(self.oldest_leak, leaked[0][0])
            self.most_leaked = max(self.most_leaked, len(leaked))
        node = loss.grad_fn
        if node is None or len(self.graphs) >= MAX_TRACKED_GRAPHS:
            return
        marker = _GraphMarker()
        try:
            node.metadata["torchlint.graph"] = marker
        except (AttributeError, RuntimeError, TypeError):  # a node type without metadata
            return
        self.graphs.append((weakref.ref(marker), self.clock, where))

    # -- forward passes (TL401, TL402, TL107) -------------------------------------------------

    def _before_forward(self, module: nn.Module, args) -> None:
        self.depth += 1
        if self.depth == 1:
            self.current = None if isinstance(module, _Loss) else PassInfo(module)
            for info in self.unresolved.pop(id(module), ()):
                self._close_pass(info, graph=True)  # the module ran again with no backward between
        elif self.current is not None and _mode_dependent(module):
            layers = self.current.train_layers if module.training else self.current.eval_layers
            layers.add(type(module).__name__)

    def _after_forward(self, module: nn.Module, args, output) -> None:
        self.depth -= 1
        if self.depth or self.current is None:
            return
        info, self.current = self.current, None
        if not info.grad or not info.training:
            self.validation_since_plateau += 1
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
        self.open_passes[weakref.ref(marker, self._on_pass_freed)] = info

    def _on_pass_backward(self, info: PassInfo, grad_outputs) -> None:
        if info.backward:
            return
        info.backward = True
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
        """An inference pass: its graph died (or never existed) with no backward through it."""
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
            call["validation"] = self.validation_since_plateau > 0
            self.losses_since_plateau, self.validation_since_plateau = [], 0
            self.plateau_calls.append(call)
            result = original(scheduler, *args, **kwargs)
            call["lr"] = [float(group["lr"]) for group in scheduler.optimizer.param_groups][:1]
            return result

        return step

    def _classify_metric(self, metric: Any) -> dict:
        if metric is MISSING or metric is None:
            return {"metric": None, "source": "none"}
        if isinstance(metric, torch.Tensor) and metric.grad_fn is not None:
            if "torchlint.graph" in metric.grad_fn.metadata:
                return {"metric": float(metric.detach()), "source": "training-loss"}
        try:
            value = float(metric)
        except (TypeError, ValueError, RuntimeError):
            return {"metric": None, "source": "other"}
        losses = self.losses_since_plateau
        if losses:
            total = sum(losses)  # in the order a script's running sum adds them
            candidates = (losses[-1], total, total / len(losses))
            if any(math.isclose(value, c, rel_tol=1e-6, abs_tol=1e-12) for c in candidates):
                return {"metric": value, "source": "training-loss"}
        return {"metric": value, "source": "other"}

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
            result = original(obj, f, *args, **kwargs)
            self.saves.append({"location": where, **self._judge_save(obj, original)})
            return result

        return save

    def _judge_save(self, obj: Any, original_save) -> dict:
        items = list(obj.items()) if isinstance(obj, Mapping) else []
        modules = [type(v).__name__ for v in [obj, *(v for _, v in items)] if isinstance(v, nn.Module)]
        if modules:
            return {"kind": "module", "modules": modules}
        state_dicts = [(None, obj)] if self._owner(obj) is not None else []
        state_dicts += [(key, value) for key, value in items if self._owner(value) is not None]
        buffer = io.BytesIO()
        try:
            original_save(obj, buffer)
            buffer.seek(0)
            loaded = torch.load(buffer, weights_only=True, map_location="cpu")
        except Exception as error:  # noqa: BLE001 - any failure to load back is the finding
            kind = "state_dict" if state_dicts else "other"
            return {"kind": kind, "roundtrip": f"torch.load(weights_only=True) failed: {_short(error)}"}
        for key, value in state_dicts:
            module = self._owner(value)
            try:
                with torch.no_grad():
                    copy.deepcopy(module).load_state_dict(loaded if key is None else loaded[key], strict=True)
            except Exception as error:  # noqa: BLE001
                return {"kind": "state_dict", "roundtrip": f"load_state_dict(strict=True) failed: {_short(error)}"}
        return {"kind": "state_dict" if state_dicts else "other", "roundtrip": "ok"}

    # -- devices (TL201) ----------------------------------------------------------------------

    def _wrap_lazy_init(self, original):
        def lazy_init():
            self.cuda_requests.see(self.user.caller(), what="CUDA initialisation")
            return original()

        return lazy_init

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
            iterator = original(loader)
            return iterator if self.limit_batches is None else _Limited(iterator, self.limit_batches)

        return iterate

    def _wrap_loader_len(self, original):
        def length(loader):
            return min(original(loader), self.limit_batches)

        return length

    # -- the end ------------------------------------------------------------------------------

    def finish(self) -> None:
        """Let the script's graphs die, classify the passes still open, and remove the hooks."""
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
                "leaks": self.leaks.to_json(),
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
        }


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


def _short(error: BaseException) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= 300 else text[:297] + "..."
