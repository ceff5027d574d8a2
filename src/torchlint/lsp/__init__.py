"""``torchlint lsp``: the language server over stdio (SPEC section 7).

This module only holds the command: pygls is imported when the server starts, so the
lint path never pays for it and a missing extra gets a clear message.
"""

from __future__ import annotations

import gc
import os
import sys

import click

LSP_PACKAGES = ("pygls", "lsprotocol")


@click.command("lsp")
@click.option("--stdio", is_flag=True, hidden=True, help="Accepted for clients that pass it; stdio is the only transport.")
def command(stdio: bool) -> None:
    """Run the language server over stdio, for editors (see docs/editors.md)."""
    try:
        from torchlint.lsp.server import create_server
    except ImportError as error:
        if (error.name or "").split(".")[0] not in LSP_PACKAGES:
            raise
        click.echo(
            f"torchlint: error: `torchlint lsp` needs the language server extra "
            f"(no module named {error.name!r}); install it with: pip install 'torchlint[lsp]'",
            err=True,
        )
        sys.exit(2)
    server = create_server()
    # Garbage is collected after each lint, off the path to its diagnostics (GarbageCollection);
    # what start-up imported (pygls, lsprotocol's classes, LibCST) is never garbage, and is
    # frozen out of those collections (a full one walked it all: about 70 ms here).
    gc.disable()
    gc.freeze()
    server.start_io()
    # The client closed the connection: exit at once, whatever lint is still running.
    sys.stdout.flush()
    os._exit(0)
