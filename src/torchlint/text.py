"""Text utilities every layer uses, below the engine: a source's rows as Python's parser
counts them, Python's own ``ast`` tree of a source, and the statement that joins a
notebook's cells into one module. Nothing here knows rules, files or PyTorch."""

from __future__ import annotations

import ast
import re
import warnings

import libcst as cst

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_BLANK_OR_COMMENT = re.compile(r"^[ \t\f]*(?:[#\r\n]|$)")


def source_rows(source: bytes | str) -> list:
    """The source's lines, line endings kept, cut where Python's parser counts a new line
    (at a line feed, a carriage return and the two together only): row ``n - 1`` is the
    ``ast`` tree's line ``n``."""
    if isinstance(source, bytes):
        return source.splitlines(keepends=True)  # bytes: at those three only
    return _LINE.findall(source)[:-1] if source else []


def undecodable_at(source: bytes, from_row: int = 1) -> tuple[int, int] | None:
    """Where the first byte that the source's encoding (its coding cookie, or UTF-8) cannot
    decode lies, on row ``from_row`` or after: (row, column), 1-based, the column counted in
    characters as the rest of the row decodes; None where there is none (or the encoding is
    unknown)."""
    import codecs

    rows = source_rows(source)
    encoding = "utf-8"
    for row in rows[:2]:  # a coding cookie (PEP 263), on the first or second row
        cookie = _COOKIE.match(row.decode("latin-1"))
        if cookie is not None:
            encoding = cookie.group(1)
            break
        if not _BLANK_OR_COMMENT.match(row.decode("latin-1")):
            break
    try:
        codec = codecs.lookup(encoding).name
    except LookupError:
        return None
    for number, row in enumerate(rows, start=1):
        if number < from_row:
            continue
        if number == 1 and row.startswith(codecs.BOM_UTF8):
            row = row[len(codecs.BOM_UTF8):]
        try:
            row.decode(codec)
        except UnicodeDecodeError as error:
            return number, len(row[: error.start].decode(codec, errors="replace")) + 1
    return None


def syntax_tree(source: bytes | str) -> ast.Module:
    """Python's own ``ast`` tree of the source; raises what its parser finds wrong there."""
    with warnings.catch_warnings():  # the user's invalid escapes are not ours to print
        warnings.simplefilter("ignore")
        return compile(source, "<file>", "exec", ast.PyCF_ONLY_AST)


# How a notebook's cells are joined into one module (``notebook.py``): a statement of this text
# between two cells. Jupyter displays the value of a cell's last statement when that is an
# expression, which a fact may need to know (a forward pass displayed is read).
CELL_BOUNDARY = "pass  # __torchlint_cell_boundary__\n"
_CELL_BOUNDARY_COMMENT = CELL_BOUNDARY.removeprefix("pass  ").rstrip("\n")


def is_cell_boundary(statement: cst.CSTNode) -> bool:
    """Whether ``statement`` is the ``CELL_BOUNDARY`` between two cells of a notebook."""
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and statement.trailing_whitespace.comment is not None
        and statement.trailing_whitespace.comment.value == _CELL_BOUNDARY_COMMENT
    )
