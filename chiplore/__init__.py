"""chiplore: learns an unfamiliar AI accelerator and optimizes kernels for it.

The Python API, the one the `chiplore` command itself uses (README: "The Python API"):

    import chiplore

    with chiplore.open_session(data_dir="runs/a", create=True) as session:
        session.learn(budget_s=600)
        session.optimize(["decoder_feedforward"], budget_s=600)
        for kernel in session.status():
            print(kernel.kernel, kernel.best_cycles, kernel.speedup_vs_baseline)
        best = session.best("decoder_feedforward")
        open("ffn.fe", "w").write(session.program_text(best))
        rows = session.query("measurements-of", {"param": "noc.chip_bytes_per_cycle"})

The names below load on first use (PEP 562): every chiplore package imports `chiplore.core`, which
runs this file, so importing the session here eagerly would be an import cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "App": "chiplore.app",
    "open_target": "chiplore.app",
    "Session": "chiplore.session",
    "DesignTree": "chiplore.session",
    "KernelListing": "chiplore.session",
    "BestProgram": "chiplore.results",
    "DesignProgram": "chiplore.results",
    "Settings": "chiplore.core.settings",
    "ChiploreError": "chiplore.core.errors",
}

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from chiplore.app import App, open_target
    from chiplore.core.errors import ChiploreError
    from chiplore.core.settings import Settings
    from chiplore.results import BestProgram, DesignProgram
    from chiplore.session import DesignTree, KernelListing, Session

__all__ = [
    "App",
    "BestProgram",
    "ChiploreError",
    "DesignProgram",
    "DesignTree",
    "KernelListing",
    "Session",
    "Settings",
    "__version__",
    "open_session",
    "open_target",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'chiplore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def open_session(*, create: bool = False, **settings: Any) -> AbstractContextManager[Session]:
    """A Session on the store and target the settings name: CHIPLORE_* from the environment, each
    overridden by a keyword (`store="neo4j"`, `data_dir=...`, `neo4j_uri=...`, `target=...`). The
    store closes when the `with` block ends. `create` makes an embedded data dir that does not
    exist yet (as `chiplore init` does); otherwise a missing graph is a ConfigError."""
    from pydantic import ValidationError

    from chiplore.app import App
    from chiplore.core.errors import ConfigError
    from chiplore.core.settings import Settings, setting_error

    unknown = sorted(set(settings) - set(Settings.model_fields))
    if unknown:  # a mistyped keyword would fall back to the environment's value without a word
        raise ConfigError(f"open_session has no setting {unknown[0]!r}; it takes {', '.join(Settings.model_fields)}")
    try:
        chosen = Settings(**settings)
    except ValidationError as error:
        raise setting_error(error, settings, "CHIPLORE_", str) from None
    return App(chosen).session(create=create)
