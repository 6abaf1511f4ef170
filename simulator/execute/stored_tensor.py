"""A DM, TRF or VRF tensor as the executor stores it: one array axis per atom digit its layout holds,
written and read by atom index (`Index`), kept factored by distinct row while writes allow."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from chiplore.simulator.execute.factored import (
    MAX_ELEMENTS,
    Array,
    Rows,
    TooDense,
    as_slices,
    dense,
    extents,
    key_dims,
    lift,
    pool_dims,
    renumber,
    strided,
    take,
)
from chiplore.simulator.toolchain.digits import Digit
from chiplore.simulator.toolchain.placement import Tensor

Index = dict[str, np.ndarray]
Picks = tuple[np.ndarray, ...] | tuple[slice, ...]  # one per stored digit: index arrays, or slices


@dataclass
class Stored:
    """A DM/TRF/VRF tensor: one array axis per atom digit its layout holds (`held` values of it).

    Nothing is allocated until the first write; a tensor written from a periodic weight stays
    factored by distinct row (`Rows`) as long as every write keeps rows and columns apart."""

    name: str
    digits: list[Digit]
    held: list[int]
    value: Array | None = None  # None: never written (reads NaN)

    @classmethod
    def empty(cls, tensor: Tensor) -> Stored:
        digits: list[Digit] = []
        held: list[int] = []
        for name in ("cluster", "slice", "lane", "elem"):
            for place in tensor.places(name):
                if place.is_rep or not place.digits:
                    continue
                inner = 1
                sizes: list[int] = []
                for digit in reversed(place.digits):
                    size = digit.size
                    if place.restrict is not None:
                        size = min(size, max(1, math.ceil(place.restrict / inner)))
                    sizes.append(size)
                    inner *= digit.size
                digits += list(place.digits)
                held += list(reversed(sizes))
        return cls(tensor.name, digits, held)

    def coords(self, root: Index) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Each digit's coordinate, and where they all fall inside what the tensor holds."""
        coords = []
        inside: np.ndarray = np.array(True)
        for digit, held in zip(self.digits, self.held, strict=True):
            value = (root.get(digit.axis, np.int64(0)) // digit.stride) % digit.size
            if held < digit.size and not bool(np.all(value < held)):  # a restricted place: mask, clamp
                inside = inside & (value < held)
                value = np.minimum(value, held - 1)
            coords.append(value)
        return tuple(coords), inside

    def read(self, root: Index) -> Array:
        coords, inside = self.coords(root)
        if self.value is None:
            return np.full(np.broadcast_shapes(*(np.shape(c) for c in coords)), np.nan, dtype=np.float32)
        values = take(self.value, coords)
        return values if bool(np.all(inside)) else np.where(inside, dense(values), np.float32(np.nan))

    def write(self, root: Index, values: Array, mask: np.ndarray | None = None) -> None:
        coords, inside = self.coords(root)
        if mask is not None:
            inside = inside & mask
            if not bool(np.any(inside)):
                return
        if not self.digits:  # a scalar per slice (`elem: [1 # 8]`): every position holds the one value
            self.value = np.asarray(dense(values), dtype=np.float32).reshape(-1)[-1:].reshape(())
            return
        everywhere = bool(np.all(inside))
        if everywhere and not isinstance(self.value, np.ndarray):
            rows = values if isinstance(values, Rows) else self._as_rows(values, coords)
            if rows is not None and self._write_rows(coords, rows):
                return
        data = self._dense()
        values = dense(values)
        if everywhere:  # the usual case: no masking, numpy broadcasts the index arrays
            data[coords] = values
            return
        shape = np.broadcast_shapes(values.shape, inside.shape, *(c.shape for c in coords))
        where = np.broadcast_to(inside, shape)
        picked = tuple(np.broadcast_to(c, shape)[where] for c in coords)
        data[picked] = np.broadcast_to(values, shape)[where]

    def _dense(self) -> np.ndarray:
        if isinstance(self.value, np.ndarray):
            return self.value
        count = math.prod(self.held)
        if count > MAX_ELEMENTS:
            raise TooDense(
                f"{self.name} holds {count:,} values that do not factor by row; the dense executor stops at"
                f" {MAX_ELEMENTS:,}"
            )
        data = np.full(self.held, np.nan, dtype=np.float32) if self.value is None else self.value.dense()
        self.value = np.ascontiguousarray(data, dtype=np.float32)
        return self.value

    def _as_rows(self, values: np.ndarray, coords: tuple[np.ndarray, ...]) -> Rows | None:
        """Dense values to write factored: into a factored tensor, or when the write copies them along
        dims they do not vary on (a TRF replicated on every slice holds one copy)."""
        n = max([np.ndim(values), *(np.ndim(c) for c in coords)])
        values = lift(np.asarray(values), n)
        copied = set().union(*(extents(lift(c, n)) for c in coords)) - extents(values)
        if self.value is None and not copied:
            return None
        return Rows(np.zeros((1,) * n, dtype=np.int64), values[None])

    def _write_rows(self, coords: tuple[np.ndarray, ...], values: Rows) -> bool:
        """Write factored values, keeping this tensor factored; False when the write mixes the two
        kinds of dims (the caller then writes densely)."""
        n = values.ndim
        coords = tuple(lift(c, n) for c in coords)
        value_keys, value_pools = key_dims(values), pool_dims(values)
        if self.value is None:
            keyed = []
            for c in coords:
                if extents(c) & value_keys and extents(c) & value_pools:
                    return False
                # Digits the value is copied along hold one row of copies: key digits too.
                keyed.append(bool(extents(c) & value_keys) or bool(extents(c) and not extents(c) & value_pools))
            self.value = Rows(
                np.zeros([h if k else 1 for h, k in zip(self.held, keyed, strict=True)], dtype=np.int64),
                np.full((1, *(1 if k else h for h, k in zip(self.held, keyed, strict=True))), np.nan, np.float32),
            )
        stored = self.value
        assert isinstance(stored, Rows)
        keyed_digits = key_dims(stored)
        key_side = value_keys.union(*(extents(coords[j]) for j in keyed_digits))
        pool_side = value_pools.union(*(extents(c) for j, c in enumerate(coords) if j not in keyed_digits))
        if key_side & pool_side:
            return False
        zero = np.zeros((1,) * n, dtype=np.int64)
        at_key = [c if j in keyed_digits else zero for j, c in enumerate(coords)]
        at_pool = [zero if j in keyed_digits else c for j, c in enumerate(coords)]
        key_shape = np.broadcast_shapes(values.key.shape, *(c.shape for c in at_key))
        at_key_b = tuple(np.broadcast_to(c, key_shape) for c in at_key)
        pool_shape = np.broadcast_shapes(values.pool.shape[1:], *(c.shape for c in at_pool))
        slices = as_slices(tuple(at_pool)) if len(at_pool) == n else None
        at_pool_b = slices if slices is not None else tuple(np.broadcast_to(c, pool_shape) for c in at_pool)
        whole_rows = _covers(at_pool_b, stored.pool.shape[1:])
        if whole_rows and _covers(at_key_b, stored.key.shape):  # the tensor is overwritten: start afresh
            used, key = renumber(np.broadcast_to(values.key, key_shape), values.pool.shape[0])
            pool = values.pool if len(used) == values.pool.shape[0] else values.pool[used]
            if _fills(pool, at_pool_b, stored.pool):
                fresh = pool  # the values as they are: a pool is never written in place, so sharing is safe
            else:
                fresh = np.full((len(used), *stored.pool.shape[1:]), np.nan, dtype=np.float32)
                _put(fresh, at_pool_b, pool, covered=True)
            new_key = np.zeros(stored.key.shape, dtype=np.int64)
            new_key[at_key_b] = key
            self.value = Rows(new_key, fresh)
            return True
        # Each stored row becomes (what it held, what lands on it): rows written from the same distinct
        # value over the same old contents stay one pool row.
        width = values.pool.shape[0]
        old, new = stored.key[at_key_b], np.broadcast_to(values.key, key_shape)
        pairs, inverse = np.unique(old * width + new, return_inverse=True)
        landing = values.pool[pairs % width]
        count = stored.pool.shape[0]
        if whole_rows and _fills(landing, at_pool_b, stored.pool):
            # Nothing of the old rows survives, and the new ones fill them.
            grown = np.concatenate([stored.pool, landing])
        else:
            # The new rows are built in place in the grown pool (a separate array and a concatenate
            # copied each weight-sized write twice); a write of whole rows keeps nothing of the old.
            grown = np.empty((count + len(pairs), *stored.pool.shape[1:]), dtype=np.float32)
            grown[:count] = stored.pool
            if not whole_rows:
                np.take(stored.pool, pairs // width, axis=0, out=grown[count:])
            _put(grown[count:], at_pool_b, landing, covered=whole_rows)
        if not stored.key.flags.writeable:  # a key another value shares (a broadcast view of it): copy it first
            stored.key = stored.key.copy()
        stored.key[at_key_b] = count + inverse.reshape(key_shape)
        stored.pool = grown
        if stored.pool.shape[0] > 2 * stored.key.size + 64:
            compacted = stored.compact()
            self.value = Rows(np.ascontiguousarray(compacted.key), compacted.pool)
        return True


def _put(rows: np.ndarray, index: Picks, values: np.ndarray, covered: bool) -> None:
    """rows[(slice(None), *index)] = values; through a strided view, not a scatter, when the index is
    affine and, covering every element (`covered`) with as many positions as elements, names each once."""
    if covered and not all(isinstance(i, slice) for i in index):
        shape = np.broadcast_shapes(*(np.shape(i) for i in index))
        if math.prod(shape) == math.prod(rows.shape[1:]):
            target = strided(rows, index, len(shape), writeable=True)  # type: ignore[arg-type]
            if target is not None:
                target[...] = values
                return
    rows[(slice(None), *index)] = values


def _fills(rows: np.ndarray, index: Picks, pool: np.ndarray) -> bool:
    """Whether writing `rows` at `index` of rows shaped like `pool`'s would copy them unchanged: whole
    slices (the caller has checked that they cover), the same row shape and dtype."""
    return all(isinstance(i, slice) for i in index) and rows.shape[1:] == pool.shape[1:] and rows.dtype == pool.dtype


def _covers(index: Picks, shape: tuple[int, ...]) -> bool:
    """Whether the index (broadcast arrays, or slices) names every position of an array of this shape."""
    count = math.prod(shape)
    if all(isinstance(i, slice) for i in index):
        return all(i.indices(size)[:2] == (0, size) for i, size in zip(index, shape, strict=True))  # type: ignore[union-attr]
    index = tuple(i for i in index if not isinstance(i, slice))
    if math.prod(np.broadcast_shapes(*(i.shape for i in index))) < count:
        return False
    flat = np.ravel_multi_index(index, shape) if index else np.zeros(1, dtype=np.int64)
    return bool(np.all(np.bincount(flat.reshape(-1), minlength=count)))


def grid_index(dims: list[tuple[Digit, np.ndarray]]) -> Index:
    """Atom -> view index over a broadcast grid with one axis per dim (nothing materialised)."""
    index: Index = {}
    count = len(dims)
    for axis_no, (digit, values) in enumerate(dims):
        shape = [1] * count
        shape[axis_no] = len(values)
        term = np.asarray(values, dtype=np.int64).reshape(shape) * digit.stride
        index[digit.axis] = index[digit.axis] + term if digit.axis in index else term
    return index
