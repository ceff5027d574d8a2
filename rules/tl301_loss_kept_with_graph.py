import re
from collections import defaultdict

import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic import Kind
from torchlint.semantic.readers import METER, TENSOR, UNKNOWN, readers_need
from torchlint.torch_rule import TorchRule
from torchlint.semantic.training import GRAPH_KEEPING, MODEL_CALLEE as MODEL, code, dotted, last_name

CONTAINER_METHODS = ("append", "extend", "insert", "add", "appendleft")
# Functions named after a model that return one rather than run it: `unwrap_model(m)`.
NOT_A_FORWARD = re.compile(r"(get|build|create|make|load|unwrap|wrap|init|prepare|setup|copy|deepcopy|clone|save|export)_", re.IGNORECASE)
# Running-average helpers whose update(value, n) keeps a sum of the values.
METER = re.compile(r"meter|avg|average|loss|tracker", re.IGNORECASE)
# What a stored value's holder may be used for later that needs it to stay a tensor.
TENSOR_FUNCTIONS = r"torch\.(stack|cat|vstack|hstack|concat|concatenate|mean|sum|std|var|max|min)"
TENSOR_METHODS = r"item|detach|cpu|cuda|numpy|tolist|mean|sum|std|var|to|backward|view|reshape|squeeze|float|double|size|dim|max|min|sqrt|pow"


class LossKeptWithGraph(TorchRule):
    """
    ## What it does
    Finds a loss tensor kept across iterations of a loop: appended to a list
    (`losses.append(loss)`), accumulated (`total += loss`, `total = total + loss`), or stored
    in a container or attribute (`history[epoch] = loss`, `self.last_loss = loss`,
    `log["loss"].append(loss)`, `self.losses.append(loss)`, `meter.update(loss, n)`), or
    kept under a name in a branch of the loop and read outside that branch (`if loss_value
    < best: best_loss = loss`, compared in later iterations). Also
    finds a model's output kept across the iterations of a training loop
    (`outputs.append(model(x))`) when the loop reads that container nowhere else (so it is
    not gathered for a loss), a running concatenation (`total = torch.cat((total, loss))`),
    and a running total of any tensor computed from a model's
    output with gradients on, whatever its name (`total = total + ((pred - y) ** 2).mean()`
    in an evaluation loop; `epoch_loss += train_step(...)` of a helper that returns its loss
    after `backward()`), whose fix adds `.detach()`.

    A loss is what a backward pass in the same function runs on, a term summed into it (not
    a batch's target, bound by the `for` over the data), or the output of a loss function
    or criterion. Left alone: `.item()`, `.detach()`,
    `float(loss)` and `.data`; containers and totals re-created in every iteration (a reset
    under a condition, `if step % 100 == 0: running = 0`, still lets the total keep the
    graphs of the iterations in between, and is reported); summing
    losses that a `backward()` then runs on (`total_loss += aux`, `losses.append(l)` then
    `torch.stack(losses).sum().backward()`); losses computed or stored under
    `torch.no_grad()` or `torch.inference_mode()` (also in a function every call of which
    in the file is), which have no graph; a function outside any training loop that sums or
    collects loss terms into what it returns or yields, directly or through names computed
    from them (a module's `forward()` over its heads, a `compute_loss` helper): that is the
    loss being built for a backward pass, kept for one call; the few mock training steps of
    a pytest or unittest test (a `test_*` function); and what a framework's step keeps
    for one call (a list it builds itself). A framework's training step is an iteration of
    the framework's loop: a loss a Lightning `training_step` (or `on_train_batch_end`, a
    Hugging Face `compute_loss`) keeps in an attribute of its object (`self.history.append(
    loss)`) outlives it and is reported; its `validation_step` runs with gradients off.

    ## Why is this bad?
    A loss tensor holds its whole autograd graph: every activation of the forward pass that
    produced it. Keeping it past its iteration keeps all of those alive, so memory grows
    with every batch until the process runs out of (GPU) memory. `.item()` keeps the number
    and drops the graph.

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
    The fix knows every reader of the total or container: each read of the name in its
    function, followed through the expressions, names, containers and loops the value goes
    on to (`mean = total / n`, `sum(losses)`, `for l in losses`). Where one of them needs a
    tensor (`total.item()`, `total.data.numpy()`, `total.cpu()`, `torch.stack([total, ...])`,
    `torch.stack(losses)`, `losses[-1].item()`) or the loss goes through a tensor method on
    the way (`loss.cpu()`), the fix inserts `.detach()`: the value stays the same tensor
    without its graph, and nothing backpropagates through it (a backward pass on it would
    have been exempt above), so that fix is safe. Otherwise every reader takes a number as
    well as a tensor (arithmetic, comparisons, f-strings, `print`, `float`, `min`, `sum`,
    NumPy, `math`, loggers and summary writers), and the fix appends `.item()`. That is safe
    where the stored tensor is the very loss a backward pass with no gradient argument runs
    on (so it is one number): `history.append(loss)` in a plain loop. Elsewhere it is unsafe:
    `.item()` raises on a loss that is not a single number (`reduction="none"`). Where a
    reader is not known, either fix is unsafe: the value is returned or yielded, stored in an
    attribute (`self.losses`, read anywhere) or an entry, or given to a function torchlint
    does not know (one of the file, a parameter, another library's), which may need a tensor
    (for `.item()`) or backpropagate through it (for `.detach()`). For a model output the fix
    inserts `.detach()`, unsafe: code elsewhere might still backpropagate through what was
    kept.

    ## References
    - [PyTorch FAQ: my model reports "cuda runtime error(2): out of memory"](https://pytorch.org/docs/stable/notes/faq.html)
    """

    code = "TL301"
    name = "loss-kept-with-graph"
    required_words = (("backward", "manual_backward", "~loss", "~crit", "~cross_entropy", "~kl_div", "~triplet_margin"),)
    message = "loss tensor `{loss}` is kept across iterations with its autograd graph; store `{loss}.{method}()`"

    def __init__(self, context) -> None:
        super().__init__(context)
        # Per file (a rule instance lints one module): indexes that keep the rule linear.
        self._backward_by_function: dict[cst.FunctionDef, list] | None = None
        self._backward_by_name: dict[tuple[str, cst.FunctionDef | None], list] | None = None
        self._scope_codes: dict[cst.CSTNode, str] = {}
        self._flow_cache: dict[tuple[cst.FunctionDef, str], bool] = {}
    total_message = "`{term}` is computed from the model's output with gradients on and summed across iterations with its autograd graph; add `.detach()`"
    output_message = "model output `{output}` is kept across training iterations with its autograd graph; store `{output}.detach()`"

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or not node.args:
            return
        if func.attr.value in CONTAINER_METHODS:
            self._check(node.args[-1].value, func.value, node)
        elif func.attr.value == "update" and len(node.args) <= 2 and METER.search(last_name(func.value)):
            self._check(node.args[0].value, func.value, node)  # losses.update(loss, n): an AverageMeter

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
            self._check(node.value, node.target, node)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            holder = target.target
            if isinstance(holder, cst.Name) and isinstance(node.value, cst.BinaryOperation):
                # total = total + loss
                operands = (node.value.left, node.value.right)
                if any(isinstance(o, cst.Name) and o.value == holder.value for o in operands):
                    for operand in operands:
                        if not (isinstance(operand, cst.Name) and operand.value == holder.value):
                            self._check(operand, holder, node)
            elif isinstance(holder, cst.Name) and _concatenated_onto(node.value, holder) is not None:
                for element in _concatenated_onto(node.value, holder):  # total = torch.cat((total, loss))
                    self._check(element, holder, node)
            elif isinstance(holder, (cst.Attribute, cst.Subscript)):
                self._check(node.value, holder, node)
            elif isinstance(holder, cst.Name) and self._kept_for_later(holder, node):
                self._check(node.value, holder, node)  # best_loss = loss, in a condition

    def _check(self, value: cst.BaseExpression, holder: cst.BaseExpression, store: cst.CSTNode) -> None:
        training = self.semantic.training
        # (A batch's target, `y` of `for x, y in loader`, is a term of the training loss but
        # data, not a computed loss.)
        loss = next((name for name in _stored_names(value) if training.is_loss(name) and not self._loop_data(name)), None)
        if loss is None:
            if isinstance(store, cst.Call):  # outputs.append(...): a container that grows
                self._check_output(value, holder, store)
            elif isinstance(holder, cst.Name) and self._accumulates(store, holder):
                self._check_total(value, holder, store)
            return
        values = self.semantic.values(loss)
        if training.detached(value) or all(map(training.detached, values or [loss])):
            return
        if self._without_graph(loss, depth=0):
            return  # computed under no_grad(): no graph to keep
        loop = self._iteration_loop(store, holder)
        if loop is None or self._grad_off(store) or training.in_test(store):
            return
        base = _base_name(holder)
        if base is not None and self._reset_in(base, loop, store):
            return
        scope = self.semantic.enclosing_function(store) or self.context.module
        if self._backpropagated(holder, scope):
            return  # summing losses before backward()
        if training.iteration_of(store) is None and (self._returned(holder, scope) or self._flows_to_return(holder, scope)):
            return  # a helper or a forward() building the loss it returns from terms
        # Every reader of the holder decides: one that needs a tensor keeps one (`.detach()`),
        # one torchlint does not follow (returned, given to an unknown function, an
        # attribute's) makes the fix unsafe.
        needs = readers_need(self.semantic, holder, _level(holder, store))
        if isinstance(_root(holder), cst.Attribute) and self._used_as_tensor(holder, scope):
            needs.add(TENSOR)  # (an attribute's readers are unknown; its class's are seen)
        if TENSOR in needs or not _is_stored_as_is(loss, value):
            method, applicability = "detach", Applicability.SAFE
        else:
            # `.item()` changes the type: safe only on a loss known to be one number (a
            # backward pass with no gradient argument runs on it).
            method = "item"
            applicability = Applicability.SAFE if self._backward_without_gradient(loss) else Applicability.UNSAFE
        if UNKNOWN in needs:
            applicability = Applicability.UNSAFE
        replacement = cst.Call(func=cst.Attribute(value=loss, attr=cst.Name(method)))
        fix = Fix(f"Store `{loss.value}.{method}()`", {loss: replacement}, applicability)
        self.report(loss, self.message.format(loss=loss.value, method=method), fix=fix)

    def _loop_data(self, name: cst.Name) -> bool:
        """A name bound only as the target of a ``for`` loop or comprehension (a batch)."""
        bindings = self.semantic.assignments(name)
        return bool(bindings) and all(self._loop_target(b.node) for b in bindings)

    def _loop_target(self, node: cst.CSTNode) -> bool:
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, (cst.For, cst.CompFor)):
                return self.semantic.inside(node, ancestor.target)
            if not isinstance(ancestor, (cst.Tuple, cst.List, cst.Element, cst.StarredElement)):
                return False
        return False

    def _accumulates(self, store: cst.CSTNode, holder: cst.Name) -> bool:
        """``total += x`` or ``total = total + x`` (not a value kept under a name in a branch),
        where the loop around it binds the total nowhere else: a running total carried from one
        iteration to the next, not one rebuilt in each (``loss = term; loss = loss + other``)."""
        if not self._accumulates_shallow(store, holder):
            return False
        loop = self._iteration_loop(store)
        if loop is None:
            return False
        for binding in self.semantic.assignments(holder):
            node = binding.node
            if not self.semantic.inside(node, loop) or self.semantic.inside(node, store):
                continue
            parent = next((a for a in self.semantic.ancestors(node) if isinstance(a, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.With))), None)
            if parent is None or not self._accumulates_shallow(parent, holder):
                return False  # bound afresh inside the loop
        return True

    @staticmethod
    def _accumulates_shallow(statement: cst.CSTNode, holder: cst.Name) -> bool:
        """``total += x``, ``total = total + x``, ``total = torch.cat((total, x))``."""
        if isinstance(statement, cst.AugAssign):
            return True
        if not isinstance(statement, cst.Assign):
            return False
        if isinstance(statement.value, cst.BinaryOperation):
            return any(isinstance(o, cst.Name) and o.value == holder.value for o in (statement.value.left, statement.value.right))
        return _concatenated_onto(statement.value, holder) is not None

    def _check_total(self, value: cst.BaseExpression, holder: cst.Name, store: cst.CSTNode) -> None:
        """A running total of any tensor computed from a model's output with gradients on,
        whatever its name (``total = total + ((pred - y) ** 2).mean()`` in an evaluation
        loop): every iteration's graph stays alive in it."""
        training = self.semantic.training
        if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)) or not training.carries_grad(value) or training.detached(value):
            return
        if not self._known_graph(value):
            return
        loop = self._iteration_loop(store)
        if loop is None or self._grad_off(store) or training.in_test(store) or self._reset_in(holder.value, loop, store):
            return
        scope = self.semantic.enclosing_function(store) or self.context.module
        if self._backpropagated(holder, scope):
            return  # summing terms before backward()
        if training.iteration_of(store) is None and (self._returned(holder, scope) or self._flows_to_return(holder, scope)):
            return  # a helper building what it returns
        needs = readers_need(self.semantic, holder, _level(holder, store))
        applicability = Applicability.UNSAFE if UNKNOWN in needs else Applicability.SAFE
        term = value
        if isinstance(value, (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.IfExp)) and not value.lpar:
            term = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        name = code(value)
        fix = Fix(f"Add `{name}.detach()`", {value: cst.Call(func=cst.Attribute(value=term, attr=cst.Name("detach")))}, applicability)
        self.report(value, self.total_message.format(term=name), fix=fix)

    def _known_graph(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether ``value`` is known to carry a graph from the file's own code: it is built,
        through tensor operations, from a forward pass of a known module (or a name bound to
        one), or from a call of a function of the file every ``return`` of which does. What
        is not seen (a parameter, a batch, another file's or library's function, a name never
        bound) is not known to: a running float sum of `idf_val(...)` is no graph."""
        from torchlint.semantic.gradflow import _DETACHING_ATTRIBUTES, _DETACHING_METHODS

        if depth > 6:
            return False
        if isinstance(value, cst.Name):
            bindings = self.semantic.assignments(value)
            if not bindings or any(isinstance(b.node, (cst.Import, cst.ImportFrom, cst.Param)) for b in bindings):
                return False
            return any(self._known_graph(v, depth + 1) for v in self.semantic.values(value))
        if isinstance(value, (cst.BinaryOperation,)):
            return self._known_graph(value.left, depth + 1) or self._known_graph(value.right, depth + 1)
        if isinstance(value, cst.UnaryOperation):
            return self._known_graph(value.expression, depth + 1)
        if isinstance(value, cst.Subscript):
            return self._known_graph(value.value, depth + 1)
        if isinstance(value, cst.Attribute):
            return value.attr.value not in _DETACHING_ATTRIBUTES and self._known_graph(value.value, depth + 1)
        if not isinstance(value, cst.Call):
            return False
        func = value.func
        if self.semantic.evaluation.known_forward(value) or (
            isinstance(func, (cst.Name, cst.Attribute)) and self.semantic.kind(func) is Kind.MODULE
        ) or (isinstance(func, cst.Name) and self.semantic.param_given_modules(func)):
            return True  # a forward pass of a module
        if isinstance(func, cst.Attribute) and not (isinstance(func.value, cst.Name) and self._imported(func.value)):
            if func.attr.value in _DETACHING_METHODS:
                return False
            functions = [f for f in self.semantic.functions.get(func.attr.value, ()) if self.semantic.enclosing_class(f) is not None]
            if isinstance(func.value, cst.Name) and func.value.value == "self" and functions:
                return self._returns_graph(functions, depth)
            return self._known_graph(func.value, depth + 1)  # a tensor's method: what it runs on
        if isinstance(func, cst.Name) and self.semantic.functions.get(func.value):
            return self._returns_graph(self.semantic.functions[func.value], depth)
        qname = self.semantic.qualified_name(func) or ""
        if qname.startswith("torch.") or self.semantic.training.is_loss(value):
            return any(self._known_graph(a.value, depth + 1) for a in value.args)
        return False

    def _imported(self, name: cst.Name) -> bool:
        bindings = self.semantic.assignments(name)
        return bool(bindings) and all(isinstance(b.node, (cst.Import, cst.ImportFrom)) for b in bindings)

    def _returns_graph(self, functions, depth: int) -> bool:
        returns = [r.value for f in functions for r in _returns_of(f) if r.value is not None]
        training = self.semantic.training
        return bool(returns) and all(
            training.carries_grad(r) and not training.detached(r) and self._known_graph(r, depth + 1) for r in returns
        )

    def _check_output(self, value: cst.BaseExpression, holder: cst.BaseExpression, store: cst.CSTNode) -> None:
        """A model's output kept across the iterations of a training loop (``outputs.append(model(x))``)."""
        output = next((e for e in _stored_exprs(value) if self._is_model_output(e)), None)
        iteration = self.semantic.training.iteration_of(store)
        if output is None or iteration is None or self._grad_off(store) or self.semantic.training.in_test(store):
            return
        base = _base_name(holder)
        if base is not None and self._reset_in(base, iteration.loop, store):
            return
        scope = self.semantic.enclosing_function(store) or self.context.module
        if self._backpropagated(holder, scope) or self._read_in(holder, iteration.loop, store):
            return  # outputs gathered for a loss computed from them
        name = code(output)
        replacement = cst.Call(func=cst.Attribute(value=output, attr=cst.Name("detach")))
        fix = Fix(f"Store `{name}.detach()`", {output: replacement}, Applicability.UNSAFE)
        self.report(output, self.output_message.format(output=name), fix=fix)

    def _is_model_output(self, expr: cst.BaseExpression) -> bool:
        """``model(x)``, ``self.net(x)``, or a name every value of which is one, computed with
        the graph on."""
        if isinstance(expr, cst.Name):
            values = self.semantic.values(expr)
            return bool(values) and all(self._is_model_call(v) and not self._grad_off(v) for v in values)
        return self._is_model_call(expr)

    def _is_model_call(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call) or any(a.star for a in expr.args) or not expr.args:
            return False
        name = last_name(expr.func)
        return self.semantic.kind(expr.func) is Kind.MODULE or (
            not dotted_library(self.semantic, expr.func) and MODEL.match(name) is not None and not NOT_A_FORWARD.match(name)
        )

    def _read_in(self, holder: cst.BaseExpression, loop: cst.CSTNode, store: cst.CSTNode) -> bool:
        """Whether the loop reads the holder anywhere but in the store."""
        holder = holder.value if isinstance(holder, cst.Subscript) else holder
        pattern = re.compile(rf"(?<![\w.]){re.escape(code(holder))}\b")
        statement = next(a for a in self.semantic.ancestors(store) if isinstance(a, cst.SimpleStatementLine)) if not isinstance(store, cst.SimpleStatementLine) else store
        text = self.context.module.code_for_node(loop.body).replace(self.context.module.code_for_node(statement), "", 1)
        return bool(pattern.search(text))

    def _backward_without_gradient(self, loss: cst.Name) -> bool:
        """Whether a backward pass with no gradient argument (so on a single number) runs on
        the value the name holds."""
        values = {id(v) for v in self.semantic.values(loss)}
        function = self.semantic.enclosing_function(loss)
        for call, target in self._backward_calls_of(loss.value, function):
            if any(a.keyword is not None and a.keyword.value in ("gradient", "grad_tensors") for a in call.args):
                continue
            if isinstance(call.func, cst.Attribute) and call.func.value is target and call.args and call.args[0].keyword is None:
                continue  # loss.backward(torch.ones_like(loss))
            if values and values & {id(v) for v in self.semantic.values(target)}:
                return True
        return False

    def _backward_calls_of(self, name: str, function: cst.FunctionDef | None) -> list[tuple[cst.Call, cst.Name]]:
        """The backward passes on the name ``name`` in ``function`` (None: at module level),
        indexed once per file."""
        if self._backward_by_name is None:
            self._backward_by_name = defaultdict(list)
            for call, target in self.semantic.training.backward_calls.items():
                if isinstance(target, cst.Name):
                    self._backward_by_name[target.value, self.semantic.enclosing_function(call)].append((call, target))
        return self._backward_by_name.get((name, function), [])

    def _returned(self, holder: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        holder = holder.value if isinstance(holder, cst.Subscript) else holder
        name = re.escape(code(holder))
        text = self._scope_code(self._holder_scope(holder, scope))
        return bool(re.search(rf"\b(return|yield)\b[^\n]*(?<![\w.]){name}\b", text))

    def _flows_to_return(self, holder: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        """Whether a local holder's value, with its graph, reaches what its function returns
        or yields through the names computed from it there: ``losses.append(l)`` then
        ``out = (sum(losses),) + out`` and ``return out``; ``total += l`` then ``loss = loss +
        total``. Such a function (a module's ``forward()``, a ``compute_loss`` helper) builds
        the loss a backward pass runs on; a ``.item()`` or ``.detach()`` on the way keeps none
        of the graph and does not count."""
        base = _base_name(holder)
        if base is None or not isinstance(scope, cst.FunctionDef):
            return False
        key = (scope, base)
        if key not in self._flow_cache:
            self._flow_cache[key] = self._returns_derived(scope, base)
        return self._flow_cache[key]

    def _returns_derived(self, function: cst.FunctionDef, name: str) -> bool:
        finder = _Derivations(self.semantic.training)
        function.body.visit(finder)
        derived = {name}
        for _ in range(len(finder.flows) + 1):  # to a fixed point
            grown = {target for target, value in finder.flows if target not in derived and _carries(value, derived, finder.training)}
            if not grown:
                break
            derived |= grown
        return any(_carries(value, derived, finder.training) for value in finder.returned)

    def _iteration_loop(self, store: cst.CSTNode, holder: cst.BaseExpression | None = None) -> cst.CSTNode | None:
        """The loop whose iterations the store outlives: the training iteration around it,
        else the innermost loop; for a holder of ``self`` outside any loop, a framework's
        training step around it (``training_step``, ``on_train_batch_end``): the framework
        calls it once per batch, and the object outlives each call."""
        iteration = self.semantic.training.iteration_of(store)
        if iteration is not None:
            return iteration.loop
        loop = next(self.semantic.training.enclosing_loops(store), None)
        if loop is None and holder is not None and _owner(holder) == "self":
            return self.semantic.training.framework_step(store)
        return loop

    def _grad_off(self, node: cst.CSTNode, depth: int = 0) -> bool:
        """Whether ``node`` runs with no graph recorded: under ``no_grad()``,
        ``inference_mode()`` or ``set_grad_enabled(False)``, or in a function of this file
        every call of which does."""
        for ancestor in self.semantic.ancestors(node):
            items = ancestor.items if isinstance(ancestor, cst.With) else ()
            decorators = ancestor.decorators if isinstance(ancestor, cst.FunctionDef) else ()
            for expr in [i.item for i in items] + [d.decorator for d in decorators]:
                target = expr.func if isinstance(expr, cst.Call) else expr
                if self.semantic.grad_off_context(expr) or (
                    self.semantic.qualified_name(target) == "torch.set_grad_enabled" and "False" in code(expr)
                ):
                    return True
            if isinstance(ancestor, cst.FunctionDef):
                calls = self.semantic.training.calls_of(ancestor) if depth < 2 else []
                return bool(calls) and all(self._grad_off(call, depth + 1) for call in calls)
        return False

    def _without_graph(self, expr: cst.BaseExpression, depth: int) -> bool:
        """Whether ``expr`` was computed with no graph recorded: every value of the name was
        computed under ``no_grad()`` or is read from such a value (``loss = outputs.loss``)."""
        while isinstance(expr, (cst.Attribute, cst.Subscript)):
            expr = expr.value
        values = self.semantic.values(expr) if isinstance(expr, cst.Name) else []
        return bool(values) and all(
            self._grad_off(v) or (depth < 3 and isinstance(v, (cst.Name, cst.Attribute, cst.Subscript)) and self._without_graph(v, depth + 1))
            for v in values
        )

    def _reset_in(self, name: str, loop: cst.CSTNode, store: cst.CSTNode) -> bool:
        """Whether the holder is bound afresh inside the loop (``parts = []`` in each
        iteration), so it lives for one iteration only. A rebinding under a condition that
        the store is outside of (``if step % 100 == 0: running = 0``) does not count: the
        holder outlives the iterations in between."""
        finder = _Rebinding(name, store)
        loop.body.visit(finder)
        return any(self._in_every_iteration_of(reset, loop, store) for reset in finder.resets)

    def _in_every_iteration_of(self, reset: cst.CSTNode, loop: cst.CSTNode, store: cst.CSTNode) -> bool:
        """Whether ``reset`` runs in every iteration of ``loop`` that runs ``store``: each
        block around it in the loop (a branch, a nested loop, an ``except``; not the body of
        a ``with`` or ``try``, or a ``finally``) also holds the store."""
        store_blocks = {id(a) for a in self.semantic.ancestors(store)}
        for ancestor in self.semantic.ancestors(reset):
            if ancestor is loop.body:
                return True
            if isinstance(ancestor, cst.BaseSuite) and not isinstance(self.semantic.parent(ancestor), (cst.With, cst.Try, cst.Finally)):
                if id(ancestor) not in store_blocks:
                    return False
        return True

    def _kept_for_later(self, holder: cst.Name, store: cst.Assign) -> bool:
        """``best_loss = loss`` in a branch of a loop's body, the name read outside that
        branch (in a later iteration's comparison, or after the loop): the value is kept past
        its iteration. (A name assigned in every iteration lives for one.)"""
        loop = self._iteration_loop(store)
        if loop is None:
            return False
        branch = None
        for ancestor in self.semantic.ancestors(store):
            if ancestor is loop:
                return False
            if isinstance(ancestor, cst.BaseSuite) and isinstance(self.semantic.parent(ancestor), (cst.If, cst.Else)):
                branch = ancestor
                break
        if branch is None:
            return False
        return any(not any(a is branch for a in self.semantic.ancestors(read)) for read in self.semantic.binding_reads(holder) or ())

    def _backpropagated(self, holder: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        """Whether a backward pass in the same function runs on the holder (directly or
        through a name computed from it)."""
        name = re.escape(code(holder.value if isinstance(holder, cst.Subscript) else holder))
        pattern = re.compile(rf"(?<![\w.]){name}\b")
        for call, loss in self._backward_calls_under(scope):
            texts = [code(loss)] + [code(v) for v in self.semantic.values(loss)] if isinstance(loss, cst.Name) else [code(loss)]
            if any(pattern.search(text) for text in texts):
                return True
        return False

    def _backward_calls_under(self, scope: cst.CSTNode) -> list[tuple[cst.Call, cst.BaseExpression]]:
        """The backward passes inside ``scope`` (a function, or the module: all of them),
        indexed once per file by every function around them."""
        backward_calls = self.semantic.training.backward_calls
        if scope is self.context.module:
            return list(backward_calls.items())
        if self._backward_by_function is None:
            self._backward_by_function = defaultdict(list)
            for call, loss in backward_calls.items():
                for ancestor in self.semantic.ancestors(call):
                    self._backward_by_function[ancestor].append((call, loss))
        return self._backward_by_function.get(scope, [])

    def _scope_code(self, scope: cst.CSTNode) -> str:
        """``scope``'s source, rendered once per scope and file."""
        if scope not in self._scope_codes:
            self._scope_codes[scope] = self.context.module.code_for_node(scope)
        return self._scope_codes[scope]

    def _used_as_tensor(self, holder: cst.BaseExpression, scope: cst.CSTNode) -> bool:
        holder = holder.value if isinstance(holder, cst.Subscript) else holder
        name = re.escape(code(holder))
        text = self._scope_code(self._holder_scope(holder, scope))
        return bool(
            re.search(rf"{TENSOR_FUNCTIONS}\(\s*{name}\b", text)
            or re.search(rf"(?<![\w.]){name}(\[[^\]]*\])?\.({TENSOR_METHODS})\(", text)
            or re.search(rf"\b(sum|max|min)\(\s*{name}\s*\)\.({TENSOR_METHODS})\(", text)
            or re.search(rf"\(\s*{name}\s*[-+*/][^\n]*?\)\.({TENSOR_METHODS})\(", text)
        )

    def _holder_scope(self, holder: cst.BaseExpression, scope: cst.CSTNode) -> cst.CSTNode:
        # A `self.` attribute is used anywhere in its class.
        if isinstance(holder, cst.Attribute):
            info = self.semantic.enclosing_class(holder)
            if info is not None:
                return info.node
        return scope


class _Rebinding(cst.CSTVisitor):
    """Finds ``name = <fresh value>`` (not ``name = name + x``) other than the store itself."""

    def __init__(self, name: str, store: cst.CSTNode) -> None:
        super().__init__()
        self.name = name
        self.store = store
        self.resets: list[cst.Assign] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        if node is self.store or re.search(rf"(?<![\w.]){re.escape(self.name)}\b", code(node.value)):
            return
        for target in node.targets:
            if isinstance(target.target, cst.Name) and target.target.value == self.name:
                self.resets.append(node)
            elif isinstance(target.target, (cst.Tuple, cst.List)) and any(
                isinstance(e.value, cst.Name) and e.value.value == self.name for e in target.target.elements
            ):
                self.resets.append(node)


class _Derivations(cst.CSTVisitor):
    """In one function (not the functions nested in it): each name a value flows into, with
    the value (``out = expr``, ``total += expr``, ``parts.append(expr)``, ``d[k] = expr``),
    and what the function returns or yields."""

    def __init__(self, training) -> None:
        super().__init__()
        self.training = training
        self.flows: list[tuple[str, cst.BaseExpression]] = []
        self.returned: list[cst.BaseExpression] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        return False

    def _flow(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._flow(element.value, value)
            return
        base = _base_name(target)
        if base is not None:
            self.flows.append((base, value))

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._flow(target.target, node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._flow(node.target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._flow(node.target, node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in CONTAINER_METHODS + ("update",) and node.args:
            for arg in node.args:
                self._flow(func.value, arg.value)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.returned.append(node.value)

    def visit_Yield(self, node: cst.Yield) -> None:
        if isinstance(node.value, cst.BaseExpression):
            self.returned.append(node.value)


def _carries(node: cst.CSTNode, names: set[str], training) -> bool:
    """Whether ``node`` holds the value of one of ``names`` with its graph: it reads the name
    other than under ``.item()``, ``.detach()``, ``float()`` and the like."""
    if isinstance(node, cst.Name):
        return node.value in names
    if isinstance(node, (cst.Call, cst.Attribute)) and training.detached(node):
        return False
    if isinstance(node, cst.Attribute):
        return _carries(node.value, names, training)  # not the attribute's own name
    if isinstance(node, cst.Arg):
        return _carries(node.value, names, training)  # not a keyword's name
    if isinstance(node, (cst.Lambda, cst.BaseString)):
        return False
    return any(_carries(child, names, training) for child in node.children)


def _concatenated_onto(value: cst.BaseExpression, holder: cst.Name) -> list[cst.BaseExpression] | None:
    """The other elements of ``torch.cat((holder, x, ...))`` (or ``torch.cat([...], dim)``):
    what a concatenation carried from one iteration to the next keeps; None for anything else."""
    if not (isinstance(value, cst.Call) and value.args and isinstance(value.func, cst.Attribute)
            and value.func.attr.value in ("cat", "concat", "concatenate") and isinstance(value.func.value, cst.Name)
            and value.func.value.value in ("torch", "th")):
        return None
    sequence = value.args[0].value
    if not isinstance(sequence, (cst.Tuple, cst.List)):
        return None
    elements = [e.value for e in sequence.elements]
    if not any(isinstance(e, cst.Name) and e.value == holder.value for e in elements):
        return None
    return [e for e in elements if not (isinstance(e, cst.Name) and e.value == holder.value)]


def _stored_names(value: cst.BaseExpression):
    """Names whose value the stored expression holds as is: ``loss`` in ``loss``,
    ``loss * x.size(0)``, ``loss.mean()``, ``[loss, acc]``, ``{"loss": loss}``; not in
    ``loss.item()`` or ``f(loss)``."""
    if isinstance(value, cst.Name):
        yield value
    elif isinstance(value, cst.BinaryOperation):
        yield from _stored_names(value.left)
        yield from _stored_names(value.right)
    elif isinstance(value, cst.UnaryOperation):
        yield from _stored_names(value.expression)
    elif isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in GRAPH_KEEPING:
        yield from _stored_names(value.func.value)
    elif isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            yield from _stored_names(element.value)
    elif isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement):
                yield from _stored_names(element.value)


def _stored_exprs(value: cst.BaseExpression):
    """What a store keeps as is: the value, or the elements of a list, tuple or dict it builds."""
    if isinstance(value, (cst.List, cst.Tuple)):
        for element in value.elements:
            yield from _stored_exprs(element.value)
    elif isinstance(value, cst.Dict):
        for element in value.elements:
            if isinstance(element, cst.DictElement):
                yield from _stored_exprs(element.value)
    else:
        yield value


def dotted_library(semantic, func: cst.BaseExpression) -> bool:
    """``torch.sigmoid`` or ``np.mean``: a library function, not a model."""
    return dotted(func) and (semantic.qualified_name(func) or "").startswith(("torch.", "numpy.", "builtins."))


def _is_stored_as_is(loss: cst.Name, value: cst.BaseExpression) -> bool:
    """Whether ``.item()`` can follow the name: it is not the receiver of a method there."""
    return not any(
        isinstance(node, cst.Attribute) and node.value is loss
        for node in _walk(value)
    )


def _walk(node: cst.CSTNode):
    yield node
    for child in node.children:
        yield from _walk(child)


def _root(holder: cst.BaseExpression) -> cst.BaseExpression:
    """What a holder's entries hang from: ``log`` in ``log["loss"]``."""
    while isinstance(holder, cst.Subscript):
        holder = holder.value
    return holder


def _level(holder: cst.BaseExpression, store: cst.CSTNode) -> int:
    """How deep the stored loss lies in the holder (``semantic.readers``): the holder of
    ``total += loss`` is the loss (0), of ``losses.append(loss)`` a list of them (1), of
    ``meter.update(loss, n)`` a running average (``METER``)."""
    if isinstance(store, cst.Call) and isinstance(store.func, cst.Attribute):
        return METER if store.func.attr.value == "update" else 1
    return 0


def _base_name(holder: cst.BaseExpression) -> str | None:
    while isinstance(holder, cst.Subscript):
        holder = holder.value
    return holder.value if isinstance(holder, cst.Name) else None


def _returns_of(function: cst.FunctionDef) -> list[cst.Return]:
    """The ``return`` statements of a function's own body (not of functions nested in it)."""
    found: list[cst.Return] = []

    def walk(node: cst.CSTNode) -> None:
        for child in node.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(child, cst.Return):
                found.append(child)
            walk(child)

    walk(function.body)
    return found


def _owner(holder: cst.BaseExpression) -> str | None:
    """The name a holder hangs from (``self`` for ``self.history``, ``self.logs["loss"]``)."""
    while isinstance(holder, (cst.Attribute, cst.Subscript)):
        holder = holder.value
    return holder.value if isinstance(holder, cst.Name) else None
