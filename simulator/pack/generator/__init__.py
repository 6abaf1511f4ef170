"""SimRNGD's design generator: Ferrite programs for any decode kernel from its op graph.

`generated_space(spec)` turns a kernel's `OpGraph` (chiplore.core.ops) and its harness signature (the
baseline's parameters) into a `DesignSpace` whose knobs are schedule choices; nothing in it names a
kernel. The modules, in the order a program is written: `signature` (the kernel's axes and
parameters), `graph` (stages: matvec groups, input ops, row ops), `geometry` (layouts as digits of
the group's own axes), `inputs` (the input vector into the TRFs), `stream` (weights in pipelined
chunks, contracted), `rows` with `lanes` and `operands` (the epilogue, fused across members),
`frame` (passes over values), `build` (one program), `space` (the knobs).
"""

from chiplore.simulator.pack.generator.graph import Unsupported
from chiplore.simulator.pack.generator.space import GeneratedSpace, generated_space, generation_problem

__all__ = ["GeneratedSpace", "Unsupported", "generated_space", "generation_problem"]
