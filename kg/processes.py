"""Small helpers about OS processes shared by the server supervisors and the designs' leases."""

from __future__ import annotations

import os
import socket


def pid_alive(pid: int) -> bool:
    """True while the process runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def this_process() -> str:
    """This process as an owner is named (`host:pid`): what `owner_runs` asks about."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_runs(owner: str) -> bool:
    """Whether a design's owner (`host:pid:tag`) may still be working: a process of another machine
    (nothing here can tell), or one of this machine that still runs."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return host != socket.gethostname() or not pid.isdigit() or pid_alive(int(pid))
