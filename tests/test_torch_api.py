"""The torch API data (semantic/torch_api.py) against the installed torch: every removed
symbol is gone, every replacement is there, every deprecated symbol that is said to warn
warns when called. Only this test imports torch; the linter never does."""

from __future__ import annotations

import importlib
import warnings

import pytest

from torchlint.semantic import torch_api

torch = pytest.importorskip("torch")


def _resolve(qname: str):
    """The object a qualified name names, as Python resolves it (an attribute of its parent
    first, else a submodule to import); raises AttributeError or ImportError when it is not
    there."""
    parts = qname.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            obj = importlib.import_module(".".join(parts[:i]))
    return obj


def _installed() -> tuple[int, int]:
    return torch_api.version(torch.__version__)


def test_versions_are_well_formed():
    for s in torch_api.SYMBOLS:
        for v in (s.since, s.deprecated, s.removed):
            assert v is None or torch_api.version(v) <= _installed(), (s.name, v)
        if s.removed is not None:
            assert s.deprecated is not None and torch_api.version(s.deprecated) <= torch_api.version(s.removed), s.name
        assert (s.replacement is None) == (s.since is None), s.name
        assert s.warns is True or (isinstance(s.warns, str) and s.warns), s.name


@pytest.mark.parametrize("symbol", [s for s in torch_api.SYMBOLS if s.replacement], ids=lambda s: s.name)
def test_replacement_exists(symbol):
    assert callable(_resolve(symbol.replacement))


@pytest.mark.parametrize("symbol", torch_api.symbols(torch_api.REMOVED).values(), ids=lambda s: s.name)
def test_removed_symbol_is_gone(symbol):
    try:
        stub = _resolve(symbol.name)
    except (AttributeError, ImportError):
        return
    # torch keeps a stub that raises, naming the replacement.
    eye = torch.eye(2)
    with pytest.raises(RuntimeError, match="removed"):
        stub(eye, eye) if symbol.name in ("torch.solve", "torch.lstsq") else stub(eye)


@pytest.mark.parametrize(
    "symbol",
    [s for s in torch_api.SYMBOLS if s.category != torch_api.REMOVED and s.name not in torch_api.symbols(torch_api.REMOVED)],
    ids=lambda s: s.name,
)
def test_kept_symbol_exists(symbol):
    assert callable(_resolve(symbol.name))


def _calls():
    """A cheap call of each symbol said to warn."""
    eye = torch.eye(3)
    return {
        "torch.chain_matmul": lambda: torch.chain_matmul(eye, eye, eye),
        "torch.cholesky": lambda: torch.cholesky(eye),
        "torch.qr": lambda: torch.qr(eye),
        "torch.range": lambda: torch.range(0, 3),
        "torch.lu": lambda: torch.lu(eye),
        "torch.lu_solve": lambda: torch.lu_solve(eye, *torch.linalg.lu_factor(eye)),
        "torch.triangular_solve": lambda: torch.triangular_solve(eye, eye),
        "torch.testing.assert_allclose": lambda: torch.testing.assert_allclose(eye, eye),
        "torch.nn.utils.weight_norm": lambda: torch.nn.utils.weight_norm(torch.nn.Linear(2, 2)),
        "torch.backends.cuda.sdp_kernel": lambda: torch.backends.cuda.sdp_kernel().__enter__(),
        "torch.cpu.amp.autocast": lambda: torch.cpu.amp.autocast(),
        "functorch.vmap": lambda: _resolve("functorch.vmap")(lambda x: x)(eye),
        "torch.cuda.amp.GradScaler": lambda: torch.cuda.amp.GradScaler(enabled=False),
        "torch.cuda.amp.custom_fwd": lambda: torch.cuda.amp.custom_fwd(lambda: None),
        "torch.cuda.amp.custom_bwd": lambda: torch.cuda.amp.custom_bwd(lambda: None),
    }


@pytest.mark.parametrize("symbol", [s for s in torch_api.SYMBOLS if s.warns is True], ids=lambda s: s.name)
def test_deprecated_symbol_warns(symbol):
    call = _calls()[symbol.name]  # a symbol said to warn has a call here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert any("deprecated" in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_register_pytree_node_warns():
    # (``warns`` says why the table's test does not call it: one class per registration.)
    import torch.utils._pytree as pytree

    class Fresh:
        pass

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pytree._register_pytree_node(Fresh, lambda c: ([], None), lambda values, context: Fresh())
    assert any("deprecated" in str(w.message) for w in caught)


def test_available():
    assert torch_api.available("2.1", (2, 1))
    assert torch_api.available("2.1", (2, 4))
    assert not torch_api.available("2.3", (2, 1))
    assert not torch_api.available("1.8", None)  # unknown: never known to exist
    assert not torch_api.available(None, (2, 13))
