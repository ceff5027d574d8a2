from __future__ import annotations

import ast
import io
import tokenize
from functools import cached_property

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic.execution_order import with_import_first
from torchlint.semantic.devices import DEVICE_NAME, DEVICE_TYPE_CALLS, cuda_index, cuda_string
from torchlint.torch_rule import TorchRule

# Keyword arguments that place tensors or modules (or map a checkpoint's storages, or a
# Hugging Face model's layers: `device_map="cuda"`).
PLACEMENT_KEYWORDS = ("device", "map_location", "device_map")


# How many one-line strings decide the file's quote style.
_QUOTE_SAMPLE = 50


class HardcodedCuda(TorchRule):
    """
    ## What it does
    Finds placements hardcoded to CUDA: `.cuda()` (also `.cuda(device=0)`,
    `.cuda(device="cuda")`), `.to("cuda")`, `torch.device("cuda:0")`,
    `device="cuda"` (and `map_location="cuda"`, a Hugging Face `device_map="cuda"`), a device
    variable set to `"cuda"`, a flag bound once to `True` at module level that the `if`s
    guarding CUDA placements test (`use_cuda = True`: the guard chooses nothing; the fix sets
    it from `torch.cuda.is_available()`), and a parameter's default `device="cuda"` that a call in the
    file relies on (`Memory(16)` for `def __init__(self, size, device="cuda")`; a default
    every call replaces is the callers' choice). The legacy typed-tensor constructors (`torch.cuda.FloatTensor(n)`)
    are left alone with the rest of the `torch.cuda` API: on real code they are mostly the
    output buffers of CUDA extension ops and of multi-GPU frameworks, CUDA-only by design in
    ways the code does not show.

    It stays silent on choices made on purpose: the branches of an `if` or a conditional
    expression that tests availability, a flag or the device
    (`torch.device("cuda" if torch.cuda.is_available() else "cpu")`, `if args.cuda:`,
    `if use_cuda:`, `if param.is_cpu:`), code after an early exit when CUDA is missing
    (`if not torch.cuda.is_available(): sys.exit(...)`), functions, classes and tests meant
    for the GPU (`to_gpu`, `@pytest.mark.skipif(not torch.cuda.is_available(), ...)`), a GPU
    index taken from a variable (`.cuda(args.gpu)`, `torch.device("cuda", local_rank)`),
    device *types* (`torch.autocast("cuda")`, `torch.amp.GradScaler("cuda")`), the rest of the
    `torch.cuda` API, `.cuda()` or `.to("cuda")` on a `torch.nn` module that holds no tensor
    to move (`nn.ReLU()`, `nn.LogSoftmax()`, a loss built without a weight such as
    `nn.CrossEntropyLoss()`; one given `weight=` a tensor is reported), and `device="cuda"`
    given to a function of the file that only compares its `device` (a device check,
    `check_device(a, b, device="cuda")`, or a test decorator's
    `functools.partial(skip_device_if, device="cuda")`).

    Code that is CUDA-only by design is not reported either, with no `noqa` needed. The whole
    file is CUDA-only when it stops without CUDA on every path (`assert
    torch.cuda.is_available()` or `if not torch.cuda.is_available(): sys.exit(...)` as a
    statement of a function's or the module's own body, or of the `__main__` block; one nested
    in a conditional only covers the rest of its branch, and `if len(gpu_ids) > 1: raise ...`,
    which stops when there are several GPUs, covers nothing), calls
    `init_process_group("nccl")` (or `backend="nccl"`), calls `torch.cuda.set_device(...)`
    outside a device check, calls a function of another project file that needs CUDA on every
    path, at any depth of calls (DINO's `utils.init_distributed_mode`, which exits without a
    GPU; a wrapper that launches a Triton kernel, or calls a function that does), imports a
    GPU-only library (Apex, Triton, TileLang, CuPy, PyCUDA, `numba.cuda`, FlashAttention, TensorRT,
    CUTLASS, Transformer Engine, MS-AMP, `torch.utils.cpp_extension`, torch2trt) outside
    `try`/`if` (inside one, the rest of that branch or `try` body is CUDA-only), loads a model
    quantized by bitsandbytes (`load_in_4bit=True` or `load_in_8bit=True`, given to
    `from_pretrained` or `BitsAndBytesConfig`; again only the rest of the branch when under
    `if`/`try`), or imports on every path (a statement of its own top-level body) a module
    the project builds from CUDA sources only (`CUDAExtension("pkg._C", [...])` in a
    `setup.py` of a folder above it, with no `CppExtension` to fall back to the CPU), a
    compiled kernel (`roi_align_cuda`), or a project module that does, at any depth: without
    a GPU such a module cannot be built or imported. A layout over several GPUs is CUDA-only
    by design too: a class that places on two or more GPUs by number (`"cuda:0"` and
    `"cuda:1"`, `.cuda(0)` and `.cuda(1)`: model parallelism), and code outside classes that
    does so or builds such a class. A file's name is no evidence: `train_gpu.py` is judged
    like any other file. Importing DeepSpeed, bitsandbytes or xformers does
    not count: they run on other accelerators or the CPU. A function that runs a
    `torch.distributed` collective (`all_reduce`, `all_gather`, ...) is CUDA-only by design
    too: NCCL needs CUDA tensors. So is a function of the file that only ever runs with a GPU,
    from the call graph: one that raises, exits or skips its test on a statement of its own
    body when CUDA is missing (`_require_cuda()`; a helper that only `return`s lets its caller
    go on), one that calls such a function on every path or is a pytest test or fixture asking
    for a fixture that does, and a helper every call of which is in such functions (a kernel
    suite's input builders). A CUDA value given to `self.<attr>` is a default chosen on purpose
    when the class (or a base of it in the file) gives that attribute another value where it
    checks for the GPU (`if not torch.cuda.is_available(): self.device = None`).

    Tests are judged like other code: a `test_*` function or a method of a
    `unittest.TestCase` subclass (any name, `testSyncBatchNorm` included) that places on
    CUDA is reported unless it is skipped without a GPU or named for it, since a single-GPU
    test fails on a CPU-only CI runner as a script would. A test that asks for several GPUs
    (`device_ids=[0, 1]`, a literal of two or more) is CUDA-only by design: what it tests
    (replication, synchronised batch norm) needs them. Other code with `device_ids=[0, 1]`
    is still reported: `nn.DataParallel` runs on the CPU when there is no GPU.

    ## Why is this bad?
    The script fails on every machine without a GPU (a laptop, a CPU CI runner, a
    colleague's Mac) with `AssertionError: Torch not compiled with CUDA enabled` or
    `RuntimeError: No CUDA GPUs are available`, and cannot be pointed at another device
    without editing it.

    ## Example
    ```python
    import torch

    model = Net().cuda()
    for x, y in loader:
        x, y = x.to("cuda"), y.to("cuda")
    ```

    ## Use instead
    ```python
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    model = Net().to(device)
    for x, y in loader:
        x, y = x.to(device), y.to(device)
    ```

    ## Fix safety
    The fix rewrites `.cuda()` to `.to(device)`, and `"cuda"` in `.to(...)`, `device=` or
    `map_location=` to `device`. It reuses only a variable known to hold a torch device
    (assigned `torch.device(...)`, a device string, or a choice between them): a local
    variable, a parameter annotated `torch.device` or defaulting to a device, `self.device`
    set so in `__init__` (or given by Lightning), an `args.device` the script sets so, a
    module-level variable. Of those it never reuses one that may hold another device on
    purpose, judged from every binding of the variable, not its name: a binding to the CPU
    or another non-CUDA device (`target = "cpu"`), or a choice whose test does not ask
    whether a GPU is there (`torch.device("cpu") if cpu_gather else torch.device("cuda")`).
    A choice whose test calls `torch.cuda.is_available()` (or `device_count()`, or another
    accelerator's availability), directly or through a name bound to such a test, with a
    CUDA branch, means "the GPU when there is one" and is reused. Otherwise it defines
    `device = torch.device("cuda" if torch.cuda.is_available() else "cpu")` once, after the
    imports, as a change of its own beside the call; where that definition would not be seen
    (another binding of `device`), it writes the conditional expression in place. Its code
    uses only names bound before it as the program runs (a notebook's cells top to bottom):
    where no module-level import binds `torch` before the top-level statement that holds the
    call (a cell before the one that imports torch, or a function defined there), it writes
    the conditional expression and imports torch at the start of that cell, after the cell's
    own imports (in a script, after its imports); the device definition goes only after the
    import of torch. In `forward` of an `nn.Module` it uses only a device known there (a
    parameter, `self.device`), never a global one: the caller places the module.
    `torch.device("cuda:0")` and a device variable set to `"cuda"` keep their string and
    fall back to `"cpu"`.

    The fix is safe when the device it uses is one it defines or one every binding of which
    is CUDA or such an availability choice: on a GPU machine the code runs where it ran before (`"cuda"` and `.cuda()`
    both mean the current device; `Module.to` moves in place and returns the module as
    `Module.cuda` does, so moving a model before or after building its optimizer is
    unaffected). It is unsafe when it reuses a device whose value it cannot see (a
    parameter, `self.device` from Lightning, `args.device`), which may be the CPU, and when
    it drops the index of `"cuda:0"` / `.cuda(0)`. Another index (`"cuda:1"`) is a
    deliberate choice of GPU and gets no fix; nor does `.cuda()` on an object of a class of
    the file that defines its own `cuda()` and may have no `to()`.

    ## References
    - [CUDA semantics: device-agnostic code](https://pytorch.org/docs/stable/notes/cuda.html#device-agnostic-code)
    """

    code = "TL201"
    name = "hardcoded-cuda"
    flag_message = "`{what}` hardcodes CUDA: the placements it guards fail on machines without a GPU"
    required_words = (("cuda",),)
    message = "`{what}` hardcodes CUDA: the code fails on machines without a GPU"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A call of ``.cuda(...)``, or a string starting with ``cuda`` (what ``cuda_string``
        accepts: every other finding is of one)."""
        return super().candidate(module) and (
            any(isinstance(n.value, str) and n.value.startswith("cuda") for n in module.nodes(ast.Constant))
            or any(isinstance(n.func, ast.Attribute) and n.func.attr == "cuda" for n in module.nodes(ast.Call))
        )

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        qname = self.semantic.qualified_name(func)
        if qname is not None and (qname.startswith("torch.cuda.") or qname in DEVICE_TYPE_CALLS):
            return
        if qname in ("torch.device", "torch.set_default_device"):
            self._check_device_constructor(node)
        elif isinstance(func, cst.Attribute) and func.attr.value == "cuda":
            self._check_cuda_call(node, func)
        else:
            for index, arg in enumerate(node.args):
                to_target = index == 0 and arg.keyword is None and isinstance(func, cst.Attribute) and func.attr.value == "to"
                placement_keyword = arg.keyword is not None and arg.keyword.value in PLACEMENT_KEYWORDS
                if (to_target or placement_keyword) and cuda_string(arg.value) and not self._guarded(arg.value):
                    if placement_keyword and self._only_compared(node, arg.keyword.value):
                        continue
                    if to_target and self.semantic.devices.holds_no_tensors(func.value):
                        continue  # `nn.CrossEntropyLoss().to("cuda")` moves nothing
                    self._report_string(arg.value, node)

    def _only_compared(self, call: cst.Call, parameter: str) -> bool:
        """Whether ``call`` calls a function of this file (directly or through
        ``functools.partial``) whose ``parameter`` is only ever compared (``x.device.type ==
        device``): a device check, not a placement."""
        func = call.func
        if self.semantic.qualified_name(func) == "functools.partial" and call.args and call.args[0].keyword is None:
            func = call.args[0].value
        if not isinstance(func, cst.Name):
            return False
        functions = self.semantic.functions.get(func.value, ())
        return bool(functions) and all(self._compared_only(f, parameter) for f in functions)

    def _compared_only(self, function: cst.FunctionDef, parameter: str) -> bool:
        """``parameter`` is a parameter of ``function`` whose every read (the scope analysis's
        references of its binding) is an operand of a comparison."""
        params = function.params
        param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == parameter), None)
        reads = self.semantic.binding_reads(param) if param is not None else None
        return reads is not None and all(_compared(self.semantic.parent(read), read) for read in reads)

    def visit_Param(self, node: cst.Param) -> None:
        """``def __init__(self, n, device="cuda")``: a default that a call in the file relies
        on (it does not pass the parameter) places on CUDA as a hardcoded value would."""
        if node.default is None or not cuda_string(node.default) or not DEVICE_NAME.match(node.name.value):
            return
        if self._guarded(node.default) or not self._default_used(node):
            return
        what = f"{node.name.value}={self._code(node.default)}"
        self.report(node.default, self.message.format(what=what), fix=self._fall_back_to_cpu(node.default))

    def _default_used(self, param: cst.Param) -> bool:
        """Some call of the function in this file (of its class, for ``__init__``) leaves the
        parameter to its default: neither by position nor by keyword, nor ``*args`` /
        ``**kwargs`` that may hold it."""
        function = self.semantic.enclosing_function(param)
        if function is None or param not in function.params.params:
            return False
        positional = list(function.params.posonly_params) + list(function.params.params)
        position = positional.index(param)
        name = function.name.value
        if name == "__init__":
            info = self.semantic.enclosing_class(function)
            if info is None:
                return False
            name, position = info.node.name.value, position - 1
        elif self.semantic.enclosing_class(function) is not None:
            return False  # a method's calls are not matched by name
        evaluation = self.semantic.evaluation
        for call in evaluation.calls_by_name.get(name, ()):
            if not isinstance(call.func, cst.Name):
                continue
            if any(a.star for a in call.args):
                continue
            given = sum(1 for a in call.args if a.keyword is None)
            if given <= position and not any(a.keyword is not None and a.keyword.value == param.name.value for a in call.args):
                return True
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._check_device_assignment(target.target, node.value)
            self._check_constant_flag(target.target, node.value)

    def _check_constant_flag(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``use_cuda = True``: a flag bound once, to the constant, that ``if`` tests guarding
        CUDA placements read. The guard is no choice: every placement it guards is hardcoded."""
        if not (isinstance(target, cst.Name) and isinstance(value, cst.Name) and value.value == "True"):
            return
        if len(self.semantic.assignments(target)) != 1 or self.semantic.enclosing_function(target) is not None or self._guarded(value):
            return
        reads = self.semantic.binding_reads(target) or []
        guards = [r for r in reads if isinstance(self.semantic.parent(r), (cst.If, cst.IfExp)) and self.semantic.parent(r).test is r]
        if not guards or not any(_places_on_cuda(self._code(self.semantic.parent(r).body)) for r in guards):
            return
        torch = self.semantic.torch_alias
        fix = None
        if torch is not None:
            changes = with_import_first(self.semantic, {value: cst.parse_expression(f"{torch}.cuda.is_available()")}, torch, [value])
            fix = _fix("Set it from `torch.cuda.is_available()`", changes)
        what = f"{target.value} = True"
        self.report(value, self.flag_message.format(what=what), fix=fix)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        # A field of a dataclass or config class is a default its user sets.
        if not isinstance(self.semantic.parent(self.semantic.parent(node)), cst.ClassDef):
            self._check_device_assignment(node.target, node.value)

    # --- what is hardcoded ------------------------------------------------------------------

    def _guarded(self, node: cst.CSTNode) -> bool:
        return self.semantic.devices.guarded(node)

    def _check_device_assignment(self, target: cst.BaseExpression, value: cst.BaseExpression | None) -> None:
        """``device = "cuda"``, unless the variable is set again elsewhere (a fallback)."""
        name = target.attr.value if isinstance(target, cst.Attribute) else target.value if isinstance(target, cst.Name) else ""
        if not (DEVICE_NAME.match(name) and cuda_string(value)):
            return
        if self._guarded(value) or self.semantic.devices.overridden(target):
            return
        what = f"{self._code(target)} = {self._code(value)}"
        self.report(value, self.message.format(what=what), fix=self._fall_back_to_cpu(value))

    def _check_device_constructor(self, node: cst.Call) -> None:
        """``torch.device("cuda:0")``; ``torch.device("cuda", local_rank)`` picks a GPU on
        purpose."""
        if not node.args or not cuda_string(node.args[0].value) or self._guarded(node):
            return
        if isinstance(self.semantic.parent(node), (cst.Comparison, cst.ComparisonTarget, cst.Element)):
            return  # `x.device != torch.device("cuda")`, `[torch.device("cuda:1"), ...]` place nothing
        if self._assigned_and_overridden(node):
            return
        fix = None
        if len(node.args) == 1:
            fix = self._fall_back_to_cpu(node.args[0].value)
        elif not isinstance(node.args[1].value, cst.Integer):
            return
        self.report(node, self.message.format(what=self._code(node)), fix=fix)

    def _check_cuda_call(self, node: cst.Call, func: cst.Attribute) -> None:
        """``x.cuda()``; ``x.cuda(args.gpu)`` picks a GPU on purpose."""
        index_args = [a for a in node.args if a.keyword is None or a.keyword.value == "device"]
        index = index_args[0].value if index_args else None
        if isinstance(index, cst.SimpleString) and cuda_string(index):  # `.cuda(device="cuda:0")`
            number = cuda_index(index)
            index = None if number is None else cst.Integer(str(number))
        elif index is not None and not isinstance(index, cst.Integer):
            return
        if self._guarded(node) or self.semantic.devices.holds_no_tensors(func.value):
            return  # (`nn.ReLU().cuda()`, `nn.NLLLoss().cuda()` move nothing)
        what = f".cuda({self._code(index_args[0]).rstrip(', ') if index_args else ''})"
        fix = None
        if (index is None or index.value == "0") and not self._custom_cuda_method(func.value):
            device = self._device(node)
            if device is not None:
                expression, changes, applicability = device
                rest = [a for a in node.args if a not in index_args]
                args = [cst.Arg(cst.parse_expression(expression)), *rest]
                if rest:
                    args[0] = args[0].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                new = node.with_changes(func=func.with_changes(attr=cst.Name("to")), args=args)
                unsafe = index is not None or applicability is Applicability.UNSAFE
                fix = _fix(f"Use `.to({expression})`", self._changes(node, {node: new}, changes), Applicability.UNSAFE if unsafe else Applicability.SAFE)
        self.report(func.attr, self.message.format(what=what), fix=fix)

    def _report_string(self, string: cst.SimpleString, call: cst.Call) -> None:
        """``"cuda"`` given to ``.to(...)``, ``device=`` or ``map_location=``."""
        index = cuda_index(string)
        fix = None
        if index in (None, 0):
            device = self._device(call)
            if device is not None:
                expression, changes, applicability = device
                unsafe = index is not None or applicability is Applicability.UNSAFE
                fix = _fix(
                    f"Use `{expression}`",
                    self._changes(call, {string: cst.parse_expression(expression)}, changes),
                    Applicability.UNSAFE if unsafe else Applicability.SAFE,
                )
        keyword = next((a.keyword.value for a in call.args if a.value is string and a.keyword is not None), None)
        what = f"{keyword}={self._code(string)}" if keyword else f".to({self._code(string)})"
        self.report(string, self.message.format(what=what), fix=fix)

    def _assigned_and_overridden(self, value: cst.CSTNode) -> bool:
        parent = self.semantic.parent(value)
        if isinstance(parent, cst.Assign) and parent.value is value:
            return any(self.semantic.devices.overridden(t.target) for t in parent.targets)
        return False

    def _custom_cuda_method(self, receiver: cst.BaseExpression) -> bool:
        """Whether ``receiver`` may be an object of a class of this file that defines its own
        ``cuda()`` (a batch or a wrapper), which may have no ``to()``."""
        if self.semantic.kind(receiver) is not None:
            return False
        for function in self.semantic.functions.get("cuda", ()):
            info = self.semantic.enclosing_class(function)
            if info is not None and self.semantic.class_kind(info) is None:
                return True
        return False

    # --- fixes -----------------------------------------------------------------------------

    def _device(self, node: cst.CSTNode) -> tuple[str, dict, Applicability] | None:
        """The device expression to use at ``node``, the changes that define it, and whether
        using it keeps the placement on a GPU machine."""
        devices = self.semantic.devices
        existing = devices.device_at(node)
        if existing is not None:
            return existing.expression, {}, Applicability.SAFE if existing.known_cuda else Applicability.UNSAFE
        torch = self.semantic.torch_alias
        if torch is None or devices.in_module_forward(node):
            return None  # in `forward`, the device is where the caller put the module
        if not devices.can_define_device(node):
            # A notebook cell (or a script) before the one that imports torch: the fix
            # imports it itself, at the start of that cell, where nothing shadows it.
            changes = {} if self.semantic.bound_before(node, torch) else {_IMPORT_FIRST: node}
            if changes and (self.semantic.top_statement(node) is None or self.semantic.bound_locally(node, torch)):
                return None
            return self._choice(torch), changes, Applicability.SAFE
        anchor = devices.definition_anchor()
        definition = cst.parse_statement(f"device = {torch}.device({self._choice(torch)})\n")
        definition = definition.with_changes(leading_lines=[cst.EmptyLine()])
        following = self._statement_after(anchor)
        if isinstance(following, (cst.FunctionDef, cst.ClassDef)) and _blank_lines_before(following) < 2:
            # (PEP 8: two blank lines before a top-level definition) The line goes just before
            # the definition that follows the imports, as one change of that definition.
            return "device", {_BLANK_LINES_BEFORE: (following, definition)}, Applicability.SAFE
        return "device", {anchor: cst.FlattenSentinel([anchor, definition])}, Applicability.SAFE

    def _choice(self, torch: str) -> str:
        """The device choice, in the file's quote style."""
        q = self._quote
        return f"{q}cuda{q} if {torch}.cuda.is_available() else {q}cpu{q}"

    @cached_property
    def _quote(self) -> str:
        """The quote the file's one-line strings use most (double quotes on a tie, as Black),
        among the first ``_QUOTE_SAMPLE`` of them: the top-level statements are rendered one
        by one until that many are seen, not the whole file."""
        counts = {"'": 0, '"': 0}
        code_for_node = self.context.module.code_for_node
        for statement in self.context.module.body:
            try:
                for token in tokenize.generate_tokens(io.StringIO(code_for_node(statement)).readline):
                    if token.type == tokenize.STRING:
                        body = token.string.lstrip("rbuRBUfF")
                        if body[:3] not in (TQ3, DQ3) and body[:1] in counts:
                            counts[body[:1]] += 1
            except (tokenize.TokenError, SyntaxError, IndentationError):
                continue
            if counts["'"] + counts['"'] >= _QUOTE_SAMPLE:
                break
        return "'" if counts["'"] > counts['"'] else '"'

    def _statement_after(self, statement: cst.CSTNode) -> cst.CSTNode | None:
        body = self.context.module.body
        index = next((i for i, s in enumerate(body) if s is statement), None)
        return body[index + 1] if index is not None and index + 1 < len(body) else None

    def _changes(self, node: cst.CSTNode, local: dict, changes: dict) -> dict | None:
        """The changes of a fix: ``local`` (the rewrite at ``node``) and ``changes`` (the
        device definition); with ``_IMPORT_FIRST``, the statement holding ``node`` rewritten
        and preceded by the file's import of torch (``execution_order.with_import_first``); with
        ``_BLANK_LINES_BEFORE``, the device line put before the definition that follows the
        imports, which keeps two blank lines before it."""
        placed = changes.pop(_BLANK_LINES_BEFORE, None)
        if placed is not None:
            # The device line, then the definition that follows it: its own changes, if any,
            # go into it (an outer change wins over the ones inside it).
            following, definition = placed
            inside = {old: new for old, new in local.items() if self.semantic.inside(old, following)}
            rewritten = following
            for old, new in inside.items():
                rewritten = rewritten.deep_replace(old, new)
            lines = [cst.EmptyLine()] * (2 - _blank_lines_before(following)) + list(following.leading_lines)
            local = {old: new for old, new in local.items() if old not in inside}
            changes = {**changes, following: cst.FlattenSentinel([definition, rewritten.with_changes(leading_lines=lines)])}
        if _IMPORT_FIRST not in changes:
            return {**local, **changes}
        return with_import_first(self.semantic, local, self.semantic.torch_alias, [changes[_IMPORT_FIRST]])

    def _fall_back_to_cpu(self, string: cst.SimpleString) -> Fix | None:
        torch = self.semantic.torch_alias
        if torch is None:
            return None
        q = self._quote
        guarded = cst.parse_expression(f"{self._code(string)} if {torch}.cuda.is_available() else {q}cpu{q}")
        return _fix("Fall back to the CPU when CUDA is unavailable", with_import_first(self.semantic, {string: guarded}, torch, [string]))

    def _code(self, node: cst.CSTNode) -> str:
        return self.context.module.code_for_node(node)


def _places_on_cuda(code: str) -> bool:
    return ".cuda(" in code or '"cuda' in code or "'cuda" in code


# A key of a device's changes (``_device``): torch is not bound before the node it maps to.
_IMPORT_FIRST = object()
# Another: the top-level definition after the imports (and the device line to put before it,
# keeping two blank lines between them).
_BLANK_LINES_BEFORE = object()
# Triple quotes (a docstring's quotes say nothing of the one-line strings' style).
TQ3, DQ3 = "'" * 3, '"' * 3


def _blank_lines_before(statement: cst.FunctionDef | cst.ClassDef) -> int:
    """The blank lines before a definition (its decorators), above any comment line."""
    count = 0
    for line in statement.leading_lines:
        if line.comment is not None:
            break
        count += 1
    return count


def _fix(message: str, changes: dict | None, applicability: Applicability = Applicability.SAFE) -> Fix | None:
    return Fix(message, changes, applicability) if changes is not None else None


def _compared(parent: cst.CSTNode | None, node: cst.CSTNode) -> bool:
    """Whether ``node`` is an operand of the comparison ``parent`` (its left side, or a
    comparator)."""
    return (isinstance(parent, cst.Comparison) and parent.left is node) or (
        isinstance(parent, cst.ComparisonTarget) and parent.comparator is node
    )
