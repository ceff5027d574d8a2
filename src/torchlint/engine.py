"""The lint engine: parse once, run every selected rule in one traversal, suppress, fix.

It knows nothing about PyTorch: rules and the semantic model bring that.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import gc
import io
import re
import tokenize
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.rule import Applicability, Edit, Finding, Fix, Location, Rule, RuleContext

INVALID_FILE = "TL000"
# A fix can enable another (or be deferred by an overlapping one): re-lint until stable.
MAX_FIX_PASSES = 10


class FixMode:
    NONE: frozenset[Applicability] = frozenset()
    SAFE = frozenset({Applicability.SAFE})
    UNSAFE = frozenset({Applicability.SAFE, Applicability.UNSAFE})


@dataclass
class SourceResult:
    findings: list[Finding]
    source: bytes
    fixed_source: bytes  # equal to ``source`` when nothing was fixed
    fixed_count: int = 0


def _error(message: str, row: int = 1, col: int = 1) -> Finding:
    return Finding(INVALID_FILE, message, Location(row, col), Location(row, col))


def parse(source: bytes | str) -> cst.Module:
    """Parse with LibCST, after Python's own parser has accepted the source: it names the
    position and reason of a syntax error best, and it refuses nesting so deep that LibCST's
    native parser would overflow its stack and crash the process."""
    with warnings.catch_warnings():  # the user's invalid escapes are not ours to print
        warnings.simplefilter("ignore")
        compile(source, "<file>", "exec", ast.PyCF_ONLY_AST)
    return cst.parse_module(source)


def parse_error_finding(error: Exception) -> Finding:
    """TL000 for source that cannot be decoded or parsed."""
    if isinstance(error, (UnicodeDecodeError, LookupError)):
        return _error(f"cannot decode file: {error}")
    if isinstance(error, SyntaxError):
        row, col = error.lineno or 1, max(error.offset or 1, 1)
        if error.msg.startswith("(unicode error)"):
            return _error(f"cannot decode file: {error.msg.removeprefix('(unicode error)').strip()}", row, col)
        reason = error.msg.replace("source code string cannot contain null bytes", "the file contains null bytes")
        return _error(f"SyntaxError: {reason}", row, col)
    if isinstance(error, cst.ParserSyntaxError):
        return _error(f"SyntaxError: {error.message}", error.raw_line, error.raw_column + 1)
    if isinstance(error, (RecursionError, MemoryError)):
        return _error("the file is nested too deeply to parse")
    return _error(f"cannot parse file: {type(error).__name__}: {error}")


# --- suppression ------------------------------------------------------------------------

_CODES = r"(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?"
_LINE_NOQA = re.compile(r"#\s*noqa" + _CODES, re.IGNORECASE)
_FILE_NOQA = re.compile(r"#\s*torchlint\s*:\s*noqa" + _CODES, re.IGNORECASE)
ALL_CODES = None  # a bare noqa


@dataclass
class Suppressions:
    lines: dict[int, set[str] | None]
    file: set[str] | None  # None: the whole file is suppressed
    file_all: bool = False

    def suppresses(self, finding: Finding) -> bool:
        if finding.code == INVALID_FILE:
            return False
        if self.file_all or finding.code in (self.file or ()):
            return True
        if finding.start.row in self.lines:
            codes = self.lines[finding.start.row]
            return codes is ALL_CODES or finding.code in codes
        return False


def _comments(text: str) -> Iterable[tuple[int, str]]:
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        # Newer syntax than this Python's tokenizer knows: fall back to a line scan.
        for row, line in enumerate(text.splitlines(), 1):
            if "#" in line:
                yield row, line[line.index("#"):]


def _codes(match: re.Match) -> set[str] | None:
    codes = match.group("codes")
    return None if codes is None else {c.upper() for c in re.split(r"[\s,]+", codes) if c}


def find_suppressions(text: str) -> Suppressions:
    result = Suppressions(lines={}, file=set())
    if "noqa" not in text.lower():
        return result
    for row, comment in _comments(text):
        file_match = _FILE_NOQA.search(comment)
        if file_match:
            codes = _codes(file_match)
            if codes is None:
                result.file_all = True
            else:
                result.file.update(codes)
            continue
        line_match = _LINE_NOQA.search(comment)
        if line_match:
            codes = _codes(line_match)
            previous = result.lines.get(row, set())
            result.lines[row] = None if codes is None or previous is None else previous | codes
    return result


# --- running rules ----------------------------------------------------------------------


def run_rules(module: cst.Module, rules: Sequence[type[Rule]]) -> tuple[list[Finding], MetadataWrapper]:
    """One traversal of ``module`` running every rule in ``rules``."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    context = RuleContext(wrapper)
    if rules:
        wrapper.visit_batched([rule(context) for rule in rules])
    return context.findings, wrapper


# --- fixes ------------------------------------------------------------------------------


class _ApplyChanges(cst.CSTTransformer):
    def __init__(self, changes: dict[cst.CSTNode, object]) -> None:
        super().__init__()
        self.changes = changes

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        return self.changes.get(original_node, updated_node)


def _span(wrapper: MetadataWrapper, node: cst.CSTNode) -> tuple[tuple[int, int], tuple[int, int]]:
    pos = wrapper.resolve(PositionProvider)[node]
    return (pos.start.line, pos.start.column), (pos.end.line, pos.end.column)


def _overlaps(a, b) -> bool:
    return not (a[1] <= b[0] or b[1] <= a[0])


def apply_fixes(module: cst.Module, wrapper: MetadataWrapper, fixes: Sequence[Fix]) -> tuple[cst.Module, int]:
    """Apply the fixes that do not overlap an earlier one (in the given, sorted order); the
    rest wait for the next pass. A fix whose result does not parse is dropped."""
    accepted: list[Fix] = []
    taken: list[tuple] = []
    for fix in fixes:
        spans = [_span(wrapper, node) for node in fix.changes]
        if any(_overlaps(s, t) for s in spans for t in taken):
            continue
        accepted.append(fix)
        taken.extend(spans)
    if not accepted:
        return module, 0
    merged = {node: new for fix in accepted for node, new in fix.changes.items()}
    fixed = module.visit(_ApplyChanges(merged))
    if _parses(fixed):
        return fixed, len(accepted)
    # Some fix broke the syntax: keep only the ones that parse on their own.
    good = [f for f in accepted if _parses(module.visit(_ApplyChanges(dict(f.changes))))]
    if not good:
        return module, 0
    fixed = module.visit(_ApplyChanges({n: r for f in good for n, r in f.changes.items()}))
    return (fixed, len(good)) if _parses(fixed) else (module, 0)


def _parses(module: cst.Module) -> bool:
    try:
        cst.parse_module(module.bytes)
    except Exception:
        return False
    return True


def _offset_to_location(text: str, offset: int) -> Location:
    row = text.count("\n", 0, offset) + 1
    line_start = text.rfind("\n", 0, offset) + 1
    return Location(row, offset - line_start + 1)


def render_edits(module: cst.Module, fix: Fix) -> tuple[Edit, ...]:
    """The fix as one text edit of ``module``'s code: the changed span and its new content."""
    before = module.code
    after = module.visit(_ApplyChanges(dict(fix.changes))).code
    start = 0
    limit = min(len(before), len(after))
    while start < limit and before[start] == after[start]:
        start += 1
    end = 0
    while end < limit - start and before[len(before) - 1 - end] == after[len(after) - 1 - end]:
        end += 1
    return (
        Edit(
            content=after[start : len(after) - end],
            start=_offset_to_location(before, start),
            end=_offset_to_location(before, len(before) - end),
        ),
    )


def _cyclic_gc_paused(function):
    """Run ``function`` with Python's cyclic garbage collector paused. A file's syntax tree is
    a million objects for 50,000 lines, none of them garbage until the file is done, and each
    collection that ran while it was built and analysed walked all of it again: a fifth of
    the time on large files. The garbage it leaves is collected once, after."""

    @functools.wraps(function)
    def paused(*args, **kwargs):
        if not gc.isenabled():
            return function(*args, **kwargs)
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            gc.enable()

    return paused


def _sort_key(finding: Finding):
    return (finding.cell or 0, finding.start, finding.end, finding.code, finding.message)


@_cyclic_gc_paused
def lint_module_source(
    source: bytes | str,
    rules: Sequence[type[Rule]],
    fix_mode: frozenset[Applicability] = FixMode.NONE,
    with_edits: bool = False,
) -> SourceResult:
    """Lint (and, with ``fix_mode``, fix) one module's source.

    ``source`` is bytes for a file (its encoding, BOM and line endings are kept) or text for
    a notebook's joined cells. Findings come back sorted, with suppressed ones removed.
    """
    try:
        module = parse(source)
    except Exception as error:  # any parse failure is a finding, never a crash
        return SourceResult([parse_error_finding(error)], source, source)
    try:
        return _lint_module(source, module, rules, fix_mode, with_edits)
    except RecursionError:  # the visitors recurse once per nesting level
        return SourceResult([_error("the file is nested too deeply to analyse")], source, source)


def _lint_module(source, module, rules, fix_mode, with_edits) -> SourceResult:
    suppressions = find_suppressions(module.code)
    if suppressions.file_all:
        return SourceResult([], source, source)
    fixed_count = 0
    for _ in range(MAX_FIX_PASSES):
        findings, wrapper = run_rules(module, rules)
        findings = [f for f in findings if not suppressions.suppresses(f)]
        findings.sort(key=_sort_key)
        fixes = [f.fix for f in findings if f.fix is not None and f.fix.applicability in fix_mode]
        if not fixes:
            break
        module, applied = apply_fixes(module, wrapper, fixes)
        if not applied:
            break
        fixed_count += applied
        suppressions = find_suppressions(module.code)
    for finding in findings:
        if finding.fix is not None:
            edits = render_edits(module, finding.fix) if with_edits else ()
            finding.fix = dataclasses.replace(finding.fix, changes={}, edits=edits)
    if fixed_count == 0:
        output = source
    else:
        output = module.bytes if isinstance(source, bytes) else module.code
    return SourceResult(_dedupe(findings), source, output, fixed_count)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen = set()
    unique = []
    for f in findings:
        key = (f.cell, f.start, f.end, f.code, f.message)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def unified_diff(before: str, after: str, path: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}"
        )
    )
