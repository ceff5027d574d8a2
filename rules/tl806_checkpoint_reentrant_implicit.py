import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import append_keyword, calls_one_of, has_star, keyword, positional

CHECKPOINT = frozenset({"torch.utils.checkpoint.checkpoint"})
SEQUENTIAL = frozenset({"torch.utils.checkpoint.checkpoint_sequential"})


class CheckpointReentrantImplicit(TorchRule):
    """
    ## What it does
    Finds `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` called
    without `use_reentrant`, however they are imported or referenced
    (`from torch.utils.checkpoint import checkpoint as ckpt`, `cp = checkpoint; cp(f, x)`).
    A call that splats `**kwargs` may pass it and is left alone, as is another library's
    `checkpoint` (DeepSpeed's, Megatron's, Fairscale's). Replaces TorchFix's TOR003.

    ## Why is this bad?
    Since PyTorch 2.4 these functions warn at every call that `use_reentrant` must be passed
    explicitly; PyTorch has announced that omitting it will become an error, and that its
    default may change. The implicit default, `use_reentrant=True`, is the variant the
    documentation recommends against: when none of the checkpointed segment's inputs
    requires grad, its parameters get no gradient at all (silently: a frozen first layer or
    raw images as input are enough), it does not support `torch.autograd.grad`, keyword
    arguments to the function, or nested structures of tensors. `use_reentrant=False` has
    none of these limits.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    h = checkpoint(self.block, h)
    ```

    ## Use instead
    ```python
    h = checkpoint(self.block, h, use_reentrant=False)
    # or, to keep the reentrant variant on purpose:
    h = checkpoint(self.block, h, use_reentrant=True)
    ```

    ## Fix safety
    The fix passes `use_reentrant=False`, as TorchFix does, and is unsafe: it is the
    recommended variant but not the one that runs today, so gradients, hooks and memory
    use may change (parameters that silently got no gradient start to get one). Passing
    `use_reentrant=True` instead would keep today's behaviour and silence the warning, but
    would write the variant PyTorch recommends against into the code, and it is no safer to
    apply blindly: torch releases before 1.11 reject the argument altogether (the fix cannot
    know which versions a project supports). Choose `True` by hand where the reentrant
    variant is needed.

    ## References
    - [`torch.utils.checkpoint`](https://pytorch.org/docs/stable/checkpoint.html)
    """

    code = "TL806"
    name = "checkpoint-reentrant-implicit"
    required_words = (("checkpoint", "checkpoint_sequential"),)
    message = "`{name}` without `use_reentrant`: pass it explicitly (`use_reentrant=False` is recommended)"

    def visit_Call(self, node: cst.Call) -> None:
        if not node.args or has_star(node, "**") or keyword(node, "use_reentrant") is not None:
            return
        name = calls_one_of(self.semantic, node, CHECKPOINT | SEQUENTIAL)
        if name is None:
            return
        if name in SEQUENTIAL:
            # checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs)
            given = positional(node)
            if len(given) >= 4 or any(a.star == "*" for a in given):
                return
        fix = Fix("Pass `use_reentrant=False`", {node: append_keyword(node, "use_reentrant", cst.Name("False"))}, Applicability.UNSAFE)
        self.report(node, self.message.format(name=name.rpartition(".")[2]), fix=fix)
