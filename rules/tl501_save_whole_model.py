import libcst as cst

from torchlint.rule import Fix, Rule
from torchlint.semantic import Kind


class SaveWholeModel(Rule):
    """
    ## What it does
    Finds `torch.save(model, path)` where `model` is an `nn.Module`: a module built from a
    `torch.nn` class or an `nn.Module` subclass, assigned so to an attribute
    (`self.model = Net()`), annotated as one, or whose `.parameters()` feed an optimizer.

    ## Why is this bad?
    Saving the module pickles the whole object, which ties the file to the exact class
    definition and module path that existed at save time: renaming a file or a class breaks
    loading. Since PyTorch 2.6, `torch.load` defaults to `weights_only=True` and refuses
    such pickles outright. The `state_dict()` is a plain mapping of tensors that loads
    anywhere the architecture can be built.

    ## Example
    ```python
    model = Net()
    torch.save(model, "model.pt")
    ```

    ## Use instead
    ```python
    model = Net()
    torch.save(model.state_dict(), "model.pt")
    # and to load:
    model = Net()
    model.load_state_dict(torch.load("model.pt", weights_only=True))
    ```

    ## Fix safety
    The fix saves `model.state_dict()` instead and is safe: the code that loads the file must
    build the model and call `load_state_dict`, but loading a pickled module with the default
    `torch.load` of PyTorch 2.6 and later already fails, so that code needs changing anyway.

    ## References
    - [Saving and loading models](https://pytorch.org/tutorials/beginner/saving_loading_models.html)
    - [`torch.load` and `weights_only`](https://pytorch.org/docs/stable/generated/torch.load.html)
    """

    code = "TL501"
    name = "save-whole-model"
    message = "`torch.save` of a whole `nn.Module`; save its `state_dict()` instead"

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_call_to(node, "torch.save"):
            return
        arg = next((a for a in node.args if a.keyword is not None and a.keyword.value == "obj"), None)
        if arg is None and node.args and node.args[0].keyword is None and node.args[0].star == "":
            arg = node.args[0]
        if arg is None or self.semantic.kind(arg.value) is not Kind.MODULE:
            return
        value = arg.value
        if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        state_dict = cst.Call(func=cst.Attribute(value=value, attr=cst.Name("state_dict")))
        self.report(
            arg.value,
            fix=Fix("Save `state_dict()` instead", {arg.value: state_dict}),
        )
