"""Token-level mutations of the shipped programs: check() answers with diagnostics, never a crash."""

from __future__ import annotations

import random
import re

import pytest

from chiplore.simulator.toolchain.check import check
from chiplore.simulator.toolchain.rules import VERSIONS
from tests.simulator.programs import all_programs

MUTANTS = 800  # a sample: benchmarks/differential.py sweeps 10,000 programs and their mutants
TOKEN = re.compile(r"//[^\n]*|\s+|\d+\.\d+|\d+|[A-Za-z_][A-Za-z0-9_]*!?|::|\.\.|->|#!\[|#\[|&mut|\S")
# Tokens worth splicing in: the language's punctuation, keywords, stages and a few strays.
EXTRA = ["{", "}", "(", ")", "[", "]", ";", ",", ".", "=", "#", "%", "/", "..", "::", "let", "mut", "for", "in",
         "fn", "kernel", "axes!", "layout", "type", "main", "sub", "fetch", "lut", "decode", "cast", "widen",
         "contract", "commit", "dm", "hbm", "trf", "vrf", "rep", "at", "0", "4096", "1.5", '"0.7.0"', "bf16",
         "f4e2m1", "nope", "\\", "$", "\u00e9", "\x00"]  # fmt: skip


def _mutate(tokens: list[str], rng: random.Random, pool: list[str]) -> str:
    mutated = list(tokens)
    for _ in range(rng.randint(1, 3)):
        index = rng.randrange(len(mutated))
        action = rng.randrange(4)
        if action == 0:
            del mutated[index]
        elif action == 1:
            mutated.insert(index, rng.choice(pool))
        elif action == 2:
            mutated[index] = rng.choice(pool)
        else:
            other = rng.randrange(len(mutated))
            mutated[index], mutated[other] = mutated[other], mutated[index]
    return "".join(mutated)


@pytest.mark.slow
@pytest.mark.timeout(900)  # 1,200 checks of kernel-sized programs: ~25 ms each, ~100 ms on a busy machine
def test_mutated_programs_give_only_diagnostics() -> None:
    sources = [p.read_text() for p in all_programs()]
    token_lists = [TOKEN.findall(source) for source in sources]
    assert all("".join(tokens) == source for tokens, source in zip(token_lists, sources, strict=True))
    meaningful = [[t for t in tokens if t.strip() and not t.startswith("//")] for tokens in token_lists]
    pool = sorted({t for tokens in meaningful for t in tokens} | set(EXTRA))
    rng = random.Random(20261129)
    codes: dict[str, int] = {}
    refused = 0
    for index in range(MUTANTS):
        which = index % len(sources)
        mutant = _mutate(token_lists[which], rng, pool)
        result = check(mutant, VERSIONS[index % len(VERSIONS)])
        for diagnostic in result.diagnostics:
            crashed = diagnostic.message.startswith("internal compiler error")
            assert not crashed, f"internal compiler error on mutant {index}:\n{mutant}"
            refused += diagnostic.message.startswith("cannot lower the kernel")
            codes[diagnostic.code] = codes.get(diagnostic.code, 0) + 1
    assert {"E0101", "E0102", "E0103"} <= set(codes), codes
    # What the IR rules let through and the lowerer cannot place is refused with the code of the rule it
    # breaks (E0105, E0107, E0325, ...): never E0100 "cannot lower the kernel", which would be a bug.
    assert refused == 0, refused
