"""The rules' base classes that know PyTorch, beside ``rule.Rule`` (which does not): a
``TorchRule`` asks the file's semantic model (``semantic.SemanticModel``, built once per file
and shared by every rule), and stays silent in a module written for another framework;
``ApiSymbolRule`` reports the uses of the torch API data's symbols (TL803, TL804, TL805)."""

from __future__ import annotations

import libcst as cst

from torchlint.rule import Applicability, Fix, Prescreen, Rule, RuleContext
from torchlint.semantic import SemanticModel, torch_api
from torchlint.semantic.frameworks import imported_modules, other_framework
from torchlint.semantic.migration import from_import, get_full_name_for_node


def _semantic_model(context: RuleContext) -> SemanticModel:
    return SemanticModel(context.wrapper, context.project, context.checkpoint)


class TorchRule(Rule):
    """A rule about PyTorch code: a module written for another framework is not its
    (``other_framework``): it reports nothing there, and the prescreen holds it back. A
    subclass's own ``candidate`` asks this one first (``super().candidate(module) and ...``)."""

    @property
    def semantic(self) -> SemanticModel:
        """The file's semantic model: built on first use, once per file, shared by every rule."""
        return self.context.shared(SemanticModel, _semantic_model)

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        return other_framework(imported_modules(module)) is None

    def report(self, node: cst.CSTNode, message: str | None = None, *, fix: Fix | None = None, help: str | None = None) -> None:
        if self.semantic.other_framework is None:
            super().report(node, message, fix=fix, help=help)


# --- the rules that report the symbols of the torch API data (TL803, TL804, TL805) ---------

_COMPAT_ERRORS = ("ImportError", "ModuleNotFoundError", "AttributeError")


class ApiSymbolRule(TorchRule):
    """A rule that reports every use of the torch API data's symbols of one category
    (``torch_api``): a call, a reference (``f = torch.chain_matmul``) or a ``from`` import,
    found through the file's imports and aliases by qualified name. A name imported with
    ``from ... import`` is reported at its import, not at each use.

    Subclasses set ``category`` and may build a fix for a call (``call_fix``)."""

    category: str
    # The symbols of the category, by qualified name, and the last part of their names (what
    # a use of one must spell out, in its import or at its use).
    api: dict[str, torch_api.ApiSymbol]
    last_names: frozenset[str]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "category" in cls.__dict__:
            cls.api = {name: s for name, s in torch_api.symbols(cls.category).items() if cls.reports(s)}
            cls.last_names = frozenset(name.rpartition(".")[2] for name in cls.api)
            # (the prescreen: a use spells the symbol's last name, in its import or at its use)
            cls.required_words = (tuple(sorted(cls.last_names)),)

    @classmethod
    def reports(cls, symbol: torch_api.ApiSymbol) -> bool:
        """Whether the rule reports uses of ``symbol`` (every symbol of its category, unless
        a rule says otherwise)."""
        return True

    def message_for(self, symbol: torch_api.ApiSymbol) -> str:
        raise NotImplementedError

    def call_fix(self, call: cst.Call, symbol: torch_api.ApiSymbol, torch: str) -> tuple[cst.CSTNode, cst.CSTNode, str] | None:
        """(the node to replace, its replacement, the torch version the replacement needs)
        for a call ``torch.<symbol>(...)`` written through the torch alias; None: no fix."""
        return None

    # --- finding the uses

    def visit_Name(self, node: cst.Name) -> None:
        if node.value not in self.last_names:
            return
        parent = self.semantic.parent(node)
        if isinstance(parent, (cst.Attribute, cst.ImportAlias, cst.FunctionDef, cst.ClassDef, cst.Param)) or from_import(self.semantic, node) is not None:
            return  # an attribute's name, an import (visit_ImportFrom), a definition, or a name from a `from` import
        self._use(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in self.last_names and not self._in_import(node):
            self._use(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return
        module = get_full_name_for_node(node.module)
        found = [(alias, self.api.get(f"{module}.{get_full_name_for_node(alias.name)}")) for alias in node.names]
        if not any(symbol for _, symbol in found) or self._compatibility_code(node, [s for _, s in found if s]):
            return
        found = [(alias, symbol if symbol is not None and self._concerns(symbol) else None) for alias, symbol in found]
        fix = self._import_fix(node, found)
        for alias, symbol in found:
            if symbol is not None:
                self.report(alias, self.message_for(symbol), fix=fix)

    def _concerns(self, symbol: torch_api.ApiSymbol) -> bool:
        """Not when every torch the project supports predates the symbol's deprecation (it
        pins or caps torch below it: ``torch==1.13.1``)."""
        return torch_api.concerns(symbol.deprecated, self.semantic.newest_torch)

    def _in_import(self, node: cst.CSTNode) -> bool:
        return any(isinstance(a, (cst.Import, cst.ImportFrom)) for a in self.semantic.ancestors(node))

    def _use(self, node: cst.Name | cst.Attribute) -> None:
        qnames = self.semantic.qualified_names(node)
        # A name that may also be something else (bound in both branches of a `try`) is
        # compatibility code, as is a use under a version check.
        if not qnames or not all(q in self.api for q in qnames):
            return
        symbol = self.api[qnames[0]]
        if self._compatibility_code(node, [symbol]) or not self._concerns(symbol):
            return
        self.report(node, self.message_for(symbol), fix=self._use_fix(node, symbol))

    # --- fixes

    def _use_fix(self, node: cst.Name | cst.Attribute, symbol: torch_api.ApiSymbol) -> Fix | None:
        torch = self.torch_root(node, symbol)
        if torch is None:
            return None
        parent = self.semantic.parent(node)
        if symbol.drop_in and symbol.replacement.startswith("torch."):
            renamed = cst.parse_expression(torch + symbol.replacement[len("torch"):])
            return self._fix(symbol, {node: renamed}, symbol.since)
        if isinstance(parent, cst.Call) and parent.func is node:
            found = self.call_fix(parent, symbol, torch)
            if found is None:
                return None
            target, replacement, needed = found
            return self._fix(symbol, {target: replacement}, needed)
        return None

    def torch_root(self, node: cst.CSTNode, symbol: torch_api.ApiSymbol) -> str | None:
        """The name ``torch`` is bound to where ``node`` spells the symbol's whole path from
        it (``th.solve`` after ``import torch as th``); None otherwise. Only such a use is
        fixed: a fix that writes through that name leaves no import unused."""
        if not isinstance(node, cst.Attribute) or not symbol.name.startswith("torch."):
            return None
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if not isinstance(root, cst.Name) or self.semantic.qualified_names(root) != ["torch"]:
            return None
        if get_full_name_for_node(node) != root.value + symbol.name[len("torch"):]:
            return None
        return root.value

    def _fix(self, symbol: torch_api.ApiSymbol, changes: dict, needed: str, message: str | None = None) -> Fix:
        message = message or f"Use `{symbol.replacement}`"
        if torch_api.available(needed, self.semantic.oldest_torch):
            return Fix(message, changes)
        return Fix(f"{message} (torch {needed} or later)", changes, Applicability.UNSAFE)

    def _import_fix(self, node: cst.ImportFrom, found: list) -> Fix | None:
        """``from old.module import a, b`` -> ``from new.module import a, b`` when each name
        is a symbol whose replacement is the same name in one new module (``functorch`` ->
        ``torch.func``)."""
        modules = {s.replacement.rpartition(".")[0] if s and s.replacement and s.drop_in else None for _, s in found}
        if len(modules) != 1 or None in modules:
            return None
        if any(s.replacement.rpartition(".")[2] != get_full_name_for_node(a.name) for a, s in found):
            return None
        (module,) = modules
        needed = max((s.since for _, s in found), key=torch_api.version)
        return self._fix(found[0][1], {node: node.with_changes(module=cst.parse_expression(module))}, needed,
                         f"Import from `{module}`")

    # --- code for older torch versions

    def _compatibility_code(self, node: cst.CSTNode, symbols: list[torch_api.ApiSymbol]) -> bool:
        """Whether ``node`` is code that supports several torch versions: in a ``try`` that
        catches ImportError or AttributeError, under a version check or ``hasattr``, or a
        fallback beside its replacement (the other branch of a conditional expression, the
        ``except`` of a ``try`` that uses it)."""
        replacements = {s.replacement for s in symbols if s.replacement}
        code = self.context.module.code_for_node
        child = node
        for ancestor in self.semantic.ancestors(node):
            if isinstance(ancestor, cst.Try) and any(
                h.type is not None and any(e in code(h.type) for e in _COMPAT_ERRORS) for h in ancestor.handlers
            ):
                return True
            if isinstance(ancestor, (cst.If, cst.IfExp, cst.While)) and any(w in code(ancestor.test) for w in ("version", "hasattr", "TORCH_")):
                return True
            if isinstance(ancestor, cst.IfExp) and child in (ancestor.body, ancestor.orelse):
                if self._uses_any(ancestor.orelse if child is ancestor.body else ancestor.body, replacements):
                    return True
            if isinstance(ancestor, cst.Try) and child in ancestor.handlers and self._uses_any(ancestor.body, replacements):
                return True
            child = ancestor
        return False

    def _uses_any(self, node: cst.CSTNode, qnames: set[str]) -> bool:
        found = False

        class Uses(cst.CSTVisitor):
            def visit_Attribute(inner, n: cst.Attribute) -> None:
                nonlocal found
                found = found or any(q in qnames for q in self.semantic.qualified_names(n))

            def visit_Name(inner, n: cst.Name) -> None:
                nonlocal found
                found = found or any(q in qnames for q in self.semantic.qualified_names(n))

        node.visit(Uses())
        return found
