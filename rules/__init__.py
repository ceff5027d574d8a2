"""torchlint's rules: one module per rule, each a ``torchlint.rule.Rule`` subclass whose
docstring is its documentation; ``all_rules()`` finds them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from functools import lru_cache

from torchlint.rule import Rule

_CODE = re.compile(r"TL\d{3}")


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule in ``torchlint.rules``, sorted by code."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, Rule) and obj is not Rule and obj.__module__ == module.__name__:
                if not _CODE.fullmatch(obj.code):
                    raise RuntimeError(f"rule {obj.__name__} has a malformed code {obj.code!r}")
                if obj.code in found:
                    raise RuntimeError(f"two rules share the code {obj.code}")
                found[obj.code] = obj
    return tuple(found[code] for code in sorted(found))


def rule_by_code(code: str) -> type[Rule]:
    for rule in all_rules():
        if rule.code == code:
            return rule
    raise KeyError(code)
