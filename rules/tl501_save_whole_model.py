from functools import cached_property
from typing import Iterator

import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic import MODULE_RETURNS_SELF, MODULE_WRAPPED_ATTRS, Kind, call_argument
from torchlint.semantic.model import MODULE_ONLY_USES
from torchlint.torch_rule import TorchRule


class SaveWholeModel(TorchRule):
    """
    ## What it does
    Finds `torch.save(model, path)` where `model` is an `nn.Module`: a module built from a
    `torch.nn` class or an `nn.Module` subclass, assigned so to an attribute
    (`self.model = Net()`), annotated as one, whose `.parameters()` feed an optimizer, or a
    `self.` attribute its class uses as only a module is used (`self.model.parameters()`, or
    `self.model.eval()` together with `self.model(x)`, `.to()` or `.state_dict()`). Also finds
    such a module held in a dict, list or tuple that is saved, inline or built in a variable
    first (`torch.save({"model": model, "epoch": e}, path)`, `torch.save([g, d], path)`; one
    built first is reported at its first save, the message naming the entry), and
    modules by structure: a copy or cast of a module (`deepcopy(model).half()`, `m.float()`,
    `m.module`, `a if c else b` of two modules, a helper of another file of the project that
    gives back its argument, `deepcopy(de_parallel(model))`), and a `self.` attribute set from an
    `__init__` parameter to which every construction of the class in the file passes a
    module (`self.model = model` with `Trainer(Net())`; the class used only so). Also finds
    an object pickled whole whose class (or a base in the same file) keeps such a module in
    a `self.` attribute: `torch.save(self, path)` in a trainer that holds `self.model`, or
    `torch.save(agent, path)` of an instance of one (not a class that pickles itself through
    `__getstate__` or `__reduce__`); and a checkpoint saved again after the function used one
    of its entries as only a module is used (`x["model"].parameters()`, stripping the
    optimizer from a checkpoint), the entry not replaced or removed in between.
    A save into an in-memory buffer (`io.BytesIO`) is not reported: saving and loading a
    module through one is a deep-copy idiom, and no file outlives the program. Nor is a
    round trip: a function that saves the module and loads the same path back whole with
    `torch.load(path, weights_only=False)` (used other than in `load_state_dict`), such as a
    test that the whole module pickles, means to save the object. (A load with the default
    `weights_only=True` refuses the pickle: that save is reported.)

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
    The fix saves `model.state_dict()` instead. It is safe when the file loads nothing that
    could be the saved module: the code that loads the file elsewhere must build the model and
    call `load_state_dict`, but loading a pickled module with the default `torch.load` of
    PyTorch 2.6 and later already fails, so that code needs changing anyway. When the same
    file calls `torch.load` and uses the result other than as an argument of
    `load_state_dict(...)` (for example `torch.load(path, weights_only=False)` then `.eval()`),
    there is no fix: changing the save without the load would break the program, and which
    load reads which file is not known. Nor is there one when another file of the project
    (any Python file or notebook under the project root, whether or not it imports this one)
    reads the part of a `torch.load` result that the save puts the module in as a module:
    calls it, reads an attribute that a mapping lacks (`ckpt["model"].eval()`,
    `.parameters()`), or passes it to a function other than `load_state_dict` (a name bound
    to the loaded value or entry counts as it). The part is matched by the dict key the
    module is saved under, or the loaded object itself for a bare module; which path each
    load reads is not compared. In a project with more files than torchlint reads for this
    (5000), those readers are unknown and the fix is unsafe. A dict bound to a name that is used again besides the
    save gets no fix either. The fix of a helper's parameter is unsafe: that its callers pass
    modules is known only of the callers torchlint sees (code outside the project, or beyond
    what the index reads, may call the helper with something else). The fixes of the shapes
    known by structure (a copy or cast of a module, an attribute given a module, a module in
    a list or tuple) are unsafe too: the code that reads the saved file or entry is mostly in
    other files, not all known, and may use it as a module (`ckpt["model"].float()`, a
    copy saved in half precision and loaded to run); where the same file reads what it loads
    as a module, there is no fix. Nor is there for an object that holds a module (its class
    would have to be changed to save the module's weights and rebuild it) or for a checkpoint
    saved again with a module entry (the function reads that entry as a module, and so may
    whatever loads the file). A finding without its fix, or whose fix the project made
    unsafe, says why in its help line (`no fix: tools/evaluate.py loads the whole model`).

    ## References
    - [Saving and loading models](https://pytorch.org/tutorials/beginner/saving_loading_models.html)
    - [`torch.load` and `weights_only`](https://pytorch.org/docs/stable/generated/torch.load.html)
    """

    code = "TL501"
    name = "save-whole-model"
    required_words = (("save",),)
    message = "`torch.save` of a whole `nn.Module`; save its `state_dict()` instead"
    dict_message = "`torch.save` of a dict holding a whole `nn.Module`; save its `state_dict()` instead"
    object_message = "`torch.save` of an object that holds a whole `nn.Module` (`.{attribute}`); save the module's `state_dict()` instead"
    sequence_message = "`torch.save` of a list or tuple holding a whole `nn.Module`; save its `state_dict()` instead"

    def __init__(self, context) -> None:
        super().__init__(context)
        self._entries_reported: set[cst.CSTNode] = set()  # entries of containers built first

    def visit_Call(self, node: cst.Call) -> None:
        if not self.semantic.is_call_to(node, "torch.save"):
            return
        obj = _argument(node, 0, "obj")
        if obj is None or self._is_in_memory_buffer(_argument(node, 1, "f")) or self._round_trip(node):
            return
        if self._is_module(obj):
            self._report(obj, self.message, fixable=True, key="")
            return
        if self._given_modules(obj) or self._derived_module(obj):
            self._report(obj, self.message, fixable=True, key="", safe=False)
            return
        holding = self._object_holding_module(obj)
        if holding is not None:
            self.report(obj, self.object_message.format(attribute=holding), help=_help(
                "no fix: the class would have to save the module's weights and build it again"))
            return
        if self._entry_used_as_module(node, obj):
            # Its readers expect the module there: no fix.
            self.report(obj, self.dict_message, help=_help("no fix: this function reads the entry as a module before saving it again"))
            return
        saved, fixable = self._saved_container(obj)
        # A container built in a variable first is reported at its first save, where the
        # module is pickled (the fix edits its entry where the container is built).
        at = obj if saved is not obj else None
        for value, key in _held_values(saved):
            message = self.dict_message if key is not None else self.sequence_message
            if self._is_module(value):
                # A list or tuple is a shape whose readers torchlint does not follow: unsafe.
                self._report(value, message, fixable, key, safe=key is not None, at=at)
            elif self._given_modules(value) or self._derived_module(value):
                self._report(value, message, fixable, key, safe=False, at=at)

    def _object_holding_module(self, expr: cst.BaseExpression) -> str | None:
        """``self`` in a method of a class of this file, or a name every value of which
        constructs one such class, where the class (or a base of it in this file) keeps a
        module in a ``self.`` attribute: the attribute's name. The pickle of the object holds
        the module. None for a class that pickles itself its own way (``__getstate__``,
        ``__reduce__``), or whose kind is known (an optimizer, a module: reported above)."""
        if not isinstance(expr, cst.Name):
            return None
        info = self._instance_class(expr)
        if info is None or self.semantic.class_kind(info) is not None:
            return None
        classes, seen = [info], set()
        while classes:
            current = classes.pop()
            if current.node in seen:
                continue
            seen.add(current.node)
            methods = [m for m in current.node.body.body if isinstance(m, cst.FunctionDef)]
            if any(m.name.value in _OWN_PICKLING for m in methods):
                return None
            for attribute in _self_attributes(methods):
                if self._is_module(attribute) or self._derived_module(attribute):
                    return attribute.attr.value
            classes.extend(self.semantic.local_bases(current))
        return None

    def _entry_used_as_module(self, save: cst.Call, obj: cst.BaseExpression) -> bool:
        """A name (one binding: a loaded checkpoint, a parameter) saved after its function
        used an entry of it as only a module is used (``x["model"].parameters()``, as a
        script that strips a checkpoint's optimizer does), the entry not replaced or removed
        between that use and the save."""
        if not isinstance(obj, cst.Name):
            return False
        assignments = self.semantic.assignments(obj)
        if len(assignments) != 1:
            return False
        scope = self.semantic.enclosing_function(save)
        saved_at = self.semantic.start_key(save)
        for call in self.semantic.calls_in(scope):
            func = call.func
            if not (isinstance(func, cst.Attribute) and func.attr.value in MODULE_ONLY_USES):
                continue
            entry = func.value
            if not (isinstance(entry, cst.Subscript) and isinstance(entry.value, cst.Name) and entry.value.value == obj.value):
                continue
            key = _subscript_key(entry)
            if key is None or self.semantic.start_key(call) > saved_at or self.semantic.assignments(entry.value) != assignments:
                continue
            if not _entry_changed(scope or self.context.module, obj.value, key, self.semantic.start_key(call), saved_at, self.semantic):
                return True
        return False

    def _instance_class(self, name: cst.Name):
        """The class of this file that ``name`` is an instance of: ``self`` (the first
        parameter of a plain method), or a name every value of which calls the class."""
        assignments = self.semantic.assignments(name)
        if len(assignments) == 1 and isinstance(assignments[0].node, cst.Param):
            param = assignments[0].node
            method = self.semantic.enclosing_function(param)
            if method is None or not method.params.params or method.params.params[0] is not param or method.decorators:
                return None
            info = self.semantic.enclosing_class(method)
            return info if info is not None and self.semantic.parent(self.semantic.parent(method)) is info.node else None
        values = self.semantic.values(name)
        if not values or len(values) != len(assignments):
            return None
        found = set()
        for value in values:
            if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Name)):
                return None
            bindings = self.semantic.assignments(value.func)
            if len(bindings) != 1 or not isinstance(bindings[0].node, cst.ClassDef):
                return None
            found.add(bindings[0].node)
        return self.semantic.classes.get(found.pop()) if len(found) == 1 else None

    def _is_module(self, expr: cst.BaseExpression) -> bool:
        if self.semantic.kind(expr) is Kind.MODULE:
            return True
        return isinstance(expr, cst.Attribute) and self.semantic.attribute_used_as_module(expr)

    def _given_modules(self, expr: cst.BaseExpression) -> bool:
        """A parameter of a checkpoint helper that every call passes a module to, in this
        file or in other files of the project (``save_checkpoint(model, path)``)."""
        return isinstance(expr, cst.Name) and self.semantic.param_given_modules(expr)

    def _derived_module(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """A module the semantic layer does not name as one but that is one by structure (a
        fact this rule keeps for itself): ``copy.deepcopy(m)``, ``m.half()``, ``m.float()``,
        ``m.to(...)``, ``m.module`` of a module, chains of those (``deepcopy(model).half()``),
        ``a if c else b`` of two, a name every binding of which is one, and a ``self.``
        attribute every value of which is one or is an ``__init__`` parameter to which every
        construction of the class in this file passes one."""
        if depth > 6:
            return False
        if self._is_module(expr) or self._given_modules(expr):
            return depth > 0
        if isinstance(expr, cst.Call):
            func = expr.func
            if self.semantic.qualified_name(func) in ("copy.deepcopy", "copy.copy") and expr.args and expr.args[0].keyword is None and not expr.args[0].star:
                return self._derived_module(expr.args[0].value, depth + 1) or self._is_module(expr.args[0].value)
            if isinstance(func, cst.Attribute) and func.attr.value in MODULE_RETURNS_SELF:
                return self._derived_module(func.value, depth + 1) or self._is_module(func.value)
            position = self.semantic.project_returns_argument(func)  # de_parallel(model), in another file
            given = call_argument(expr, position, "") if position is not None and not any(a.star for a in expr.args) else None
            return given is not None and (self._is_module(given) or self._derived_module(given, depth + 1))
        if isinstance(expr, cst.IfExp):  # net.module if wrapped else net
            return all(self._is_module(e) or self._derived_module(e, depth + 1) for e in (expr.body, expr.orelse))
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in MODULE_WRAPPED_ATTRS and (self._derived_module(expr.value, depth + 1) or self._is_module(expr.value)):
                return True
            return self._attribute_holds_module(expr, depth)
        if isinstance(expr, cst.Name):
            assignments = self.semantic.assignments(expr)
            values = self.semantic.values(expr)
            return bool(values) and all(a.node in self.semantic.bound_values for a in assignments) and all(
                self._is_module(v) or self._derived_module(v, depth + 1) for v in values
            )
        return False

    def _attribute_holds_module(self, expr: cst.Attribute, depth: int) -> bool:
        """``self.<attr>`` every value of which (in its class) is a module, or an unannotated
        parameter of the class's ``__init__`` to which every construction of the class in this
        file passes a module (``Trainer(Net())``); the class used nowhere but in those calls."""
        info = self.semantic.enclosing_class(expr)
        if info is None or not isinstance(expr.value, cst.Name):
            return False
        method = self.semantic.enclosing_function(expr)
        if method is None or not method.params.params or method.params.params[0].name.value != expr.value.value:
            return False
        values = info.attribute_values.get(expr.attr.value, ())
        return bool(values) and all(
            self._is_module(v) or self._derived_module(v, depth + 1) or self._constructed_with_modules(info.node, v)
            for v in values
        )

    def _constructed_with_modules(self, cls: cst.ClassDef, value: cst.BaseExpression) -> bool:
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in MODULE_RETURNS_SELF:
            value = value.func.value  # self.model = model.to(device)
        if not isinstance(value, cst.Name):
            return False
        assignments = self.semantic.assignments(value)
        if len(assignments) != 1 or not isinstance(assignments[0].node, cst.Param) or assignments[0].node in self.semantic.annotations:
            return False
        param = assignments[0].node
        init = self.semantic.enclosing_function(param)
        if init is None or init.name.value != "__init__" or self.semantic.enclosing_class(init) is not self.semantic.classes.get(cls):
            return False
        params = list(init.params.params)
        if param not in params or params.index(param) == 0:
            return False
        position = params.index(param) - 1  # after self
        calls = 0
        for binding in self.semantic.assignments_of_function(cls):
            for access in binding.references:
                call = self.semantic.parent(access.node)
                if not (isinstance(call, cst.Call) and call.func is access.node):
                    return False  # subclassed or passed around: its constructions are unknown
                argument = call_argument(call, position, param.name.value)
                if argument is None or not (self._is_module(argument) or self._derived_module(argument, 1)):
                    return False
                calls += 1
        return calls > 0

    def _saved_container(self, obj: cst.BaseExpression) -> tuple[cst.BaseExpression | None, bool]:
        """The dict, list or tuple literal saved, and whether a fix may edit it: an inline
        one, or one bound to a name read nowhere but in this save."""
        if isinstance(obj, _CONTAINERS):
            return obj, True
        if isinstance(obj, cst.Name):
            values = self.semantic.values(obj)
            if len(values) == 1 and isinstance(values[0], _CONTAINERS):
                assignments = self.semantic.assignments(obj)
                return values[0], len(assignments) == 1 and len(assignments[0].references) == 1
        return None, False

    def _report(
        self, value: cst.BaseExpression, message: str, fixable: bool, key: str | None, safe: bool = True, at: cst.CSTNode | None = None
    ) -> None:
        if at is not None:
            if value in self._entries_reported:
                return  # saved again: one finding, at the first save
            self._entries_reported.add(value)
        reader = self._project_reads_as_module(key) if fixable else False
        if at is not None:
            entry = self.context.module.code_for_node(value)
            message = f"{message} (`{entry if len(entry) <= 40 else entry[:37] + '...'}`)"
        # (Each finding without its fix says why in its help line, and so does an unsafe fix
        # that the project made unsafe.)
        if not fixable:
            self.report(at or value, message, help=_help("no fix: the saved container is used again besides this save"))
            return
        if self._loads_may_read_a_module:
            self.report(at or value, message, help=_help("no fix: this file uses what `torch.load` gives as more than a `state_dict`"))
            return
        if reader:
            read = (
                "loads the whole model" if key == ""
                else f"uses the `{key}` entry of a loaded checkpoint as a module" if key not in (None, "*")
                else "uses an entry of a loaded checkpoint as a module"
            )
            self.report(at or value, message, help=_help(f"no fix: {reader} {read}"))
            return
        note = None
        if reader is None:
            safe = False  # the project's loaders are not all known
            note = _help("unsafe: which files of the project load it is not known")
        wrapped = value
        if not isinstance(value, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
            wrapped = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        state_dict = cst.Call(func=cst.Attribute(value=wrapped, attr=cst.Name("state_dict")))
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        self.report(at or value, message, fix=Fix(_SAVE_STATE_DICT, {value: state_dict}, applicability), help=note)

    def _project_reads_as_module(self, key: str | None) -> str | bool | None:
        """A file of the project (its path in the project) that reads, as a module, the part
        of a ``torch.load`` result that the save puts the module in: ``key`` "" the saved
        object, a dict key ("*": one not spelled as a string), None a place in a list or
        tuple. False: none does; None: unknown (a project too large to read)."""
        loads = self.semantic.project_module_loads()
        if loads is None:
            return None
        if key == "":
            return loads.get("", False)
        if key is None or key == "*":
            return next((reader for read, reader in sorted(loads.items()) if read != ""), False)
        return loads.get(key) or loads.get("*") or False

    @cached_property
    def _loads_may_read_a_module(self) -> bool:
        """Whether the file calls ``torch.load`` on a file and uses the result other than as an
        argument of ``load_state_dict(...)``: it may load the module saved here."""
        for load in self._loads_in(None):
            if self._is_in_memory_buffer(_argument(load, 0, "f")):
                continue
            if not all(self._inside_load_state_dict(use) for use in self.semantic.reads_of(load)):
                return True
        return False

    def _round_trip(self, save: cst.Call) -> bool:
        """The function that saves also loads the same path back whole."""
        path = _argument(save, 1, "f")
        function = self.semantic.enclosing_function(save)
        if path is None or function is None:
            return False
        code = self.context.module.code_for_node(path)
        return any(
            (loaded := _argument(load, 0, "f")) is not None
            and self.context.module.code_for_node(loaded) == code
            and _weights_only_false(load)
            and not all(self._inside_load_state_dict(use) for use in self.semantic.reads_of(load))
            for load in self._loads_in(function)
        )

    def _loads_in(self, node: cst.CSTNode | None) -> list[cst.Call]:
        """The ``torch.load(...)`` calls in ``node`` (None: the module)."""
        return [c for c in self.semantic.calls_in(node) if self.semantic.is_call_to(c, "torch.load")]

    def _inside_load_state_dict(self, node: cst.CSTNode) -> bool:
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, cst.Arg):
                call = self.semantic.parent(ancestor)
                return isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "load_state_dict"
            if isinstance(ancestor, cst.BaseStatement):
                return False
        return False

    def _is_in_memory_buffer(self, expr: cst.BaseExpression | None) -> bool:
        """``io.BytesIO()``, or a name bound to one (by assignment or ``with ... as``)."""
        if expr is None:
            return False
        if self.semantic.is_call_to(expr, "io.BytesIO"):
            return True
        if not isinstance(expr, cst.Name):
            return False
        if any(self.semantic.is_call_to(v, "io.BytesIO") for v in self.semantic.values(expr)):
            return True
        for assignment in self.semantic.assignments(expr):
            as_name = self.semantic.parent(assignment.node)
            item = self.semantic.parent(as_name) if isinstance(as_name, cst.AsName) else None
            if isinstance(item, cst.WithItem) and self.semantic.is_call_to(item.item, "io.BytesIO"):
                return True
        return False


def _argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional[: position + 1]):
        return None
    return positional[position].value if len(positional) > position else None


def _weights_only_false(load: cst.Call) -> bool:
    value = _argument(load, 99, "weights_only")
    return isinstance(value, cst.Name) and value.value == "False"


_CONTAINERS = (cst.Dict, cst.List, cst.Tuple)
_SAVE_STATE_DICT = "Save `state_dict()` instead"


def _help(why: str) -> str:
    """The help line of a finding whose fix is withheld or unsafe: the advice, and why."""
    return f"{_SAVE_STATE_DICT} ({why})"
# Methods through which a class pickles itself its own way (what it saves is not known).
_OWN_PICKLING = frozenset({"__getstate__", "__reduce__", "__reduce_ex__"})


def _subscript_key(entry: cst.Subscript) -> str | None:
    """The string key of ``x["model"]``."""
    if len(entry.slice) != 1 or not isinstance(entry.slice[0].slice, cst.Index):
        return None
    key = entry.slice[0].slice.value
    value = key.evaluated_value if isinstance(key, cst.SimpleString) else None
    return value if isinstance(value, str) else None


def _entry_changed(scope: cst.CSTNode, name: str, key: str, start: float, end: float, semantic) -> bool:
    """Whether, between ``start`` and ``end``, the scope stores into or deletes ``name[key]``
    (or any entry of ``name`` by a key not spelled as a string), or calls a method of
    ``name`` that may (``pop``, ``update``, ``clear``, ``setdefault``, ``popitem``)."""
    changed = False

    class Changes(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return node is scope

        def _entry(self, target: cst.BaseExpression, at: cst.CSTNode) -> None:
            nonlocal changed
            if isinstance(target, (cst.Tuple, cst.List)):
                for element in target.elements:
                    self._entry(element.value, at)
            elif (
                isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value == name
                and _subscript_key(target) in (key, None) and start < semantic.start_key(at) < end
            ):
                changed = True

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                self._entry(target.target, node)

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            self._entry(node.target, node)

        def visit_Del(self, node: cst.Del) -> None:
            self._entry(node.target, node)

        def visit_Call(self, node: cst.Call) -> None:
            nonlocal changed
            func = node.func
            if (
                isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name
                and func.attr.value in ("pop", "update", "clear", "setdefault", "popitem") and start < semantic.start_key(node) < end
            ):
                changed = True

    scope.visit(Changes())
    return changed


def _self_attributes(methods: list[cst.FunctionDef]) -> Iterator[cst.Attribute]:
    """The ``self.<attr>`` expressions assigned in the methods (``self`` their first parameter)."""
    for method in methods:
        if not method.params.params:
            continue
        owner = method.params.params[0].name.value
        for statement in _statements(method.body):
            targets = []
            if isinstance(statement, cst.Assign):
                targets = [t.target for t in statement.targets]
            elif isinstance(statement, cst.AnnAssign):
                targets = [statement.target]
            for target in targets:
                if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name) and target.value.value == owner:
                    yield target


def _statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The small statements of a function body, nested blocks included (not nested functions
    or classes)."""
    for child in node.children:
        if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        if isinstance(child, cst.BaseSmallStatement):
            yield child
        elif isinstance(child, (cst.BaseStatement, cst.BaseSuite, cst.SimpleStatementLine, cst.Else, cst.ExceptHandler, cst.Finally)):
            yield from _statements(child)


def _held_values(
    saved: cst.BaseExpression | None, key: str | None = "", top: bool = True
) -> Iterator[tuple[cst.BaseExpression, str | None]]:
    """The values a saved dict, list or tuple literal holds, nested ones included, each with
    the key of the saved dict it lies under ("*": a key not spelled as a string), or None
    when a list or tuple holds it (at any depth)."""
    if isinstance(saved, cst.Dict):
        entries = []
        for element in saved.elements:
            if isinstance(element, cst.DictElement):
                name = element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else "*"
                name = name if isinstance(name, str) else "*"
                entries.append((element.value, name if top else key))
            # (a `**other` entry holds nothing this save spells)
    elif isinstance(saved, (cst.List, cst.Tuple)):
        entries = [(e.value, None) for e in saved.elements if isinstance(e, cst.Element)]
    else:
        return
    for value, held_under in entries:
        if key is None:
            held_under = None  # inside a list or tuple
        if isinstance(value, _CONTAINERS):
            yield from _held_values(value, held_under, top=False)
        else:
            yield value, held_under

