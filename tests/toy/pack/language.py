"""The toy chip's language guide (chiplore.core.pack.LanguageGuide): Toyl for chiplore's DSL summary.
Toyl's statements are its constructs; prose names one in backticks (`load NAME chunks=C lanes=L`); a
program uses the keywords its lines start with. The docs' code blocks are whole programs. A program
with the gemv kernel's tensors is checked on the host as that kernel (the chip's own reference is
the expectation): the team knows what gemv computes, not how the chip executes it."""

from __future__ import annotations

import re

from chiplore.core.pack import Construct, DocExample, HostCase, LanguageGuide, Unavailable
from chiplore.core.target import Diagnostic

GEMV_TENSORS = ("param w 256x256", "param x 256", "out y 256")

CONSTRUCTS = (
    Construct("toolchain", "item", "#toolchain V (the first line)"),
    Construct("kernel", "item", "kernel NAME"),
    Construct("param", "memory", "param NAME ROWSxCOLS | param NAME N (an f32 input)"),
    Construct("out", "memory", "out NAME N (an f32 output)"),
    Construct("load", "dma", "load NAME chunks=C lanes=L", ("load.",)),
    Construct("mul", "compute", "mul OUT MATRIX VECTOR (OUT = MATRIX @ VECTOR)", ("construct.mul",), ("mul",)),
    Construct("mac", "compute", "mac OUT MATRIX VECTOR (OUT = MATRIX @ VECTOR)", ("construct.mac",), ("mac",)),
    Construct("scale", "compute", "scale OUT IN FACTOR (OUT = IN * FACTOR)"),
    Construct("store", "dma", "store NAME", ("store.",)),
)
KEYWORDS = frozenset(c.name for c in CONSTRUCTS) - {"toolchain"}
NAMED = re.compile(r"`(#toolchain|" + "|".join(sorted(KEYWORDS)) + r")\b")


class ToylGuide(LanguageGuide):
    constructs = CONSTRUCTS

    def named_in(self, text: str) -> frozenset[str]:
        return frozenset("toolchain" if word == "#toolchain" else word for word in NAMED.findall(text))

    def used_in(self, program: str) -> frozenset[str]:
        words = {line.split()[0] for line in program.splitlines() if line.strip() and not line.strip().startswith("//")}
        return frozenset("toolchain" if w == "#toolchain" else w for w in words if w in KEYWORDS | {"#toolchain"})

    def complete(self, info: str, body: str, version: str, context: str) -> DocExample | None:
        """Toyl blocks have no info string and are whole programs (a `#toolchain` line, a kernel)."""
        if info or not body.lstrip().startswith("#toolchain") or "kernel" not in self.used_in(body):
            return None
        return DocExample(source=body if body.endswith("\n") else body + "\n")

    def deprecated(self, diagnostic: Diagnostic) -> Unavailable | None:
        return None  # Toyl deprecates nothing: a statement is there or refused

    def example(self, construct: str, version: str) -> str | None:
        """gemv with the construct in it: `scale y y 1` keeps the kernel's result; a multiply is the kernel."""
        lines = [f"#toolchain {version}", "kernel gemv", *GEMV_TENSORS, "load w chunks=8 lanes=2", "load x"]
        if construct in ("mul", "mac"):
            return "\n".join([*lines, f"{construct} y w x", "store y"]) + "\n"
        if construct == "scale":
            multiply = "mac" if version >= "2.0" else "mul"
            return "\n".join([*lines, f"{multiply} y w x", "scale y y 1", "store y"]) + "\n"
        return None

    def host_case(self, program: str, version: str) -> HostCase | None:
        statements = {" ".join(line.split()) for line in program.splitlines()}
        if "kernel gemv" in statements and all(t in statements for t in GEMV_TENSORS):
            return HostCase(statement="y = w @ x (the gemv kernel)", kernel="gemv")
        return None
