"""The `chiplore` command line, one module per command group over the Session API: graph (init,
status, db), learn, optimize (and tree), toolchain, kernel, query (params, cypher), results (best,
show), graph_io (graph export, import, copy), serve (mcp, completion), demo (and report)."""

from __future__ import annotations

import signal

# each module registers its commands
from chiplore.cli import (  # noqa: F401
    demo,
    graph,
    graph_io,
    kernels,
    learn,
    optimize,
    query,
    results,
    serve,
    toolchain,
)
from chiplore.cli.main import main
from chiplore.cli.options import err_console
from chiplore.core.errors import Terminated


def run() -> None:
    """The console script: a terminated command unwinds like Ctrl-C, so stores close cleanly."""

    def exit_on_sigterm(signum: int, frame: object) -> None:
        raise Terminated(128 + signum)

    signal.signal(signal.SIGTERM, exit_on_sigterm)
    try:
        main()
    except Terminated:  # said as Ctrl-C's "aborted" is: a script's log shows why the command ended
        err_console.print("[red]error:[/red] terminated (SIGTERM)", highlight=False)
        raise


__all__ = ["main", "run"]
