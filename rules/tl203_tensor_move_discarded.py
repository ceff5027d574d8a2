import ast

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen
from torchlint.semantic import Kind
from torchlint.torch_rule import TorchRule

MOVES = ("to", "cuda", "cpu")
# Factories whose result is a tensor.
TENSOR_FACTORIES = frozenset(
    f"torch.{name}"
    for name in (
        "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "rand", "randn", "randint",
        "arange", "linspace", "eye", "stack", "cat", "zeros_like", "ones_like", "randn_like", "rand_like", "Tensor",
        "FloatTensor", "LongTensor",
    )
)
# What a tensor tells of its device: a program that reads one of these after the move sees
# the change the fix makes (a demonstration that `.cuda()` does not move in place).
DEVICE_PROPERTIES = frozenset({"device", "is_cuda", "is_cpu", "is_mps", "is_meta", "is_xpu", "get_device"})


class TensorMoveDiscarded(TorchRule):
    """
    ## What it does
    Finds `x.to(device)`, `x.cuda()` or `x.cpu()` on a tensor as a bare statement, its result
    thrown away.

    ## Why is this bad?
    Unlike `Module.to`, which moves a module's parameters in place, `Tensor.to` returns a new
    tensor and leaves `x` where it was. The statement does nothing, and the next line that
    mixes `x` with tensors on the GPU fails with a device mismatch.

    ## Example
    ```python
    for x, y in loader:
        x.to(device)
        y.to(device)
    ```

    ## Use instead
    ```python
    for x, y in loader:
        x = x.to(device)
        y = y.to(device)
    ```

    ## Fix safety
    The fix assigns the result back (`x = x.to(device)`) and is safe: the bare statement had
    no effect, so the only change is the one that was meant. Where the code after the move
    reads the tensor's device (`x.is_cuda`, `x.device`, `x.get_device()`), as a
    demonstration that the move is not in place does, the fix changes what the program
    reads and prints: it is unsafe there.

    The rule reports only receivers known to be tensors: names built by a torch factory, and
    the elements of a sample tuple taken from a data loader (`for x, y in loader:`). Modules,
    a whole batch (`for batch in loader:`, which may be a tokenizer's `BatchEncoding`, a dict
    or a graph batch whose `.to()` moves in place) and objects of unknown type are left alone.

    ## References
    - [`torch.Tensor.to`](https://pytorch.org/docs/stable/generated/torch.Tensor.to.html)
    """

    code = "TL203"
    name = "tensor-move-discarded"
    required_words = (("to", "cuda", "cpu"), (*(name.removeprefix("torch.") for name in TENSOR_FACTORIES), "~loader"))
    message = "`{call}` returns a moved copy, which is thrown away: tensors do not move in place"

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """A statement that is only ``name.to(...)``, ``name.cuda(...)`` or ``name.cpu(...)``."""
        return super().candidate(module) and any(
            isinstance(call := n.value, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr in MOVES and isinstance(call.func.value, ast.Name)
            for n in module.nodes(ast.Expr)
        )

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not (isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in MOVES):
            return
        receiver = call.func.value
        if not isinstance(receiver, cst.Name) or not self._is_tensor(receiver):
            return
        assign = cst.Assign(targets=[cst.AssignTarget(receiver)], value=call)
        inspected = self._device_read_after(receiver, node)
        applicability = Applicability.UNSAFE if inspected else Applicability.SAFE
        message = f"Assign the result back to `{receiver.value}`"
        if inspected:
            message += f" (the code after it reads `{receiver.value}.{inspected}`, which the move changes)"
        self.report(
            call,
            self.message.format(call=self.context.module.code_for_node(call)),
            fix=Fix(message, {node: assign}, applicability),
        )

    def _device_read_after(self, receiver: cst.Name, statement: cst.CSTNode) -> str | None:
        """The device property (``is_cuda``, ``device``, ``get_device``) that the first read of
        the tensor after the statement to take one takes, if any: the value it reads is the
        one the fix moves."""
        after = self.semantic.end_key(statement)
        found = []
        for assignment in self.semantic.assignments(receiver):
            for access in assignment.references:  # (a set: ordered below)
                read = access.node
                parent = self.semantic.parent(read)
                if (
                    isinstance(parent, cst.Attribute) and parent.value is read and parent.attr.value in DEVICE_PROPERTIES
                    and self.semantic.start_key(read) > after
                ):
                    found.append((self.semantic.start_key(read), parent.attr.value))
        return min(found)[1] if found else None

    def _is_tensor(self, name: cst.Name) -> bool:
        if self.semantic.kind(name) is not None:
            return False
        values = self.semantic.values(name)
        if values:
            return all(isinstance(v, cst.Call) and self.semantic.qualified_name(v.func) in TENSOR_FACTORIES for v in values)
        return self._from_loader(name)

    def _from_loader(self, name: cst.Name) -> bool:
        """``x`` in ``for x, y in train_loader:`` (or ``enumerate(train_loader)``): the default
        collate makes each element of a sample tuple a tensor. A whole batch (``for batch in
        loader:``) may be a dict, a tokenizer's ``BatchEncoding`` or a graph batch, whose
        ``.to()`` moves in place."""
        for ancestor in self.semantic.ancestors(name):
            if isinstance(ancestor, cst.For) and "loader" in _names_and_strings(ancestor.iter).lower():
                target = ancestor.target
                if isinstance(ancestor.iter, cst.Call) and isinstance(ancestor.iter.func, cst.Name) and ancestor.iter.func.value == "enumerate":
                    target = target.elements[1].value if isinstance(target, cst.Tuple) and len(target.elements) == 2 else None
                return any(t.value == name.value for t in _sample_elements(target))
        return False


def _names_and_strings(node: cst.CSTNode) -> str:
    """The names and strings of ``node``'s code, not its comments: what the prescreen sees."""
    found = []

    class Words(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            found.append(node.value)

        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            found.append(node.value)

        def visit_FormattedStringText(self, node: cst.FormattedStringText) -> None:
            found.append(node.value)

    node.visit(Words())
    return " ".join(found)


def _sample_elements(target: cst.BaseExpression | None) -> list[cst.Name]:
    """The names a ``for`` target unpacks from a sample tuple (``x, y``)."""
    if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) < 2:
        return []
    return [e.value for e in target.elements if isinstance(e.value, cst.Name)]
