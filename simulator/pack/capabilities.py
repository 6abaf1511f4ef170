"""SimRNGD's capability flags: yes/no facts the learnt legality rules decide (0 refused, 1 not).

The design spaces write the construct a toolchain has (`.widen` where `.cast` is gone, a decode pass
where a contraction refuses f8 streams); the rule each flag reads is the one a compile probe found.
"""

from __future__ import annotations

from chiplore.core.pack import Capability

WIDEN = "vocab.widen"  # `.widen`/`.narrow` (0.7.0) instead of `.cast`
DECODE = "vocab.decode"  # `.decode` (0.6.0 on) instead of `.lut`
ALLREDUCE = "vocab.allreduce_slices"  # `allreduce_slices` instead of `reduce_slices(result = all)`
BRIDGE = "vocab.reduce_clusters"  # the clusters' values added over the bridge (0.7.0)
F8_STREAM = "contract.f8_stream"  # a contraction takes f8 codes as they stream in
F4_STREAM = "contract.f4_stream"  # ... and f4 codes
BUFFERS = "vocab.buffers"  # `buffers: N` in a tensor type (0.7.0) instead of `#[pipeline(depth = N)]`

CAPABILITIES = (
    Capability(WIDEN, "construct.widen"),
    Capability(DECODE, "construct.decode"),
    Capability(ALLREDUCE, "construct.allreduce_slices"),
    Capability(BRIDGE, "construct.reduce_clusters"),
    Capability(F8_STREAM, "contract.stream_dtype", "f8e4m3"),
    Capability(F4_STREAM, "contract.stream_dtype", "f4e2m1"),
    Capability(BUFFERS, "construct.buffers"),
)
