from typing import Iterator

import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.torch_rule import TorchRule


class CompiledStateDict(TorchRule):
    """
    ## What it does
    Finds `torch.save(compiled.state_dict(), ...)`, or a saved dict holding
    `compiled.state_dict()`, where `compiled` holds the result of `torch.compile(model)`.

    ## Why is this bad?
    `torch.compile` wraps the model in an `OptimizedModule` whose state dict keys all gain an
    `_orig_mod.` prefix. The saved file then does not load into the plain model
    (`load_state_dict` reports every key as missing and unexpected).

    ## Example
    ```python
    model = torch.compile(model)
    torch.save(model.state_dict(), "model.pt")
    ```

    ## Use instead
    ```python
    model = torch.compile(model)
    torch.save(model._orig_mod.state_dict(), "model.pt")
    ```

    ## Fix safety
    The fix saves `compiled._orig_mod.state_dict()` and is unsafe: every reader of the saved
    file must agree with the keys it drops, and the fix cannot see them all. A project that
    loads its checkpoints back into a compiled model (resuming training, inference through
    `torch.compile`) needs the prefixed keys, files saved before the fix keep them, and a
    model compiled only on some paths (`if args.compile:`) has no `_orig_mod` on the others.
    (Round 3 of the first-sight measurement: five safe fixes of five broke a program.)

    ## References
    - [`torch.compile`](https://pytorch.org/docs/stable/generated/torch.compile.html)
    """

    code = "TL802"
    name = "compiled-state-dict"
    required_words = (("save",), ("compile",), ("state_dict",))
    message = "`state_dict()` of a `torch.compile`d model has `_orig_mod.`-prefixed keys; save `{name}._orig_mod.state_dict()`"

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_call_to(node, "torch.save") or not node.args:
            return
        for saved in _saved_values(node.args[0].value):
            self._check(saved)

    def _check(self, saved: cst.BaseExpression) -> None:
        if not (isinstance(saved, cst.Call) and isinstance(saved.func, cst.Attribute) and saved.func.attr.value == "state_dict"):
            return
        holder = saved.func.value
        values = self.semantic.values(holder)
        if not values or not all(self.semantic.is_call_to(v, "torch.compile") for v in values):
            return
        name = self.context.module.code_for_node(holder)
        unwrapped = cst.Attribute(value=holder, attr=cst.Name("_orig_mod"))
        fix = Fix(f"Save `{name}._orig_mod.state_dict()`", {holder: unwrapped}, Applicability.UNSAFE)
        self.report(saved, self.message.format(name=name), fix=fix)


def _saved_values(saved: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """What is saved: the object, or the values of a saved dict literal (nested included)."""
    if isinstance(saved, cst.Dict):
        for element in saved.elements:
            if isinstance(element, cst.DictElement):
                yield from _saved_values(element.value)
    else:
        yield saved
