"""`torchlint verify SCRIPT [ARGS...]`: run a training script under runtime checks (SPEC section 6)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from torchlint.runtime import report
from torchlint.runtime.launcher import SetupError, VerifyRequest, verify


@click.command(
    "verify",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False, "help_option_names": ["-h", "--help"]},
)
@click.argument("script", required=False, type=click.Path(path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="auto: CUDA when present; cpu: hide CUDA (proves device independence); cuda: require it.",
)
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0, show_default=True, help="Seconds before the run counts as hung.")
@click.option("--limit-batches", type=click.IntRange(min=1), help="Each DataLoader yields at most N batches per pass.")
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    help="After N optimizer steps leave the training loop (its DataLoaders yield nothing more) and run what follows it;"
    " where no DataLoader drives the loop, end the run there.",
)
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--reference", metavar="MODULE:FACTORY", help="Train the factory's model and loss with the reference trainer instead of a script.")
def command(
    script: Path | None,
    script_args: tuple[str, ...],
    device: str,
    timeout: float,
    limit_batches: int | None,
    max_steps: int | None,
    output_format: str,
    reference: str | None,
) -> None:
    """Run SCRIPT (with its own ARGS) under instrumentation and report each check.

    Options go before SCRIPT; everything after it is passed to the script. Exit status: 0 when
    no check fails, 1 when one does, 2 on usage errors.
    """
    if (script is None) == (reference is None):
        raise click.UsageError("give either SCRIPT or --reference MODULE:FACTORY")
    if reference is not None and script_args:
        raise click.UsageError("arguments are for a SCRIPT; --reference takes none")
    if script is not None and not script.is_file():
        raise click.UsageError(f"{script}: no such file")
    request = VerifyRequest(script, script_args, reference, device, timeout, limit_batches, max_steps)
    try:
        result = verify(request, script_output_to_stderr=output_format == "json")
    except SetupError as error:
        click.echo(f"torchlint verify: {error}", err=True)
        sys.exit(2)
    click.echo(report.to_json(result) if output_format == "json" else report.to_text(result))
    sys.exit(1 if result.failed else 0)
