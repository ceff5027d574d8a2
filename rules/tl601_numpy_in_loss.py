import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic.execution_order import with_import_first
from torchlint.semantic.migration import drop_aliases, from_import
from torchlint.text import is_cell_boundary
from torchlint.torch_rule import TorchRule
from torchlint.semantic.training import dotted

# NumPy functions with a torch function of the same meaning and call shape.
TORCH_EQUIVALENT = {
    "mean": "mean", "sum": "sum", "abs": "abs", "sqrt": "sqrt", "exp": "exp", "log": "log", "square": "square",
    "maximum": "maximum", "minimum": "minimum", "clip": "clamp", "power": "pow", "tanh": "tanh", "log1p": "log1p",
    "amax": "amax", "amin": "amin", "dot": "dot", "matmul": "matmul", "var": "var", "std": "std", "sin": "sin",
    "cos": "cos", "exp2": "exp2", "log2": "log2", "log10": "log10", "negative": "neg", "sign": "sign",
}
KEYWORDS = {"axis": "dim", "keepdims": "keepdim"}
# Methods that leave the autograd graph on the way to NumPy, and so leave the gradient path.
DETACHING = ("numpy", "detach", "cpu")
WRAPPERS = ("torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor", "torch.FloatTensor",
            "torch.autograd.Variable", "torch.autograd.variable.Variable")
WRAPPER_KEYWORDS = ("requires_grad", "dtype", "device")


class NumpyInLoss(TorchRule):
    """
    ## What it does
    Finds a loss that a backward pass runs on but whose gradient path to the model goes
    through NumPy: `.numpy()` or `np.*` calls on model outputs, usually re-wrapped with
    `torch.tensor(..., requires_grad=True)` or `torch.from_numpy(...)` so that `backward()`
    does not complain; also a term added to the loss that was computed so. It follows the
    loss through intermediate names, same-file helper functions, loss classes, and module
    classes whose instance is named as a criterion (`crit = Smooth()`). NumPy used
    for metrics and logging on detached values, on targets and data, or for scalar weights
    (`np.random.beta(...)`) is left alone.

    ## Why is this bad?
    NumPy arrays have no autograd graph. The loss is a new leaf tensor: `backward()` runs,
    but no gradient reaches the model's parameters, so the optimizer steps with zero or
    stale gradients and the model never learns.

    ## Example
    ```python
    pred = model(x)
    loss = torch.tensor(np.mean((pred.detach().numpy() - y.numpy()) ** 2), requires_grad=True)
    loss.backward()
    ```

    ## Use instead
    ```python
    pred = model(x)
    loss = torch.mean((pred - y) ** 2)
    loss.backward()
    ```

    ## Fix safety
    When the NumPy computation sits whole in one expression and every NumPy call in it has a
    torch equivalent (`np.mean` → `torch.mean`, `np.clip` → `torch.clamp`, `axis=` → `dim=`,
    ...), the fix rewrites it in torch: the `np.` calls become `torch.` calls, `.numpy()`,
    `.detach()`, `.cpu()` and `.data` on the path are removed, and a `torch.tensor(...,
    requires_grad=True)`, `torch.from_numpy(...)` or `.requires_grad_()` re-wrap is dropped.
    That expression is the loss's own, or the single `return` of the same-file helper
    function or loss class `forward` that computes it (the fix is written there, where the
    NumPy code lives; for a helper function, only when every call of it in the file computes
    a loss that a backward pass runs on, so no caller passing arrays breaks). It is offered
    only where the file imports `torch`; where that import runs only after the rewritten
    code (a notebook cell before the one that imports torch), the fix adds the file's own
    `import torch` at the start of that cell, after the cell's own imports, unless a
    function there binds `torch` itself (then there is no fix). It is unsafe: NumPy and
    torch differ in dtype promotion (float64 there, the model's dtype here) and in some
    defaults (`np.std` is the population deviation, `torch.std` the sample one), so the
    numbers can change. An import the rewrite leaves unused (`import numpy as np`, a
    `from torch import tensor` whose every use was in the rewritten expression) goes with it
    (in a notebook, when it is in the same cell).
    Otherwise (a NumPy call with no equivalent, NumPy spread over several statements) it
    reports only.

    ## References
    - [Autograd mechanics](https://pytorch.org/docs/stable/notes/autograd.html)
    """

    code = "TL601"
    name = "numpy-in-loss"
    required_words = (("backward", "manual_backward"), ("numpy",))
    message = "loss `{loss}` is computed through NumPy: no gradient reaches the model"

    def leave_Module(self, original_node: cst.Module) -> None:
        training = self.semantic.training
        reported = set()
        for loss in training.backward_calls.values():
            if loss is None:
                continue
            values = self.semantic.values(loss) if isinstance(loss, cst.Name) else [loss]
            for value in values:
                if value not in reported and any(self._cut_through_numpy(term) for term in _summands(value)):
                    reported.add(value)
                    name = self.context.module.code_for_node(loss)
                    self.report(value, self.message.format(loss=name), fix=self._fix(value))

    def _cut_through_numpy(self, term: cst.BaseExpression) -> bool:
        """Whether ``term`` comes from the model but carries no gradient, having gone through NumPy."""
        training = self.semantic.training
        return training.from_model(term) and not training.carries_grad(term) and self._through_numpy(term, depth=4)

    def _through_numpy(self, expr: cst.CSTNode, depth: int, follow_names: bool = True,
                       model_params: frozenset[str] = frozenset()) -> bool:
        """Whether a NumPy call or ``.numpy()`` on model output feeds ``expr`` (through the
        names it reads, same-file functions and loss classes, when ``follow_names``). Inside a
        same-file function, ``model_params`` are its parameters that this call passes model
        output to (`def penalty(depth)` called as `penalty(logits)`)."""
        training = self.semantic.training

        def from_model(value: cst.BaseExpression) -> bool:
            return training.from_model(value) or any(
                isinstance(n, cst.Name) and n.value in model_params and self._is_read(n) for n in _walk(value)
            )

        for node in _walk(expr):
            if not isinstance(node, (cst.Call, cst.Name)):
                continue
            if isinstance(node, cst.Name):
                if follow_names and depth > 0 and self._is_read(node):
                    if any(self._through_numpy(v, depth - 1, model_params=model_params) for v in self.semantic.values(node)):
                        return True
                continue
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value == "numpy" and from_model(func.value):
                return True
            if self._is_numpy(func) and any(from_model(a.value) for a in node.args):
                return True
            if follow_names and depth > 0:
                body = training.local_callee_returns(node)
                params = self._params_given_model_output(node, from_model) if body else frozenset()
                if any(self._through_numpy(r, depth - 1, model_params=params) for r in body):
                    return True
        return False

    def _params_given_model_output(self, call: cst.Call, from_model) -> frozenset[str]:
        """The parameters of the same-file function ``call`` runs that it passes model output to."""
        function = self.semantic.training.local_callee(call.func)
        params = [*function.params.posonly_params, *function.params.params]
        if params and params[0].name.value in ("self", "cls") and (
            isinstance(call.func, cst.Attribute) or function.name.value in ("forward", "__call__")
        ):
            params = params[1:]
        given = set()
        for index, arg in enumerate(call.args):
            if arg.star or not from_model(arg.value):
                continue
            if arg.keyword is not None:
                given.add(arg.keyword.value)
            elif index < len(params):
                given.add(params[index].name.value)
        return frozenset(given)

    def _is_read(self, name: cst.Name) -> bool:
        parent = self.semantic.parent(name)
        return not (isinstance(parent, cst.Attribute) and parent.attr is name) and not (
            isinstance(parent, cst.Arg) and parent.keyword is name
        )

    def _is_numpy(self, func: cst.BaseExpression) -> bool:
        return dotted(func) and (self.semantic.qualified_name(func) or "").startswith("numpy.")

    def _fix(self, value: cst.BaseExpression) -> Fix | None:
        """Rewrites the NumPy code where it is: the loss's own expression, or the one return
        of the same-file helper or loss class the loss is computed by."""
        torch = self.semantic.torch_alias
        if torch is None:
            return None
        if self._through_numpy(value, depth=0, follow_names=False):
            return self._rewrite(value, "Compute the loss with torch operations")
        helper = self.semantic.training.local_callee(value.func) if isinstance(value, cst.Call) else None
        returns = self.semantic.training.local_callee_returns(value) if helper is not None else []
        if len(returns) != 1 or not self._has_numpy(returns[0]) or not self._only_loss_calls(helper):
            return None
        return self._rewrite(returns[0], f"Compute the loss in `{helper.name.value}` with torch operations")

    def _rewrite(self, expr: cst.BaseExpression, message: str) -> Fix | None:
        rewriter = _ToTorch(self.semantic, self.semantic.torch_alias)
        new = expr.visit(rewriter)
        if rewriter.unmapped or any(self._numpy_valued(n) for n in _walk(expr) if isinstance(n, cst.Name) and self._is_read(n)):
            return None
        changes = {expr: new, **self._imports_left_unused(expr, new)}
        if rewriter.wrote_torch:  # torch must exist where the expression runs (a notebook's cell before its import)
            changes = with_import_first(self.semantic, changes, self.semantic.torch_alias, [expr])
        return Fix(message, changes, Applicability.UNSAFE) if changes is not None else None

    def _imports_left_unused(self, expr: cst.BaseExpression, new: cst.BaseExpression) -> dict:
        """The changes that drop the imports the rewrite leaves unused: a name the expression
        read (``np``, a wrapper imported by name such as ``tensor``) that the new expression
        does not, bound by an import whose every use lies in the expression."""
        kept = {n.value for n in _walk(new) if isinstance(n, cst.Name)}
        unused: dict[cst.CSTNode, list[cst.ImportAlias]] = {}
        for name in _walk(expr):
            if not isinstance(name, cst.Name) or name.value in kept or not self._is_read(name):
                continue
            imported = from_import(self.semantic, name)
            if imported is None or not all(self.semantic.inside(use, expr) for use in imported.uses):
                continue
            if not self._same_cell(imported.statement, expr):
                continue  # (a notebook's fix stays within one cell; the import stays, as before)
            aliases = unused.setdefault(imported.statement, [])
            if imported.alias not in aliases:
                aliases.append(imported.alias)
        changes: dict = {}
        for statement, aliases in unused.items():
            changes.update(drop_aliases(self.semantic, statement, aliases))
        return changes

    def _same_cell(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Whether two nodes lie in the same notebook cell (in a script, always)."""
        body = self.context.module.body
        tops = [self.semantic.top_statement(n) for n in (a, b)]
        if any(t is None for t in tops):
            return False
        first, last = sorted(body.index(t) for t in tops)
        return not any(is_cell_boundary(s) for s in body[first:last])

    def _has_numpy(self, expr: cst.BaseExpression) -> bool:
        return any(
            isinstance(n, cst.Call) and (self._is_numpy(n.func) or (isinstance(n.func, cst.Attribute) and n.func.attr.value == "numpy"))
            for n in _walk(expr)
        )

    def _only_loss_calls(self, helper: cst.FunctionDef) -> bool:
        """Whether every call of a helper function in this file computes a loss that a backward
        pass runs on (so rewriting it in torch changes no caller that passes arrays). A loss
        class's ``forward`` computes only its loss."""
        if helper.name.value in ("forward", "__call__"):
            return True
        training = self.semantic.training
        losses = set()
        for loss in training.backward_calls.values():
            losses.update(self.semantic.values(loss) if isinstance(loss, cst.Name) else [loss])
        calls = training.calls_of(helper)
        return bool(calls) and all(any(c is term for value in losses for term in _summands(value)) for c in calls)

    def _numpy_valued(self, name: cst.Name) -> bool:
        """A name bound to a NumPy array: left in a torch expression, it would break it."""
        for value in self.semantic.values(name):
            for node in _walk(value):
                if isinstance(node, cst.Call) and (
                    self._is_numpy(node.func) or (isinstance(node.func, cst.Attribute) and node.func.attr.value == "numpy")
                ):
                    return True
        return False


class _ToTorch(cst.CSTTransformer):
    def __init__(self, semantic, torch: str) -> None:
        super().__init__()
        self.semantic = semantic
        self.torch = torch
        self.unmapped = False
        self.wrote_torch = False  # whether a `torch.` call was written

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        if original_node.attr.value == "data":
            return updated_node.value  # x.data -> x
        return updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = original_node.func
        qname = (self.semantic.qualified_name(func) or "") if dotted(func) else ""
        if isinstance(func, cst.Attribute) and func.attr.value in DETACHING and not original_node.args:
            return updated_node.func.value  # x.detach().cpu().numpy() -> x
        if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and all(
            isinstance(a.value, cst.Name) and a.value.value == "True" for a in original_node.args
        ):
            return updated_node.func.value  # the re-wrap's .requires_grad_(): the result has a graph
        if qname.startswith("numpy."):
            name = qname.split(".", 1)[1]
            keywords = [a.keyword.value for a in original_node.args if a.keyword is not None]
            if name not in TORCH_EQUIVALENT or any(k not in KEYWORDS for k in keywords):
                self.unmapped = True
                return updated_node
            args = [
                a.with_changes(keyword=cst.Name(KEYWORDS[a.keyword.value])) if a.keyword is not None else a
                for a in updated_node.args
            ]
            self.wrote_torch = True
            return updated_node.with_changes(func=cst.parse_expression(f"{self.torch}.{TORCH_EQUIVALENT[name]}"), args=args)
        if (qname in WRAPPERS or (isinstance(func, cst.Name) and func.value == "Variable")) and updated_node.args:
            rest = updated_node.args[1:]
            if updated_node.args[0].keyword is None and all(a.keyword is not None and a.keyword.value in WRAPPER_KEYWORDS for a in rest):
                value = updated_node.args[0].value
                return value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if _needs_parens(value) else value
        return updated_node


def _needs_parens(value: cst.BaseExpression) -> bool:
    return not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)) and not value.lpar


def _summands(expr: cst.BaseExpression):
    """The terms added up into a loss: ``a``, ``b`` and ``0.1 * c`` in ``a + b - 0.1 * c``."""
    yield expr
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        yield from _summands(expr.left)
        yield from _summands(expr.right)


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)
