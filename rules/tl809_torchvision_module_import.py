import ast

import libcst as cst

from torchlint.rule import Fix, Prescreen
from torchlint.torch_rule import TorchRule

# The modules TorchFix's TOR203 names.
MODULES = ("datasets", "models", "transforms")


class TorchvisionModuleImport(TorchRule):
    """
    ## What it does
    Finds `import torchvision.models as models`, and likewise for `datasets` and
    `transforms`: an import of one of torchvision's modules under its own name. An import
    under another name (`import torchvision.models as tvm`) and `from torchvision import
    models` are left alone. Replaces TorchFix's TOR203, which finds the same three.

    Opt-in: it is a matter of style (both imports bind the same module and nothing
    behaves differently), not a bug; select it to make imports uniform.

    ## Why is this bad?
    `import torchvision.models as models` is `from torchvision import models` said the long
    way (pylint's `consider-using-from-import`); the `from` form is the one torchvision's
    documentation and most code use, and it reads as what it is.

    ## Example
    ```python
    import torchvision.models as models
    ```

    ## Use instead
    ```python
    from torchvision import models
    ```

    ## Fix safety
    The fix is safe: both statements bind the same name to the same module object (the
    submodule is imported either way) and nothing else. An import statement that imports
    other names too gets no fix.

    ## References
    - [pylint: consider-using-from-import](https://pylint.readthedocs.io/en/stable/user_guide/messages/refactor/consider-using-from-import.html)
    """

    code = "TL809"
    name = "torchvision-module-import"
    opt_in = True
    required_words = (("torchvision",), MODULES)
    message = "Use `from torchvision import {module}` instead of `import torchvision.{module} as {module}`"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """``import torchvision.X as X``."""
        return super().candidate(module) and any(
            a.asname is not None and a.name == f"torchvision.{a.asname}" for n in module.nodes(ast.Import) for a in n.names
        )

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            name, asname = alias.name, alias.asname
            if not (
                isinstance(name, cst.Attribute)
                and isinstance(name.value, cst.Name)
                and name.value.value == "torchvision"
                and name.attr.value in MODULES
                and asname is not None
                and isinstance(asname.name, cst.Name)
                and asname.name.value == name.attr.value
            ):
                continue
            module = name.attr.value
            fix = None
            if len(node.names) == 1:
                new = cst.ImportFrom(module=cst.Name("torchvision"), names=[cst.ImportAlias(name=cst.Name(module))])
                fix = Fix(f"Use `from torchvision import {module}`", {node: new})
            self.report(node, self.message.format(module=module), fix=fix)
