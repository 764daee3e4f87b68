"""Package names that load their module on first use (PEP 562), so importing a package is cheap.

A command's ``--help`` or a configuration error should answer in a second; importing TensorFlow,
Keras or MLflow for names it never touches takes ten.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(namespace: dict, exports: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list]]:
    """``(__getattr__, __dir__)`` for a package whose ``exports`` map each name to its module.

    ``namespace`` is the package's ``globals()``: a loaded name is stored there, so later lookups
    do not come back here.
    """

    def __getattr__(name: str):
        if name not in exports:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(exports[name]), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__
