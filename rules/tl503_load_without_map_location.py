import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic import Kind
from torchlint.torch_rule import TorchRule

# Classes of torch whose `load_state_dict` copies the loaded tensors where the object's own
# tensors are (an optimizer casts its state to each parameter's device) or keeps no tensor
# (a scheduler's numbers, a grad scaler's scale).
_TORCH_STATE_PREFIXES = ("torch.optim.", "torch.cuda.amp.GradScaler", "torch.amp.GradScaler", "torch.amp.grad_scaler.GradScaler")
# What a reader of the loaded value is.
_COPIES, _KEEPS, _OTHER = "copies", "keeps", "other"


class LoadWithoutMapLocation(TorchRule):
    """
    ## What it does
    Finds `torch.load` of a checkpoint with no `map_location`. It is silent where the
    failure cannot happen: the file was written by the same code just before (a path a
    `torch.save` earlier in the same function writes, an empty `io.BytesIO()` buffer), or
    every `torch.save` of the file to that path saves tensors moved to the CPU.

    Opt-in: whether a file holds CUDA tensors is decided where it was saved, which is
    mostly elsewhere (another script, another project, a conversion run on the CPU), and
    on real code most loads without `map_location` read files that load fine: converted or
    downloaded weights saved from the CPU, datasets and metadata with no CUDA tensors, and
    checkpoints of GPU-only training code. Select it when code must run on machines without
    the GPU the checkpoints were saved from.

    ## Why is this bad?
    Tensors are restored to the device they were saved from. A checkpoint saved on a GPU
    then fails to load on a machine without one (`RuntimeError: Attempting to deserialize
    object on a CUDA device but torch.cuda.is_available() is False`), and on a multi-GPU
    machine every process loads onto the saving GPU.

    ## Example
    ```python
    model.load_state_dict(torch.load("model.pt"))
    ```

    ## Use instead
    ```python
    model.load_state_dict(torch.load("model.pt", map_location="cpu"))
    # or map_location=device
    ```

    ## Fix safety
    The fix adds `map_location` and reads where the loaded tensors go: the loaded value, or
    each read of the one name it is assigned to (`ckpt["model"]`, `ckpt.get("optimizer")`).

    - Every read is passed to the `load_state_dict` of a module (without `assign=True`), or of
      an optimizer, LR scheduler or grad scaler built by torch's own class: the fix passes
      `map_location="cpu"` and is safe. A module copies the loaded tensors into its own
      parameters, wherever they are; torch's optimizers cast their loaded state to each
      parameter's device; schedulers and scalers keep numbers.
    - Every read is passed to some `load_state_dict`, one of an object the rule cannot see
      (an optimizer built by another function or library, an EMA helper, a module class of
      this file that defines its own `load_state_dict`), which may keep the tensors where
      they were loaded: with a device variable in scope whose every binding means "the GPU
      when there is one" (`device = torch.device("cuda" if torch.cuda.is_available() else
      "cpu")`), the fix passes `map_location=device` and is safe: the tensors go where the
      program trains. Without one it passes `map_location="cpu"` and is unsafe: that object
      may then hold state on the CPU next to parameters on the GPU (an optimizer's next step
      fails with "expected all tensors to be on the same device").
    - Any other read (the loaded tensors used directly, a whole pickled module, the value
      returned or tested): the fix passes `map_location=device` where such a device variable
      is in scope, else `map_location="cpu"`, and is unsafe either way: tensors that the code
      uses directly then live on another device than before (a file saved from the CPU goes
      to the GPU; one saved from the GPU stays on the CPU).
    A device variable is written only where it is bound when the call runs as the file's own
    code reads it: before the call at module level (in a notebook, in an earlier cell or
    earlier in the same one), or at module level for a call inside a function, which runs
    when it is called.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    - [`Optimizer.load_state_dict`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.load_state_dict.html)
    """

    code = "TL503"
    name = "load-without-map-location"
    required_words = (("load",),)
    opt_in = True
    message = "`torch.load` without `map_location` fails on a machine without the device the file was saved from"

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_call_to(node, "torch.load") or not node.args:
            return
        devices = self.semantic.devices
        if devices.written_by_this_code(node) or devices.saved_from_cpu(node):
            return
        if any(arg.star == "**" for arg in node.args):
            return  # a splatted **kwargs may carry map_location
        if len([a for a in node.args if a.keyword is None and a.star == ""]) >= 2:
            return  # torch.load(f, map_location) positionally
        if any(arg.keyword is not None and arg.keyword.value == "map_location" for arg in node.args):
            return
        readers = {self._reader(read) for read in self.semantic.reads_of(node)}
        device = devices.device_at(node)
        device = device.expression if device is not None and device.known_cuda else None
        if readers == {_COPIES}:
            location, applicability = '"cpu"', Applicability.SAFE
        elif device is not None:
            safe = readers and _OTHER not in readers  # (a value nobody reads here may be read anywhere)
            location, applicability = device, Applicability.SAFE if safe else Applicability.UNSAFE
        else:
            location, applicability = '"cpu"', Applicability.UNSAFE
        last = node.args[-1]
        args = [*node.args[:-1], last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))]
        args.append(cst.Arg(keyword=cst.Name("map_location"), value=cst.parse_expression(location),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
        if isinstance(last.comma, cst.Comma):
            args[-1] = args[-1].with_changes(comma=last.comma)
        fix = Fix(f"Pass `map_location={location}`", {node: node.with_changes(args=args)}, applicability)
        self.report(node, fix=fix)

    def _reader(self, read: cst.CSTNode) -> str:
        """What reads the loaded value at ``read``: a ``load_state_dict`` that copies the
        tensors where its object's own are (``_COPIES``), one of an object the rule cannot
        see (``_KEEPS``), or anything else (``_OTHER``)."""
        value = read
        parent = self.semantic.parent(value)
        if isinstance(parent, cst.Subscript) and parent.value is value:  # ckpt["model"]
            value = parent
        elif isinstance(parent, cst.Attribute) and parent.value is value and parent.attr.value == "get":
            call = self.semantic.parent(parent)  # ckpt.get("model")
            if not (isinstance(call, cst.Call) and call.func is parent):
                return _OTHER
            value = call
        arg = self.semantic.parent(value)
        call = self.semantic.parent(arg)
        if not (isinstance(arg, cst.Arg) and arg.keyword is None and arg.star == "" and isinstance(call, cst.Call)
                and call.args and call.args[0] is arg):
            return _OTHER
        func = call.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "load_state_dict"):
            return _OTHER
        receiver = func.value
        if self.semantic.kind(receiver) is Kind.MODULE:
            if any(a.keyword is not None and a.keyword.value == "assign" for a in call.args):
                return _KEEPS  # assign=True: the module takes the loaded tensors themselves
            if "load_state_dict" in self.semantic.functions:
                return _KEEPS  # a module class of this file may load its own way
            return _COPIES
        values = self.semantic.values(receiver)
        if values and all(isinstance(v, cst.Call) and (self.semantic.qualified_name(v.func) or "").startswith(_TORCH_STATE_PREFIXES)
                          for v in values):
            return _COPIES
        return _KEEPS
