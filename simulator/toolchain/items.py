"""Rules on what a file declares: one kernel, whose parameters are HBM tensors (E0106), HBM tensors
of a size the compiler can address (E0105), and layouts and types that do not refer to themselves
(E0501, a dependency cycle).

The lowerer runs one kernel and hands it its tensors in HBM (docs/simrngd.md §3.1); a layout that
spreads itself, or a type that names itself, has no fields to resolve; the device uploads every
input. All three are found here, on the declarations, before lowering or the device meets them.
"""

from __future__ import annotations

from collections.abc import Iterator

from chiplore.simulator.diagnostics import Diagnostic
from chiplore.simulator.dsl import ir
from chiplore.simulator.dsl.walk import walk
from chiplore.simulator.toolchain.env import Env
from chiplore.simulator.toolchain.rules import emit

_SHAPE = "a Ferrite file holds one kernel, whose parameters are HBM tensors"
# HBM addresses and the bytes a job uploads are counted in 64-bit integers and floats: a tensor past
# 1 TiB (the shipped kernels' largest is 59 million elements) is refused rather than overflowing them.
MAX_HBM_TENSOR_BYTES = 1 << 40


def check_kernel_items(program: ir.Program, env: Env, version: str) -> list[Diagnostic]:
    """E0106: no kernel or more than one; a kernel parameter that is not a tensor in HBM."""
    kernels = program.kernels
    if not kernels:
        return emit("0106", version, f"{_SHAPE}: this one holds no kernel (helpers are fns)", program.span)
    out: list[Diagnostic] = []
    for extra in kernels[1:]:
        out += emit("0106", version, f"{_SHAPE}: kernel {extra.name} is a second one (after {kernels[0].name})",
                    extra.span)  # fmt: skip
    for kernel in kernels:
        for param in kernel.params:
            if not isinstance(param, ir.TensorParam):
                out += emit("0106", version, f"{_SHAPE}: {param.name} of kernel {kernel.name} is not a tensor",
                            param.span)  # fmt: skip
            elif isinstance(param.type, ir.DevType) or isinstance(env.resolve(param.type), ir.DevType):
                out += emit("0106", version, f"{_SHAPE}: {param.name} of kernel {kernel.name} is not in HBM",
                            param.span)  # fmt: skip
    return out


def check_hbm_sizes(program: ir.Program, env: Env, version: str) -> list[Diagnostic]:
    """E0105: an `hbm<D>[...]` type that holds more than MAX_HBM_TENSOR_BYTES."""
    out: list[Diagnostic] = []
    for node in walk(program):
        if not isinstance(node, ir.HbmType) or node.dtype not in ir.DTYPE_BYTES:
            continue
        positions = env.positions(node.mapping)
        if positions is None:
            continue
        size = (positions * int(ir.DTYPE_BYTES[node.dtype] * 2) + 1) // 2  # in integers: no float overflows
        if size > MAX_HBM_TENSOR_BYTES:
            shown = f"{size:,}" if size < 10**18 else f"about 2^{size.bit_length() - 1}"
            out += emit("0105", version, f"an HBM tensor of {shown} bytes is past the compiler's limit of "
                        f"{MAX_HBM_TENSOR_BYTES:,} bytes (1 TiB)", node.span)  # fmt: skip
    return out


def check_declaration_cycles(program: ir.Program, version: str) -> list[Diagnostic]:
    """E0501: a layout that spreads itself, or a type that names itself, through any chain of others."""
    layouts = {item.name: item for item in program.items if isinstance(item, ir.LayoutDecl)}
    types = {item.name: item for item in program.items if isinstance(item, ir.TypeDecl)}
    spreads = {name: [i.name for i in item.layout.items if isinstance(i, ir.Spread)] for name, item in layouts.items()}
    aliases = {name: [item.type.name] if isinstance(item.type, ir.TypeRef) else [] for name, item in types.items()}
    out: list[Diagnostic] = []
    for kind, graph, declared in (("layout", spreads, layouts), ("type", aliases, types)):
        verb = "spreads" if kind == "layout" else "names"
        for cycle in _cycles(graph):
            path = " -> ".join([*cycle, cycle[0]])
            out += emit("0501", version, f"'{cycle[0]}' is used before it is defined: {kind} {cycle[0]} {verb} "
                        f"itself ({path}), a dependency cycle", declared[cycle[0]].span)  # fmt: skip
    return out


def _cycles(graph: dict[str, list[str]]) -> Iterator[list[str]]:
    """Each cycle of the graph once, as the names on it; a depth-first walk with its own stack, since
    a chain of declarations may be thousands long."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in graph:
        if root in state:
            continue
        state[root] = 1
        path, stack = [root], [iter(graph[root])]
        while stack:
            child = next(stack[-1], None)
            if child is None:
                stack.pop()
                state[path.pop()] = 2
            elif child not in graph or state.get(child) == 2:
                continue
            elif state.get(child) == 1:
                yield path[path.index(child) :]
            else:
                state[child] = 1
                path.append(child)
                stack.append(iter(graph[child]))
