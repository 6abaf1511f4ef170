"""A real Neo4j 5.26 without Docker: Maven fetches the embedded DBMS, a one-file launcher runs it.

Used by the test suite, CI and laptops with Java 17+. `scripts/neo4j-local start|stop|status`
is the command-line face of this module (`python -m chiplore.kg.neo4j_local`).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import platformdirs

from chiplore.core.errors import ChiploreError
from chiplore.kg.processes import pid_alive

NEO4J_VERSION = "5.26.19"
LAUNCHER = "Neo4jLocal"
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 60.0
JAVA_OPTS_ENV = "CHIPLORE_NEO4J_JAVA_OPTS"
JVM_FLAGS = [
    "-Xms256m",
    "-Xmx1g",
    # A small server on a developer's machine or CI, not a production DBMS: the client JIT alone and one
    # GC thread spend about half the CPU the server JIT and G1 spend warming up (a Neo4j-bound test
    # subset: 59 -> 32 CPU-s, 51 -> 42 s), and they share two cores with the tests. JAVA_OPTS_ENV adds
    # flags after these (the last of a flag wins): `-XX:TieredStopAtLevel=4 -XX:+UseG1GC` for a big graph.
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    # The flags of Neo4j's own neo4j.conf: its page cache and Netty need these packages opened.
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
]


class Neo4jLocalError(ChiploreError):
    """Fetching, starting or stopping the local Neo4j failed."""


@dataclass(frozen=True)
class Instance:
    name: str
    home: Path
    uri: str | None
    pid: int | None
    browser: str | None = None  # Neo4j Browser's URL (HTTP on 127.0.0.1)

    @property
    def running(self) -> bool:
        return self.pid is not None and pid_alive(self.pid)


def cache_dir() -> Path:
    override = os.environ.get("CHIPLORE_NEO4J_LOCAL_HOME")
    return Path(override) if override else Path(platformdirs.user_cache_dir("chiplore")) / "neo4j-local"


def install(version: str = NEO4J_VERSION) -> tuple[str, Path]:
    """Fetch Neo4j with Maven (once) and compile the launcher (once); return (classpath, classes)."""
    root = cache_dir() / version
    classpath_file = root / "classpath.txt"
    classes = root / "classes"
    root.mkdir(parents=True, exist_ok=True)
    pom = root / "pom.xml"
    if pom.exists() and pom.read_text() != _resource("pom.xml"):
        classpath_file.unlink(missing_ok=True)  # the dependencies changed: resolve them again
    if not classpath_file.exists():
        for tool in ("mvn", "javac", "java"):
            if shutil.which(tool) is None:
                raise Neo4jLocalError(f"{tool} is not on PATH; the local Neo4j needs Java 17+ and Maven")
        pom.write_text(_resource("pom.xml"))
        result = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(pom), f"-Dneo4j.version={version}",
             "dependency:build-classpath", f"-Dmdep.outputFile={classpath_file}.partial"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            tail = (result.stdout + result.stderr).strip().splitlines()[-5:]
            raise Neo4jLocalError("Maven could not fetch Neo4j: " + " | ".join(tail))
        Path(f"{classpath_file}.partial").rename(classpath_file)
    classpath = classpath_file.read_text().strip()
    source = root / f"{LAUNCHER}.java"
    fresh_source = _resource(f"{LAUNCHER}.java")
    stale = not source.exists() or source.read_text() != fresh_source
    if stale or not (classes / f"{LAUNCHER}.class").exists():
        source.write_text(fresh_source)
        classes.mkdir(exist_ok=True)
        result = subprocess.run(
            ["javac", "-cp", classpath, "-d", str(classes), str(source)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if result.returncode != 0:
            raise Neo4jLocalError(f"javac failed on the launcher: {result.stderr.strip()[-500:]}")
    return classpath, classes


def java_flags() -> list[str]:
    """The JVM's flags: chiplore's, then CHIPLORE_NEO4J_JAVA_OPTS's (split as a shell would)."""
    extra = os.environ.get(JAVA_OPTS_ENV, "")
    try:
        return [*JVM_FLAGS, *shlex.split(extra)]
    except ValueError as error:  # an unclosed quote
        raise Neo4jLocalError(f"{JAVA_OPTS_ENV}={extra!r} cannot be split into flags: {error}") from None


def instance(name: str = "default") -> Instance:
    home = cache_dir() / "instances" / name
    pid = _read_int(home / "pid")
    uri_file, browser_file = home / "uri", home / "browser"
    uri = uri_file.read_text().strip() if uri_file.exists() else None
    browser = browser_file.read_text().strip() if browser_file.exists() else None
    return Instance(name=name, home=home, uri=uri, pid=pid, browser=browser)


def start(name: str = "default", password: str = "", *, fresh: bool = False) -> Instance:
    """Start the named instance (or return it if it runs) and wait until Bolt answers. An instance
    keeps its Bolt port from one start to the next where the port is free (a teammate's exported URI
    still works), and its authentication: one made with a password does not start without one (that
    would turn its authentication off), and a running one is not handed out for another password."""
    current = instance(name)
    made_with = _read_text(current.home / "auth") if not fresh else None
    if made_with is None and not fresh and (current.home / "dbms").is_dir():
        made_with = UNKNOWN_AUTH  # made before its authentication was kept: whether it had a password is unknown
    if current.running and not fresh:
        if made_with not in (None, UNKNOWN_AUTH) and not _same_auth(made_with, password):
            raise Neo4jLocalError(f"instance {name!r} runs with {_said(made_with)}, and CHIPLORE_NEO4J_PASSWORD "
                                  f"{'is not set' if not password else 'is another'}: `stop` it first to start it "
                                  "with another")  # fmt: skip
        return current
    if made_with not in (None, NO_AUTH) and not password:
        made = "a password" if made_with != UNKNOWN_AUTH else "a password, perhaps (an older chiplore made it)"
        raise Neo4jLocalError(f"instance {name!r} was made with {made}, and CHIPLORE_NEO4J_PASSWORD is not set: "
                              "starting it so would turn its authentication off; set it (or --fresh starts a new "
                              "instance, deleting its data)")  # fmt: skip
    if current.running:
        stop(name)
    classpath, classes = install()
    home = current.home
    if fresh and home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    for stale in ("pid", "uri", "browser"):
        (home / stale).unlink(missing_ok=True)
    home.chmod(0o700)  # its store, its password's hash and its log are the user's alone
    port, http_port = (_free_port(kept) for kept in _last_ports(home))
    (home / "ports").write_text(f"{port} {http_port}")
    _write_private(home / "auth", _auth_mark(password))
    log_path = home / "neo4j.log"
    env = {**os.environ, "NEO4J_LOCAL_PASSWORD": password}
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            ["java", *java_flags(), "-cp", f"{classes}{os.pathsep}{classpath}", LAUNCHER,
             str(home / "dbms"), str(port), str(http_port)],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
        )  # fmt: skip
    (home / "pid").write_text(str(process.pid))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise Neo4jLocalError(f"Neo4j exited with code {process.returncode}: {_tail(log_path)}")
        lines = log_path.read_text(errors="replace").splitlines()
        ready = [line for line in lines if line.startswith("READY ")]
        if ready:
            uri = ready[-1].split(" ", 1)[1].strip()
            browsers = [line.split(" ", 1)[1].strip() for line in lines if line.startswith("BROWSER ")]
            (home / "uri").write_text(uri)
            if browsers:
                (home / "browser").write_text(browsers[-1])
            return Instance(name=name, home=home, uri=uri, pid=process.pid, browser=browsers[-1] if browsers else None)
        time.sleep(0.2)
    _terminate(process.pid)
    raise Neo4jLocalError(f"Neo4j did not become ready in {READY_TIMEOUT_S:.0f} s: {_tail(log_path)}")


def stop(name: str = "default") -> bool:
    """Stop the named instance; True when one was running."""
    current = instance(name)
    was_running = current.running
    if current.pid is not None and was_running:
        _terminate(current.pid)
    for stale in ("pid", "uri", "browser"):
        (current.home / stale).unlink(missing_ok=True)
    return was_running


def _terminate(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if pid_alive(pid):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _free_port(wanted: int = 0) -> int:
    """`wanted` where it is free, else any free port (0: any). SO_REUSEADDR as the server's own bind:
    a port its last run left in TIME_WAIT (clients were connected) is free to it."""
    for port in dict.fromkeys((wanted, 0)):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise Neo4jLocalError("no free port on 127.0.0.1")


def _last_ports(home: Path) -> tuple[int, int]:
    """The Bolt and HTTP ports of the instance's last start; (0, 0) where none is kept or readable."""
    kept = (_read_text(home / "ports") or "").split()
    if len(kept) == 2 and all(k.isdigit() and 0 < int(k) < 65536 for k in kept):
        return int(kept[0]), int(kept[1])
    return 0, 0


NO_AUTH = "none"
UNKNOWN_AUTH = "unknown"  # an instance made before its authentication was kept


def _auth_mark(password: str) -> str:
    """How an instance authenticates, as kept beside it: a salted scrypt of its password, never the
    password itself."""
    if not password:
        return NO_AUTH
    salt = secrets.token_hex(16)
    return f"scrypt${salt}${_scrypt(password, salt)}"


def _same_auth(mark: str, password: str) -> bool:
    if mark == NO_AUTH or not password:
        return mark == NO_AUTH and not password
    kind, _, rest = mark.partition("$")
    salt, _, digest = rest.partition("$")
    return kind == "scrypt" and hmac.compare_digest(digest, _scrypt(password, salt))


def _scrypt(password: str, salt: str) -> str:
    return hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=2**14, r=8, p=1).hex()


def _write_private(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(text)


def _said(mark: str) -> str:
    return "no password" if mark == NO_AUTH else "a password"


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        return None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _resource(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text()


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return "no log"
    return " | ".join(line.strip() for line in text[-lines:])
