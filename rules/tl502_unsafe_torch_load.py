import libcst as cst

from torchlint.semantic.frameworks import TorchRule


class UnsafeTorchLoad(TorchRule):
    """
    ## What it does
    Finds `torch.load(..., weights_only=False)`, except where the file is one the code has
    just written itself: a module cloned through an in-memory buffer
    (`torch.save(model, buffer)` then `torch.load(buffer, weights_only=False)`), or a path a
    `torch.save` earlier in the same function writes (a test that saves and reloads a model).

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
    required_words = (("load",), ("weights_only",))
    opt_in = True
    message = "`torch.load(..., weights_only=False)` unpickles the file, which can run arbitrary code"

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_call_to(node, "torch.load") or self.semantic.devices.written_by_this_code(node):
            return
        for arg in node.args:
            if arg.keyword is not None and arg.keyword.value == "weights_only":
                if isinstance(arg.value, cst.Name) and arg.value.value == "False":
                    self.report(arg)
