"""The `chiplore` command line, one module per command group over the Session API: graph (init,
status, db), learn, optimize (and tree), toolchain, kernel, query (and cypher), demo (and report)."""

from __future__ import annotations

import signal

from chiplore.cli import demo, graph, kernels, learn, optimize, query, toolchain  # noqa: F401  (each registers its commands)
from chiplore.cli.main import main


def run() -> None:
    """The console script: a terminated command unwinds like Ctrl-C, so stores close cleanly."""

    def exit_on_sigterm(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, exit_on_sigterm)
    main()


__all__ = ["main", "run"]
