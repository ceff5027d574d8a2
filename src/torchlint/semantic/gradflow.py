"""Gradient flow: whether the output of a forward pass can reach a backward pass.

A forward pass is *inference* when its outputs provably never reach ``backward()``,
``torch.autograd.grad`` / ``torch.autograd.backward``, or a loss that is backpropagated (SPEC
section 5): the question the runtime verifier asks of the recorded graphs. This facet asks it
of the source, following the value the pass returns:

- through expressions (arithmetic, attributes, method calls on it, subscripts, conditional
  expressions, containers and comprehensions that hold it, calls that take it as an argument);
- through names: each read of the binding it is assigned to that the binding can reach (in
  straight-line order, through loops into the next iteration, not past a rebinding that runs
  on every path to the read), ``+=`` into a running total, ``for`` targets over it;
- through containers and objects: ``outs.append(out)`` makes ``outs`` hold it, an attribute
  assigned it (``self.saved = out``) is followed to every read of that attribute in the file;
- through calls: a same-file function given it as an argument is followed into its parameter;
- through ``return``: to every call of the function in the file; a call in another file of
  the project (the project index) whose result is used in a body that runs a backward pass,
  or in a function that returns a value, makes it unknown, as do a function with no caller
  in view and ``forward`` (``model(x)`` calls it);
- into objects a value is handed to (``meter.add(out)``), and the objects those are parts
  of (``for layer in self.lm.layers(): layer.condition(out)``); a part of a parameter's
  object is the caller's, unknown.

Values that carry no graph end the path: ``.item()``, ``.tolist()``, ``.detach()``,
``.argmax()``, comparisons, ``float(...)``, ``len(...)``, ``print(...)``, f-strings, shapes,
conditions. What cannot be followed (a ``yield``, a ``lambda``, a function passed around by
name or with no visible caller, a method's result with no call in the file, a path too long,
a forward pass whose output is thrown away: run for its hooks or its side effects)
makes the answer ``UNKNOWN``: the rules stay silent then, as they do where a backward pass is
reached (``REACHES``). ``NEVER`` is the proof the rules report on.
"""

from __future__ import annotations

import builtins
from collections import defaultdict
from functools import cached_property
from typing import TYPE_CHECKING, Iterator

import libcst as cst

from torchlint.text import is_cell_boundary

if TYPE_CHECKING:
    from torchlint.semantic import SemanticModel

REACHES, NEVER, UNKNOWN = "reaches", "never", "unknown"

_BACKWARD_METHODS = frozenset({"backward", "manual_backward"})  # `loss.backward()`, `accelerator.backward(loss)`
_BACKWARD_FUNCTIONS = frozenset({"torch.autograd.backward", "torch.autograd.grad"})
# Methods of a tensor whose result carries no graph.
_DETACHING_METHODS = frozenset(
    {"item", "tolist", "detach", "detach_", "numpy", "argmax", "argmin", "argsort", "size", "dim", "numel", "nelement",
     "eq", "ne", "lt", "le", "gt", "ge", "equal", "allclose", "isclose", "isnan", "isinf", "isfinite", "long", "int",
     "bool", "byte", "short", "char", "nonzero", "count_nonzero", "sign", "round", "floor", "ceil", "trunc",
     "element_size", "data_ptr", "stride", "is_contiguous", "get_device", "__len__", "__str__", "__repr__", "__format__"}
)
_DETACHING_ATTRIBUTES = frozenset({"shape", "ndim", "dtype", "device", "data", "requires_grad", "grad", "grad_fn", "is_cuda", "is_leaf", "layout"})
_DETACHING_FUNCTIONS = frozenset(
    {"torch.argmax", "torch.argmin", "torch.argsort", "torch.eq", "torch.ne", "torch.lt", "torch.le", "torch.gt",
     "torch.ge", "torch.equal", "torch.allclose", "torch.isclose", "torch.isnan", "torch.isinf", "torch.isfinite",
     "torch.numel", "torch.count_nonzero", "torch.nonzero", "torch.sign", "torch.round", "torch.floor", "torch.ceil",
     "torch.save", "torch.is_tensor", "numpy.array", "numpy.asarray", "numpy.mean", "numpy.sum"}
)
_DETACHING_BUILTINS = frozenset(
    {"print", "float", "int", "bool", "str", "repr", "len", "isinstance", "type", "round", "format", "id", "hash",
     "abs", "divmod", "hasattr", "callable", "issubclass"}
)
_BUILTINS = frozenset(dir(builtins))
# Builtins that give the elements of their arguments: ``for i, s in enumerate(sentences)``.
_ITERATING_BUILTINS = frozenset({"enumerate", "zip", "reversed", "iter", "list", "tuple", "sorted", "filter"})
_MAX_STEPS = 4000  # expressions followed for one forward pass before the answer is unknown


class GradientFlow:
    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._answers: dict[cst.Call, str] = {}
        self._entered: dict[cst.FunctionDef, set[cst.Call]] = {}  # (``_follow``'s, for the walk under way)
        self._start_functions: set[cst.FunctionDef] = set()
        self._escapes: dict[cst.Call, bool] = {}
        self._sites: dict[cst.FunctionDef, list[cst.Call] | None] = {}

    # --- the question --------------------------------------------------------------------

    def of(self, call: cst.Call) -> str:
        """``REACHES``, ``NEVER`` or ``UNKNOWN`` for the output of ``call`` (a forward pass)."""
        if call not in self._answers:
            if self._records_no_graph(call):
                self._answers[call], self._escapes[call] = NEVER, False
            else:
                self._answers[call], self._escapes[call] = self._follow(call)
        return self._answers[call]

    def _displayed(self, expression: cst.Expr) -> bool:
        """Whether a notebook cell ends with this expression statement: Jupyter displays its
        value (a module joined from cells, ``text.CELL_BOUNDARY`` between them)."""
        line = self.model.parent(expression)
        module = self.model.module
        if not isinstance(line, cst.SimpleStatementLine) or line.body[-1] is not expression or expression.semicolon is not cst.MaybeSentinel.DEFAULT:
            return False
        if self.model.parent(line) is not module:
            return False
        boundaries = self._boundaries
        if not boundaries:
            return False  # a script, not a notebook
        index = module.body.index(line)
        return index + 1 == len(module.body) or index + 1 in boundaries

    @cached_property
    def _boundaries(self) -> set[int]:
        return {i for i, statement in enumerate(self.model.module.body) if is_cell_boundary(statement)}

    def _records_no_graph(self, call: cst.Call) -> bool:
        """Inside ``with torch.no_grad():`` / ``inference_mode()``, or a function decorated
        with one: its output has no graph to reach anything with."""
        model = self.model
        for ancestor in model.ancestors(call):
            if isinstance(ancestor, cst.With) and any(model.grad_off_context(item.item) for item in ancestor.items):
                return True
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor.asynchronous is None and any(model.grad_off_context(d.decorator) for d in ancestor.decorators)
            if isinstance(ancestor, (cst.Lambda, cst.ClassDef)):
                return False
        return False

    def returned(self, call: cst.Call) -> bool:
        """Whether the output of ``call`` leaves its function through ``return`` (whatever
        its callers do with it): a decorator that turns gradients off there changes what they
        get."""
        self.of(call)
        return self._escapes[call]

    def _follow(self, start: cst.Call) -> tuple[str, bool]:
        statement = self.model.parent(start)
        if isinstance(statement, cst.Expr) and self._displayed(statement):
            return NEVER, False  # a notebook cell shows it: read, never differentiated
        if isinstance(statement, cst.Expr) or (
            isinstance(statement, cst.Assign) and all(isinstance(t.target, cst.Name) and t.target.value == "_" for t in statement.targets)
        ):
            # Run for what it does, not for what it gives: a warm-up, forward hooks that
            # compute a loss (style transfer), statistics that train mode updates.
            return UNKNOWN, False
        seen: set[cst.CSTNode] = set()
        stack: list[cst.CSTNode] = [start]
        answer, returned, steps = NEVER, False, 0
        # Functions of the file the value entered as an argument, with the calls it entered
        # through (``model(x, state)`` into ``forward``'s ``state``): what they return of it
        # goes back to those calls, not to their other callers (the pass's own function
        # excepted).
        self._entered = {}
        self._start_functions = set(a for a in self.model.ancestors(start) if isinstance(a, cst.FunctionDef))
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            steps += 1
            if steps > _MAX_STEPS:
                return UNKNOWN, True
            try:
                stack.extend(self._next(node))
            except _Reaches:
                return REACHES, returned
            except _Returned as escape:
                returned = True
                stack.extend(escape.sites)
            except _Unknown:
                answer = UNKNOWN
        return answer, returned

    # --- one step: where the value of ``node`` goes ----------------------------------------

    def _next(self, node: cst.CSTNode) -> list[cst.CSTNode]:
        model = self.model
        parent = model.parent(node)
        if parent is None:
            raise _Unknown
        if isinstance(parent, cst.Attribute):
            if parent.value is not node:
                return []
            grand = model.parent(parent)
            if isinstance(grand, cst.Call) and grand.func is parent:
                method = parent.attr.value
                if method in _BACKWARD_METHODS:
                    raise _Reaches
                return [] if method in _DETACHING_METHODS else [grand]
            if isinstance(grand, cst.AssignTarget) or parent.attr.value in _DETACHING_ATTRIBUTES:
                return []
            return [parent]
        if isinstance(parent, cst.Arg):
            call = model.parent(parent)
            if not isinstance(call, cst.Call):
                raise _Unknown
            return self._argument(call, parent)
        if isinstance(parent, cst.Call):
            return []  # an object that holds the value, called: a model run on other inputs
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation, cst.Await, cst.StarredElement)):
            return [parent]
        if isinstance(parent, cst.IfExp):
            return [] if parent.test is node else [parent]
        if isinstance(parent, cst.Subscript):
            return [parent] if parent.value is node else []
        if isinstance(parent, (cst.Index, cst.SubscriptElement, cst.Slice, cst.Comparison, cst.ComparisonTarget,
                               cst.FormattedStringExpression, cst.If, cst.While, cst.Assert, cst.Expr, cst.Del, cst.Raise)):
            return []  # an index, a truth value, a string, a condition, a value thrown away
        if isinstance(parent, cst.Element):
            return [model.parent(parent)]
        if isinstance(parent, cst.DictElement):
            return [model.parent(parent)] if parent.value is node else []
        if isinstance(parent, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return [parent] if parent.elt is node else []
        if isinstance(parent, cst.DictComp):
            return [parent] if parent.value is node else []
        if isinstance(parent, cst.CompFor):
            if parent.iter is not node:
                return []
            return list(self._target_reads(parent.target))
        if isinstance(parent, cst.For):
            return list(self._target_reads(parent.target)) if parent.iter is node else []
        if isinstance(parent, cst.WithItem):
            return list(self._target_reads(parent.asname.name)) if parent.asname is not None else []
        if isinstance(parent, cst.Assign):
            if parent.value is not node:
                return []
            return [read for target in parent.targets for read in self._target_reads(target.target)]
        if isinstance(parent, (cst.AnnAssign, cst.AugAssign)):
            return list(self._target_reads(parent.target)) if parent.value is node else []
        if isinstance(parent, cst.NamedExpr):
            return [parent, *self._target_reads(parent.target)] if parent.value is node else []
        if isinstance(parent, cst.Return):
            function = self.model.enclosing_function(parent)
            if function in self._entered and function not in self._start_functions:
                return list(self._entered[function])  # back to the calls that passed the value in
            raise _Returned(self._returns_to(parent))
        if isinstance(parent, (cst.AssignTarget, cst.Decorator)):
            return []
        raise _Unknown  # a yield, a lambda's body, a default value...

    def _argument(self, call: cst.Call, arg: cst.Arg) -> list[cst.CSTNode]:
        model = self.model
        func = call.func
        qname = model.qualified_name(func)
        if qname in _BACKWARD_FUNCTIONS or isinstance(func, cst.Attribute) and func.attr.value in _BACKWARD_METHODS:
            raise _Reaches
        if qname in _DETACHING_FUNCTIONS or isinstance(func, cst.Name) and func.value in _DETACHING_BUILTINS and func.value in _BUILTINS and qname in (None, f"builtins.{func.value}", func.value):
            return []
        if model.project_gives_no_graph(func):
            return []  # a helper of another file that ends it (`to_np(t)`: `t.detach().numpy()`)
        # What a call returns may hold its arguments (`criterion(out, y)`); a function of the
        # file gives back only what its `return`s give (followed from its parameter below).
        functions = self._same_file_functions(call)
        found: list[cst.CSTNode] = [] if functions else [call]
        # A method given the value may keep it (`outs.append(out)`, `buffer.push(out)`): its
        # receiver then holds it. A module, an optimizer, a loss... computes from it (`model.test(z)`).
        if isinstance(func, cst.Attribute) and model.kind(func.value) is None:
            receiver = func.value
            if isinstance(receiver, cst.Name) and receiver.value not in ("self", "cls") and self._holds_values(receiver):
                found += self._name_reads(receiver) + self._aliased_reads(receiver)
            elif isinstance(receiver, cst.Attribute) and not self._module_attribute(receiver):
                found += self._attribute_reads(receiver.attr.value)
        # A function of the file given the value: follow it into its parameter.
        for function in functions:
            param = _parameter_for(function, call, arg, method=isinstance(func, cst.Attribute))
            if param is None:
                raise _Unknown  # `*args`, `**kwargs`: where it goes is not seen
            reads = model.binding_reads(param)
            if reads is None:
                raise _Unknown
            self._entered.setdefault(function, set()).add(call)
            found += reads
        return found

    # --- names, attributes, returns ------------------------------------------------------

    def _target_reads(self, target: cst.BaseExpression) -> Iterator[cst.CSTNode]:
        """The reads of what an assignment target now holds."""
        if isinstance(target, cst.Name):
            yield from self._binding_reads(target)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                yield from self._target_reads(element.value)
        elif isinstance(target, cst.StarredElement):
            yield from self._target_reads(target.value)
        elif isinstance(target, cst.Attribute):
            yield from self._attribute_reads(target.attr.value)
        elif isinstance(target, cst.Subscript):
            root = target.value
            while isinstance(root, (cst.Subscript, cst.Attribute)):
                if isinstance(root, cst.Attribute):
                    yield from self._attribute_reads(root.attr.value)
                    return
                root = root.value
            if isinstance(root, cst.Name):
                yield from self._name_reads(root)
            else:
                raise _Unknown
        else:
            raise _Unknown

    def _binding_reads(self, target: cst.Name) -> list[cst.CSTNode]:
        """Each read of ``name`` that the binding made at ``target`` can reach: later in its
        scope, or earlier inside a loop around both (the next iteration), unless a rebinding
        that runs on every path to the read comes between. A ``+=`` of the name reached so is
        a binding that holds the value too."""
        model = self.model
        scope = model.scopes.get(target)
        if scope is None:
            raise _Unknown
        name = target.value
        bindings = [a.node for a in scope.assignments[name]]
        if not any(b is target for b in bindings):
            return self._name_reads(target)  # (a `global`'s binding, resolved elsewhere)
        killers = [b for b in bindings if b is not target and not isinstance(model.parent(b), cst.AugAssign)]
        start = model.start_key(target)
        # (a comprehension's element reads its target textually before it: its own loop)
        loops = [a for a in self._own_ancestors(target) if isinstance(a, (cst.For, cst.While, cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp))]
        # `h = rnn(x, h)`: the value is read before the binding is made (or next iteration).
        assigned = next((a.value for a in self._own_ancestors(target) if isinstance(a, (cst.Assign, cst.AnnAssign))), None)
        found: list[cst.CSTNode] = []
        for access in scope.accesses[name]:
            read = access.node
            position = model.start_key(read)
            if position > start and not (assigned is not None and model.inside(read, assigned)):
                if not any(start < model.start_key(k) < position and self._runs_before(k, read) and not self._reads_first(k, read) for k in killers):
                    found.append(read)
            else:
                loop = next((l for l in loops if model.inside(read, l)), None)
                if loop is not None and not any(
                    model.inside(k, loop) and model.start_key(k) < position and self._runs_before(k, read) for k in killers
                ):
                    found.append(read)
        # Reads in nested functions and comprehensions: LibCST gives them as references.
        # (Not a read in a scope that binds the name itself: LibCST links a function's read of
        # its own parameter to a module-level binding of the same name when the function
        # rebinds it, `h, state = rnn(x, state)` in a `forward(self, x, state)`.)
        found += [
            r.node for a in scope.assignments[name] if a.node is target for r in a.references
            if model.scopes.get(r.node) is not scope and not _binds_own(model.scopes.get(r.node), name)
        ]
        # A later `total += ...` of the name: the running total holds the value.
        for binding in bindings:
            parent = model.parent(binding)
            if isinstance(parent, cst.AugAssign) and binding is not target and self._total_reached(target, binding, killers, loops):
                found.append(binding)
        return found

    def _reads_first(self, rebinding: cst.Name, read: cst.CSTNode) -> bool:
        """Whether ``read`` is in the value the rebinding assigns (``out = [o * s for o in
        out]``): it runs before the name is bound again."""
        for ancestor in self._own_ancestors(rebinding):
            if isinstance(ancestor, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                return ancestor.value is not None and self.model.inside(read, ancestor.value)
            if isinstance(ancestor, cst.BaseStatement):
                return False
        return False

    def _total_reached(self, target: cst.Name, total: cst.Name, killers: list, loops: list) -> bool:
        """Whether the binding at ``target`` reaches the ``+=`` of ``total``: later, with no
        rebinding on every path between, or earlier in a loop around both."""
        model = self.model
        start, position = model.start_key(target), model.start_key(total)
        if position > start:
            return not any(start < model.start_key(k) < position and self._runs_before(k, total) for k in killers)
        return any(model.inside(total, loop) for loop in loops)

    def _runs_before(self, killer: cst.CSTNode, read: cst.CSTNode) -> bool:
        """Whether the rebinding at ``killer`` runs on every path that reaches ``read`` after
        it: its statement is in a block that holds ``read`` (or it is a loop or ``with``
        target and ``read`` is in its body)."""
        model = self.model
        statement = killer
        for statement in self._own_ancestors(killer):
            if isinstance(statement, cst.BaseStatement):
                break
        else:
            return False
        if isinstance(statement, (cst.For, cst.With)):
            return model.inside(read, statement.body)
        if isinstance(statement, cst.BaseCompoundStatement):
            return False  # (a walrus in a condition, an except's name...)
        block = model.parent(statement)
        return block is not None and model.inside(read, block) and not model.inside(read, statement)

    def _own_ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        for ancestor in self.model.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                return
            yield ancestor

    def _module_attribute(self, expr: cst.Attribute) -> bool:
        """An attribute chain on an imported module (``nn.functional`` in
        ``nn.functional.cross_entropy(out, y)``): a namespace of functions, holding nothing."""
        root = expr
        while isinstance(root, cst.Attribute):
            root = root.value
        return isinstance(root, cst.Name) and root.value not in ("self", "cls") and bool(self.model.assignments(root)) and all(
            isinstance(a.node, (cst.Import, cst.ImportFrom)) for a in self.model.assignments(root)
        )

    def _holds_values(self, name: cst.Name) -> bool:
        """A name bound to values (a list, a buffer, a metric), not an imported module, a
        class or a function: ``F.cross_entropy(out, y)`` keeps nothing in ``F``."""
        assignments = self.model.assignments(name)
        return bool(assignments) and not any(
            isinstance(a.node, (cst.Import, cst.ImportFrom, cst.FunctionDef, cst.ClassDef)) for a in assignments
        )

    def _name_reads(self, name: cst.Name) -> list[cst.CSTNode]:
        """Every read of every binding of ``name`` visible where it is read: an object that
        now holds the value (``outs`` after ``outs.append(out)``), wherever it is read."""
        found: list[cst.CSTNode] = []
        for assignment in self.model.assignments(name):
            found += [r.node for r in assignment.references]
        if not found:
            raise _Unknown
        return found

    def _aliased_reads(self, name: cst.Name, seen: frozenset = frozenset()) -> list[cst.CSTNode]:
        """The reads of the objects that ``name`` is a part of: ``layer`` bound by ``for layer
        in self.lm.layers`` or ``m = meters[0]`` is reached through ``self.lm`` and ``meters``
        too, so what ``layer.condition(x)`` keeps in it is read wherever they are. A part of
        a parameter's object (``for s in sentences: s.set_embedding(e)``) is the caller's:
        what it keeps is read where the caller reads it, which is not followed."""
        found: list[cst.CSTNode] = []
        for assignment in self.model.assignments(name):
            target = assignment.node
            if isinstance(target, cst.Param) and target.name.value not in ("self", "cls"):
                raise _Unknown
            parent = self.model.parent(target)
            if isinstance(parent, cst.For) and parent.target is target:
                source = parent.iter
            elif isinstance(parent, cst.Element) and isinstance(self.model.parent(self.model.parent(parent)), cst.For):
                source = self.model.parent(self.model.parent(parent)).iter  # `for i, s in enumerate(sentences)`
            elif isinstance(parent, cst.AssignTarget) and parent.target is target:
                source = self.model.parent(parent).value
            else:
                continue
            for root, attribute in self._containers(source):
                if root.value in ("self", "cls"):
                    if attribute is not None:
                        found += self._attribute_reads(attribute)
                elif root.value not in seen and root.value != name.value and self._holds_values(root):
                    found += self._name_reads(root) + self._aliased_reads(root, seen | {name.value})
        # Calling the object that holds it (`self.lang_model(text)` after its layers were
        # conditioned on the value) computes from it.
        calls = [self.model.parent(read) for read in found]
        return found + [c for c, read in zip(calls, found) if isinstance(c, cst.Call) and c.func is read]

    def _containers(self, source: cst.BaseExpression) -> Iterator[tuple[cst.Name, str | None]]:
        """The names an element or part of ``source`` comes from, each with the attribute read
        of it first (``self.lm.layers()``: ``self``, ``"lm"``; ``enumerate(xs)``: ``xs``)."""
        attribute = None
        while isinstance(source, (cst.Attribute, cst.Subscript, cst.Call)):
            if isinstance(source, cst.Call):
                if isinstance(source.func, cst.Name) and source.func.value in _ITERATING_BUILTINS:
                    for arg in source.args:
                        yield from self._containers(arg.value)
                    return
                if not isinstance(source.func, cst.Attribute):
                    return  # `Meter()`: a new object
                source = source.func
            if isinstance(source, cst.Attribute):
                attribute = source.attr.value
            source = source.value
        if isinstance(source, cst.Name):
            yield source, attribute

    def _attribute_reads(self, attr: str) -> list[cst.CSTNode]:
        """Every read of an attribute of that name in the file (``self.saved_log_probs``,
        ``policy.saved_log_probs``): an object's attribute may be read wherever it is."""
        return self._attributes[attr]

    @cached_property
    def _attributes(self) -> dict[str, list[cst.CSTNode]]:
        found: dict[str, list[cst.CSTNode]] = defaultdict(list)
        for node in self.model.order:
            if type(node) is cst.Attribute:
                found[node.attr.value].append(node)
        return found

    def _returns_to(self, statement: cst.Return) -> list[cst.CSTNode]:
        """The calls whose value a ``return`` gives, where every caller is seen."""
        function = self.model.enclosing_function(statement)
        if function is None or function.asynchronous is not None or any(
            isinstance(a, cst.Lambda) for a in self._own_ancestors(statement)
        ):
            raise _Unknown
        if _called_implicitly(self.model, function):
            raise _Unknown  # `model(x)` calls `forward`: its callers are everywhere
        sites = self.call_sites(function)
        if sites is None:
            raise _Unknown  # passed around by name: its callers are unknown
        elsewhere = self.model.project_callers_backprop(function)
        if elsewhere:
            raise _Unknown  # another file uses what it gives where a backward pass runs
        if not sites and elsewhere is None:
            raise _Unknown  # no caller seen: whoever calls it may differentiate what it gives
        return sites

    def call_sites(self, function: cst.FunctionDef) -> list[cst.Call] | None:
        """Every call of ``function`` in the file, or None where it is used other than by a
        call (passed around: its callers are unknown)."""
        if function not in self._sites:
            self._sites[function] = self._find_sites(function)
        return self._sites[function]

    def _find_sites(self, function: cst.FunctionDef) -> list[cst.Call] | None:
        model = self.model
        owner = model.parent(model.parent(function))
        if isinstance(owner, cst.ClassDef):
            references = self._attributes.get(function.name.value, [])
        else:
            scope = model.scopes.get(function)
            if scope is None:
                return None
            references = [r.node for a in scope.assignments[function.name.value] if a.node is function for r in a.references]
        sites = []
        for reference in references:
            call = model.parent(reference)
            if not (isinstance(call, cst.Call) and call.func is reference):
                return None
            if not model.inside(call, function):
                sites.append(call)
        return sites

    def _same_file_functions(self, call: cst.Call) -> list[cst.FunctionDef]:
        """The file's functions a call may run: ``helper(x)`` bound to a ``def``, or
        ``self.helper(x)`` of a method of the caller's class."""
        model = self.model
        func = call.func
        if isinstance(func, cst.Name):
            return [a.node for a in model.assignments(func) if isinstance(a.node, cst.FunctionDef)]
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            info = model.enclosing_class(call)
            if info is None:
                return []
            return [
                f for f in model.functions.get(func.attr.value, ())
                if model.parent(model.parent(f)) is info.node
            ]
        return []


def _binds_own(scope, name: str) -> bool:
    """Whether a function or comprehension scope binds ``name`` itself (its reads of it are
    its own)."""
    return scope is not None and name in scope.assignments and any(a.scope is scope for a in scope.assignments[name])


def _parameter_for(function: cst.FunctionDef, call: cst.Call, arg: cst.Arg, method: bool) -> cst.Param | None:
    """The parameter of ``function`` that ``arg`` of ``call`` binds; None where a star
    parameter or argument takes it."""
    if arg.star:
        return None
    params = function.params
    if arg.keyword is not None:
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            if param.name.value == arg.keyword.value:
                return param
        return None
    positional = [*params.posonly_params, *params.params]
    if method and positional and positional[0].name.value in ("self", "cls"):
        positional = positional[1:]
    index = [a for a in call.args if a.keyword is None].index(arg)
    if any(a.star for a in call.args[: call.args.index(arg)]):
        return None
    return positional[index] if index < len(positional) else None


class _Reaches(Exception):
    pass


class _Unknown(Exception):
    pass


def _called_implicitly(model: SemanticModel, function: cst.FunctionDef) -> bool:
    """A method Python or ``nn.Module`` calls without naming it: ``forward`` (``model(x)``)
    and special methods (``__call__``, ``__getitem__``)."""
    name = function.name.value
    return isinstance(model.parent(model.parent(function)), cst.ClassDef) and (
        name == "forward" or (name.startswith("__") and name.endswith("__"))
    )


class _Returned(Exception):
    def __init__(self, sites: list[cst.CSTNode]) -> None:
        super().__init__()
        self.sites = sites
