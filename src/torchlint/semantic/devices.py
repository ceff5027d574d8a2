"""Device facts: whether a CUDA placement was chosen on purpose (under an availability check
or a user's flag, after an early exit when CUDA is missing, in code that is CUDA-only by
design), and which expression already holds a torch device where a fix needs one.

CUDA-only by design is a fact of the whole file (``DeviceFacts.cuda_only``): it calls
``init_process_group("nccl")``, calls ``torch.cuda.set_device(...)``, ``torch.cuda.synchronize()``
or a tensor's ``.pin_memory()`` unconditionally (operations that exist only for a GPU, and raise
without one: GPU benchmarks, kernel tests), calls a function of another project file that
calls ``set_device`` or starts NCCL on every path (``ProjectView.requires_cuda``), defines
Triton kernels, raises or exits when CUDA is missing on every path (a check that is a
statement of a function's or the module's own body, or of the ``__main__`` block), imports a
GPU-only library or loads a bitsandbytes 4-/8-bit model outside ``try``/``if``, or is named
for the GPU (``gpu_benchmark.py``: the project view's file name). Inside ``try``/``if``, such
an import or load makes the rest of its block CUDA-only. A function that runs a
``torch.distributed`` collective is CUDA-only by design too (NCCL needs CUDA tensors),
whatever the rest of the file does, and so is a test that asks for several GPUs
(``device_ids=[0, 1]``).

One scan of the nodes the semantic model's collecting pass recorded gathers what the
questions need: the names that hold a device, ``self.device`` set in ``__init__``,
``args.device``-style attributes, early exits on a missing GPU, collectives, and the markers
of CUDA-only files.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Iterable

import libcst as cst
from libcst.metadata import GlobalScope
from torchlint.semantic.vocabulary import (
    _AVAILABILITY, _COLLECTIVES, _DEVICE_STRING, _gpu_only_module, _PARAMETER_FREE, DEVICE_NAME, Kind,
)

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

_CUDA_STRING = re.compile(r"^cuda(:(?P<index>\d+))?$")
# What a test mentions when it picks the device on purpose: an availability check, a flag
# (`args.cuda`, `use_gpu`, `not args.no_cuda`), a device comparison (`device.type == "cuda"`).
_CHOICE = re.compile(r"cuda|gpu|device|\bcpu\b|\bmps\b|is_cpu|is_available|accelerat|nccl|distributed|\bddp\b", re.IGNORECASE)
# Functions, classes and files whose name says they are for the GPU (`to_gpu`, `benchmark_cuda`,
# `low_vram_shift`, `wrap_in_dataparallel`: DataParallel needs GPUs; `_nccl_estimate`: NCCL
# runs on CUDA only; a tutorial's `502_GPU.py`, a benchmark's `py_load_gpu_tensor.py`).
_GPU_NAME = re.compile(r"cuda|gpu|vram|data_?parallel|nccl", re.IGNORECASE)
# Calls that end a function, a script or a test when the GPU is missing.
_EXIT_CALL = re.compile(r"^(exit|quit|_exit|skip|skipTest)$")
# Context managers of tests that expect the code inside to fail.
_EXPECTS_FAILURE = re.compile(r"\b(assertRaises\w*|raises)\(")
# Keywords that load a model quantized by bitsandbytes (`from_pretrained(..., load_in_4bit=True)`,
# `BitsAndBytesConfig(load_in_8bit=True)`): its 4- and 8-bit layers run on CUDA only.
_QUANTIZED_LOADING = frozenset({"load_in_4bit", "load_in_8bit"})
# Loss modules that hold no tensor unless given a weight (`weight=`, `pos_weight=`), and
# those that never hold one: `.cuda()` on them moves nothing, and cannot fail without a GPU.
_WEIGHTED_LOSSES = frozenset(
    f"torch.nn.{name}"
    for name in ("CrossEntropyLoss", "NLLLoss", "NLLLoss2d", "BCELoss", "BCEWithLogitsLoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss")
)
_LOSS_WEIGHTS = frozenset({"weight", "pos_weight"})
_UNWEIGHTED_LOSSES = frozenset(
    f"torch.nn.{name}"
    for name in (
        "L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "PoissonNLLLoss", "GaussianNLLLoss", "CTCLoss",
        "MarginRankingLoss", "HingeEmbeddingLoss", "CosineEmbeddingLoss", "SoftMarginLoss", "MultiLabelMarginLoss",
        "TripletMarginLoss", "TripletMarginWithDistanceLoss",
    )
)
# The temporary folders pytest gives a test: what a test loads from there, it wrote.
_TEMPORARY_FOLDERS = frozenset({"tmp_path", "tmpdir", "tmp_dir", "tmp_path_factory"})
# What a device value means (``DeviceFacts.meaning``).
ACCELERATOR, OTHER, UNKNOWN = "accelerator", "other", "unknown"
# Calls that ask whether an accelerator is there.
_AVAILABILITY_CALLS = frozenset(
    {"torch.cuda.is_available", "torch.cuda.device_count", "torch.backends.mps.is_available", "torch.xpu.is_available",
     "torch.accelerator.is_available", "torch.accelerator.device_count"}
)
# Calls whose "cuda" argument is a device *type* (autocast, grad scaling), not a placement.
DEVICE_TYPE_CALLS = frozenset(
    {
        "torch.autocast",
        "torch.amp.autocast",
        "torch.amp.autocast_mode.autocast",
        "torch.amp.GradScaler",
        "torch.amp.grad_scaler.GradScaler",
        "torch.amp.custom_fwd",
        "torch.amp.custom_bwd",
        "torch.get_autocast_dtype",
        "torch.is_autocast_enabled",
        "torch.set_autocast_enabled",
    }
)


def cuda_string(expr: cst.BaseExpression | None) -> bool:
    """``"cuda"`` or ``"cuda:N"``."""
    return isinstance(expr, cst.SimpleString) and bool(_CUDA_STRING.match(expr.raw_value))


def cuda_index(expr: cst.SimpleString) -> int | None:
    """``N`` in ``"cuda:N"``; None for plain ``"cuda"`` (the current device)."""
    match = _CUDA_STRING.match(expr.raw_value)
    return int(match.group("index")) if match and match.group("index") else None


@dataclass(frozen=True)
class DeviceInScope:
    """An expression holding a device at some point of the code."""

    expression: str  # `device`, `self.device`, `args.device`, `x.device`
    known_cuda: bool  # its value is a CUDA choice, so using it keeps a GPU placement on a GPU


class DeviceFacts:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        # Why the whole file is CUDA-only by design (None: it is not), for the docs and tests.
        self.cuda_only: str | None = None
        self.set_device_calls: list[cst.Call] = []
        # `torch.cuda.synchronize()` and `x.pin_memory()`: GPU-only operations, by why they are there.
        self.gpu_only_calls: dict[str, list[cst.Call]] = defaultdict(list)
        self.saves: list[cst.Call] = []  # `torch.save(obj, f)` calls
        self.other_saves: list[cst.Call] = []  # other calls named `*save*`, with a path among their arguments
        self.collective_functions: set[cst.FunctionDef | None] = set()
        self.device_names: set[str] = set()  # names bound to a device anywhere in the file
        # `args` in `args.device = ...`, with the values assigned.
        self.device_holders: dict[str, list[cst.BaseExpression | None]] = defaultdict(list)
        self.self_device_set: dict[cst.ClassDef, cst.CSTNode] = {}  # `self.device = ...` in __init__
        # Early exits when CUDA is missing (an `if` that leaves, an `assert`), each with the
        # block it guards after it: the body of its function, the module, a branch, a loop.
        self.early_exits: list[tuple[cst.CSTNode, cst.CSTNode]] = []
        # The raising or exiting ones among them that run on every path (a statement of
        # their function's or the module's own body, or of the `__main__` block).
        self.script_exits: list[cst.CSTNode] = []
        # Blocks that are CUDA-only from a node on (a GPU-only library imported, a model loaded
        # in 4 or 8 bits, in an `if` branch or a `try` body): (the block, the node).
        self.gpu_only_blocks: list[tuple[cst.CSTNode, cst.CSTNode]] = []
        # Functions that ask for several GPUs (`device_ids=[0, 1]`).
        self.multi_gpu_functions: set[cst.FunctionDef | None] = set()
        # The values assigned to each target (`device`, `self.device`) in each function (None:
        # the module), to tell a single hardcoded choice from a default that is overridden
        # (counted, and so rendered, only when asked).
        self.assigned_values: defaultdict[tuple[cst.FunctionDef | None, str], list[cst.BaseExpression | None]] = defaultdict(list)
        # Functions (None: the module) that run `exec(...)`, as nanoGPT's configurator does
        # to override the defaults assigned above it.
        self.executing: set[cst.FunctionDef | None] = set()
        model.replay(_Collector(self))
        if self.cuda_only is None and any(not self.chosen_here(c) for c in self.set_device_calls):
            self.cuda_only = "it calls torch.cuda.set_device"
        for reason, calls in sorted(self.gpu_only_calls.items()):
            if self.cuda_only is None and any(not self.chosen_here(c) for c in calls):
                self.cuda_only = reason
        if self.cuda_only is None and model.project is not None:
            self.cuda_only = model.project.imports_cuda_only()

    @property
    def module(self) -> cst.Module:
        return self.model.module

    def code(self, node: cst.CSTNode) -> str:
        if type(node) is cst.Name and not node.lpar:
            return node.value  # what rendering it gives, without a code generator
        return self.module.code_for_node(node)

    # --- guards ------------------------------------------------------------------------

    def guarded(self, node: cst.CSTNode) -> bool:
        """Whether CUDA at ``node`` is a choice made on purpose: inside a branch of an ``if``
        or conditional expression that tests availability, a flag or the device; after an
        early exit when CUDA is missing; in a function, class or test meant for the GPU, or
        one that runs a collective; or in a file that is CUDA-only by design."""
        if self.cuda_only is not None:
            return True
        if any(f in self.collective_functions for f in self._functions_around(node)):
            return True
        return (
            self.chosen_here(node)
            or self._after_early_exit(node)
            or self._in_gpu_only_block(node)
            or any(f in self.cuda_only_functions for f in self._functions_around(node))
            or self._reset_by_choice(node)
            or self._model_parallel(node)
        )

    def _model_parallel(self, node: cst.CSTNode) -> bool:
        """Inside a class (or, outside any class, a module) that places on two or more
        distinct CUDA devices by number (``"cuda:0"`` and ``"cuda:1"``, ``.cuda(0)`` and
        ``.cuda(1)``), or outside any class in a file that builds such a class: model
        parallelism, which needs those GPUs by design."""
        owner = next((a for a in self.model.ancestors(node) if isinstance(a, cst.ClassDef)), None)
        if len(self._cuda_indices.get(owner, ())) >= 2:
            return True
        # Code outside the classes that builds such a class of the file needs its GPUs too.
        calls = self.model.evaluation.calls_by_name
        return owner is None and any(
            cls is not None and len(indices) >= 2 and calls.get(cls.name.value) for cls, indices in self._cuda_indices.items()
        )

    @cached_property
    def _cuda_indices(self) -> dict[cst.ClassDef | None, set[int]]:
        """The CUDA device numbers written in each class of the file (None: outside any)."""
        found: dict[cst.ClassDef | None, set[int]] = defaultdict(set)
        # (From the collecting pass's record of strings and calls: no walk of its own.)
        for node in self.model.cuda_strings:
            if cuda_string(node) and cuda_index(node) is not None:
                found[self._class_around(node)].add(cuda_index(node))
        for node in self.model.calls_in():
            func = node.func
            if type(func) is cst.Attribute and func.attr.value == "cuda" and node.args:
                value = node.args[0].value
                if isinstance(value, cst.Integer) and value.value.isdigit():
                    found[self._class_around(node)].add(int(value.value))
        return found

    def _class_around(self, node: cst.CSTNode) -> cst.ClassDef | None:
        return next((a for a in self.model.ancestors(node) if isinstance(a, cst.ClassDef)), None)

    def _reset_by_choice(self, node: cst.CSTNode) -> bool:
        """A CUDA value given to ``self.<attr>`` in a method whose class (or a base of it in
        the file) gives the same attribute another value where a device choice is made
        (``if not use_cuda(): self.device = None`` in the base's ``__post_init__``): the
        default is replaced on purpose when there is no GPU."""
        assign = next((a for a in self.model.ancestors(node) if isinstance(a, (cst.Assign, cst.AnnAssign))), None)
        if assign is None:
            return False
        targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
        attrs = [t.attr.value for t in targets if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self"]
        function = self.model.enclosing_function(assign)
        info = self.model.enclosing_class(function) if function is not None else None
        if not attrs or info is None:
            return False
        for cls in [info, *self.model.local_bases(info)]:
            for attr in attrs:
                for value in cls.attribute_values.get(attr, ()):
                    if value is not assign.value and self.chosen_here(value):
                        return True
        return False

    @cached_property
    def cuda_only_functions(self) -> frozenset[cst.FunctionDef]:
        """Functions of the file that only ever run with a GPU, from the call graph: one that
        stops (raises, exits, skips its test) on a statement of its own body when CUDA is
        missing (``_require_cuda()``) or whose decorator skips it then; one whose own body
        calls such a function unconditionally, or that is a pytest test or fixture asking for
        a fixture that is one (``def test_fwd(mods)``); and a helper every call of which is in
        such functions, never passed around, with no caller in another file (``_make_inputs``
        of a kernel test suite). Followed to any depth in the file."""
        stopping = [e for e, block in self.early_exits if self._stops(e)]
        found: set[cst.FunctionDef] = set()
        for exit_node in stopping:
            function = self.model.enclosing_function(exit_node)
            block = self.model.parent(_statement_of(self.model, exit_node))
            if function is not None and self.model.parent(block) is function:
                found.add(function)
        functions = [f for group in self.model.functions.values() for f in group]
        for function in functions:
            if any(self._skips_without_gpu(d) for d in function.decorators):
                found.add(function)
        if not found:
            return frozenset()
        flow = self.model.gradient_flow
        fixtures = {f.name.value: f for f in functions if any(self._is_fixture(d) for d in f.decorators)}
        for _ in range(len(functions)):
            added = set()
            for function in functions:
                if function in found:
                    continue
                params = [p.name.value for p in function.params.params]
                if any(fixtures.get(p) in found for p in params):
                    added.add(function)
                    continue
                if any(self._unconditional_in(call, function) for callee in found for call in flow.call_sites(callee) or ()):
                    added.add(function)
                    continue
                sites = flow.call_sites(function)
                if sites and self.model.project_callers_backprop(function) is None and all(
                    any(f in found for f in self._functions_around(site)) for site in sites
                ):
                    added.add(function)
            if not added:
                break
            found |= added
        return frozenset(found)

    def _is_fixture(self, decorator: cst.Decorator) -> bool:
        """``@pytest.fixture`` or ``@pytest.fixture(...)``."""
        call = decorator.decorator
        return self.model.qualified_name(call.func if isinstance(call, cst.Call) else call) == "pytest.fixture"

    def _stops(self, exit_node: cst.CSTNode) -> bool:
        """Whether an early exit raises, exits or skips (its caller does not go on), not
        ``return``: the ``if``'s body ends so, or it is an ``assert``."""
        if isinstance(exit_node, cst.Assert):
            return True
        if not isinstance(exit_node, cst.If):
            return False
        body = exit_node.body
        if not isinstance(body, cst.IndentedBlock) or not body.body or not isinstance(body.body[-1], cst.SimpleStatementLine):
            return False
        statement = body.body[-1].body[-1]
        return isinstance(statement, cst.Raise) or _exit_of(body) is not None and not isinstance(statement, (cst.Return, cst.Continue, cst.Break))

    def _unconditional_in(self, call: cst.Call, function: cst.FunctionDef) -> bool:
        """Whether ``call`` runs on every call of ``function``: in its own body, not inside a
        branch, loop, ``try``, conditional expression or nested function."""
        for ancestor in self.model.ancestors(call):
            if ancestor is function:
                return True
            if isinstance(ancestor, (cst.If, cst.For, cst.While, cst.Try, cst.IfExp, cst.BooleanOperation, cst.Lambda,
                                     cst.FunctionDef, cst.ClassDef, cst.BaseComp, cst.Match)):
                return False
        return False

    def _in_gpu_only_block(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` comes after a GPU-only import or a 4-/8-bit model load in a block
        that holds both (``if args.trt: from torch2trt import TRTModule; x.cuda()``)."""
        if not self.gpu_only_blocks:
            return False
        position = self.model.start_key(node)
        ancestors = set(self.model.ancestors(node))
        return any(block in ancestors and self.model.start_key(start) < position for block, start in self.gpu_only_blocks)

    def _functions_around(self, node: cst.CSTNode) -> list[cst.FunctionDef]:
        return [a for a in self.model.ancestors(node) if isinstance(a, cst.FunctionDef)]

    def chosen_here(self, node: cst.CSTNode) -> bool:
        """Whether an enclosing ``if``, conditional expression, function or handler makes
        CUDA at ``node`` a choice (``guarded`` without the file-wide and early-exit facts)."""
        child = node
        for ancestor in self.model.ancestors(node):
            if self._guards(ancestor, child):
                return True
            child = ancestor
        return False

    def _guards(self, ancestor: cst.CSTNode, child: cst.CSTNode) -> bool:
        if isinstance(ancestor, (cst.If, cst.While)):
            return child is not ancestor.test and self.is_choice(ancestor.test)
        if isinstance(ancestor, cst.IfExp):
            if child is ancestor.test:
                return False
            other = ancestor.orelse if child is ancestor.body else ancestor.body
            return self.is_choice(ancestor.test) or bool(_CHOICE.search(self.code(other)))
        if isinstance(ancestor, cst.BooleanOperation):  # use_cuda and model.cuda()
            return child is ancestor.right and self.is_choice(ancestor.left)
        if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef)):
            return (
                bool(_GPU_NAME.search(ancestor.name.value))
                or any(self._skips_without_gpu(d) for d in ancestor.decorators)
                or (ancestor in self.multi_gpu_functions and self._is_test(ancestor))
            )
        if isinstance(ancestor, cst.Try):  # try: x = x.cuda() / except RuntimeError: fall back
            return child is ancestor.body and any(_catches_failure(h) for h in ancestor.handlers)
        if isinstance(ancestor, cst.With):  # with pytest.raises(RuntimeError): x.cuda()
            return child is ancestor.body and any(_EXPECTS_FAILURE.search(self.code(i.item)) for i in ancestor.items)
        return False

    def _is_test(self, function: cst.FunctionDef) -> bool:
        """A method of a ``unittest.TestCase`` subclass (any name: ``testSyncBatchNorm``), a
        ``test*`` method of a ``Test*`` class, or a ``test*`` function."""
        parent = self.model.parent(self.model.parent(function))
        if isinstance(parent, cst.ClassDef):
            info = self.model.classes.get(parent)
            if info is not None and any(b.endswith("TestCase") for b in info.base_names):
                return True
            return parent.name.value.startswith("Test") and function.name.value.startswith("test")
        return function.name.value.startswith("test")

    def _skips_without_gpu(self, decorator: cst.Decorator) -> bool:
        # @pytest.mark.skipif(not torch.cuda.is_available(), ...), @requires_cuda; not
        # @torch.autocast("cuda"), which only names a device type.
        call = decorator.decorator
        func = call.func if isinstance(call, cst.Call) else call
        return self.model.qualified_name(func) not in DEVICE_TYPE_CALLS and bool(_CHOICE.search(self.code(call)))

    def is_choice(self, test: cst.BaseExpression) -> bool:
        """Whether ``test`` decides about the device, directly or through a name bound to such
        a test (``use_cuda = not args.no_cuda and torch.cuda.is_available()``)."""
        if _CHOICE.search(self.code(test)):
            return True
        return any(_CHOICE.search(self.code(v)) for name in _names(test) for v in self.model.values(name))

    def _after_early_exit(self, node: cst.CSTNode) -> bool:
        # `if not torch.cuda.is_available(): return` earlier in the block that holds it (the
        # body of the same function or an enclosing one, the module, a branch or a loop). A
        # script that raises or exits there on every path (`sys.exit("needs a GPU")`,
        # `assert torch.cuda.is_available()` as a statement of a function's or the module's
        # own body) has no code running without a GPU after it, and guards every function
        # (they run later); one nested in a conditional only guards the rest of its branch.
        if not self.early_exits:
            return False
        if self.script_exits and self.model.enclosing_function(node) is not None:
            return True
        position = self.model.start_key(node)
        ancestors = set(self.model.ancestors(node))
        return any(block in ancestors and self.model.start_key(e) < position for e, block in self.early_exits)

    # --- what a placement moves -------------------------------------------------------------

    def holds_no_tensors(self, expr: cst.BaseExpression, seen: frozenset = frozenset()) -> bool:
        """Whether ``expr`` is a ``torch.nn`` module with no parameters or buffers wherever it
        is bound: an activation, pooling or other parameter-free layer (``nn.ReLU()``), or a
        loss built without a weight tensor (``nn.CrossEntropyLoss()``, not
        ``nn.CrossEntropyLoss(weight=w)``), or such a module moved (``.cuda()``, ``.to()``)."""
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("cuda", "to", "cpu"):
                return self.holds_no_tensors(func.value, seen)
            qname = self.model.qualified_name(func)
            if qname in _PARAMETER_FREE or qname in _UNWEIGHTED_LOSSES:
                return True
            if qname in _WEIGHTED_LOSSES:
                # A positional argument may be the weight (`nn.CrossEntropyLoss(w)`).
                return all(
                    a.keyword is not None and (a.keyword.value not in _LOSS_WEIGHTS or _none(a.value)) for a in expr.args
                )
            return False
        if isinstance(expr, (cst.Name, cst.Attribute)) and self.code(expr) not in seen:
            name = self.code(expr)
            # `criterion = criterion.cuda()` moves what its other values hold.
            values = [v for v in self.model.values(expr) if self._moved(v) != name]
            return bool(values) and all(self.holds_no_tensors(v, seen | {name}) for v in values)
        return False

    def _moved(self, value: cst.BaseExpression) -> str | None:
        """``x`` of ``x.cuda()``, ``x.to(...)`` or ``x.cpu()``."""
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in ("cuda", "to", "cpu"):
            return self.code(value.func.value)
        return None

    # --- devices in scope -----------------------------------------------------------------

    def device_at(self, node: cst.CSTNode) -> DeviceInScope | None:
        """The expression to use for a device at ``node``, only where it is known to hold a
        torch device (``torch.device(...)``, a device string, or a choice between them): a
        local variable bound before ``node`` or a parameter annotated ``torch.device`` or
        defaulting to a device, ``self.device`` set so in ``__init__`` (or given by
        Lightning), an ``args.device`` the code sets so, or a module-level variable. In
        ``forward`` of an ``nn.Module`` a module-level device is not used: the caller
        places the module."""
        names = sorted(self.device_names | {"device"}, key=lambda n: (n != "device", n))
        for name in names:
            local = self._bindings(node, name, local=True)
            if local and min(map(self.model.start_key, local)) < self.model.start_key(node):
                if not all(map(self._binds_device, local)):
                    return None  # the local hides any other `device`
                meaning = self._bindings_meaning(local)
                if meaning != OTHER:
                    return DeviceInScope(name, meaning == ACCELERATOR)
                continue  # it may hold another device on purpose: never reused
        self_device = self._self_device(node)
        if self_device is not None:
            return self_device
        for holder, values in sorted(self.device_holders.items(), key=lambda item: item[0]):
            if self._bindings(node, holder) and all(v is not None and self.is_device_value(v) for v in values):
                if _combine(self.meaning(v) for v in values) != OTHER:
                    return DeviceInScope(f"{holder}.device", False)  # the command line may set it too
        if self.in_module_forward(node):
            return None
        for name in names:
            if self._bindings(node, name, local=True):
                continue  # shadowed by a local bound only later
            module_level = self._bindings(node, name, local=False)
            in_function = self.model.enclosing_function(node) is not None
            usable = [b for b in module_level if in_function or self.model.start_key(b) < self.model.start_key(node)]
            if usable and all(map(self._binds_device, module_level)):
                meaning = self._bindings_meaning(module_level if in_function else usable)
                if meaning != OTHER:
                    return DeviceInScope(name, meaning == ACCELERATOR)
        return None

    def meaning(self, value: cst.BaseExpression | None, depth: int = 0) -> str:
        """What a device value means, from its structure: ``ACCELERATOR`` the GPU when there
        is one (a CUDA device, or a choice whose test asks whether a GPU is available,
        ``torch.device("cuda" if torch.cuda.is_available() else "cpu")``, directly or through
        a name bound to such a test); ``OTHER`` a device that may be another one on purpose
        (``"cpu"``, ``"cpu" if cpu_gather else "cuda"``); ``UNKNOWN`` a value it cannot see
        (``torch.device(args.device)``, a parameter)."""
        if value is None or depth > 6:
            return UNKNOWN
        if isinstance(value, cst.SimpleString):
            text = value.raw_value
            if not _DEVICE_STRING.match(text):
                return UNKNOWN
            return ACCELERATOR if text.startswith("cuda") else OTHER
        if isinstance(value, cst.FormattedString):  # f"cuda:{local_rank}"
            first = value.parts[0] if value.parts else None
            if isinstance(first, cst.FormattedStringText) and first.value.startswith("cuda"):
                return ACCELERATOR
            return UNKNOWN
        if isinstance(value, cst.Call):
            if self.model.qualified_name(value.func) != "torch.device":
                return UNKNOWN
            return self.meaning(_argument(value, 0, "type"), depth + 1)
        if isinstance(value, cst.IfExp):
            branches = (self.meaning(value.body, depth + 1), self.meaning(value.orelse, depth + 1))
            if ACCELERATOR in branches and UNKNOWN not in branches and self.asks_availability(value.test):
                return ACCELERATOR
            return _combine(branches)
        if isinstance(value, cst.Name):
            values = self.model.values(value)
            return _combine(self.meaning(v, depth + 1) for v in values) if values else UNKNOWN
        return UNKNOWN

    def asks_availability(self, test: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``test`` calls ``torch.cuda.is_available()`` (or asks the device count, or
        another accelerator's availability), or reads a name every value of which does."""
        if depth > 4:
            return False
        for call in self.model.calls_in(test):
            if self.model.qualified_name(call.func) in _AVAILABILITY_CALLS:
                return True
        for name in _names(test):
            values = self.model.values(name)
            if values and all(self.asks_availability(v, depth + 1) for v in values):
                return True
        return False

    def _bindings_meaning(self, bindings: list[cst.CSTNode]) -> str:
        """The meaning (``meaning``) of a variable from its bindings: a parameter is unknown."""
        return _combine(self.meaning(self.model.bound_values.get(b)) for b in bindings)

    def is_device_value(self, value: cst.BaseExpression) -> bool:
        """``torch.device(...)``, a device string (``"cuda:0"``, ``"cpu"``), or a conditional
        choice between them."""
        if isinstance(value, cst.Call):
            return self.model.qualified_name(value.func) == "torch.device"
        if isinstance(value, cst.SimpleString):
            return bool(_DEVICE_STRING.match(value.raw_value))
        if isinstance(value, cst.IfExp):
            return self.is_device_value(value.body) and self.is_device_value(value.orelse)
        return False

    def _binds_device(self, binding: cst.CSTNode) -> bool:
        """Whether ``binding`` (an assigned name or a parameter) gives a torch device."""
        if binding in self.model.bound_values:
            return self.is_device_value(self.model.bound_values[binding])
        if isinstance(binding, cst.Param):
            annotation = binding.annotation
            if annotation is not None and "torch.device" in self.model.qualified_names(annotation.annotation):
                return True
            return binding.default is not None and self.is_device_value(binding.default)
        return False

    def in_module_forward(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` is in ``forward`` of an ``nn.Module`` subclass."""
        function = self.model.enclosing_function(node)
        if function is None or function.name.value != "forward":
            return False
        info = self.model.enclosing_class(function)
        return info is not None and self.model.class_kind(info) is Kind.MODULE

    def can_define_device(self, node: cst.CSTNode) -> bool:
        """Whether a module-level ``device`` defined after the imports would be the one
        ``node`` sees: nothing else binds ``device`` at module level, no enclosing function
        binds it, and ``node`` comes after the definition."""
        anchor = self.definition_anchor()
        if anchor is None or self.model.start_key(node) <= self.model.start_key(anchor):
            return False
        return not self._bindings(node, "device")

    def definition_anchor(self) -> cst.SimpleStatementLine | None:
        """The last import of the block that imports ``torch`` at the top of the module, after
        which a device definition goes; None when ``torch`` is not imported there."""
        anchor = None
        seen_torch = False
        for statement in self.module.body:
            if isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
            ):
                anchor = statement
                seen_torch = seen_torch or _imports_torch(statement)
            elif seen_torch or isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                break
        return anchor if seen_torch else None

    def _bindings(self, node: cst.CSTNode, name: str, local: bool | None = None) -> list[cst.CSTNode]:
        """Where ``name`` is bound as seen from ``node``: in its function or an enclosing one
        (``local``), at module level (not ``local``), or either."""
        scope = self.model.scopes.get(node)
        if scope is None:
            return []
        return [a.node for a in scope[name] if local is None or isinstance(a.scope, GlobalScope) != local]

    def _self_device(self, node: cst.CSTNode) -> DeviceInScope | None:
        function = self.model.enclosing_function(node)
        params = function.params.params if function is not None else ()
        info = self.model.enclosing_class(function) if function is not None else None
        if info is None or not params or params[0].name.value != "self":
            return None
        assigned = self.self_device_set.get(info.node)
        if assigned is not None:
            in_init_before = function.name.value != "__init__" or self.model.start_key(assigned) < self.model.start_key(node)
            values = info.attribute_values.get("device", [])
            if in_init_before and values and all(map(self.is_device_value, values)):
                meaning = _combine(map(self.meaning, values))
                if meaning != OTHER:
                    return DeviceInScope("self.device", meaning == ACCELERATOR)
                return None  # it may hold another device on purpose
        if any(base.endswith("LightningModule") for base in info.base_names):
            return DeviceInScope("self.device", False)
        return None

    # --- checkpoints ------------------------------------------------------------------------

    def written_by_this_code(self, load: cst.Call) -> bool:
        """Whether the file a ``torch.load`` reads is one this code has just written, so it
        holds what this run made: an in-memory buffer (``io.BytesIO()``), a file in a test's
        temporary folder (``tmp_path``), or the path a ``torch.save`` (or another ``*save*``
        call, such as ``fabric.save``) earlier in the same function (or at module level)
        writes."""
        source = _argument(load, 0, "f")
        if source is None:
            return False
        if self._in_memory(source) or any(n.value in _TEMPORARY_FOLDERS for n in _names(source)):
            return True
        function = self.model.enclosing_function(load)
        source_code = self.code(source)
        for save in self.saves + self.other_saves:
            if self.model.enclosing_function(save) is function and self.model.start_key(save) < self.model.start_key(load):
                arguments = [_argument(save, 1, "f")] if save in self.saves else [a.value for a in save.args]
                if any(a is not None and self.code(a) == source_code for a in arguments):
                    return True
        return False

    def saved_from_cpu(self, load: cst.Call) -> bool:
        """Whether every ``torch.save`` of the file to the path ``load`` reads saves tensors
        moved to the CPU (``.cpu()``), so they load on any machine."""
        source = _argument(load, 0, "f")
        same = [save for save in self.saves if source is not None and self._same_file(save, source)]
        return bool(same) and all(".cpu()" in self.code(save.args[0].value) for save in same)

    def _same_file(self, save: cst.Call, source: cst.BaseExpression) -> bool:
        target = _argument(save, 1, "f")
        return target is not None and self.code(target) == self.code(source)

    def _in_memory(self, source: cst.BaseExpression) -> bool:
        """An empty ``io.BytesIO()``, which only this code can have filled (not
        ``io.BytesIO(downloaded)``)."""
        values = self.model.values(source) if isinstance(source, cst.Name) else [source]
        return bool(values) and all(
            isinstance(v, cst.Call) and not v.args and self.model.qualified_name(v.func) in ("io.BytesIO", "_io.BytesIO")
            for v in values
        )

    # --- assignments ------------------------------------------------------------------------

    def overridden(self, target: cst.BaseExpression) -> bool:
        """Whether the variable assigned at ``target`` is assigned again in the same function
        (``device = "cuda"`` then ``if not torch.cuda.is_available(): device = "cpu"``)."""
        owner = self.model.enclosing_function(target)
        return self._assigned_more_than_once(owner, self.code(target)) or owner in self.executing

    def _assigned_more_than_once(self, owner: cst.FunctionDef | None, target_code: str) -> bool:
        count = 0
        for value in self.assigned_values.get((owner, target_code), ()):
            if value is None or target_code not in self.code(value):  # not `device = torch.device(device)`
                count += 1
                if count > 1:
                    return True
        return False


class _Collector:
    """The one scan (``SemanticModel.replay``)."""

    def __init__(self, facts: DeviceFacts) -> None:
        self.facts = facts
        self.functions: list[cst.FunctionDef | None] = [None]
        self.classes: list[cst.ClassDef] = []
        self.optional_depth = 0  # how many `try` and `if` statements enclose the node
        self.main_blocks: set[cst.CSTNode] = set()  # the body of `if __name__ == "__main__":`

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)
        # A Triton kernel (`@triton.jit`, `@triton.autotune(...)`) runs only on a GPU, even
        # where the import of triton itself is optional.
        for decorator in node.decorators:
            target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
            if (self.facts.model.qualified_name(target) or "").startswith("triton."):
                self.facts.cuda_only = "it defines Triton GPU kernels"

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.functions.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self.classes.pop()

    def visit_Import(self, node: cst.Import) -> None:
        self._imports(node, [self.facts.code(a.name) for a in node.names])

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.module is not None and not node.relative:
            base = self.facts.code(node.module)
            names = [] if isinstance(node.names, cst.ImportStar) else [self.facts.code(a.name) for a in node.names]
            self._imports(node, [base] + [f"{base}.{n}" for n in names])

    def _imports(self, node: cst.Import | cst.ImportFrom, modules: list[str]) -> None:
        # An import under `try` or `if` is optional: the file runs without the library, but
        # the rest of its block does not.
        if any(_gpu_only_module(m) for m in modules):
            self._gpu_only(node, "it imports a GPU-only library")

    def _gpu_only(self, node: cst.CSTNode, reason: str) -> None:
        if self.optional_depth == 0:
            self.facts.cuda_only = reason
        else:
            statement = _statement_of(self.facts.model, node)
            self.facts.gpu_only_blocks.append((self.facts.model.parent(statement), node))

    def visit_Try(self, node: cst.Try) -> None:
        # `except ImportError: raise` makes nothing optional.
        if not all(_exit_of(h.body) == "script" for h in node.handlers):
            self.optional_depth += 1

    def leave_Try(self, original_node: cst.Try) -> None:
        if not all(_exit_of(h.body) == "script" for h in original_node.handlers):
            self.optional_depth -= 1

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._target(target.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._target(node.target, node.value)

    def visit_For(self, node: cst.For) -> None:  # for device in devices:
        self._target(node.target, None)

    def _target(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        facts = self.facts
        function = self.functions[-1]
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value, None)
            return
        facts.assigned_values[(function, facts.code(target))].append(value)
        if isinstance(target, cst.Name):
            if DEVICE_NAME.match(target.value) or (value is not None and facts.is_device_value(value)):
                facts.device_names.add(target.value)
            if target.value == "pytestmark" and function is None and value is not None and _CHOICE.search(facts.code(value)):
                facts.cuda_only = "its tests are skipped without a GPU"
        elif isinstance(target, cst.Attribute) and target.attr.value == "device" and isinstance(target.value, cst.Name):
            owner = target.value.value
            if owner == "self":
                if function is not None and function.name.value == "__init__" and self.classes:
                    facts.self_device_set.setdefault(self.classes[-1], target)
            else:
                facts.device_holders[owner].append(value)

    def visit_Call(self, node: cst.Call) -> None:
        facts = self.facts
        if isinstance(node.func, cst.Name) and node.func.value == "exec":
            facts.executing.add(self.functions[-1])
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value in _QUANTIZED_LOADING and _true(arg.value):
                self._gpu_only(node, "it loads a model quantized to 4 or 8 bits by bitsandbytes")
            elif arg.keyword.value == "device_ids" and _several(arg.value):
                facts.multi_gpu_functions.add(self.functions[-1])
        qname = facts.model.qualified_name(node.func) or ""
        callee = node.func.attr.value if isinstance(node.func, cst.Attribute) else node.func.value if isinstance(node.func, cst.Name) else ""
        if qname == "torch.save" and len(node.args) >= 2:
            facts.saves.append(node)
        elif "save" in callee.lower() and node.args:  # fabric.save(path, state), save_checkpoint(...)
            facts.other_saves.append(node)
        if qname == "torch.cuda.set_device":
            facts.set_device_calls.append(node)
        elif qname == "torch.cuda.synchronize":
            facts.gpu_only_calls["it times GPU work with torch.cuda.synchronize"].append(node)
        elif callee == "pin_memory" and isinstance(node.func, cst.Attribute) and not node.args and not (
            self.functions[-1] is not None and self.functions[-1].name.value == "pin_memory"
        ):  # a batch type's own `pin_memory()` is what a DataLoader calls on any machine
            facts.gpu_only_calls["it pins host memory for transfers to the GPU"].append(node)
        elif qname in _COLLECTIVES:
            facts.collective_functions.add(self.functions[-1])
        elif qname.endswith(("init_process_group", "init_distributed")) and any(
            isinstance(a.value, cst.SimpleString) and a.value.evaluated_value == "nccl" for a in node.args
        ):
            facts.cuda_only = "it trains on NCCL"
        elif (reason := facts.model.project_requires_cuda(node.func)) is not None:
            # (DINO's scripts call utils.init_distributed_mode, which exits without a GPU.)
            facts.gpu_only_calls[f"it calls {facts.code(node.func)}, which {reason}"].append(node)

    def visit_If(self, node: cst.If) -> None:
        self.optional_depth += 1
        if _is_main_block(node):
            self.main_blocks.add(node.body)
        exits = [_exit_of(node.body), _exit_of(node.orelse.body) if isinstance(node.orelse, cst.Else) else None]
        if exits[0] and _requires_several_gpus(node.test):
            exits[0] = None  # `if len(gpu_ids) > 1: raise NotImplementedError`: it stops with GPUs
        if any(exits) and self._tests_availability(node.test):
            self._early_exit(node, "script" in exits)

    def leave_If(self, original_node: cst.If) -> None:
        self.optional_depth -= 1

    def visit_Assert(self, node: cst.Assert) -> None:
        if self._tests_availability(node.test):
            self._early_exit(node, True)

    def _early_exit(self, node: cst.CSTNode, ends_script: bool) -> None:
        """An exit when CUDA is missing, guarding what follows it in its block; one that ends
        the script on every path (a statement of its function's or the module's own body, or
        of the `__main__` block) guards every function."""
        model = self.facts.model
        block = model.parent(_statement_of(model, node))
        self.facts.early_exits.append((node, block))
        if ends_script and (
            isinstance(block, cst.Module) or isinstance(model.parent(block), cst.FunctionDef) or block in self.main_blocks
        ):
            self.facts.script_exits.append(node)

    def _tests_availability(self, test: cst.BaseExpression) -> bool:
        """Whether ``test`` asks if a GPU is there (``torch.cuda.is_available()``,
        ``use_cuda``, ``n_gpu > 0``), directly or through a name bound to such a test; not
        a check of the user's device string (``args.device in ("cuda", "cpu")``), nor one of
        a value placed with ``.cuda()`` (``assert net(x).shape == ...`` after
        ``net = Net().cuda()``): a placement asks nothing."""
        names = _names(test)
        if any(self._asks_for_gpu(n) for n in names):
            return True
        return any(self._asks_for_gpu(n) for name in names for v in self.facts.model.values(name) for n in _names(v))

    def _asks_for_gpu(self, name: cst.Name) -> bool:
        if not _AVAILABILITY.search(name.value):
            return False
        model = self.facts.model
        attribute = model.parent(name)
        placed = (
            isinstance(attribute, cst.Attribute)
            and attribute.attr is name
            and isinstance(call := model.parent(attribute), cst.Call)
            and call.func is attribute
        )
        return not (placed and name.value == "cuda")


def _combine(meanings: Iterable[str]) -> str:
    """The meaning of a variable from those of its values: any ``OTHER`` makes it other;
    all ``ACCELERATOR`` (at least one), the accelerator; else unknown."""
    found = set(meanings)
    if OTHER in found:
        return OTHER
    return ACCELERATOR if found == {ACCELERATOR} else UNKNOWN


def _argument(call: cst.Call, index: int, keyword: str) -> cst.BaseExpression | None:
    """The argument of ``call`` at position ``index`` or given as ``keyword``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[index].value if len(positional) > index else None


def _statement_of(model: SemanticModel, node: cst.CSTNode) -> cst.CSTNode:
    """The statement that holds ``node`` (a compound one, or a line of simple ones): the child
    of a block or of the module."""
    parent = model.parent(node)
    while parent is not None and not isinstance(parent, (cst.IndentedBlock, cst.Module, cst.SimpleStatementSuite)):
        node, parent = parent, model.parent(parent)
    return node


def _is_main_block(node: cst.If) -> bool:
    """``if __name__ == "__main__":``."""
    test = node.test
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == "__name__"
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.Equal)
        and isinstance(test.comparisons[0].comparator, cst.SimpleString)
        # (not `evaluated_value`: its `ast.literal_eval` leaves cyclic garbage)
        and test.comparisons[0].comparator.value in ('"__main__"', "'__main__'")
    )


def _requires_several_gpus(test: cst.BaseExpression) -> bool:
    """Whether ``test`` holds only with more than one GPU: ``len(gpu_ids) > 1``,
    ``torch.cuda.device_count() >= 2``, alone or as a term of ``and``."""
    if isinstance(test, cst.BooleanOperation):
        return isinstance(test.operator, cst.And) and (_requires_several_gpus(test.left) or _requires_several_gpus(test.right))
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    operator, bound = test.comparisons[0].operator, test.comparisons[0].comparator
    if not isinstance(bound, cst.Integer) or not bound.value.isdigit():
        return False
    count = int(bound.value)
    return (isinstance(operator, cst.GreaterThan) and count >= 1) or (isinstance(operator, cst.GreaterThanEqual) and count >= 2)


def _none(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "None"


def _true(value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Name) and value.value == "True"


def _several(value: cst.BaseExpression) -> bool:
    """A literal list or tuple of two or more items (``device_ids=[0, 1]``)."""
    return isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) >= 2 and not any(
        isinstance(e, cst.StarredElement) for e in value.elements
    )


def _exit_of(block: cst.BaseSuite) -> str | None:
    """How ``block`` ends: ``"script"`` for ``raise`` or ``sys.exit()``, ``"scope"`` for
    ``return``, ``continue``, ``break`` or a test's ``skip``, None when it goes on."""
    if not isinstance(block, cst.IndentedBlock) or not block.body:
        return None
    last = block.body[-1]
    if not isinstance(last, cst.SimpleStatementLine):
        return None
    statement = last.body[-1]
    if isinstance(statement, cst.Raise):
        return "script"
    if isinstance(statement, (cst.Return, cst.Continue, cst.Break)):
        return "scope"
    if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
        func = statement.value.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if _EXIT_CALL.match(name):
            return "scope" if name.startswith("skip") else "script"
    return None


def _catches_failure(handler: cst.ExceptHandler) -> bool:
    """A handler for the errors a missing GPU raises (or for anything)."""
    if handler.type is None:
        return True
    caught = cst.Module(body=[]).code_for_node(handler.type)
    return bool(re.search(r"\b(Exception|RuntimeError|AssertionError|AcceleratorError)\b", caught))


def _imports_torch(statement: cst.SimpleStatementLine) -> bool:
    return any(
        isinstance(s, cst.Import) and any(isinstance(a.name, cst.Name) and a.name.value == "torch" for a in s.names)
        for s in statement.body
    )


def _names(expr: cst.BaseExpression) -> list[cst.Name]:
    found = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node)

    expr.visit(Names())
    return found
