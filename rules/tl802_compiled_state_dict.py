from typing import Iterator

import libcst as cst

from torchlint.rule import Fix
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
    The fix saves `compiled._orig_mod.state_dict()` and is safe: the tensors are the same,
    only the key prefix is dropped, which is what loading into the uncompiled model needs.

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
        fix = Fix(f"Save `{name}._orig_mod.state_dict()`", {holder: unwrapped})
        self.report(saved, self.message.format(name=name), fix=fix)


def _saved_values(saved: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """What is saved: the object, or the values of a saved dict literal (nested included)."""
    if isinstance(saved, cst.Dict):
        for element in saved.elements:
            if isinstance(element, cst.DictElement):
                yield from _saved_values(element.value)
    else:
        yield saved
