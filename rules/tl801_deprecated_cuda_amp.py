from functools import cached_property

import libcst as cst

from torchlint.rule import Applicability, Fix
from torchlint.semantic import torch_api
from torchlint.semantic.execution_order import with_import_first
from torchlint.torch_rule import TorchRule
from torchlint.semantic.migration import drop_aliases, from_import

# The deprecated callables, by qualified name, and their replacement in `torch.amp`.
DEPRECATED = {
    "torch.cuda.amp.autocast": "autocast",
    "torch.cuda.amp.autocast_mode.autocast": "autocast",
    "torch.cuda.amp.GradScaler": "GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler": "GradScaler",
    "torch.cuda.amp.custom_fwd": "custom_fwd",
    "torch.cuda.amp.autocast_mode.custom_fwd": "custom_fwd",
    "torch.cuda.amp.custom_bwd": "custom_bwd",
    "torch.cuda.amp.autocast_mode.custom_bwd": "custom_bwd",
}
# The torch version that first has each replacement (the API data: semantic/torch_api.py):
# `torch.amp.autocast` 2.0, `GradScaler` 2.3, `custom_fwd` / `custom_bwd` 2.4.
ADDED_IN = {name: torch_api.BY_NAME[f"torch.cuda.amp.{name}"].since for name in set(DEPRECATED.values())}
# The parameters of the deprecated signatures, in order.
OLD_PARAMETERS = {
    "autocast": ("enabled", "dtype", "cache_enabled"),
    "GradScaler": ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
    "custom_fwd": ("fwd",),
    "custom_bwd": ("bwd",),
}
# The keyword-only parameters of the deprecated signatures.
OLD_KEYWORD_ONLY = {"custom_fwd": ("cast_inputs",)}

_SPACE = cst.SimpleWhitespace(" ")
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


class DeprecatedCudaAmp(TorchRule):
    """
    ## What it does
    Finds `torch.cuda.amp.autocast(...)`, `torch.cuda.amp.GradScaler(...)` and the
    `torch.cuda.amp.custom_fwd` / `custom_bwd` decorators, however imported, called as
    functions, context managers or decorators. Replaces TorchFix's TOR101 and TOR103 for
    `torch.cuda.amp` (its other deprecated functions are TL804's).

    ## Why is this bad?
    They are deprecated since PyTorch 2.4 and warn at every use; the device-generic
    `torch.amp.autocast("cuda", ...)`, `torch.amp.GradScaler("cuda", ...)` and
    `torch.amp.custom_fwd(device_type="cuda")` replace them.

    ## Example
    ```python
    scaler = torch.cuda.amp.GradScaler()
    with torch.cuda.amp.autocast(enabled=use_amp):
        loss = model(x)
    ```

    ## Use instead
    ```python
    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda", enabled=use_amp):
        loss = model(x)
    ```

    ## Fix safety
    The new calls are what the deprecated ones forward to, but `torch.amp.GradScaler` came
    with torch 2.3 and `torch.amp.custom_fwd(device_type=...)` with 2.4: on an older torch
    the fixed code fails with an `AttributeError` or a `TypeError`, and the fix cannot know
    which versions a project supports unless the project says so. So each fix is safe only
    where the oldest torch the project supports (its declared requirement, or `target-torch`)
    has the replacement: 2.0 for `autocast`, 2.3 for `GradScaler`, 2.4 for `custom_fwd` and
    `custom_bwd`; elsewhere, an undeclared torch included, it is unsafe (`--unsafe-fixes`). Every argument keeps its parameter:
    `torch.cuda.amp.autocast(flag)` becomes `torch.amp.autocast("cuda", enabled=flag)` (the
    new signature puts `dtype` second), and `GradScaler`'s positional arguments keep their
    order after the device. A call with `*args` or `**kwargs`, or with an argument the old
    signature does not take, gets no fix, nor does a file that does not `import torch` (the
    fix writes `torch.amp`); where that import runs only after a rewritten use (a notebook
    cell before the one that imports torch), the fix adds the file's own `import torch` at
    the start of that use's cell, after the cell's own imports, unless a function there
    binds `torch` itself (then there is no fix). The fix leaves no import unused: once every
    use of a name of `from torch.cuda.amp import ...`, or of the module bound by `import
    torch.cuda.amp as amp`, is rewritten, that name (or the whole import) goes with them;
    one still read otherwise stays.

    `torch.amp.GradScaler("cuda")` is not an instance of `torch.cuda.amp.GradScaler` (the old
    class is a subclass of the new one): code that tests a scaler with
    `isinstance(scaler, torch.cuda.amp.GradScaler)` would stop recognising it, and loss
    scaling could silently stop. The fix of a `GradScaler` call therefore also rewrites each
    `isinstance` or `issubclass` test of the file whose class (or one of a tuple of classes)
    is the deprecated one, to `torch.amp.GradScaler`, which both the old and the new scalers
    are instances of. Any other reference to the old class in the file (`type(s) is
    GradScaler`, `cls = torch.cuda.amp.GradScaler`; annotations aside) is left as it is, and
    the fix is then unsafe and its message names that reference. (Tests in other files of
    the project are not seen.)

    A project that pins or caps torch below 2.4 (`torch==1.13.1`, `torch<2.4` in every
    requirement it declares) never sees the deprecation, and is not told about it.

    A name bound in both branches of `try: ... except ImportError:`, calls under a
    torch-version check, and a fallback beside its replacement (the other branch of a
    conditional expression, or the `except` of a `try` that calls `torch.amp`) are left
    alone: they exist to support older versions.

    ## References
    - [Automatic mixed precision](https://pytorch.org/docs/stable/amp.html)
    """

    code = "TL801"
    name = "deprecated-cuda-amp"
    required_words = (("amp",), ("autocast", "GradScaler", "custom_fwd", "custom_bwd"))
    message = "`torch.cuda.amp.{name}` is deprecated; use `torch.amp.{name}({device}...)`"

    def visit_Call(self, node: cst.Call) -> None:
        name = self._deprecated(node.func)
        if name is None:
            return
        self.report(node, self._message(name), fix=self._fix(node.func))

    def visit_Decorator(self, node: cst.Decorator) -> None:
        # `@torch.cuda.amp.custom_fwd` uncalled: `@torch.amp.custom_fwd(device_type="cuda")`.
        if not isinstance(node.decorator, (cst.Name, cst.Attribute)):
            return
        name = self._deprecated(node.decorator)
        if name not in ("custom_fwd", "custom_bwd"):
            return
        self.report(node.decorator, self._message(name), fix=self._fix(node.decorator))

    def _fix(self, used: cst.BaseExpression) -> Fix | None:
        """The fix of one use (a call's function, or a decorator); when it reads a name of a
        ``from torch.cuda.amp import ...`` (or the module of ``import torch.cuda.amp as amp``)
        and every use of that name can be rewritten, the
        fix rewrites them all and removes the name from the import, which nothing would
        use any more."""
        rewrite = self._rewrite(used)
        if rewrite is None:
            return None
        names, changes, written = {rewrite[0]}, dict([rewrite[1:]]), [rewrite[1]]
        # `from torch.cuda.amp import GradScaler`: the name is the use; `import torch.cuda.amp
        # as amp`: the name is the use's root, `amp.GradScaler`.
        module = isinstance(used, cst.Attribute) and isinstance(used.value, cst.Name)
        root = used.value if module else used
        imported = from_import(self.semantic, root)
        if imported is not None:
            uses = [self.semantic.parent(use) if module else use for use in imported.uses if use is not root]
            others = [self._rewrite(use) if isinstance(use, (cst.Name, cst.Attribute)) else None for use in uses]
            if all(r is not None for r in others):
                for other in others:
                    names.add(other[0])
                    changes[other[1]] = other[2]
                    written.append(other[1])
                changes.update(drop_aliases(self.semantic, imported.statement, [imported.alias]))
        untested = []  # references to the old class that the fix leaves (a class test it cannot rewrite)
        if "GradScaler" in names:
            for reference in self._scaler_class_references:
                test = self._rewrite_class_test(reference)
                if test is not None:
                    changes[test[0]] = test[1]
                    written.append(test[0])
                elif reference not in changes:
                    untested.append(reference)
        # `torch` must exist where each rewritten use runs (a notebook's cell before the one
        # that imports torch: the import is added there).
        changes = with_import_first(self.semantic, changes, self.semantic.torch_alias, written)
        if changes is None:
            return None
        needed = max(names, key=lambda n: torch_api.version(ADDED_IN[n]))
        shown = " and ".join(f"`torch.amp.{n}`" for n in sorted(names))
        if untested:
            where = self.context.module.code_for_node(self._expression_around(untested[0]))
            where = where if len(where) <= 60 else where[:57] + "..."
            message = f"Use {shown}; `{where}` still refers to `torch.cuda.amp.GradScaler`, which the new scaler is not an instance of"
            return Fix(message, changes, Applicability.UNSAFE)
        if torch_api.available(ADDED_IN[needed], self.semantic.oldest_torch):
            return Fix(f"Use {shown}", changes)
        return Fix(f"Use {shown} (torch {ADDED_IN[needed]} or later)", changes, Applicability.UNSAFE)

    @cached_property
    def _scaler_class_references(self) -> list[cst.BaseExpression]:
        """The references to the deprecated ``GradScaler`` class in the file other than the
        calls that build one, its imports and annotations: class tests and the like."""
        found = []
        rule = self

        class References(cst.CSTVisitor):
            def visit_Import(self, node: cst.Import) -> bool:
                return False

            def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
                return False

            def visit_Annotation(self, node: cst.Annotation) -> bool:
                return False

            def visit_Name(self, node: cst.Name) -> None:
                self._reference(node)

            def visit_Attribute(self, node: cst.Attribute) -> bool:
                return not self._reference(node)

            def _reference(self, node: cst.Name | cst.Attribute) -> bool:
                qnames = rule.semantic.qualified_names(node)
                if not qnames or not all(DEPRECATED.get(q) == "GradScaler" for q in qnames):
                    return False
                parent = rule.semantic.parent(node)
                if not (isinstance(parent, cst.Call) and parent.func is node):
                    found.append(node)
                return True

        if "GradScaler" in self.context.module.code:
            self.context.module.visit(References())
        return found

    def _rewrite_class_test(self, reference: cst.BaseExpression) -> tuple[cst.CSTNode, cst.CSTNode] | None:
        """``torch.cuda.amp.GradScaler`` as the class of an ``isinstance`` or ``issubclass``
        test (or one of a tuple of classes there), with ``torch.amp.GradScaler``, which old
        and new scalers are both instances of; None for any other reference."""
        torch = self.semantic.torch_alias
        use = self._class_use(reference)
        if torch is None or not isinstance(use, cst.Call) or len(use.args) != 2 or any(a.star or a.keyword for a in use.args):
            return None
        if self.semantic.qualified_name(use.func) not in ("builtins.isinstance", "builtins.issubclass"):
            return None
        return reference, cst.parse_expression(f"{torch}.amp.GradScaler")

    def _expression_around(self, reference: cst.BaseExpression) -> cst.CSTNode:
        """The whole expression a reference is part of (``type(s) is C``), or its statement
        where it stands alone (``cls = C``): what a message shows of it."""
        found = reference
        for ancestor in self.semantic.ancestors(reference):
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSuite)):
                break
            if isinstance(ancestor, cst.BaseSmallStatement):
                return ancestor if found is reference else found
            if isinstance(ancestor, cst.BaseExpression):
                found = ancestor
        return found

    def _class_use(self, reference: cst.BaseExpression) -> cst.CSTNode:
        """What a class reference is used in: the call it is the second argument of
        (``isinstance(s, C)``, ``isinstance(s, (A, C))``), else its parent expression."""
        parent = self.semantic.parent(reference)
        if isinstance(parent, cst.Element) and isinstance(self.semantic.parent(parent), cst.Tuple):
            tuple_ = self.semantic.parent(parent)
            arg = self.semantic.parent(tuple_)
            if isinstance(arg, cst.Arg) and arg.value is tuple_:
                parent = arg
        if isinstance(parent, cst.Arg):
            call = self.semantic.parent(parent)
            if isinstance(call, cst.Call) and len(call.args) == 2 and call.args[1] is parent:
                return call
        return parent if isinstance(parent, cst.BaseExpression) else reference

    def _rewrite(self, used: cst.BaseExpression) -> tuple[str, cst.CSTNode, cst.CSTNode] | None:
        """(the API's name, the node to replace, its replacement) for a use of the deprecated
        API: the function of a call, or an uncalled decorator; None where it cannot be
        rewritten (another use of the name, arguments that do not map, no `import torch`)."""
        torch = self.semantic.torch_alias
        name = self._deprecated(used)
        parent = self.semantic.parent(used)
        if torch is None or name is None:
            return None
        if isinstance(parent, cst.Call) and parent.func is used:
            args = self._new_arguments(name, parent.args, parent.whitespace_before_args)
            if args is None:
                return None
            return name, parent, parent.with_changes(func=cst.parse_expression(f"{torch}.amp.{name}"), args=args)
        if isinstance(parent, cst.Decorator) and parent.decorator is used and name in ("custom_fwd", "custom_bwd"):
            return name, used, cst.parse_expression(f'{torch}.amp.{name}(device_type="cuda")')
        if name == "GradScaler":  # isinstance(s, GradScaler), rewritten with the calls
            test = self._rewrite_class_test(used)
            if test is not None:
                return (name, *test)
        return None

    def _message(self, name: str) -> str:
        return self.message.format(name=name, device='device_type="cuda", ' if name.startswith("custom_") else '"cuda", ')

    def _deprecated(self, func: cst.BaseExpression) -> str | None:
        qnames = self.semantic.qualified_names(func)
        # A name also bound to the new API (try/except ImportError) is compatibility code.
        if not qnames or not all(q in DEPRECATED for q in qnames) or self._compatibility_code(func):
            return None
        symbol = torch_api.BY_NAME.get(f"torch.cuda.amp.{DEPRECATED[qnames[0]]}")
        if symbol is not None and not torch_api.concerns(symbol.deprecated, self.semantic.newest_torch):
            return None  # the project pins or caps torch below the deprecation
        return DEPRECATED[qnames[0]]

    def _new_arguments(self, name: str, args: tuple[cst.Arg, ...], indent: cst.BaseParenthesizableWhitespace) -> list[cst.Arg] | None:
        """The arguments of the ``torch.amp`` call, each bound to the parameter it had; None
        when some argument cannot be mapped."""
        if any(a.star for a in args):
            return None
        positional = [a for a in args if a.keyword is None]
        keywords = [a for a in args if a.keyword is not None]
        allowed = OLD_PARAMETERS[name] + OLD_KEYWORD_ONLY.get(name, ())
        if len(positional) > len(OLD_PARAMETERS[name]) or any(a.keyword.value not in allowed for a in keywords):
            return None
        device = cst.SimpleString('"cuda"')
        # A first argument on its own line puts the device on a line of its own too.
        after = _SPACE
        if isinstance(indent, cst.ParenthesizedWhitespace):
            after = cst.ParenthesizedWhitespace(indent=indent.indent, last_line=indent.last_line)
        first = cst.Arg(device, comma=cst.Comma(whitespace_after=after))
        if name == "GradScaler":  # GradScaler(device="cuda", init_scale, ...): the same order after the device
            return _insert(list(args), 0, first)
        if name == "autocast":  # autocast(device_type, dtype, enabled, cache_enabled): name every argument
            named = [a.with_changes(keyword=cst.Name(p), equal=_EQUAL) for p, a in zip(OLD_PARAMETERS[name], positional)]
            return _insert([*named, *keywords], 0, first)
        # custom_fwd(fwd=None, *, device_type, cast_inputs=None), custom_bwd(bwd=None, *, device_type)
        return _insert(list(args), len(positional), cst.Arg(device, keyword=cst.Name("device_type"), equal=_EQUAL))

    def _compatibility_code(self, node: cst.CSTNode) -> bool:
        # Code for old torch versions: try/except ImportError, version checks, and a fallback
        # beside the replacement (`torch.amp.GradScaler(...) if new_torch else
        # torch.cuda.amp.GradScaler()`, or in the `except` of a `try` that calls it).
        child = node
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, cst.Try) and any(
                h.type is not None and "ImportError" in self.context.module.code_for_node(h.type) for h in ancestor.handlers
            ):
                return True
            if isinstance(ancestor, (cst.If, cst.IfExp)) and "version" in self.context.module.code_for_node(ancestor.test):
                return True
            if isinstance(ancestor, cst.IfExp) and child in (ancestor.body, ancestor.orelse):
                other = ancestor.orelse if child is ancestor.body else ancestor.body
                if self._calls_replacement(other):
                    return True
            if isinstance(ancestor, cst.Try) and child in ancestor.handlers and self._calls_replacement(ancestor.body):
                return True
            child = ancestor
        return False

    def _calls_replacement(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` calls something of ``torch.amp`` (the replacements)."""
        return any((self.semantic.qualified_name(c.func) or "").startswith("torch.amp.") for c in self.semantic.calls_in(node))


def _insert(args: list[cst.Arg], index: int, arg: cst.Arg) -> list[cst.Arg]:
    """``args`` with ``arg`` inserted at ``index``, commas kept where they separate."""
    if index < len(args):
        if arg.comma == cst.MaybeSentinel.DEFAULT:
            arg = arg.with_changes(comma=cst.Comma(whitespace_after=_SPACE))
        return [*args[:index], arg, *args[index:]]
    if args and args[-1].comma == cst.MaybeSentinel.DEFAULT:
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=_SPACE))
    return [*args, arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)]
