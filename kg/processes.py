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


def this_machine() -> str:
    """This machine as owners name it: its host name and, where the kernel tells it, its PID namespace
    (`host@4026531836`). Two containers may share a host name while each counts its own PIDs: a PID
    of one names nothing in the other, so neither may judge the other's processes by it."""
    host = socket.gethostname()
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # 'pid:[4026531836]'
    except OSError:
        return host
    inode = namespace.removeprefix("pid:[").removesuffix("]")
    return f"{host}@{inode}" if inode.isdigit() else host


def this_process() -> str:
    """This process as an owner is named (`host@pidns:pid`): what `owner_runs` asks about."""
    return f"{this_machine()}:{os.getpid()}"


def owner_runs(owner: str) -> bool:
    """Whether a design's owner (`host@pidns:pid:tag`) may still be working: a process of another
    machine or PID namespace (nothing here can tell), or one of this one that still runs. An owner
    an older chiplore wrote (`host:pid`, no namespace) is judged by its host name alone."""
    where, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    here = this_machine() if "@" in where else socket.gethostname()
    return where != here or not pid.isdigit() or pid_alive(int(pid))
