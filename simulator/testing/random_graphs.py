"""Random well-formed kernels over the whole op vocabulary (chiplore.core.ops), as `PackSketch`es.

`random_sketch(seed)` draws one kernel of a kind (`KINDS`): a projection (one to three matvecs
sharing an input), a gated feed-forward, a chain of matvecs (an MLP), an attention QKV projection
(heads, head norms, RoPE, a KV cache), an attention output projection, or a projection followed by
element-wise ops. Within a kind everything is drawn: the shapes (small and huge N and K, K no
multiple of a tile, N no power of two, head_dim 64/128/256), the weights' dtypes (bf16, f8e4m3,
f4e2m1), their scales (per row, per block, per tensor, a global scale; bf16, f32 or f8 codes), the
rounding points, and names that clash with what a generator or Ferrite might use (`out`, `acc`,
`main`, `layout`, `fn_`, ...). Each input gets a fixture recipe suited to it: weights with a few
distinct rows so host tests stay fast, scales that keep every value near 1, so the tolerances mean
the same for every kernel. Nothing here is taken from the shipped packs.
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np

from chiplore.simulator.execute.numerics import F4_MAGNITUDES, f8_decode
from chiplore.simulator.testing.sketch import PackSketch, Param, Scalar

KINDS = ("projection", "gated_ffn", "mlp_chain", "attention_qkv", "attention_output", "elementwise")
TOOLCHAINS = ("0.6.0", "0.6.0", "0.7.0")  # the shipped packs' toolchain most often
# half the kernels take odd sizes (K no multiple of a tile, N no power of two, tiny and huge), half
# the sizes models have, so the campaign reaches what comes after the generator as well
HIDDEN = (64, 128, 192, 256, 384, 640, 1000, 1024, 1536, 2048, 2880, 3072, 3840, 4096, 5120, 6144, 8192, 16384)
ROWS = (8, 24, 96, 200, 256, 1000, 1536, 2048, 3000, 3840, 4096, 5120, 11008, 14336, 32000, 100000, 131072)
PLAIN_HIDDEN = (1024, 2048, 3072, 4096)
PLAIN_ROWS = (1024, 2048, 4096, 8192, 14336)
HEAD_DIMS = (64, 128, 256)
GQA_HEADS = ((32, 8), (16, 8), (8, 8), (32, 4), (64, 8), (16, 4), (8, 2), (32, 32))  # (query, key-value) heads
PERIODS = (31, 61, 127, 251, 509)  # distinct rows of a weight: primes, so no tiling bug hides behind them
BLOCKS = (16, 32, 64, 128)
ACTIVATIONS = ("gelu_tanh", "gelu", "silu")
# names a generator or Ferrite may use for itself: a kernel's own names must not confuse either (not
# `for`, `let`, `fn`, `kernel`, `type`, `layout`: they begin a statement or a declaration, so a parameter
# so named cannot be used in Ferrite, and no pack a user can write has one)
CLASHING = ("out", "acc", "x", "w", "main", "sub", "tile", "dm", "fn_", "let1", "for_", "kernel_x",
            "trf", "vrf", "hbm", "inv", "part", "xt", "w_d", "y", "h", "s", "one", "every", "chunk", "i", "n",
            "r", "axes", "rep", "at", "in", "mut", "int", "axis")  # fmt: skip
AXIS_NAMES = ("H", "K", "N", "L", "V", "D", "E", "T", "Dh", "R0_", "K0_", "Hh0_", "Every", "One", "tile", "x", "out")
CLASH_ODDS = 0.4


def random_sketch(seed: int) -> PackSketch:
    """One random kernel; the same seed always gives the same sketch."""
    rng = random.Random(seed)
    kind = KINDS[seed % len(KINDS)] if seed >= 0 else rng.choice(KINDS)
    draw = _Draw(rng, f"u{abs(seed):05d}_{kind}"[:64])
    getattr(draw, kind)()
    return draw.sketch(kind)


class _Draw:
    """One kernel being drawn: its names, axes, parameters, recipes and ops."""

    def __init__(self, rng: random.Random, name: str) -> None:
        self.rng, self.name = rng, name
        self.odd = rng.random() < 0.5  # odd sizes, or the sizes models have
        self.taken: set[str] = {name}
        self.axes: dict[str, int | tuple[str, ...]] = {}
        self.params: list[Param] = []
        self.inputs: dict[str, dict[str, Any]] = {}
        self.ops: list[dict[str, Scalar]] = []
        self.notes: list[str] = []
        self.changed_sets: set[str] = set()

    # ---- names ----------------------------------------------------------------------------------------

    def fresh(self, stem: str) -> str:
        """A parameter or value name: often one a generator or the language may use itself."""
        if self.rng.random() < CLASH_ODDS:
            free = [n for n in CLASHING if n not in self.taken]
            if free:
                return self._take(self.rng.choice(free))
        name, index = stem, 0
        while name in self.taken:
            index += 1
            name = f"{stem}{index}"
        return self._take(name)

    def _take(self, name: str) -> str:
        self.taken.add(name)
        return name

    def axis(self, size: int, stem: str) -> str:
        """A new axis; its name is no parameter's (Ferrite binds both in one scope: E0502)."""
        free = [n for n in AXIS_NAMES if n not in self.axes and n not in self.taken]
        name = self.rng.choice(free) if free and self.rng.random() < 0.5 else stem
        index = 0
        while name in self.axes or name in self.taken:
            index += 1
            name = f"{stem}{index}"
        self.axes[name] = size
        return self._take(name)

    def composite(self, parts: tuple[str, ...], stem: str) -> str:
        name, index = stem, 0
        while name in self.axes or name in self.taken:
            index += 1
            name = f"{stem}{index}"
        self.axes[name] = parts
        return self._take(name)

    def size(self, axis: str) -> int:
        value = self.axes[axis]
        return value if isinstance(value, int) else math.prod(self.size(a) for a in value)

    # ---- parameters ---------------------------------------------------------------------------------

    def param(self, stem: str, dtype: str, dims: tuple[str, ...], recipe: dict[str, Any] | None,
              mutable: bool = False) -> str:  # fmt: skip
        name = self.fresh(stem)
        self.params.append(Param(name, dtype, dims, mutable))
        if recipe is not None:
            self.inputs[name] = recipe
        return name

    def vector(self, stem: str, axis: str | tuple[str, ...], mutable: bool = False) -> str:
        """An activation vector (bf16, sometimes f32) drawn around 0."""
        dims = (axis,) if isinstance(axis, str) else axis
        dtype = "bf16" if mutable or self.rng.random() < 0.85 else "f32"
        dist = self.rng.choice([{"kind": "uniform", "low": -1.0, "high": 1.0}, {"kind": "normal", "std": 0.7},
                                {"kind": "signs", "magnitude": 0.5}])  # fmt: skip
        recipe: dict[str, Any] = {"dist": dist}
        if self.rng.random() < 0.3:
            recipe["sets"] = {"cancel": {"block_offsets": {"magnitude": self.rng.choice([4.0, 16.0]), "block": 256}}}
            self.changed_sets.add("cancel")
        return self.param(stem, dtype, dims, recipe, mutable)

    def gain(self, stem: str, axis: str) -> str:
        """A norm weight or a per-element gain near 1."""
        low = self.rng.choice([0.75, 0.5, 0.0])
        return self.param(stem, "bf16", (axis,), {"dist": {"kind": "uniform", "low": low, "high": 2.0 - low}})

    def scalar(self, stem: str) -> str:
        dist = (
            {"kind": "constant", "value": self.rng.choice([0.375, 0.5, 1.25])}
            if self.rng.random() < 0.5
            else {"kind": "uniform", "low": 0.5, "high": 1.5}
        )
        return self.param(stem, self.rng.choice(["bf16", "f32"]), ("1",), {"dist": dist})

    def output(self, stem: str, dims: tuple[str, ...], dtype: str | None = None) -> str:
        """An output parameter, drawn as noise (so an element the kernel does not write fails) or zeros."""
        noise = {"dist": {"kind": "uniform", "low": -4.0, "high": 4.0}} if self.rng.random() < 0.5 else None
        return self.param(stem, dtype or self.rng.choice(["bf16", "bf16", "f32"]), dims, noise, mutable=True)

    # ---- ops ----------------------------------------------------------------------------------------

    def op(self, kind: str, stem: str, rounded: float = 0.5, **fields: Scalar | None) -> str:
        out = self.fresh(stem)
        op: dict[str, Scalar] = {"op": kind, **{k: v for k, v in fields.items() if v is not None}, "out": out}
        if self.rng.random() < rounded:
            op["round_bf16"] = True
        self.ops.append(op)
        return out

    def sink(self, kind: str, **fields: Scalar) -> None:
        self.ops.append({"op": kind, **fields})

    def norm(self, value: str, axis: str, rounded: float = 0.85) -> str:
        """rms_norm of `value` (its weight optional): what feeds most matvecs."""
        weight = self.gain("norm_weight", axis) if self.rng.random() < 0.8 else None
        eps = self.rng.choice([1e-6, 1e-5])
        return self.op("rms_norm", "normed", rounded, input=value, weight=weight, eps=eps)

    def matvec(self, value: str, k_axis: str, rows: tuple[str, ...], stem: str, period: int | None = None,
               style: random.Random | None = None) -> str:  # fmt: skip
        """A matvec of `value` by a new weight [*rows, k_axis], with a random dtype and scales that keep
        its outputs about as large as its input. `style` draws the formats (dtype, scale kind and
        dtype, block, global scale): matvecs given generators seeded alike have the same formats."""
        rng = style or self.rng
        k = self.size(k_axis)
        dtype = rng.choice(["bf16", "f8e4m3", "f8e4m3", "f4e2m1"])
        if dtype == "f4e2m1" and k % 2:
            dtype = "f8e4m3"
        kinds = ["row", "block", "tensor", None] if dtype != "bf16" else [None, None, "row", "tensor"]
        kind = rng.choice(kinds)
        blocks = [b for b in BLOCKS if k % b == 0]
        if kind == "block" and not blocks:
            kind = "row"
        period = period or rng.choice(PERIODS)
        weight_recipe, spread = self._weight(dtype, period, k if kind is None else None, rng)
        target = 1.0 / (spread * math.sqrt(k))  # what all the scales together multiply by
        weight = self.param(f"{stem}_weight", dtype, (*rows, k_axis), weight_recipe)
        fields: dict[str, Scalar | None] = {"input": value, "weight": weight}
        scale_dtype = rng.choice(["bf16", "f32", "f8e4m3"] if kind == "block" else ["bf16", "f32"])
        coded = kind == "block" and scale_dtype == "f8e4m3"  # codes of 0.5 to 3.75, 1.6 on average
        global_value = None
        if kind is None and (dtype != "bf16" or rng.random() < 0.25):  # codes need a scale to stay near 1
            global_value = target
        elif coded:
            global_value = target / 1.6
        elif kind is not None and rng.random() < 0.25:
            global_value = 2.0 ** -rng.randint(0, 6)
            target /= global_value
        if kind is not None:
            spread_of = {"kind": "uniform", "low": 0.5 * target, "high": 1.5 * target}
            recipe: dict[str, Any] = {"dist": spread_of}
            if kind == "block":
                dims = (*rows, f"{k_axis} / {(block := rng.choice(blocks))}")
                fields["block"] = block
                if coded:
                    recipe["dist"] = {"kind": "f8_codes", "exponent_low": 6, "exponent_high": 8, "signed": False}
            else:
                dims = rows if kind == "row" else ("1",)
            if kind != "tensor":
                recipe["distinct_rows"] = period if rng.random() < 0.8 else rng.choice(PERIODS)
            fields["scale"] = self.param(f"{stem}_scale", scale_dtype, dims, recipe)
            fields["scale_kind"] = kind
        if global_value is not None:
            fields["global_scale"] = self.param(f"{stem}_global_scale", rng.choice(["f32", "bf16"]), ("1",),
                                                {"dist": {"kind": "constant", "value": global_value}})  # fmt: skip
        return self.op("matvec", stem, 0.5, **fields)

    @staticmethod
    def _weight(dtype: str, period: int, unscaled_k: int | None, rng: random.Random) -> tuple[dict[str, Any], float]:
        """A weight's recipe and the root mean square of its values (bf16 weights without a scale
        are drawn small enough to need none)."""
        if dtype == "bf16":
            std = 1.0 / math.sqrt(unscaled_k) if unscaled_k else rng.choice([1.0, 0.05])
            return {"dist": {"kind": "normal", "std": std}, "distinct_rows": period}, std
        if dtype == "f4e2m1":
            spread = float(np.sqrt(np.mean(F4_MAGNITUDES.astype(np.float64) ** 2)))
            return {"dist": {"kind": "f4_codes"}, "distinct_rows": period}, spread
        low = rng.choice([5, 6, 7])
        codes = np.array([(e << 3) | m for e in range(low, low + 4) for m in range(8)], dtype=np.uint8)
        spread = float(np.sqrt(np.mean(f8_decode(codes).astype(np.float64) ** 2)))
        recipe = {"dist": {"kind": "f8_codes", "exponent_low": low, "exponent_high": low + 3}, "distinct_rows": period}
        return recipe, spread

    def row_ops(self, value: str, axis: str, depth: int) -> str:
        """Up to `depth` element-wise ops on a vector of `axis`'s length."""
        for _ in range(depth):
            choice = self.rng.choice(["scale", "activation", "mul_scalar", "add_vector", "mul_vector"])
            if choice == "scale":
                value = self.op("scale", "scaled", by=self.rng.choice([0.0625, 0.5, 1.5, -2.0, 3.0]), input=value)
            elif choice == "activation":
                value = self.op(self.rng.choice(ACTIVATIONS), "act", input=value)
            elif choice == "mul_scalar":
                value = self.op("mul", "prod", a=value, b=self.scalar("gain"))
            elif choice == "add_vector":
                value = self.op("add", "sum", a=value, b=self.vector("bias", axis))
            else:
                value = self.op("mul", "gated", a=value, b=self.gain("gate", axis))
        return value

    def rows_size(self, small: bool = False) -> int:
        if not self.odd:
            return self.rng.choice(PLAIN_ROWS)
        sizes = [n for n in ROWS if n <= 16384] if small or self.rng.random() < 0.85 else list(ROWS)
        return self.rng.choice(sizes)

    def hidden(self, large: bool = True) -> int:
        if not self.odd:
            return self.rng.choice(PLAIN_HIDDEN)
        sizes = HIDDEN if large else tuple(k for k in HIDDEN if k <= 4096)
        return self.rng.choice(sizes)

    # ---- kinds --------------------------------------------------------------------------------------

    def projection(self) -> None:
        k_axis = self.axis(self.hidden(), "H")
        x = self.vector("x", k_axis)
        if self.rng.random() < 0.3:  # a residual added before the norm, and kept
            residual = self.vector("residual", k_axis, mutable=True)
            x = self.op("add", "summed", a=x, b=residual)
            self.sink("store", input=x, to=residual)
        h = self.norm(x, k_axis) if self.rng.random() < 0.8 else x
        period = self.rng.choice(PERIODS)
        for index in range(self.rng.choice([1, 1, 2, 3])):
            n_axis = self.axis(self.rows_size(), "N")
            y = self.matvec(h, k_axis, (n_axis,), f"proj{index}", period if self.rng.random() < 0.5 else None)
            y = self.row_ops(y, n_axis, self.rng.choice([0, 0, 1, 2]))
            self.sink("store", input=y, to=self.output("out", (n_axis,)))

    def gated_ffn(self) -> None:
        h_axis = self.axis(self.hidden(large=False), "H")
        l_axis = self.axis(self.rows_size(small=True), "L")
        residual = self.vector("residual", h_axis, mutable=True)
        h = self.norm(residual, h_axis)
        period = self.rng.choice(PERIODS)
        gate = self.matvec(h, h_axis, (l_axis,), "gate", period)
        up = self.matvec(h, h_axis, (l_axis,), "up", period if self.rng.random() < 0.7 else None)
        act = self.op(self.rng.choice(ACTIVATIONS), "act", 0.3, input=gate)
        a = self.op("mul", "a", 0.8, a=act, b=up)
        d = self.matvec(a, l_axis, (h_axis,), "down")
        if self.rng.random() < 0.4:
            d = self.norm(d, h_axis, rounded=0.5)
        o = self.op("add", "o", 0.5, a=residual, b=d)
        if self.rng.random() < 0.3:
            o = self.op("mul", "o", 0.5, a=o, b=self.scalar("layer_scalar"))
        self.sink("store", input=o, to=residual)

    def mlp_chain(self) -> None:
        axis = self.axis(self.hidden(large=False), "H")
        value = self.vector("x", axis)
        if self.rng.random() < 0.7:
            value = self.norm(value, axis)
        first = axis
        for index in range(self.rng.choice([2, 2, 3])):
            # back to the first axis sometimes, never from it: a weight [H, H] names one axis twice (E0204)
            back = index > 0 and axis != first and self.rng.random() < 0.3
            n_axis = first if back else self.axis(self.rows_size(small=True), "N")
            value = self.matvec(value, axis, (n_axis,), f"layer{index}")
            value = self.op(self.rng.choice(ACTIVATIONS), "act", 0.6, input=value)
            axis = n_axis
        self.sink("store", input=value, to=self.output("out", (axis,)))

    def attention_qkv(self) -> None:
        head_dim = self.rng.choice(HEAD_DIMS)
        h_axis = self.axis(self.hidden(large=False), "H")
        if self.odd:
            q_heads = self.rng.choice([1, 2, 4, 8, 12, 16, 32, 40, 64])
            kv_heads = self.rng.choice([h for h in (1, 2, 4, 8, 16) if h <= q_heads] or [1])
        else:  # the head counts models have
            q_heads, kv_heads = self.rng.choice(GQA_HEADS)
        dh = self.axis(head_dim, "Dh")
        nq, nk = self.axis(q_heads, "Nq"), self.axis(kv_heads, "Nk")
        q_rows = (self.composite((nq, dh), "Q"),) if self.rng.random() < 0.6 else (nq, dh)
        kv_rows = (self.composite((nk, dh), "KV"),) if self.rng.random() < 0.6 else (nk, dh)
        x = self.vector("x", h_axis)
        h = self.norm(x, h_axis)
        period = self.rng.choice(PERIODS)
        alike = self.rng.random() < 0.75  # q, k and v in one format, as models have them (or each its own)
        style = self.rng.random()

        def formats() -> random.Random | None:
            return random.Random(style) if alike else None

        q = self.matvec(h, h_axis, q_rows, "q", period, formats())
        k = self.matvec(h, h_axis, kv_rows, "k", period, formats())
        with_v = self.rng.random() < 0.75
        v = self.matvec(h, h_axis, kv_rows, "v", period, formats()) if with_v else None
        q = self.head_norm(q, head_dim, dh) if self.rng.random() < 0.7 else q
        k = self.head_norm(k, head_dim, dh) if self.rng.random() < 0.7 else k
        if v is not None and self.rng.random() < 0.3:
            v = self.op("head_norm", "vn", 0.8, input=v, head_dim=head_dim)
        if self.rng.random() < 0.6:
            positions = self.axis(self.rng.choice([64, 512, 4096, 32768]), "E")
            cos = self.param("cos", "bf16", (positions, dh), {"dist": {"kind": "rope", "part": "cos"}})
            negate = self.rng.random() < 0.8
            sin = self.param("sin", "bf16", (positions, dh),
                             {"dist": {"kind": "rope", "part": "sin", "negate_low_half": negate}})  # fmt: skip
            where = {"kind": "position", "axis": positions} if self.rng.random() < 0.5 else \
                {"kind": "position", "value": self.rng.randrange(self.size(positions))}  # fmt: skip
            rope_pos = self.param("rope_pos", "i32", ("1",), {"dist": where})
            q = self.op("rope", "q_rot", 0.8, input=q, cos=cos, sin=sin, position=rope_pos, head_dim=head_dim)
            k = self.op("rope", "k_rot", 0.8, input=k, cos=cos, sin=sin, position=rope_pos, head_dim=head_dim)
        self.sink("store", input=q, to=self.output("q_out", (nq, dh), "bf16"))
        t_axis = self.axis(self.rng.choice([16, 100, 512, 2048]), "T")
        kv_pos = self.param("kv_pos", "i32", ("1",), {"dist": {"kind": "position", "axis": t_axis}})
        cache_dims = (t_axis, nk, dh) if self.rng.random() < 0.6 else (t_axis, kv_rows[0]) if len(kv_rows) == 1 \
            else (t_axis, nk, dh)  # fmt: skip
        for value, stem in ((k, "k_cache"), (v, "v_cache")):
            if value is not None:
                noise = {"dist": {"kind": "uniform", "low": -1.0, "high": 1.0}} if self.rng.random() < 0.7 else None
                cache = self.param(stem, "bf16", cache_dims, noise, mutable=True)
                self.sink("cache_write", input=value, cache=cache, position=kv_pos)

    def head_norm(self, value: str, head_dim: int, dh_axis: str) -> str:
        weight = self.gain("head_norm_weight", dh_axis) if self.rng.random() < 0.8 else None
        return self.op("head_norm", "hn", 0.8, input=value, head_dim=head_dim, weight=weight)

    def attention_output(self) -> None:
        head_dim = self.rng.choice(HEAD_DIMS)
        heads = self.rng.choice([1, 4, 8, 16, 32])
        nh, dh = self.axis(heads, "Nh"), self.axis(head_dim, "Dh")
        q_axis = self.composite((nh, dh), "Q")
        h_axis = self.axis(self.hidden(large=False), "H")
        x = self.vector("x", (nh, dh) if self.rng.random() < 0.5 else (q_axis,))
        y = self.matvec(x, q_axis, (h_axis,), "o")
        residual = self.vector("residual", h_axis, mutable=True)
        if self.rng.random() < 0.8:
            y = self.norm(y, h_axis, rounded=0.7)
        o = self.op("add", "r", 0.5, a=residual, b=y)
        self.sink("store", input=o, to=residual)

    def elementwise(self) -> None:
        k_axis = self.axis(self.hidden(), "H")
        n_axis = self.axis(self.rows_size(), "N")
        x = self.vector("x", k_axis)
        h = self.norm(x, k_axis) if self.rng.random() < 0.6 else x
        y = self.matvec(h, k_axis, (n_axis,), "proj")
        if self.rng.random() < 0.3:  # a second matvec of the same rows, combined element-wise
            other = self.matvec(h, k_axis, (n_axis,), "proj")
            y = self.op(self.rng.choice(["add", "mul"]), "both", a=y, b=other)
        y = self.row_ops(y, n_axis, self.rng.choice([1, 2, 3, 4]))
        if self.rng.random() < 0.3:  # an intermediate stored as well
            self.sink("store", input=y, to=self.output("mid", (n_axis,)))
            y = self.row_ops(y, n_axis, 1)
        self.sink("store", input=y, to=self.output("out", (n_axis,)))

    # ---- the sketch ---------------------------------------------------------------------------------

    def sketch(self, kind: str) -> PackSketch:
        self.rng.shuffle(self.params)  # the signature's order is the kernel's, not the graph's
        sets = None
        if self.rng.random() < 0.4:  # a pack may list the sets it changes, and only those
            sets = tuple(sorted(self.changed_sets))
        streamed = {str(op.get("weight")) for op in self.ops if op["op"] == "matvec"}
        dtypes = ", ".join(sorted({p.dtype for p in self.params if p.name in streamed}))
        return PackSketch(
            name=self.name, kind=kind, toolchain=self.rng.choice(TOOLCHAINS), atol=0.05, rtol=0.02,
            description=f"random {kind.replace('_', ' ')} ({dtypes} weights): its baseline is the design generator's "
                        "program at the space's first valid point, and its reference is its op graph's",
            axes=self.axes, params=self.params, inputs=self.inputs, ops=self.ops, sets=sets, label=kind[:24],
            notes=[f"A random {kind} kernel (chiplore.simulator.testing, seed {self.name}); no reference.py: the "
                   "reference is the op graph's."],
        )  # fmt: skip
