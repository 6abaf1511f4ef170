"""Row-factored arrays: the executor's form of values periodic in their rows (docs/simrngd.md §9.3).

A `Rows` array is `full[i] == pool[key[i_k], i_p]`: `key` varies only along its *key dims* (the rows
of a periodic weight: 15,360 FFN rows name 509 distinct ones) and `pool` only along the others (the
columns). Element-wise ops, operands that follow the same rows, and reductions over pool dims run on
the pool alone, so a weight tensor costs what its distinct rows cost. Whatever mixes key and pool
dims (a reduction over rows, an operand that varies along both, a scattered write) falls back to a
dense array, which is always correct, only slower.

Both `key` and `pool[0]` have the full number of dims, with extent 1 where they do not vary, so numpy
broadcasting lines them up with dense operands.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

SMALL_ROW = 64  # rows this wide are merged by content when compacted
MAX_ELEMENTS = 20_000_000  # a dense value beyond this is refused rather than exhausting memory


class ExecutionError(RuntimeError):
    """The executor cannot run this program (a construct it does not model, or too large)."""


class TooDense(ExecutionError):
    """A value past MAX_ELEMENTS that the executor cannot hold by row (an input drawn whole, every row
    distinct, is the usual cause: a pack gives it `distinct_rows`)."""


def _check_size(count: int, what: str) -> None:
    if count > MAX_ELEMENTS:
        raise TooDense(f"{what}: {count:,} values that do not factor by row; the executor stops at {MAX_ELEMENTS:,}")


@dataclass
class Rows:
    key: np.ndarray  # int64; extent > 1 only on key dims
    pool: np.ndarray  # (distinct rows, *dims); extent > 1 only on pool dims

    @property
    def ndim(self) -> int:
        return self.key.ndim

    @property
    def shape(self) -> tuple[int, ...]:
        # an empty side (no row chosen) is an empty value, not one of extent 1
        return tuple(0 if 0 in (k, p) else max(k, p) for k, p in zip(self.key.shape, self.pool.shape[1:], strict=True))

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def dense(self) -> np.ndarray:
        _check_size(self.size, "a weight-sized value")
        n = self.ndim
        taken = self.pool[self.key]  # key.shape + pool dims
        order = [axis for i in range(n) for axis in (i, n + i)]
        return taken.transpose(order).reshape(self.shape)

    def lifted(self, ndim: int) -> Rows:
        """The same values with leading unit dims up to `ndim`."""
        extra = ndim - self.ndim
        if extra <= 0:
            return self
        return Rows(lift(self.key, ndim), self.pool.reshape(self.pool.shape[0], *(1,) * extra, *self.pool.shape[1:]))

    def narrowed(self) -> Rows:
        """The same values with the key cut to extent 1 along the key dims it does not vary on (a row
        copied on every slice stays one row), for element-wise use only."""
        key = core(self.key)  # dims it is broadcast along need no look
        for axis in extents(key):
            first = key.take([0], axis=axis)
            if np.array_equal(key, np.broadcast_to(first, key.shape)):
                key = first
        return self if key is self.key else Rows(key, self.pool)

    def compact(self) -> Rows:
        """Drop pool rows no key names (reads of a tile keep only the rows they touch); narrow rows
        are also merged by content (tiles written one by one name the same values anew)."""
        used, key = renumber(self.key, self.pool.shape[0])
        pool = self.pool[used] if len(used) < self.pool.shape[0] else self.pool
        shape, key = key.shape, core(key)
        width = int(np.prod(pool.shape[1:]))
        if width <= SMALL_ROW and len(used) > 1 and len(used) * width <= 1 << 20:
            rows = np.ascontiguousarray(pool, dtype=np.float32).reshape(len(used), width)
            _, first, by_content = np.unique(
                rows.view(np.dtype((np.void, 4 * width))).reshape(-1), return_index=True, return_inverse=True
            )
            if len(first) < len(used):
                return Rows(np.broadcast_to(by_content.reshape(-1)[key], shape), pool[first])
        if len(used) == self.pool.shape[0]:
            return self
        return Rows(np.broadcast_to(key, shape), pool)


def renumber(key: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The ids in use (sorted) and the key renumbered over them: np.unique in linear time (over what
    the key holds: a key broadcast along a dim is looked at once there, and stays broadcast)."""
    held = core(key)
    used = np.flatnonzero(np.bincount(held.reshape(-1), minlength=count))
    if len(used) == count:
        return used, key
    lookup = np.zeros(count, dtype=np.int64)
    lookup[used] = np.arange(len(used))
    return used, np.broadcast_to(lookup[held], key.shape)


def core(array: np.ndarray) -> np.ndarray:
    """A view of the array with every dim it is broadcast along (stride 0) cut to extent 1."""
    if 0 not in array.strides:
        return array
    cut = (slice(0, 1) if n > 1 and s == 0 else slice(None) for n, s in zip(array.shape, array.strides, strict=True))
    return array[tuple(cut)]


def broadcast_copy(array: np.ndarray) -> np.ndarray:
    """A copy of the array that copies only what it holds: dims it is broadcast along stay broadcast
    (read-only; a key read from a stored tensor, which is written in place, must not change)."""
    held = core(array)
    return held.copy() if held is array else np.broadcast_to(held.copy(), array.shape)


Array = np.ndarray | Rows


def extents(array: np.ndarray | None) -> set[int]:
    return set() if array is None else {i for i, size in enumerate(np.shape(array)) if size > 1}


def key_dims(rows: Rows) -> set[int]:
    return extents(rows.key)


def pool_dims(rows: Rows) -> set[int]:
    return {i - 1 for i in extents(rows.pool) if i > 0}


def dense(value: Array | float) -> np.ndarray:
    return value.dense() if isinstance(value, Rows) else np.asarray(value)


def lift(array: np.ndarray, ndim: int) -> np.ndarray:
    """A scalar or lower-rank index array as one with `ndim` dims (leading ones)."""
    array = np.asarray(array)
    return array.reshape((1,) * (ndim - array.ndim) + array.shape)


def lift_value(value: Array, ndim: int) -> Array:
    return value.lifted(ndim) if isinstance(value, Rows) else lift(value, ndim)


def from_table(table: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> Array:
    """table[rows, cols] for index arrays of one rank; factored by distinct row when the rows and the
    columns vary along different dims (a periodic weight read through a plain view)."""
    n = max(rows.ndim, cols.ndim)
    rows, cols = lift(rows, n), lift(cols, n)
    if extents(rows) & extents(cols):
        _check_size(int(np.prod(np.broadcast_shapes(rows.shape, cols.shape))), "a weight read")
        return table[rows, cols]
    used, key = renumber(rows, table.shape[0])
    distinct = table if len(used) == table.shape[0] else table[used]
    picked = strided(distinct, (cols,), n)
    return Rows(key, picked if picked is not None else gather_columns(distinct, (cols,)))


def unary(fn: Callable[[np.ndarray], np.ndarray], value: Array) -> Array:
    return Rows(value.key, fn(value.pool)) if isinstance(value, Rows) else fn(value)


def apply(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], left: Array | float, right: Array | float) -> Array:
    """fn(left, right) element-wise, staying factored when the operands allow it."""
    key, lvalues, rvalues = _paired(left, right)
    return fn(lvalues, rvalues) if key is None else Rows(key, fn(lvalues, rvalues))


def contract(left: Array, right: Array, axes: tuple[int, ...]) -> Array:
    """The sum over `axes` of left * right, products and sum in f64, back to f32 (the Tensor Unit's
    contraction): `reduce_over(apply(multiply))` without holding the products, factored when only
    pool dims are reduced."""
    key, lvalues, rvalues = _paired(left, right)
    if key is None:
        return _sum_of_products(lvalues, rvalues, axes)
    if set(axes) & extents(key):  # rows are summed: the dense fallback
        product = Rows(key, np.multiply(lvalues, rvalues, dtype=np.float64))
        return reduce_over(product, axes, np.sum)
    kept = [s for i, s in enumerate(key.shape) if i not in axes]
    return Rows(key.reshape(kept), _sum_of_products(lvalues, rvalues, tuple(a + 1 for a in axes)))


def _sum_of_products(left: np.ndarray, right: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """np.sum(left * right, axes) in f64, back to f32, by einsum (no product array); unit dims are
    squeezed so einsum sees each label with one extent."""
    left, right = lift(left, np.ndim(right)), lift(right, np.ndim(left))
    shape = np.broadcast_shapes(left.shape, right.shape)
    labels = string.ascii_letters[: len(shape)]  # 52 labels: numpy broadcasts at most 32 dims
    lsub = "".join(lab for lab, n in zip(labels, left.shape, strict=True) if n > 1)
    rsub = "".join(lab for lab, n in zip(labels, right.shape, strict=True) if n > 1)
    out = "".join(lab for i, lab in enumerate(labels) if i not in axes and shape[i] > 1)
    summed = np.einsum(
        f"{lsub},{rsub}->{out}",
        left.reshape([n for n in left.shape if n > 1]),
        right.reshape([n for n in right.shape if n > 1]),
        dtype=np.float64,
        casting="safe",
    )
    return summed.astype(np.float32).reshape([n for i, n in enumerate(shape) if i not in axes])


def _paired(left: Array | float, right: Array | float) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """The operands of an element-wise op as (key, left pool, right pool) over one key (a pool of
    one row broadcasts over every row), or as (None, left, right) dense."""
    if not isinstance(left, Rows) and not isinstance(right, Rows):
        return None, np.asarray(left), np.asarray(right)
    if isinstance(left, Rows) and isinstance(right, Rows):
        joined = _join(left, right)
        if joined is not None:
            return joined
        # Densify the operand that is smaller once its key is cut to the dims it varies on (an input
        # read on every slice is one copy); the other stays factored if the dense one then fits it.
        left, right = left.narrowed(), right.narrowed()
        if left.size <= right.size:
            return _paired(left.dense(), right)
        return _paired(left, right.dense())
    if isinstance(left, Rows):
        pool = _as_pool(np.asarray(right), left)
        return (left.key, left.pool, pool) if pool is not None else (None, left.dense(), np.asarray(right))
    assert isinstance(right, Rows)
    pool = _as_pool(np.asarray(left), right)
    return (right.key, pool, right.pool) if pool is not None else (None, np.asarray(left), right.dense())


def reduce_over(value: Array, axes: tuple[int, ...], reducer: Callable[..., np.ndarray]) -> Array:
    """Reduce over `axes` in f64, back to f32; factored when only pool dims are reduced."""
    if not axes:
        return value
    if isinstance(value, Rows) and not (set(axes) & key_dims(value)):
        key = value.key.reshape([s for i, s in enumerate(value.key.shape) if i not in axes])
        pool = reducer(value.pool.astype(np.float64, copy=False), axis=tuple(a + 1 for a in axes)).astype(np.float32)
        return Rows(key, pool)
    return reducer(dense(value).astype(np.float64, copy=False), axis=axes).astype(np.float32)


def as_slices(index: tuple[np.ndarray, ...]) -> tuple[slice, ...] | None:
    """The same selection as basic slices, when each index array is a constant or a run of
    consecutive values along its own dim (most views: a tile of a tensor), else None. Slicing makes
    a view where fancy indexing copies."""
    slices = []
    for dim, array in enumerate(index):
        array = np.asarray(array)
        varying = extents(array)
        if not varying:
            start = int(array.reshape(-1)[0]) if array.size else 0
            slices.append(slice(start, start + 1))
            continue
        if varying != {dim} or array.ndim != len(index):
            return None
        run = array.reshape(-1)
        if int(run[-1]) - int(run[0]) != len(run) - 1 or (len(run) > 1 and not np.all(np.diff(run) == 1)):
            return None
        slices.append(slice(int(run[0]), int(run[-1]) + 1))
    return tuple(slices)


def take(value: Array, picks: tuple[np.ndarray, ...]) -> Array:
    """value[picks] (one index array per dim, broadcast together), factored when the key dims' picks
    and the pool dims' picks vary along different dims of the result."""
    if not isinstance(value, Rows):
        if not picks:
            return value
        slices = as_slices(picks) if value.ndim == len(picks) else None
        return value[slices] if slices is not None else value[picks]
    n = max((np.ndim(p) for p in picks), default=0)
    picks = tuple(lift(p, n) for p in picks)
    kd, pd = key_dims(value), pool_dims(value)
    key_picks = [picks[i] for i in kd]
    pool_picks = [picks[i] for i in pd]
    if set().union(*map(extents, key_picks)) & set().union(*map(extents, pool_picks)):
        return value.dense()[picks]
    zero = np.zeros((1,) * n, dtype=np.int64)
    key_index = tuple(picks[i] if i in kd else zero for i in range(value.ndim))
    view = strided(value.key[None], key_index, n)
    # A copy either way: a stored tensor's key is written in place, a value read from it must not change.
    key = broadcast_copy(view[0]) if view is not None else value.key[key_index]
    pool_index = tuple(picks[i] if i in pd else zero for i in range(value.ndim))
    pool = strided(value.pool, pool_index, n)
    if pool is None:
        pool = gather_columns(value.pool, pool_index)
    return Rows(lift(key, n), pool).compact()


def gather_columns(pool: np.ndarray, index: tuple[np.ndarray, ...]) -> np.ndarray:
    """pool[(slice(None), *index)], rows outermost in memory. numpy lays out a slice followed by
    index arrays with the sliced axis innermost, and every element-wise op on such a pool then
    strides across rows (7-10x slower on a weight tile)."""
    shape = np.broadcast_shapes(*(np.shape(i) for i in index))
    flat = np.ravel_multi_index(tuple(index), pool.shape[1:]) if index else np.zeros(shape, dtype=np.int64)
    return np.take(pool.reshape(pool.shape[0], -1), np.broadcast_to(flat, shape), axis=1)


def strided(pool: np.ndarray, index: tuple[np.ndarray, ...], ndim: int, writeable: bool = False) -> np.ndarray | None:
    """pool[(slice(None), *index)] laid out over `ndim` result dims, as a view (no copy), when every
    index array is affine in the result's coordinates (a tile of a weight read through a view: a run,
    a stride, a constant); None otherwise. Read-only unless `writeable` (a view to write through,
    which the caller makes sure names no element twice)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in index))
    if len(shape) != ndim or len(index) != pool.ndim - 1:
        return None
    bases, strides = [], [0] * ndim
    for dim, array in enumerate(index):
        affine = _affine(np.asarray(array), pool.shape[dim + 1])
        if affine is None:
            return None
        base, steps = affine
        bases.append(base)
        for axis, step in steps.items():
            strides[axis] += step * pool.strides[dim + 1]
    anchor = pool[(slice(None), *bases)]  # each row's first picked element: where the view starts
    return np.lib.stride_tricks.as_strided(
        anchor, shape=(pool.shape[0], *shape), strides=(pool.strides[0], *strides), writeable=writeable
    )


def _affine(array: np.ndarray, size: int) -> tuple[int, dict[int, int]] | None:
    """(base, {dim: step}) when array == base + the sum of step * coordinate over its dims, with every
    value in [0, size); None otherwise."""
    if array.size == 0:
        return None
    base = int(array.reshape(-1)[0])
    steps: dict[int, int] = {}
    expected: np.ndarray = np.int64(base)  # type: ignore[assignment]
    low = high = base
    for dim, length in enumerate(array.shape):
        if length < 2:
            continue
        step = int(array[tuple(1 if d == dim else 0 for d in range(array.ndim))]) - base
        if step:
            steps[dim] = step
            line = [1] * array.ndim
            line[dim] = length
            expected = expected + step * np.arange(length, dtype=np.int64).reshape(line)
            low, high = low + min(0, step * (length - 1)), high + max(0, step * (length - 1))
    if low < 0 or high >= size or not np.array_equal(np.broadcast_to(expected, array.shape), array):
        return None
    return base, steps


def _join(left: Rows, right: Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """One key for both operands, and each one's pool re-indexed by it (None if dims conflict)."""
    kd = key_dims(left) | key_dims(right)
    if kd & (pool_dims(left) | pool_dims(right)):
        return None
    shape = np.broadcast_shapes(left.key.shape, right.key.shape)
    lkey, rkey = np.broadcast_to(left.key, shape), np.broadcast_to(right.key, shape)
    if np.array_equal(lkey, rkey):  # the same rows (a stash, or two reads of one tensor)
        return lkey, left.pool, right.pool
    width = right.pool.shape[0]
    combined = lkey.astype(np.int64) * width + rkey
    if left.pool.shape[0] * width <= 1 << 24:
        pairs, key = renumber(combined, left.pool.shape[0] * width)
    else:
        pairs, key = np.unique(combined, return_inverse=True)
        key = key.reshape(shape)
    return key, left.pool[pairs // width], right.pool[pairs % width]


def _as_pool(operand: np.ndarray, rows: Rows) -> np.ndarray | None:
    """A dense operand as a pool aligned with rows.key, if it varies along key dims only through it."""
    operand = lift(operand, rows.ndim)
    kd = key_dims(rows)
    if not kd & extents(operand):
        return operand[None]
    shape = tuple(rows.key.shape[i] if i in kd else operand.shape[i] for i in range(rows.ndim))
    moved = np.moveaxis(np.broadcast_to(operand, shape), sorted(kd), range(len(kd)))
    by_position = moved.reshape(-1, *moved.shape[len(kd) :])
    flat_key = rows.key.reshape(-1)  # C order over the key dims, as moveaxis left them
    # A first look at a few thousand positions turns down most operands that vary within a key cheaply.
    _, first, inverse = np.unique(flat_key[:4096], return_index=True, return_inverse=True)
    sample = by_position[: len(inverse)]
    if not np.array_equal(sample[first[inverse.reshape(-1)]], sample, equal_nan=True):
        return None
    first_of = np.full(rows.pool.shape[0], -1, dtype=np.int64)
    first_of[flat_key[::-1]] = np.arange(len(flat_key))[::-1]  # the first position of each key
    used = np.flatnonzero(first_of >= 0)
    table = by_position[first_of[used]]
    lookup = np.zeros(rows.pool.shape[0], dtype=np.int64)
    lookup[used] = np.arange(len(used))
    if not np.array_equal(table[lookup[flat_key]], by_position, equal_nan=True):
        return None  # the operand differs between positions of one key
    pool_shape = tuple(1 if i in kd else shape[i] for i in range(rows.ndim))
    pool = np.full((rows.pool.shape[0], *pool_shape), np.nan, dtype=np.result_type(operand.dtype, np.float32))
    pool[used] = table.reshape(len(used), *pool_shape)
    return pool
