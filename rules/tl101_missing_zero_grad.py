import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic import Kind
from torchlint.semantic.execution_order import bound_within
from torchlint.torch_rule import TorchRule
from torchlint.semantic.training import OPTIMIZER_NAME, code, last_name, optimizer_of_step


class MissingZeroGrad(TorchRule):
    """
    ## What it does
    Finds a training loop that runs `backward()` and an optimizer step but never clears the
    gradients: no `optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None` or same-file
    helper that does it, anywhere in the iteration. Also finds a `train_step` function that
    runs backward and step without clearing, when every call of it in the file sits in such a
    loop. A clear counts only for the optimizer it can reach: `net_d.zero_grad()` does not
    clear an optimizer known to hold only `net_g`'s parameters. Also finds a clear that runs
    only every N iterations (`if i % k == 0: opt.zero_grad()`) while the step runs every
    iteration: that is no accumulation, every skipped clear leaves stale gradients.

    Steps are `opt.step()`, `scaler.step(opt)` (AMP) and `xm.optimizer_step(opt)`, on any
    object not known or named to be a scheduler; backward passes are `loss.backward()`,
    `scaler.scale(loss).backward()`, `accelerator.backward(loss)` and
    `torch.autograd.backward(loss)`. Clearing every N steps under an accumulation condition,
    clearing at the end of the iteration, `opt.step(closure)` (the closure clears), DeepSpeed
    engines (whose `step()` clears) and frameworks that own the loop (Lightning's
    `training_step`) are fine, and so are the few mock training steps of a pytest or
    unittest test (a `test_*` function). Scaling or clipping gradients in place (`p.grad.mul_(s)`,
    `p.grad = p.grad / n`, `clamp_`) is no clear.

    ## Why is this bad?
    `backward()` adds to `.grad`; it does not overwrite it. Without clearing, every step uses
    the sum of all gradients so far, so updates grow without bound and training diverges or
    stalls.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    The fix inserts `<optimizer>.zero_grad()` for the optimizer that steps (`opt` in
    `scaler.step(opt)`): as the first statement of the iteration (or of the step function),
    or, where the step runs under a condition (gradient accumulation that forgot to clear),
    right after the step, so that the gradients of the accumulated batches still add up. It
    is safe when the object is known to be an optimizer (built from a `torch.optim` class in
    the file, or passed one by every call of the function): a loop that never clears
    gradients is never what was meant, and clearing before the forward pass, or right after
    the step that consumed them, drops no gradient that a later step of the same iteration
    uses. When the object's type is unknown but its name says optimizer (`optimizer`,
    `opt_g`), the fix is unsafe; otherwise there is none, since `x.zero_grad()` on an object
    of unknown type may not exist or mean something else. A clear that runs only every N
    iterations has no fix: whether to clear every iteration or to step every N is the
    author's choice. Nor does an optimizer bound in the iteration itself (a new one in each
    iteration): at the start of the first iteration its name is not bound yet.

    ## References
    - [`torch.optim.Optimizer.zero_grad`](https://pytorch.org/docs/stable/generated/torch.optim.Optimizer.zero_grad.html)
    - [Zeroing out gradients in PyTorch](https://pytorch.org/tutorials/recipes/recipes/zeroing_out_gradients.html)
    """

    code = "TL101"
    name = "missing-zero-grad"
    required_words = (("backward", "manual_backward"), ("step", "optimizer_step"))
    message = "`{optimizer}.step()` in a loop that never clears gradients; they accumulate across iterations"
    conditional_message = (
        "`{optimizer}.step()` runs every iteration but its gradients are cleared only every N iterations; they go stale"
    )

    def leave_Module(self, original_node: cst.Module) -> None:
        training = self.semantic.training
        for iteration in training.iterations:
            self._check(iteration.steps, iteration.clears, iteration.loop)
        for step_function in training.step_functions():
            function = step_function.function
            if any(self._runs_in(clear, function) for clear in training.clears):
                continue
            loops = [next(training.enclosing_loops(call)) for call in step_function.call_sites]
            if any(self._runs_in(clear, loop) for loop in loops for clear in training.clears):
                continue
            self._check(step_function.steps, [], function)

    def _check(self, steps: list[cst.Call], clears: list[cst.CSTNode], body_owner: cst.CSTNode) -> None:
        """Reports each optimizer stepped in ``body_owner`` (a loop or a function) that no clear
        there is for, or that is cleared only every N iterations while it steps every time."""
        stepped = {code(optimizer_of_step(step)): optimizer_of_step(step) for step in steps}
        reported = set()
        for step in steps:
            optimizer = optimizer_of_step(step)
            name = code(optimizer)
            if name in reported or self.semantic.training.in_test(step):
                continue
            own = [clear for clear in clears if self._may_clear(clear, optimizer, stepped)]
            if not own:
                reported.add(name)
                self.report(step, self.message.format(optimizer=name), fix=self._fix(step, optimizer, body_owner))
            elif not self._conditional(step, body_owner) and all(self._every_n_only(clear, body_owner) for clear in own):
                reported.add(name)
                self.report(step, self.conditional_message.format(optimizer=name))

    def _may_clear(self, clear: cst.CSTNode, optimizer: cst.BaseExpression, stepped: dict[str, cst.BaseExpression]) -> bool:
        """Whether ``clear`` may clear the gradients ``optimizer`` steps with. ``opt_d.zero_grad()``
        clears only opt_d when opt_d also steps here (two optimizers, as in a GAN), and a
        module's or another optimizer's ``zero_grad()`` clears nothing of an optimizer known to
        hold other modules' parameters; any other clear (``p.grad = None``, a helper) may clear
        every optimizer."""
        if not (isinstance(clear, cst.Call) and isinstance(clear.func, cst.Attribute) and clear.func.attr.value == "zero_grad"):
            return True
        receiver = clear.func.value
        if code(receiver) == code(optimizer):
            return True
        if code(receiver) in stepped:
            return False
        training = self.semantic.training
        holders = training.parameter_holders(optimizer)
        if holders is None:
            return True
        if training.is_known_optimizer(receiver):
            cleared = training.parameter_holders(receiver)
            return cleared is None or any(_related(c, h) for c in cleared for h in holders)
        # A module: known as one, or one whose parameters another optimizer stepped here holds.
        if self.semantic.kind(receiver) is Kind.MODULE or any(
            code(receiver) in (training.parameter_holders(other) or ()) for other in stepped.values()
        ):
            return any(_related(code(receiver), h) for h in holders)
        return True

    def _conditional(self, node: cst.CSTNode, body_owner: cst.CSTNode) -> bool:
        for ancestor in self.semantic.ancestors(node):
            if ancestor is body_owner:
                return False
            if isinstance(ancestor, (cst.If, cst.Try)):
                return True
        return False

    def _every_n_only(self, clear: cst.CSTNode, body_owner: cst.CSTNode) -> bool:
        """Whether ``clear`` runs only every N iterations (under ``if i % n == 0:``)."""
        for ancestor in self.semantic.ancestors(clear):
            if ancestor is body_owner:
                return False
            if isinstance(ancestor, cst.If) and _every_n(ancestor.test):
                return True
        return False

    def _runs_in(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return any(a is container for a in self.semantic.ancestors(node))

    def _fix(self, step: cst.Call, optimizer: cst.BaseExpression, body_owner: cst.CSTNode) -> Fix | None:
        if self.semantic.training.is_known_optimizer(optimizer):
            applicability = Applicability.SAFE
        elif OPTIMIZER_NAME.search(last_name(optimizer)):
            applicability = Applicability.UNSAFE
        else:
            return None  # `x.zero_grad()` on an object of unknown type may mean anything
        clear = cst.parse_statement(f"{code(optimizer)}.zero_grad()\n")
        message = f"Call `{code(optimizer)}.zero_grad()`"
        statement = self._statement_under_condition(step, body_owner)
        if statement is not None:
            return Fix(f"{message} after the step", {statement: cst.FlattenSentinel([statement, clear])}, applicability)
        body = body_owner.body
        if not isinstance(body, cst.IndentedBlock) or not body.body:
            return None
        first = body.body[0]
        if isinstance(body_owner, cst.FunctionDef) and _is_docstring(first):
            if len(body.body) == 1:
                return None
            first = body.body[1]
        root = _root_name(optimizer)
        if root is None or bound_within(self.semantic, step, root, body):
            return None  # bound in the iteration, before the step: it does not exist yet at its start
        return Fix(f"{message} at the start of the iteration", {first: cst.FlattenSentinel([clear, first])}, applicability)

    def _statement_under_condition(self, step: cst.Call, body_owner: cst.CSTNode) -> cst.SimpleStatementLine | None:
        """The statement line of a step that runs every N iterations, under an accumulation
        condition (``if (i + 1) % accum_steps == 0:``) inside the loop."""
        statement = None
        for ancestor in self.semantic.ancestors(step):
            if ancestor is body_owner:
                return None
            if statement is None and isinstance(ancestor, cst.SimpleStatementLine):
                statement = ancestor
            if isinstance(ancestor, cst.If) and statement is not None and _every_n(ancestor.test):
                return statement
        return None


def _every_n(test: cst.BaseExpression) -> bool:
    text = code(test).lower()
    return "%" in text or "accum" in text


def _is_docstring(statement: cst.BaseStatement) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def _related(a: str, b: str) -> bool:
    """Whether modules written ``a`` and ``b`` share parameters: the same, or one inside the
    other (``model`` and ``model.head``)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def _root_name(expr: cst.BaseExpression) -> str | None:
    """The name an expression starts from (``self`` of ``self.opt``); None if none."""
    while isinstance(expr, (cst.Attribute, cst.Subscript, cst.Call)):
        expr = expr.func if isinstance(expr, cst.Call) else expr.value
    return expr.value if isinstance(expr, cst.Name) else None
