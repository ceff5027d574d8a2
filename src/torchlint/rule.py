"""What a rule is and what it reports.

A rule is a LibCST visitor. All selected rules run together in one batched traversal of
the file; each asks facts shared per file (``RuleContext.shared``: the semantic model of
``torch_rule.TorchRule``) and calls ``report``. The engine owns everything else
(positions, suppression, fixes, output). Nothing here knows PyTorch.
"""

from __future__ import annotations

import ast
import enum
import inspect
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Callable, ClassVar, Iterator, Mapping, Union

import libcst as cst
from libcst.metadata import MetadataWrapper

from torchlint.positions import LintMemo, Positions, StatementLines
from torchlint.text import syntax_tree


@lru_cache(maxsize=None)
def project_urls() -> dict[str, str]:
    """The project's addresses as pyproject.toml's ``[project.urls]`` declares them (``Homepage``,
    ``Documentation``, ``Rules``...): from the installed package's metadata, or, run from a
    source tree that is not installed, from its pyproject.toml; empty where neither is found."""
    urls: dict[str, str] = {}
    try:
        from importlib.metadata import PackageNotFoundError, metadata

        for entry in metadata("torchlint").get_all("Project-URL") or []:
            label, _, url = entry.partition(",")
            urls[label.strip()] = url.strip()
    except (ImportError, PackageNotFoundError):
        pass
    if not urls:
        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        try:
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # pragma: no cover
                import tomli as tomllib
            project = tomllib.loads(pyproject.read_text()).get("project", {})
            if project.get("name") == "torchlint":
                urls = dict(project.get("urls", {}))
        except (OSError, ValueError):
            pass
    return urls

Replacement = Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]

class Applicability(str, enum.Enum):
    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True, order=True)
class Location:
    row: int  # 1-based
    column: int  # 1-based


@dataclass(frozen=True)
class Edit:
    content: str
    start: Location
    end: Location


@dataclass(frozen=True)
class Fix:
    """A CST edit: each original node in ``changes`` is replaced by its replacement.

    ``edits`` is the same fix as text (what JSON, SARIF and the editor show); the engine
    renders it only when asked, and drops ``changes`` once the file is done.
    """

    message: str
    changes: Mapping[cst.CSTNode, Replacement] = field(default_factory=dict, compare=False)
    applicability: Applicability = Applicability.SAFE
    edits: tuple[Edit, ...] = ()


@dataclass
class Finding:
    code: str
    message: str
    start: Location
    end: Location
    fix: Fix | None = None
    cell: int | None = None  # 1-based notebook cell; rows then count within the cell
    # The text output's help line where the fix's message is not all there is to say: the
    # advice of a finding without a fix, saying why it has none, or why its fix is unsafe
    # (``(no fix: train_eval.py loads the whole model)``). None: the fix's message, if any.
    help: str | None = None


class RuleContext:
    """What a rule may ask about the file it is checking. Facts built on first use, once per
    file, and shared by every rule (the semantic model) live in ``shared``."""

    def __init__(
        self,
        wrapper: MetadataWrapper,
        project: object = None,
        statement_lines: StatementLines | None = None,
        position_memo: LintMemo | None = None,
        checkpoint: Callable[[], None] | None = None,
    ) -> None:
        self.wrapper = wrapper
        # Called between the long stages of the shared facts (an editor's lint raises there
        # once the document has changed again); None: nothing to call.
        self.checkpoint = checkpoint
        self.position_memo = position_memo  # an editor's positions of the document's last version
        self.module = wrapper.module
        self.project = project  # what the semantic layer knows of the file's project, opaque here
        self.statement_lines = statement_lines  # Python's parser's lines of the top-level statements
        self.findings: list[Finding] = []
        # Rules that raised on this file, by code: the first exception of each. A failed
        # rule is skipped for the rest of the traversal and its findings are dropped.
        self.failures: dict[str, BaseException] = {}
        self._shared: dict[object, object] = {}

    def shared(self, key: object, make: Callable[[RuleContext], object]) -> object:
        """The file's fact of ``key``, built by ``make(context)`` on first use and shared by
        every rule. A fact that holds the tree's cycles offers ``release()``; one that knows
        each node's top-level statement offers ``top_statement(node)`` (positions use it)."""
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = make(self)
        return found

    @cached_property
    def positions(self) -> Positions:
        """Node positions, rendered per top-level statement (``positions.py``)."""
        return Positions(self.wrapper, self.statement_lines, self._top_statement, self.position_memo)

    def release(self) -> None:
        """Break the cycles the file's facts hold (the shared facts', and the positions'
        back to this context), so that its tree is freed as soon as it is dropped; the lint
        calls it once it has no more questions (``SemanticModel.release``)."""
        shared, self._shared = self._shared, {}
        for fact in shared.values():
            release = getattr(fact, "release", None)
            if release is not None:
                release()
        self.__dict__.pop("positions", None)

    def _top_statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        # The parents a shared fact has already computed (the semantic model's), if any.
        for fact in self._shared.values():
            top_statement = getattr(fact, "top_statement", None)
            if top_statement is not None:
                return top_statement(node)
        return None


class Rule(cst.BatchableCSTVisitor):
    """Base class of every rule. Subclasses set ``code``, ``name`` and ``message``.

    The class docstring is the rule's documentation, in ruff's shape: *What it does*,
    *Why is this bad?*, *Example*, *Use instead*, *Fix safety*, *References*.
    """

    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    # Opt-in rules are not selected by default: their precision on real code (the ecosystem
    # triage) is below the bar for the default set. A selector that names them selects them.
    opt_in: ClassVar[bool] = False
    # The prescreen: what a module's code must contain for this rule to find anything in it,
    # as groups of words, at least one word of each group. A word is matched as a whole
    # identifier (a name, attribute, keyword argument, parameter, definition or import) or a
    # word of a string constant; comments and docstrings do not count (``Prescreen``). One
    # written ``"~loss"`` matches the code's identifiers and strings anywhere, in any case
    # (``CrossEntropyLoss``); one written ``"*val"`` matches a part of a word as camelCase and
    # underscores split it, or a whole word, in any case (``X_val``, ``valLoss``, ``VAL``; not
    # ``value``). Each group must be a necessary condition, for every fix pass too (a module
    # without these words never gets a finding of this rule), derived from the rule and the
    # facts it asks for, which must therefore never read a comment or a docstring for them;
    # words from other files (the project index) do not count. The engine runs the rule only
    # on modules that pass. Empty: the rule runs on every module.
    required_words: ClassVar[tuple[tuple[str, ...], ...]] = ()

    @classmethod
    def candidate(cls, module: Prescreen) -> bool:
        """The prescreen's second test, after ``required_words``: whether the module's ``ast``
        nodes (``module.nodes(ast.Call)``) hold something this rule could report. Like the
        words it must be a necessary condition of every finding, derived from the rule's own
        logic and kept as simple as that; the default admits every module."""
        return True

    def __init__(self, context: RuleContext) -> None:
        super().__init__()
        self.context = context

    def report(self, node: cst.CSTNode, message: str | None = None, *, fix: Fix | None = None, help: str | None = None) -> None:
        # Positions are rendered on the first finding (of its top-level statement), not
        # declared as a dependency: most files have no finding.
        pos = self.context.positions[node]
        self.context.findings.append(
            Finding(
                code=self.code,
                message=message or self.message,
                start=Location(pos.start.line, pos.start.column + 1),
                end=Location(pos.end.line, pos.end.column + 1),
                fix=fix,
                help=help,
            )
        )

    def get_visitors(self) -> Mapping[str, Callable]:
        # LibCST finds these with inspect.getmembers on every instance, for every file, which
        # also evaluates properties (and so built the shared facts for files no rule asked
        # about). The names are a fact of the class: find them once.
        # A batched traversal stops at the first exception of any visitor, so each callable
        # is guarded: an exception (in the rule or in the facts it asks for) disables this
        # rule for the rest of the file, and the other rules go on.
        return {name: _isolated(self, getattr(self, name)) for name in _visitor_names(type(self))}

    @classmethod
    def documentation(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def selection_note(cls) -> str:
        if not cls.opt_in:
            return "Selected by default."
        return (
            f"Opt-in: not selected by default; select it with `--select {cls.code}`, a prefix "
            f"that names it (`--extend-select {cls.code[:3]}`) or `ALL`. Its precision on real "
            "code is below the bar for the default set (see `ecosystem/README.md`)."
        )

    @classmethod
    def url(cls) -> str:
        """The rule's documentation: its section of the rules page (``[project.urls]`` ``Rules``)."""
        anchor = f"{cls.code}-{cls.name}".lower()
        return f"{project_urls().get('Rules', '')}#{anchor}"


def _isolated(rule: Rule, method: Callable) -> Callable:
    """``method`` of ``rule``, recording its first exception and skipped from then on."""
    failures, code = rule.context.failures, rule.code

    def call(node: cst.CSTNode) -> None:
        if code in failures:
            return
        try:
            method(node)
        except (RecursionError, MemoryError):
            raise  # the file is too deep or too big for any rule: the engine says so
        except Exception as error:
            failures[code] = error

    return call


_WORD = re.compile(rb"\w+")
# The word a module with a `from M import *` holds, for ``Rule.required_words``: what it
# imports is known only from the other file (the project index), never from its own words.
STAR_IMPORT = "import*"
# The parts of names: `evaluateModel` -> `evaluate`, `Model`; `X_test` -> `X`, `test`.
_NAME_PART = re.compile(rb"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")


class Prescreen:
    """What the prescreen knows of one module, from Python's own ``ast`` tree of it: its
    words (``Rule.required_words``) and its nodes by type (``Rule.candidate``).

    The words are those of the code: every identifier (names, attributes, keyword
    arguments, parameters, definitions, imported modules and their aliases) and every string
    constant (f-string parts included), split by one regex (ASCII words; a non-ASCII letter
    only splits a word, which admits more). Comments and docstrings hold none: a comment
    never changes a finding, and neither does a string that stands as a statement of its own
    (a docstring, or code disabled in a triple-quoted string).
    """

    def __init__(self, tree: ast.AST) -> None:
        words: list[str] = []
        self._nodes: dict[type, list[ast.AST]] = defaultdict(list)
        stack = [tree]
        while stack:
            node = stack.pop()
            kind = type(node)
            if kind is ast.Expr and type(node.value) is ast.Constant and isinstance(node.value.value, (str, bytes)):
                continue  # a docstring, or a string standing as a statement
            self._nodes[kind].append(node)
            for name in node._fields:
                value = getattr(node, name)
                if isinstance(value, ast.AST):
                    stack.append(value)
                elif isinstance(value, list):
                    for item in value:
                        if isinstance(item, ast.AST):
                            stack.append(item)
                        elif isinstance(item, str):
                            words.append(item)  # `global` and `nonlocal` names, a class pattern's attributes
                elif isinstance(value, str):
                    words.append(value)  # identifiers and string constants
                elif isinstance(value, bytes):
                    words.append(value.decode("latin-1"))
        self.text = "\n".join(words).encode("utf-8", "surrogatepass")
        self.words = set(_WORD.findall(self.text))
        if any(alias.name == "*" for node in self._nodes.get(ast.ImportFrom, ()) for alias in node.names):
            self.words.add(STAR_IMPORT.encode())
        self._lower: bytes | None = None
        self._parts: set[bytes] | None = None

    @classmethod
    def of_source(cls, source: bytes | str) -> Prescreen:
        """The prescreen of a module's source; raises what Python's parser finds wrong with it."""
        return cls(syntax_tree(source))

    def nodes(self, *types: type) -> Iterator[ast.AST]:
        """The module's nodes of these ``ast`` types (docstrings left out), in no set order."""
        for kind in types:
            yield from self._nodes.get(kind, ())

    def admit(self, rule: type[Rule]) -> bool:
        """Whether ``rule`` may find something in this module."""
        if not all(any(self._has(word) for word in group) for group in _encoded_words(rule)):
            return False
        try:
            return rule.candidate(self)
        except Exception:  # a mistake in the test: the rule runs, and reports its own failure if any
            return True

    def _has(self, word: bytes) -> bool:
        if word[:1] == b"~":
            if self._lower is None:
                self._lower = self.text.lower()
            return word[1:] in self._lower
        if word[:1] == b"*":
            if self._parts is None:
                self._parts = {part.lower() for part in _NAME_PART.findall(self.text)} | {w.lower() for w in self.words}
            return word[1:] in self._parts
        return word in self.words


@lru_cache(maxsize=None)
def _encoded_words(rule: type[Rule]) -> tuple[tuple[bytes, ...], ...]:
    return tuple(tuple((w.lower() if w[:1] in "~*" else w).encode() for w in group) for group in rule.required_words)


def visits(rule: type[Rule]) -> bool:
    """Whether the rule looks at the syntax tree at all (TL000 does not: the engine reports it)."""
    return bool(_visitor_names(rule))


@lru_cache(maxsize=None)
def _visitor_names(cls: type) -> tuple[str, ...]:
    """The ``visit_``/``leave_`` methods of ``cls`` that do something, sorted (as ``dir``)."""
    owners: dict[str, type] = {}  # each name, with the class it is found on first
    for klass in reversed(cls.__mro__):
        owners.update((name, klass) for name in vars(klass) if name.startswith(("visit_", "leave_")))
    return tuple(sorted(name for name, owner in owners.items() if _does_something(owner, name)))


@lru_cache(maxsize=None)
def _does_something(owner: type, name: str) -> bool:
    # Per defining class: LibCST's visitor bases define some 600 no-op methods, shared by all rules.
    method = getattr(owner, name)
    return callable(method) and not getattr(method, "_is_no_op", False)
