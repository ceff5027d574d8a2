"""The torch API that changed, as data: every removed, deprecated or non-public symbol that
torchlint's migration rules know (TL801, TL803, TL804, TL805), with its replacement and the
torch versions that matter for a fix.

One ``ApiSymbol`` per qualified name (the name as ``SemanticModel.qualified_names`` gives
it, however the code imports it). Versions are ``"major.minor"``. The tests check the data
against the installed torch (``tests/test_torch_api.py``): every removed symbol is gone (or
is a stub that raises), every replacement is there, and every deprecated symbol marked
``warns=True`` warns when called; ``warns`` otherwise says why the test does not call it.

The linter never imports torch: this module holds plain data and reads nothing.
Which symbols: those TorchFix knows (its ``deprecated_symbols.yaml``, its non-public-alias
and functorch visitors); the versions: PyTorch's release notes, deprecation PRs and
documentation.
"""

from __future__ import annotations

from dataclasses import dataclass

# The categories, each one rule's.
REMOVED = "removed"  # TL803: gone from torch (a stub that raises, or no attribute at all)
DEPRECATED = "deprecated"  # TL804: still works, warns or is documented as deprecated
NON_PUBLIC = "non-public"  # TL805: a private path of a public function
AMP = "amp"  # TL801: the `torch.cuda.amp` API (its own rule)


@dataclass(frozen=True)
class ApiSymbol:
    name: str  # the qualified name
    category: str
    replacement: str | None  # the replacement's qualified name; None: no single one
    since: str | None  # the torch version that first has the replacement (None: no replacement)
    deprecated: str | None  # the torch version that deprecated it (docs or warning)
    removed: str | None = None  # the torch version that removed it
    # True: calling it warns (the tests check); otherwise why the tests do not call it.
    warns: bool | str = True
    torchfix: tuple[str, ...] = ()  # the TorchFix codes that find it
    note: str = ""  # how the replacement differs, for the message and the docs
    # Whether the replacement takes the same arguments and does the same (the same function
    # under its public name, or a rename): every use may be renamed, imports included.
    drop_in: bool = False


_RAISES = "removed: calling it raises (the tests check that instead)"
NO_WARNING = "documented as deprecated; torch emits no warning"

SYMBOLS: tuple[ApiSymbol, ...] = (
    # --- removed (TL803) ---------------------------------------------------------------
    ApiSymbol("torch.solve", REMOVED, "torch.linalg.solve", "1.8", "1.9", "2.0", warns=_RAISES, torchfix=("TOR001", "TOR004"),
              note="`torch.linalg.solve(A, B)` takes the arguments in the other order and returns the solution alone"),
    ApiSymbol("torch.symeig", REMOVED, "torch.linalg.eigh", "1.8", "1.9", "2.0", warns=_RAISES, torchfix=("TOR001", "TOR004"),
              note="`torch.linalg.eigh` reads the lower triangle by default (`UPLO=\"L\"`); `symeig` read the upper one"),
    ApiSymbol("torch.eig", REMOVED, "torch.linalg.eig", "1.9", "1.9", "1.13", warns=_RAISES, torchfix=("TOR001", "TOR004"),
              note="`torch.linalg.eig` returns complex tensors"),
    ApiSymbol("torch.lstsq", REMOVED, "torch.linalg.lstsq", "1.9", "1.9", "1.13", warns=_RAISES, torchfix=("TOR001", "TOR004"),
              note="`torch.linalg.lstsq(A, B)` takes the arguments in the other order and returns a named tuple"),
    ApiSymbol("torch.matrix_rank", REMOVED, "torch.linalg.matrix_rank", "1.8", "1.9", "1.13", warns=_RAISES, torchfix=("TOR001", "TOR004"),
              note="`torch.linalg.matrix_rank` takes `hermitian=` instead of `symmetric=`"),
    # --- deprecated (TL804) ------------------------------------------------------------
    ApiSymbol("torch.chain_matmul", DEPRECATED, "torch.linalg.multi_dot", "1.9", "1.9", torchfix=("TOR101", "TOR103"),
              note="`torch.linalg.multi_dot` takes one list of matrices"),
    ApiSymbol("torch.cholesky", DEPRECATED, "torch.linalg.cholesky", "1.8", "1.9", torchfix=("TOR101", "TOR103")),
    ApiSymbol("torch.qr", DEPRECATED, "torch.linalg.qr", "1.8", "1.9", torchfix=("TOR101", "TOR103"),
              note="`torch.linalg.qr` takes `mode=` instead of `some=`"),
    ApiSymbol("torch.range", DEPRECATED, "torch.arange", "1.0", "0.4", torchfix=("TOR101", "TOR103"),
              note="`torch.arange` leaves out its end point and returns the default integer dtype for integer bounds"),
    ApiSymbol("torch.lu", DEPRECATED, "torch.linalg.lu_factor", "1.11", "1.13", torchfix=("TOR101", "TOR103")),
    ApiSymbol("torch.lu_solve", DEPRECATED, "torch.linalg.lu_solve", "1.13", "1.13", torchfix=("TOR101", "TOR103"),
              note="`torch.linalg.lu_solve(LU, pivots, B)` takes the right-hand side last"),
    ApiSymbol("torch.triangular_solve", DEPRECATED, "torch.linalg.solve_triangular", "1.11", "1.11", torchfix=("TOR101", "TOR103"),
              note="`torch.linalg.solve_triangular(A, B, upper=...)` takes the arguments in the other order"),
    ApiSymbol("torch.norm", DEPRECATED, "torch.linalg.norm", "1.7", "1.9", warns=NO_WARNING, torchfix=("TOR101", "TOR103"),
              note="or `torch.linalg.vector_norm` / `torch.linalg.matrix_norm`, which say which norm they compute"),
    ApiSymbol("torch.svd", DEPRECATED, "torch.linalg.svd", "1.8", "1.9", warns=NO_WARNING, torchfix=("TOR101", "TOR103"),
              note="`torch.linalg.svd` returns `Vh`, not `V`, and takes `full_matrices=` instead of `some=`"),
    ApiSymbol("torch.ger", DEPRECATED, "torch.outer", "1.8", "1.8", warns=NO_WARNING, torchfix=("TOR101", "TOR103"), drop_in=True),
    ApiSymbol("torch.nn.UpsamplingNearest2d", DEPRECATED, "torch.nn.Upsample", "1.0", "1.0",
              warns="documented as deprecated; torch emits no warning", torchfix=("TOR101", "TOR103"),
              note='`torch.nn.Upsample(..., mode="nearest")`'),
    ApiSymbol("torch.nn.UpsamplingBilinear2d", DEPRECATED, "torch.nn.Upsample", "1.0", "1.0",
              warns="documented as deprecated; torch emits no warning", torchfix=("TOR101", "TOR103"),
              note='`torch.nn.Upsample(..., mode="bilinear", align_corners=True)`'),
    ApiSymbol("torch.testing.assert_allclose", DEPRECATED, "torch.testing.assert_close", "1.9", "1.12", torchfix=("TOR101", "TOR103"),
              note="`torch.testing.assert_close` has other default tolerances"),
    ApiSymbol("torch.nn.utils.weight_norm", DEPRECATED, "torch.nn.utils.parametrizations.weight_norm", "2.1", "2.1",
              torchfix=("TOR101", "TOR103"),
              note="the parametrized module keeps its weight under `parametrizations.weight.original0/1`, so old state dicts need converting"),
    ApiSymbol("torch.backends.cuda.sdp_kernel", DEPRECATED, "torch.nn.attention.sdpa_kernel", "2.3", "2.3",
              torchfix=("TOR101", "TOR103"), note="`sdpa_kernel` takes a list of `SDPBackend`s instead of boolean flags"),
    ApiSymbol("torch.utils._pytree._register_pytree_node", DEPRECATED, "torch.utils._pytree.register_pytree_node", "2.2", "2.2",
              warns="needs a class registered once per process; the test registers a fresh one", torchfix=("TOR101", "TOR103")),
    ApiSymbol("torch.cpu.amp.autocast", DEPRECATED, "torch.amp.autocast", "2.0", "2.4", torchfix=("TOR101", "TOR103"),
              note='`torch.amp.autocast("cpu", ...)`'),
    *(
        ApiSymbol(f"functorch.{name}", DEPRECATED, f"torch.func.{name}", "2.0", "2.0",
                  warns=True if name == "vmap" else "the same deprecation as `functorch.vmap`, which the test calls",
                  torchfix=("TOR101", "TOR103"), drop_in=True)
        for name in ("vmap", "grad", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "functionalize")
    ),
    # --- non-public aliases (TL805) ------------------------------------------------------
    ApiSymbol("torch.utils.data._utils.collate.default_collate", NON_PUBLIC, "torch.utils.data.default_collate", "1.11", None,
              warns="a private path: it does not warn", torchfix=("TOR104", "TOR105"), drop_in=True),
    ApiSymbol("torch.utils.data._utils.collate.default_convert", NON_PUBLIC, "torch.utils.data.default_convert", "1.11", None,
              warns="a private path: it does not warn", torchfix=("TOR104", "TOR105"), drop_in=True),
    # --- torch.cuda.amp (TL801) ----------------------------------------------------------
    ApiSymbol("torch.cuda.amp.autocast", AMP, "torch.amp.autocast", "2.0", "2.4", warns="needs CUDA",
              torchfix=("TOR101",), note='`torch.amp.autocast("cuda", ...)`'),
    ApiSymbol("torch.cuda.amp.GradScaler", AMP, "torch.amp.GradScaler", "2.3", "2.4", torchfix=(),
              note='`torch.amp.GradScaler("cuda", ...)`'),
    ApiSymbol("torch.cuda.amp.custom_fwd", AMP, "torch.amp.custom_fwd", "2.4", "2.4", torchfix=("TOR101",),
              note='`torch.amp.custom_fwd(device_type="cuda")`'),
    ApiSymbol("torch.cuda.amp.custom_bwd", AMP, "torch.amp.custom_bwd", "2.4", "2.4", torchfix=("TOR101",),
              note='`torch.amp.custom_bwd(device_type="cuda")`'),
)

BY_NAME: dict[str, ApiSymbol] = {s.name: s for s in SYMBOLS}


def symbols(category: str) -> dict[str, ApiSymbol]:
    """The symbols of one category, by qualified name."""
    return {s.name: s for s in SYMBOLS if s.category == category}


def version(text: str) -> tuple[int, int]:
    """``"2.1"`` as ``(2, 1)``."""
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def concerns(deprecated: str | None, newest: tuple[int, int] | None) -> bool:
    """Whether a deprecation in torch ``deprecated`` concerns a project whose newest
    supported torch is ``newest`` (None: unknown or uncapped, so it does): a project pinned
    to torch 1.13 never sees what 2.4 deprecated."""
    return deprecated is None or newest is None or newest >= version(deprecated)


def available(since: str | None, oldest: tuple[int, int] | None) -> bool:
    """Whether something that came with torch ``since`` exists in every torch version a
    project supports, ``oldest`` being the oldest (None: unknown, so not known to)."""
    return since is not None and oldest is not None and oldest >= version(since)
