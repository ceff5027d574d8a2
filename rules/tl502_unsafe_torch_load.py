import libcst as cst

from torchlint.torch_rule import TorchRule


# The torch release that added `torch.load(weights_only=...)`.
WEIGHTS_ONLY_SINCE = (1, 13)

class UnsafeTorchLoad(TorchRule):
    """
    ## What it does
    Finds `torch.load(..., weights_only=False)`, and `torch.load(...)` without `weights_only`
    in a project that supports a torch older than 2.6 (its `target-torch`, or the lower
    bound of its declared requirement on torch), where that is the default; except where
    the file is one the code has just written itself: a module cloned through an in-memory buffer
    (`torch.save(model, buffer)` then `torch.load(buffer, weights_only=False)`), or a path a
    `torch.save` earlier in the same function writes (a test that saves and reloads a model).

    Where the oldest supported torch is unknown, a call without `weights_only` is not
    reported (on torch 2.6 and later it loads safely), nor is it where every supported torch
    is older than 1.13, which has no `weights_only` to pass (a project pinned to 1.12).
    Replaces TorchFix's TOR102 that way.

    Opt-in: `weights_only=False` is written on purpose (it is not the default since PyTorch
    2.6), and on real code it mostly reads the project's own checkpoints, datasets and
    caches, which are trusted; whether a file can come from elsewhere is not visible in the
    code. Select it for a security review of the loading code.

    ## Why is this bad?
    With `weights_only=False`, `torch.load` unpickles the file, and unpickling runs arbitrary
    code: a checkpoint downloaded from the internet, or shared on a cluster, can execute
    anything with your permissions. Since PyTorch 2.6 the default is `weights_only=True`,
    which loads tensors, state dicts and plain containers safely.

    ## Example
    ```python
    state = torch.load("checkpoint.pt", weights_only=False)
    ```

    ## Use instead
    ```python
    state = torch.load("checkpoint.pt", weights_only=True)
    # or, for trusted files holding other types:
    torch.serialization.add_safe_globals([MyConfig])
    state = torch.load("checkpoint.pt")
    ```

    ## Fix safety
    There is no fix: whether a file is trusted, and which types it must be allowed to hold,
    is for the author to decide.

    ## References
    - [`torch.load`](https://pytorch.org/docs/stable/generated/torch.load.html)
    """

    code = "TL502"
    name = "unsafe-torch-load"
    required_words = (("load",),)
    opt_in = True
    message = "`torch.load(..., weights_only=False)` unpickles the file, which can run arbitrary code"
    message_default = (
        "`torch.load` without `weights_only` unpickles the file on torch before 2.6 (this project "
        "supports {oldest}), which can run arbitrary code; pass `weights_only=True`"
    )

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_call_to(node, "torch.load") or self.semantic.devices.written_by_this_code(node):
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "weights_only":
                if isinstance(arg.value, cst.Name) and arg.value.value == "False":
                    self.report(arg)
                return
        # No `weights_only` (and no `**kwargs` that may pass it): the default of the oldest
        # torch the project supports decides; unknown stays silent.
        oldest = self.semantic.oldest_torch
        newest = self.semantic.newest_torch
        if newest is not None and newest < WEIGHTS_ONLY_SINCE:
            return  # no supported torch has `weights_only` to pass (a project pinned to 1.12)
        if oldest is not None and oldest < (2, 6) and not any(a.star == "**" for a in node.args):
            self.report(node, self.message_default.format(oldest=f"{oldest[0]}.{oldest[1]}"))
