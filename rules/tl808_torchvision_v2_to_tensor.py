import libcst as cst
from libcst.helpers import get_full_name_for_node

from torchlint.rule import Applicability, Fix
from torchlint.semantic.execution_order import with_import_first
from torchlint.torch_rule import TorchRule
from torchlint.semantic.references import callee_names

TO_TENSOR = frozenset({"torchvision.transforms.v2.ToTensor", "torchvision.transforms.v2._deprecated.ToTensor"})
V2 = "torchvision.transforms.v2"


class TorchvisionV2ToTensor(TorchRule):
    """
    ## What it does
    Finds uses of `torchvision.transforms.v2.ToTensor`, however it is imported or referenced
    (`v2.ToTensor()`, `from torchvision.transforms.v2 import ToTensor`), at each use; an
    import of it that nothing reads is reported at the import (it fails once torchvision
    removes the class). The classic `torchvision.transforms.ToTensor` is not deprecated and
    is left alone. Replaces TorchFix's TOR202.

    ## Why is this bad?
    `v2.ToTensor` is deprecated since torchvision 0.16 and will be removed. It returns a
    plain tensor, which the v2 transforms after it must guess is the image, where
    `v2.ToImage()` returns a `tv_tensors.Image` they know to transform; and it mixes two
    steps (conversion and scaling to `[0, 1]`) that v2 keeps apart.

    ## Example
    ```python
    transform = v2.Compose([v2.RandomHorizontalFlip(), v2.ToTensor()])
    ```

    ## Use instead
    ```python
    transform = v2.Compose([v2.RandomHorizontalFlip(), v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
    ```

    ## Fix safety
    The fix writes what torchvision's deprecation message says, `v2.ToImage()` then
    `v2.ToDtype(torch.float32, scale=True)` (spliced into the list of a `v2.Compose`, or as
    a `v2.Compose` of its own elsewhere), and is unsafe: the output is equal only up to
    float precision for 8-bit images, it is a `tv_tensors.Image` rather than a plain tensor
    (which changes what later v2 transforms and `isinstance` checks see), and inputs that
    `ToTensor` passed through unscaled (16- or 32-bit integer images, float arrays) are now
    scaled and converted to float32; the new transforms need torchvision 0.16. A use through
    a bare imported name, or in a file that does not `import torch`, gets no fix. Where the
    name it writes (`torch`, or the file's alias) is bound only after that code runs (a
    notebook cell before the one that imports torch), the fix adds the file's own import of
    it at the start of that cell, after the cell's own imports, and offers nothing where a
    function there binds that name itself.

    ## References
    - [Transforming images: getting started with v2](https://pytorch.org/vision/stable/transforms.html#v1-or-v2-which-one-should-i-use)
    """

    code = "TL808"
    name = "torchvision-v2-to-tensor"
    required_words = (("ToTensor",), ("v2",))
    message = "`v2.ToTensor` is deprecated; use `v2.ToImage()` and `v2.ToDtype(torch.float32, scale=True)`"

    def visit_Name(self, node: cst.Name) -> None:
        if node.value == "ToTensor":
            parent = self.semantic.parent(node)
            if not isinstance(parent, (cst.Attribute, cst.ImportAlias, cst.AsName)):
                self._check(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "ToTensor" and not isinstance(self.semantic.parent(node), cst.ImportAlias):
            self._check(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or isinstance(node.names, cst.ImportStar) or node.module is None:
            return
        scope = self.semantic.scopes.get(node)
        if scope is None or f"{get_full_name_for_node(node.module)}.ToTensor" not in TO_TENSOR:
            return
        for alias in node.names:
            if not (isinstance(alias.name, cst.Name) and alias.name.value == "ToTensor"):
                continue
            bound = alias.evaluated_alias or alias.evaluated_name
            bindings = [a for a in scope.assignments[bound] if a.node is node]
            # Only an import nothing reads: each read is reported where it is.
            if bindings and not any(b.references for b in bindings):
                self.report(alias)

    def _check(self, node: cst.Name | cst.Attribute) -> None:
        names = callee_names(self.semantic, node)
        if not names or not all(n in TO_TENSOR for n in names):
            return
        self.report(node, fix=self._fix(node))

    def _fix(self, node: cst.Name | cst.Attribute) -> Fix | None:
        call = self.semantic.parent(node)
        torch = self.semantic.torch_alias
        if not (isinstance(call, cst.Call) and call.func is node and not call.args and isinstance(node, cst.Attribute)):
            return None
        if torch is None or self.semantic.qualified_names(node.value) != [V2]:
            return None
        v2 = self.context.module.code_for_node(node.value)
        steps = [cst.parse_expression(f"{v2}.ToImage()"), cst.parse_expression(f"{v2}.ToDtype({torch}.float32, scale=True)")]
        element = self.semantic.parent(call)
        if isinstance(element, cst.Element) and self._in_compose_list(element):
            new: cst.CSTNode | cst.FlattenSentinel = cst.FlattenSentinel(
                [cst.Element(steps[0], comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), cst.Element(steps[1], comma=element.comma)]
            )
            changes = {element: new}
        else:
            compose = cst.parse_expression(f"{v2}.Compose([{v2}.ToImage(), {v2}.ToDtype({torch}.float32, scale=True)])")
            changes = {call: compose}
        changes = with_import_first(self.semantic, changes, torch, [call])  # (`v2` is read there already)
        if changes is None:
            return None
        return Fix("Use `v2.ToImage()` and `v2.ToDtype(torch.float32, scale=True)`", changes, Applicability.UNSAFE)

    def _in_compose_list(self, element: cst.Element) -> bool:
        """Whether ``element`` is an item of the list given to ``v2.Compose``."""
        listing = self.semantic.parent(element)
        arg = self.semantic.parent(listing) if isinstance(listing, cst.List) else None
        compose = self.semantic.parent(arg) if isinstance(arg, cst.Arg) else None
        return isinstance(compose, cst.Call) and callee_names(self.semantic, compose.func) == [f"{V2}.Compose"]
