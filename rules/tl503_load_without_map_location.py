import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic.frameworks import TorchRule


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
    The fix adds `map_location="cpu"` and is unsafe: the loaded tensors then live on the CPU,
    which is right before `load_state_dict` (it copies into the model's own device) but not
    for code that uses the loaded tensors directly on a GPU.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
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
        last = node.args[-1]
        args = [*node.args[:-1], last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))]
        args.append(cst.Arg(keyword=cst.Name("map_location"), value=cst.SimpleString('"cpu"'),
                            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))))
        if isinstance(last.comma, cst.Comma):
            args[-1] = args[-1].with_changes(comma=last.comma)
        fix = Fix('Pass `map_location="cpu"`', {node: node.with_changes(args=args)}, Applicability.UNSAFE)
        self.report(node, fix=fix)
