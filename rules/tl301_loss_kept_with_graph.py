import libcst as cst

from torchlint.rule import Fix, Rule
from torchlint.semantic.training import Loop, SCOPE_BOUNDARIES

GRAD_OFF = ("torch.no_grad", "torch.inference_mode")
# Uses of a container or accumulator that need it to stay a tensor.
TENSOR_USES = ("torch.stack", "torch.cat", "torch.mean", "torch.sum", "torch.tensor")


class LossKeptWithGraph(Rule):
    """
    ## What it does
    Finds a loss tensor kept across iterations of a loop: appended to a list
    (`losses.append(loss)`), accumulated (`total += loss`, `total = total + loss`), or stored
    in a container or attribute (`history[epoch] = loss`, `self.last_loss = loss`).

    ## Why is this bad?
    A loss tensor holds its whole autograd graph: every activation of the forward pass that
    produced it. Keeping it past its iteration keeps all of those alive, so memory grows
    with every batch until the process runs out of (GPU) memory. `.item()` keeps the number
    and drops the graph. Summing losses before `backward()` in the same iteration, or under
    `torch.no_grad()`, keeps no graph and is fine.

    ## Example
    ```python
    losses = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        losses.append(loss)
    ```

    ## Use instead
    ```python
    losses = []
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        losses.append(loss.item())
    ```

    ## Fix safety
    The fix appends `.item()` to the stored loss, or `.detach()` where the container or
    accumulator is later used as a tensor (`torch.stack(losses)`, `total.item()`). It is
    safe: the stored value keeps its number, only the graph goes.

    ## References
    - [PyTorch FAQ: my model reports "cuda runtime error(2): out of memory"](https://pytorch.org/docs/stable/notes/faq.html)
    """

    code = "TL301"
    name = "loss-kept-with-graph"
    message = "loss tensor `{loss}` is kept across iterations with its autograd graph; store `{loss}.item()`"

    def visit_Call(self, node: cst.Call) -> None:
        # losses.append(loss)
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend", "add") and len(node.args) == 1:
            self._check(node.args[0].value, func.value, node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            self._check(node.value, node.target, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Name) and isinstance(node.value, cst.BinaryOperation):
                # total = total + loss
                operands = (node.value.left, node.value.right)
                if any(isinstance(o, cst.Name) and o.value == t.value for o in operands):
                    for operand in operands:
                        if not (isinstance(operand, cst.Name) and operand.value == t.value):
                            self._check(operand, t, node)
            elif isinstance(t, (cst.Attribute, cst.Subscript)):
                self._check(node.value, t, node)

    def _check(self, value: cst.BaseExpression, holder: cst.BaseExpression, statement: cst.CSTNode) -> None:
        loss = _loss_name(value)
        if loss is None or not self.semantic.training.is_loss(loss):
            return
        loop = self._loop(statement)
        if loop is None or self._grad_off(statement) or self._reset_in_loop(holder, loop, statement):
            return
        if self._backward_on_holder(holder, loop):
            return  # summing losses before backward()
        method = "detach" if self._used_as_tensor(holder) else "item"
        replacement = cst.Call(func=cst.Attribute(value=loss, attr=cst.Name(method)))
        fix = Fix(f"Store `{loss.value}.{method}()`", {loss: replacement})
        self.report(loss, self.message.format(loss=loss.value), fix=fix)

    def _loop(self, node: cst.CSTNode):
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, SCOPE_BOUNDARIES):
                return None
            if isinstance(ancestor, Loop):
                return ancestor
        return None

    def _grad_off(self, node: cst.CSTNode) -> bool:
        for ancestor in self.semantic.ancestors(node):
            items = ancestor.items if isinstance(ancestor, cst.With) else ()
            decorators = ancestor.decorators if isinstance(ancestor, cst.FunctionDef) else ()
            for expr in [i.item for i in items] + [d.decorator for d in decorators]:
                target = expr.func if isinstance(expr, cst.Call) else expr
                if self.semantic.qualified_name(target) in GRAD_OFF:
                    return True
        return False

    def _holder_name(self, holder: cst.BaseExpression) -> str:
        while isinstance(holder, cst.Subscript):
            holder = holder.value
        return self.context.module.code_for_node(holder)

    def _reset_in_loop(self, holder: cst.BaseExpression, loop, store: cst.CSTNode) -> bool:
        # A container or total re-created inside the loop lives for one iteration only.
        name = self._holder_name(holder)
        for statement in _statements(loop.body):
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if small is not store and isinstance(small, cst.Assign) and any(
                        self.context.module.code_for_node(t.target) == name for t in small.targets
                    ) and not isinstance(small.value, cst.BinaryOperation):
                        return True
        return False

    def _backward_on_holder(self, holder: cst.BaseExpression, loop) -> bool:
        name = self._holder_name(holder)
        training = self.semantic.training
        return any(
            name in self.context.module.code_for_node(loss)
            for call, loss in training.backward_calls.items()
            if any(a is loop for a in self.semantic.ancestors(call))
        )

    def _used_as_tensor(self, holder: cst.BaseExpression) -> bool:
        name = self._holder_name(holder)
        code = self.context.module.code
        return any(f"{fn}({name}" in code for fn in TENSOR_USES) or f"{name}.item()" in code or f"{name}.detach()" in code


def _loss_name(value: cst.BaseExpression) -> cst.Name | None:
    """The loss name stored: ``loss`` in ``loss``, ``loss * x.size(0)``, ``[loss]``."""
    if isinstance(value, cst.Name):
        return value
    if isinstance(value, cst.BinaryOperation):
        return _loss_name(value.left) or _loss_name(value.right)
    return None


def _statements(block):
    return block.body if isinstance(block, cst.IndentedBlock) else ()
