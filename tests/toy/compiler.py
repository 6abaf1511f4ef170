"""`check(source, version)`: the Toyl compiler's legality rules, as coded diagnostics.

E01xx: the text (E0100 header, E0101 unknown statement, E0102 malformed, E0103 a statement this
version does not have, E0104 written for another version). E02xx: names and values (E0201 undeclared,
E0202 used before it is loaded or computed, E0203 chunks x lanes that do not divide the rows, E0204 a
store of what was never computed, E0205 an output never stored, E0206 shapes that do not fit, E0207
declared twice, E0208 no or two `kernel` lines). E03xx: the chip's limits (E0301 a lane's buffer,
E0302 the number of lanes). Checking never raises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chiplore.core.target import CheckResult, Diagnostic
from tests.toy.toyl import Statement, error, parse, shape_of
from tests.toy.versions import MULTIPLIES, VERSIONS, Toolchain

F32 = 4
RULES_CHECKED = tuple(f"E0{n}" for n in (100, 101, 102, 103, 104, 201, 202, 203, 204, 205, 206, 207, 208, 301, 302))


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    output: bool

    @property
    def nbytes(self) -> int:
        size = 1
        for extent in self.shape:
            size *= extent
        return size * F32


@dataclass
class Program:
    """A program that parsed: its kernel, tensors and statements (what timing and the executor read)."""

    kernel: str
    tensors: dict[str, Tensor] = field(default_factory=dict)
    statements: list[Statement] = field(default_factory=list)


def check(source: str, version: str) -> CheckResult:
    return analyse(source, version)[0]


def analyse(source: str, version: str) -> tuple[CheckResult, Program]:
    parsed = parse(source)
    diagnostics = list(parsed.diagnostics)
    toolchain = VERSIONS.get(version)
    if toolchain is None:
        diagnostics.append(error("E0104", f"unknown toolchain {version!r}; known: {', '.join(VERSIONS)}"))
        return CheckResult(version=version, diagnostics=tuple(diagnostics)), Program(kernel="")
    if parsed.header is not None and parsed.header != version:
        diagnostics.append(error("E0104", f"written for toolchain {parsed.header}, compiled with {version}: "
                                          "update its `#toolchain` line", 1))  # fmt: skip
    program = Program(kernel="")
    _Semantics(toolchain, program, diagnostics).run(parsed.statements)
    return CheckResult(version=version, diagnostics=tuple(diagnostics), rules_checked=RULES_CHECKED), program


@dataclass
class _Semantics:
    toolchain: Toolchain
    program: Program
    diagnostics: list[Diagnostic]
    ready: set[str] = field(default_factory=set)  # loaded inputs and computed values
    stored: set[str] = field(default_factory=set)

    def run(self, statements: list[Statement]) -> None:
        kernels = [s for s in statements if s.op == "kernel"]
        if len(kernels) != 1:
            self.diagnostics.append(error("E0208", f"a program names its kernel once; this one has {len(kernels)}"))
        else:
            self.program.kernel = kernels[0].args[0]
        for statement in statements:
            getattr(self, f"_{'multiply' if statement.op in MULTIPLIES else statement.op}")(statement)
            self.program.statements.append(statement)
        for tensor in self.program.tensors.values():
            if tensor.output and tensor.name not in self.stored:
                self._error("E0205", f"output `{tensor.name}` is never stored", None)

    def _error(self, code: str, message: str, at: Statement | None) -> None:
        self.diagnostics.append(error(code, message, at))

    def _kernel(self, s: Statement) -> None:
        pass

    def _declare(self, s: Statement, output: bool) -> None:
        name, shape = s.args[0], shape_of(s.args[1])
        if shape is None or 0 in shape:
            self._error("E0102", f"`{s.args[1]}` is not a shape (write N or ROWSxCOLS)", s)
        elif name in self.program.tensors:
            self._error("E0207", f"`{name}` is declared twice", s)
        else:
            self.program.tensors[name] = Tensor(name, shape, output)

    def _param(self, s: Statement) -> None:
        self._declare(s, output=False)

    def _out(self, s: Statement) -> None:
        self._declare(s, output=True)

    def _tensor(self, name: str, s: Statement) -> Tensor | None:
        tensor = self.program.tensors.get(name)
        if tensor is None:
            self._error("E0201", f"`{name}` is not declared", s)
        return tensor

    def _load(self, s: Statement) -> None:
        tensor = self._tensor(s.args[0], s)
        if tensor is None:
            return
        if tensor.output:
            self._error("E0201", f"`{tensor.name}` is an output: only inputs are loaded", s)
            return
        chunks, lanes = s.options.get("chunks", 1), s.options.get("lanes", 1)
        rows = tensor.shape[0]
        if rows % (chunks * lanes):
            self._error("E0203", f"chunks={chunks} x lanes={lanes} does not divide the {rows} rows of `{tensor.name}`",
                        s)  # fmt: skip
        elif lanes > self.toolchain.max_lanes:
            self._error("E0302", f"lanes={lanes} exceeds the {self.toolchain.max_lanes} DMA lanes", s)
        else:
            per_lane = tensor.nbytes // (chunks * lanes)
            limit = self.toolchain.lane_buffer_bytes
            if per_lane > limit:
                self._error("E0301", f"a chunk of {per_lane:,} B per lane exceeds the {limit:,} B lane buffer", s)
        self.ready.add(tensor.name)

    def _multiply(self, s: Statement) -> None:
        if s.op != self.toolchain.multiply:
            self._error("E0103", f"'{s.op}' is not available in toolchain {self.toolchain.version}; "
                                 f"write '{self.toolchain.multiply}'", s)  # fmt: skip
        out, matrix, vector = (self._tensor(name, s) for name in s.args)
        if out is None or matrix is None or vector is None:
            return
        for operand in (matrix, vector):
            if operand.name not in self.ready:
                self._error("E0202", f"`{operand.name}` is used before it is loaded or computed", s)
        if len(matrix.shape) != 2 or vector.shape != matrix.shape[1:] or out.shape != matrix.shape[:1]:
            self._error("E0206", f"`{s.op} {' '.join(s.args)}` needs a ROWSxCOLS matrix, a COLS vector and a ROWS "
                                 f"result; got {out.shape}, {matrix.shape}, {vector.shape}", s)  # fmt: skip
        self.ready.add(out.name)

    def _scale(self, s: Statement) -> None:
        out, source = self._tensor(s.args[0], s), self._tensor(s.args[1], s)
        try:
            float(s.args[2])
        except ValueError:
            self._error("E0102", f"`{s.args[2]}` is not a number", s)
        if out is None or source is None:
            return
        if source.name not in self.ready:
            self._error("E0202", f"`{source.name}` is used before it is loaded or computed", s)
        if out.shape != source.shape:
            self._error("E0206", f"`scale` keeps the shape: {out.shape} against {source.shape}", s)
        self.ready.add(out.name)

    def _store(self, s: Statement) -> None:
        tensor = self._tensor(s.args[0], s)
        if tensor is None:
            return
        if not tensor.output:
            self._error("E0201", f"`{tensor.name}` is an input: only outputs are stored", s)
        elif tensor.name not in self.ready:
            self._error("E0204", f"store of `{tensor.name}` before it is computed", s)
        self.stored.add(tensor.name)
