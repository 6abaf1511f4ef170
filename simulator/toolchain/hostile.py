"""Hostile inputs for `ferc check` and `fe-run submit`: programs built to break a compiler rather
than to run (deep nesting of every construct that nests, long files, binary garbage, invalid UTF-8,
NUL bytes, huge literals, axes, loop ranges and tile offsets, shadowed names, mutants of the shipped
programs).

Input `i` of a campaign seeded `s` is drawn from random.Random(s * 1_000_003 + i), and its kind is
`KINDS[i % len(KINDS)]`, so any one input can be regenerated alone (`hostile(s, i)`).
`benchmarks/hostile_programs.py` runs a campaign through both tools as subprocesses under a time
and memory limit; `tests/simulator/test_hostile_programs.py` runs a sample in-process. Every input
must get coded diagnostics, a clean compile, a device result or one line of refusal: never a
traceback and never E0100 (docs/simrngd.md §5.1).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import NamedTuple

from chiplore.simulator.dsl.parser import MAX_NESTING_DEPTH
from chiplore.simulator.toolchain.budget import MAX_INLINE_DEPTH, MAX_LOWERING_STEPS, MAX_SOURCE_BYTES

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
BUDGET_BYTES = MAX_SOURCE_BYTES - 512  # what fits under the compiler's source budget, header included

# A small clean program with a slot for each place a hostile value can go. It compiles under every
# version (0.7.0 spells its casts widen/narrow) and its kernel, k, is a probe: timed, not graded.
TEMPLATE = """#![toolchain = "{version}"]
axes! {{ H = {axis}, K = 32 }}
layout One = {{ cluster: [1 # 2], slice: [1 # 256] }};
kernel k(x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]) {{
    let a: dm<bf16>{{..One, elem: [H]}} = x.dma(engines = [{engine}], packet = {packet});
    for c in {start}..{stop} {{
        let t: dm<bf16>{{..One, elem: [H % 16]}} = x.tile(H % 64, {offset}, {length}).dma(engines = [1]);
    }}
    let s: dm<bf16>{{..One, elem: [H]}} = main(a).fetch(time = [H / 16], packet = [H % 16]).{up}(f32)
        .vector(mul({scale}), add({shift}))
        .{down}(bf16)
        .commit();
    s.dma_into(y, engines = [0]);
}}
"""
SLOTS = {"axis": "64", "engine": "0", "packet": "128", "start": "0", "stop": "4", "offset": "c * 16",
         "length": "16", "scale": "2.0", "shift": "0.5"}  # fmt: skip
VERSIONS = ("0.5.0", "0.6.0", "0.7.0")
INTEGER_SLOTS = ("axis", "engine", "packet", "start", "stop", "offset", "length")
FLOAT_SLOTS = ("scale", "shift")
KERNEL_HEAD = "axes! { H = 64 }\nkernel k(x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]) {\n"


class Draws(random.Random):
    """One input's random stream, and the most bytes the input may take where its kind lets the size
    vary (a test draws small ones; a long file or a 10 MB one is its own kind)."""

    def __init__(self, seed: int, size: int) -> None:
        super().__init__(seed)
        self.size = size


class Answer(NamedTuple):
    """How a tool answered one input (`answer`)."""

    answer: str  # coded, clean, ran, refused; or, uncoded: traceback, internal, killed, unexpected
    codes: tuple[str, ...]
    detail: str = ""


UNCODED = ("traceback", "internal", "timeout", "killed", "unexpected")
_CODE = re.compile(r"\b(?:error|warning|note)\[([EWN]\d{4})\]")
_VERDICT = re.compile(r": (ok|failed) under toolchain \S+ \(")
_DEVICE = re.compile(
    r"^\S+/\S+: (ok|compile_error|fault|timeout|transient|queue_rejected) \("
)  # a job id: <device>/<session>-<n>


def answer(exit_code: int, stdout: str, stderr: str, tool: str) -> Answer:
    """Classify what `ferc check` or `fe-run submit` printed: coded diagnostics, a clean compile, a
    device result or one line of refusal are answers; anything else is uncoded, with why."""
    codes = tuple(_CODE.findall(stdout))
    last = (stderr.strip().splitlines() or [""])[-1][:200]
    if "Traceback (most recent call last)" in stdout + stderr:
        return Answer("traceback", codes, last)
    if "E0100" in codes:
        return Answer("internal", codes, next((line for line in stdout.splitlines() if "E0100" in line), "")[:200])
    if exit_code < 0:
        return Answer("killed", codes, f"signal {-exit_code}")
    if exit_code == 2:
        lines = stderr.splitlines()
        if stdout == "" and len(lines) == 1 and lines[0].startswith("error: "):
            return Answer("refused", codes, lines[0][:200])
        return Answer("unexpected", codes, f"exit 2 with {len(lines)} lines on stderr: {last}")
    if exit_code not in (0, 1) or stderr.strip():
        return Answer("unexpected", codes, f"exit {exit_code}, stderr: {last}")
    if tool == "ferc check":
        if not _VERDICT.search(stdout):
            return Answer("unexpected", codes, "no verdict line")
        if exit_code == 1:
            errors = [code for code in codes if code.startswith("E")]
            return Answer("coded", codes) if errors else Answer("unexpected", codes, "failed without an error code")
        return Answer("clean", codes)
    device = _DEVICE.match(stdout)
    if device is None:
        return Answer("unexpected", codes, f"no device result: {stdout[:120]!r}")
    if device.group(1) == "compile_error" and not any(code.startswith("E") for code in codes):
        message = next((line.strip() for line in stdout.splitlines()[1:] if line.strip()), "")
        return Answer("unexpected", codes, f"compile_error without a code: {message[:160]}")
    return Answer("coded" if device.group(1) == "compile_error" else "ran", codes, device.group(1))


@dataclass(frozen=True)
class Hostile:
    """One hostile input: the bytes of the file and the kernel `fe-run` is told to run."""

    kind: str
    index: int
    data: bytes
    kernel: str = "k"
    # Codes one of which the compiler must answer with, when the kind is built to hit a limit.
    expect: frozenset[str] = frozenset()

    @property
    def text(self) -> str:
        """The file as `ferc` and `fe-run` read it (undecodable bytes become U+FFFD)."""
        return self.data.decode("utf-8", errors="replace")


def template(rng: Draws, **slots: str) -> str:
    version = rng.choice(VERSIONS)
    up, down = ("widen", "narrow") if version == "0.7.0" else ("cast", "cast")
    return TEMPLATE.format(version=version, up=up, down=down, **(SLOTS | slots))


def _within(text: str, rng: Draws) -> int:
    """How many repetitions of `text` fit in the budget, drawn log-uniformly above the depth limit."""
    most = max(2, (rng.size - 200) // max(1, len(text)))
    least = min(most, MAX_NESTING_DEPTH // 2)
    return int(least * (most / least) ** rng.random())


def _nested(open_: str, close: str, inner: str, rng: Draws) -> tuple[str, frozenset[str]]:
    n = _within(open_ + close, rng)
    return open_ * n + inner + close * n, _deep(n)


def _deep(repetitions: int) -> frozenset[str]:
    """E0105 when a construct repeated this many times, one level each at least, nests past the limit."""
    return frozenset({"E0105"}) if repetitions > MAX_NESTING_DEPTH else frozenset()


def _huge_int(rng: Draws) -> str:
    roll = rng.random()
    if roll < 0.4:  # past i64: refused as the program is read
        return str(rng.randint(2**63, 2**64)) if rng.random() < 0.5 else "9" * rng.randint(20, max(21, rng.size))
    if roll < 0.8:  # inside i64, far past any size the chip has
        return str(rng.choice([2**31, 2**32 + 8, 2**40, 2**53 + 1, 2**62, 2**63 - 1, 10**18]))
    return str(rng.choice([0, 1, 3, 7, 4095, 4097, 65536, 10**6, 10**9]))  # awkward but small


def _huge_float(rng: Draws) -> str:
    long = ["0." + "0" * min(5_000, rng.size) + "1", "9" * min(30_000, rng.size) + ".9"]
    return rng.choice(["1e308", "1e309", "1.0e999", "1e-400", "0.0", "3.4e38", "3.5e38", "1" * 400 + ".0", "1.5e-45",
                       "6.0e4", *long])  # fmt: skip


# ---- the kinds -------------------------------------------------------------------------------------


def deep_for(rng: Draws) -> tuple[str, frozenset[str]]:
    loops, expect = _nested("for i in 0..1 {\n", "}\n", "", rng)
    return KERNEL_HEAD + loops + "    x.dma_into(y, engines = [0]);\n}\n", expect


def deep_unary(rng: Draws) -> tuple[str, frozenset[str]]:
    n = _within("-", rng)
    return KERNEL_HEAD + "    let n = " + "-" * n + "1;\n}\n", _deep(n)


def deep_binary(rng: Draws) -> tuple[str, frozenset[str]]:
    op = rng.choice([" + ", " - ", " * ", " / ", " % "])
    n = _within(f"1{op}", rng)
    return KERNEL_HEAD + "    let n = " + op.join(["1"] * n) + ";\n}\n", _deep(n)


def deep_parens(rng: Draws) -> tuple[str, frozenset[str]]:
    # Parentheses add no level of their own: only the parser's stack grows, and it is not recursive.
    inner, _ = _nested("(", ")", "1", rng)
    return KERNEL_HEAD + f"    let n = {inner};\n    x.dma_into(y, engines = [0]);\n}}\n", frozenset()


def deep_calls(rng: Draws) -> tuple[str, frozenset[str]]:
    inner, expect = _nested(rng.choice(["f(", "main(", "exp(", "dm::zeros("]), ")", "x", rng)
    return KERNEL_HEAD + f"    let n = {inner};\n}}\n", expect


def deep_chain(rng: Draws) -> tuple[str, frozenset[str]]:
    link = rng.choice([".tile(H, 0, 64)", ".vector(neg())", ".fetch(time = [H], packet = [1])", ".roll(H, 1)",
                       ".commit()", ".f()"])  # fmt: skip
    head = rng.choice(["x", "main(x)", "sub(x)"])
    n = _within(link, rng)
    return KERNEL_HEAD + f"    let n = {head}{link * n};\n}}\n", _deep(n)


def deep_args(rng: Draws) -> tuple[str, frozenset[str]]:
    inner, expect = _nested("vector(mul(vrf = ", "))", "v", rng)
    return KERNEL_HEAD + f"    let n = main(x).{inner};\n}}\n", expect


def deep_fns(rng: Draws) -> tuple[str, frozenset[str]]:
    """A chain of fns each calling the next (inlined, so the chain nests as deep as it is long), or a
    cycle of them (a fn that calls itself, in the end)."""
    n = rng.choice([1, rng.randint(2, 40), rng.randint(40, 1_200)])
    cycle = n == 1 or rng.random() < 0.5
    calls = [f"    f{(i + 1) % n}(v);\n" if cycle or i + 1 < n else "" for i in range(n)]
    fns = "".join(f"fn f{i}(v: &hbm<bf16>[H]) {{\n{call}}}\n" for i, call in enumerate(calls))
    source = (
        "axes! { H = 64 }\n" + fns + "kernel k(x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]) {\n"
        "    f0(x);\n    x.dma_into(y, engines = [0]);\n}\n"
    )
    return source, frozenset({"E0104"}) if cycle or n > MAX_INLINE_DEPTH else frozenset()


def deep_layouts(rng: Draws) -> tuple[str, frozenset[str]]:
    """Layouts that spread each other (`..L1` in L0, `..L2` in L1, ...), types that name each other,
    possibly in a cycle."""
    n = _within("layout L00000 = { ..L00000 };\n", rng)
    cycle = rng.random() < 0.5
    if rng.random() < 0.5:
        items = "".join(f"layout L{i} = {{ ..L{(i + 1) % n if cycle else i + 1} }};\n" for i in range(n))
        items += f"layout L{n} = {{ cluster: [1 # 2], slice: [1 # 256] }};\n"
        use = "let a: dm<bf16>{..L0, elem: [H]} = x.dma(engines = [0]);\n    a.dma_into(y, engines = [0]);\n"
    else:
        items = "".join(f"type T{i} = T{(i + 1) % n if cycle else i + 1};\n" for i in range(n))
        items += f"type T{n} = dm<bf16>{{cluster: [1 # 2], slice: [1 # 256], elem: [H]}};\n"
        use = "let a: T0 = x.dma(engines = [0]);\n    a.dma_into(y, engines = [0]);\n"
    source = "axes! { H = 64 }\n" + items + "kernel k(x: &hbm<bf16>[H], y: &mut hbm<bf16>[H]) {\n    " + use + "}\n"
    return source, frozenset({"E0501"}) if cycle else frozenset()


def long_file(rng: Draws) -> tuple[str, frozenset[str]]:
    """A valid program padded to a size drawn from 8 KB to 12 MB (over 64 KB: E0104; over 10 MB: the
    tools refuse to read it)."""
    size = int(8_000 * (12_000_000 / 8_000) ** rng.random())
    line = "    let t{i}: dm<bf16>{{..One, elem: [H]}} = x.dma(engines = [0]);\n"
    head, tail = template(rng).rsplit("    s.dma_into", 1)
    body, i = [], 0
    total = len(head) + len(tail)
    while total < size:
        text = line.format(i=i) if rng.random() < 0.5 else f"    // {'-' * rng.randint(10, 4000)}\n"
        body.append(text)
        total += len(text)
        i += 1
    expect = frozenset({"E0104"}) if total > MAX_SOURCE_BYTES else frozenset()
    return head + "".join(body) + "    s.dma_into" + tail, expect


def many_errors(rng: Draws) -> tuple[str, frozenset[str]]:
    """Thousands of statements, each with an unknown name: thousands of diagnostics."""
    line = "    let t{i}: dm<bf17>{{..Nope, elem: [Q]}} = z{i}.dma(engines = [9]);\n"
    n = _within(line.format(i=9999), rng)
    return KERNEL_HEAD + "".join(line.format(i=i) for i in range(n)) + "}\n", frozenset({"E0102"})


def many_unrolled(rng: Draws) -> tuple[str, frozenset[str]]:
    """Loops that unroll to thousands or billions of statements: the budget refuses them (E0104)."""
    depth = rng.randint(1, 4)
    width = max(2, int((MAX_LOWERING_STEPS * 2) ** (1 / depth))) if rng.random() < 0.5 else 10 ** rng.randint(3, 18)
    loops = "".join(f"for i{d} in 0..{width} {{\n" for d in range(depth))
    return (
        KERNEL_HEAD + loops + "    let t: dm<bf16>{cluster: [1 # 2], slice: [1 # 256], elem: [H]} = "
        "x.dma(engines = [0]);\n" + "}\n" * depth + "    x.dma_into(y, engines = [0]);\n}\n",
        frozenset({"E0104"}),
    )


def huge_int(rng: Draws) -> tuple[str, frozenset[str]]:
    slots = {slot: _huge_int(rng) for slot in rng.sample(INTEGER_SLOTS, rng.randint(1, 3))}
    return template(rng, **slots), frozenset()


def huge_range(rng: Draws) -> tuple[str, frozenset[str]]:
    start = rng.choice(["0", str(-(10 ** rng.randint(1, 18))), str(2**62)])
    stop = str(10 ** rng.randint(4, 18) + rng.randint(0, 9))
    return template(rng, start=start, stop=stop), frozenset()


def huge_tile(rng: Draws) -> tuple[str, frozenset[str]]:
    offset = rng.choice(["c * 16", _huge_int(rng), f"c * {_huge_int(rng)}", f"-{_huge_int(rng)}", "c * 16 - 64"])
    return template(rng, offset=offset, length=rng.choice(["16", "0", "-16", _huge_int(rng)])), frozenset()


def huge_axis(rng: Draws) -> tuple[str, frozenset[str]]:
    axis = _huge_int(rng)
    return template(rng, axis=axis), frozenset()


def huge_tensor(rng: Draws) -> tuple[str, frozenset[str]]:
    """An input whose dimensions multiply past any memory: many large axes, or one composite of them."""
    n = rng.randint(2, 40)
    axes = ", ".join(f"A{i} = {_huge_int(rng)}" for i in range(n))
    dims = ", ".join(f"A{i}" for i in range(n))
    shape = f"[{dims}]" if rng.random() < 0.5 else "[Q]"
    source = (f"axes! {{ H = 64, {axes}, Q = ({dims}) }}\nlayout One = {{ cluster: [1 # 2], slice: [1 # 256] }};\n"
              f"kernel k(x: &hbm<bf16>[H], z: &hbm<bf16>{shape}, y: &mut hbm<bf16>[H]) {{\n"
              "    let a: dm<bf16>{..One, elem: [H]} = x.dma(engines = [0]);\n"
              "    let b: dm<bf16>{..One, elem: [A0 % 64]} = z.tile(A0 % 64, 0, 64).dma(engines = [1]);\n"
              "    a.dma_into(y, engines = [0]);\n}\n")  # fmt: skip
    return source, frozenset()


def huge_float(rng: Draws) -> tuple[str, frozenset[str]]:
    return template(rng, scale=_huge_float(rng), shift=_huge_float(rng)), frozenset()


def shadowed(rng: Draws) -> tuple[str, frozenset[str]]:
    """A `let` or loop variable that rebinds a parameter, an axis, a keyword or an earlier let."""
    name = rng.choice(["x", "y", "a", "s", "c", "H", "One", "auto", "bf16", "k"])
    statement = rng.choice([
        f"    let {name}: dm<bf16>{{..One, elem: [H]}} = x.dma(engines = [2]);\n",
        f"    for {name} in 0..2 {{\n        let u: dm<bf16>{{..One, elem: [H]}} = x.dma(engines = [2]);\n    }}\n",
        f"    {name} = x.dma(engines = [2]);\n",
        f"    let {name} = 3;\n",
    ])  # fmt: skip
    source = template(rng)
    where = rng.choice(["    let s:", "    s.dma_into", "    for c"])
    reserved = name in ("x", "y", "H", "One", "auto", "bf16")  # rebound wherever the statement goes
    return source.replace(where, statement + where, 1), frozenset({"E0502"}) if reserved else frozenset()


def structure(rng: Draws) -> tuple[str, frozenset[str]]:
    """Files with no kernel, two kernels, non-tensor kernel parameters, empty or comment-only."""
    source = template(rng)
    return rng.choice([
        "", " \n\t\n", "// only a comment\n", "/* an unterminated comment" + "*" * rng.randint(1, rng.size),
        source.split("kernel k")[0],
        source + source.split("\n", 1)[1].replace("kernel k(", "kernel k2("),
        source.replace("y: &mut hbm<bf16>[H]", "y: &mut hbm<bf16>[H], n: int, A: axis, L: layout"),
        source.replace("x: &hbm<bf16>[H]", "x: dm<bf16>{..One, elem: [H]}"),
        '#![toolchain = "9.9.9"]\n' + source, '#![toolchain = "' + "9" * rng.size + '"]\n' + source,
    ]), frozenset()  # fmt: skip


def long_names(rng: Draws) -> tuple[str, frozenset[str]]:
    name = "n" * rng.randint(min(1_000, rng.size), rng.size)
    source = template(rng)
    return rng.choice([source.replace(" a:", f" {name}:").replace("(a)", f"({name})"),
                       source.replace("H", "H" + name[: rng.size // 20]), KERNEL_HEAD + f"    {name};\n}}\n"]), \
        frozenset()  # fmt: skip


def mutant(rng: Draws) -> tuple[str, frozenset[str]]:
    """A shipped program with tokens deleted, duplicated, swapped or replaced by hostile ones."""
    sources = _shipped()
    _, text = sources[rng.randrange(len(sources))]
    tokens = TOKEN.findall(text)
    pool = ["{", "}", "(", ")", "[", "]", ";", ",", ".", "..", "-", "let", "for", "in", "fn", "kernel", "mut",
            "out", "x", "0", "1", "99999999999999999999", "9223372036854775807", "1e999", "\x00", "\ufffd", "axes!",
            "#[pipeline(depth = 1000000000)]", "#![toolchain = \"0.5.0\"]"]  # fmt: skip
    for _ in range(rng.randint(1, 6)):
        index = rng.randrange(len(tokens))
        action = rng.randrange(5)
        if action == 0:
            del tokens[index]
        elif action == 1:
            tokens.insert(index, rng.choice(pool))
        elif action == 2:
            tokens[index] = rng.choice(pool)
        elif action == 3:
            other = rng.randrange(len(tokens))
            tokens[index], tokens[other] = tokens[other], tokens[index]
        else:
            tokens[index] = tokens[index] * rng.randint(2, 50)
    return "".join(tokens), frozenset()


KINDS: dict[str, Callable[[random.Random], tuple[str, frozenset[str]]]] = {
    "deep_for": deep_for, "deep_unary": deep_unary, "deep_binary": deep_binary, "deep_parens": deep_parens,
    "deep_calls": deep_calls, "deep_chain": deep_chain, "deep_args": deep_args, "deep_fns": deep_fns,
    "deep_layouts": deep_layouts, "long_file": long_file, "many_errors": many_errors,
    "many_unrolled": many_unrolled, "huge_int": huge_int, "huge_range": huge_range, "huge_tile": huge_tile,
    "huge_axis": huge_axis, "huge_tensor": huge_tensor, "huge_float": huge_float, "shadowed": shadowed,
    "structure": structure, "long_names": long_names, "mutant": mutant,
}  # fmt: skip
BYTE_KINDS: dict[str, Callable[[random.Random], bytes]] = {}  # filled below: kinds that are not text


def binary(rng: Draws) -> bytes:
    return rng.randbytes(int(16 * (rng.size / 16) ** rng.random()))


def invalid_utf8(rng: Draws) -> bytes:
    data = bytearray(template(rng).encode())
    for _ in range(rng.randint(1, 20)):
        data[rng.randrange(len(data))] = rng.choice([0x80, 0xC0, 0xFF, 0xFE, 0xED, 0xF4])
    return bytes(data)


def nul_bytes(rng: Draws) -> bytes:
    data = bytearray(template(rng).encode())
    for _ in range(rng.randint(1, 20)):
        data.insert(rng.randrange(len(data)), 0)
    return bytes(data) if rng.random() < 0.8 else b"\x00" * rng.randint(1, rng.size + 6_000)


BYTE_KINDS.update({"binary": binary, "invalid_utf8": invalid_utf8, "nul_bytes": nul_bytes})
ALL_KINDS = (*KINDS, *BYTE_KINDS)
TOKEN = re.compile(r"//[^\n]*|\s+|\d+\.\d+|\d+|[A-Za-z_][A-Za-z0-9_]*!?|::|\.\.|->|#!\[|#\[|&mut|\S")


@cache
def _shipped() -> tuple[tuple[str, str], ...]:
    return tuple((str(p.relative_to(KERNELS)), p.read_text()) for p in sorted(KERNELS.glob("**/*.fe")))


def hostile(seed: int, index: int, size: int = BUDGET_BYTES) -> Hostile:
    """Input `index` of the campaign seeded `seed`; `size` caps the inputs whose size is drawn (the
    default fills the compiler's source budget)."""
    rng = Draws(seed * 1_000_003 + index, size)
    kind = ALL_KINDS[index % len(ALL_KINDS)]
    if kind in BYTE_KINDS:
        return Hostile(kind=kind, index=index, data=BYTE_KINDS[kind](rng))
    text, expect = KINDS[kind](rng)
    kernel = "k"
    if kind == "mutant":
        declared = re.findall(r"kernel\s+([A-Za-z_][A-Za-z0-9_]*)", text)
        kernel = declared[0] if declared else "k"
    return Hostile(kind=kind, index=index, data=text.encode("utf-8", errors="surrogatepass"), kernel=kernel,
                   expect=expect)  # fmt: skip
