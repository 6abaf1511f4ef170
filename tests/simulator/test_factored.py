"""Row-factored arrays (the executor's periodic values): every operation equals its dense twin, stays
factored where the dims allow, and falls back to dense where they do not."""

from __future__ import annotations

import numpy as np
import pytest

from chiplore.simulator.execute.factored import (
    MAX_ELEMENTS,
    ExecutionError,
    Rows,
    apply,
    contract,
    dense,
    from_table,
    reduce_over,
    take,
    unary,
)

RNG = np.random.default_rng(7)
TABLE = RNG.standard_normal((13, 40)).astype(np.float32)  # 13 distinct rows of 40 columns


def weight() -> Rows:
    """60 rows x 40 columns of a 13-periodic table, dims (row blocks 6, rows 10, columns 40)."""
    rows = (np.arange(6)[:, None, None] * 10 + np.arange(10)[None, :, None]) % 13
    value = from_table(TABLE, rows, np.arange(40)[None, None, :])
    assert isinstance(value, Rows)
    return value


def test_a_periodic_read_keeps_only_the_distinct_rows() -> None:
    value = weight()
    assert value.pool.shape == (13, 1, 1, 40)
    rows = (np.arange(60) % 13).reshape(6, 10)
    assert np.array_equal(value.dense(), TABLE[rows])


def test_rows_and_columns_that_share_a_dim_read_densely() -> None:
    mixed = from_table(TABLE, np.arange(13) % 13, np.arange(13) % 40)
    assert isinstance(mixed, np.ndarray)
    assert np.array_equal(mixed, TABLE[np.arange(13), np.arange(13)])


def test_element_wise_ops_run_on_the_pool() -> None:
    value = weight()
    columns = RNG.standard_normal((1, 1, 40)).astype(np.float32)
    result = apply(np.multiply, value, columns)
    assert isinstance(result, Rows) and result.pool.shape[0] == 13
    assert np.allclose(dense(result), value.dense() * columns)
    assert np.array_equal(dense(unary(np.negative, value)), -value.dense())


def test_an_operand_that_follows_the_rows_is_factored_and_one_that_does_not_is_dense() -> None:
    value = weight()
    periodic_scale = TABLE[:, 0][(np.arange(60) % 13).reshape(6, 10, 1)]  # a per-row scale, periodic too
    follows = apply(np.multiply, value, periodic_scale)
    assert isinstance(follows, Rows)
    assert np.allclose(dense(follows), value.dense() * periodic_scale)
    per_row = RNG.standard_normal((6, 10, 1)).astype(np.float32)  # differs between rows of one key
    breaks = apply(np.multiply, value, per_row)
    assert isinstance(breaks, np.ndarray)
    assert np.allclose(breaks, value.dense() * per_row)


def test_two_factored_operands_join_their_keys() -> None:
    left = weight()
    shifted = (np.arange(6)[:, None, None] * 10 + np.arange(10)[None, :, None] + 3) % 7
    right = from_table(TABLE[:7], shifted, np.arange(40)[None, None, :])
    result = apply(np.add, left, right)
    assert isinstance(result, Rows)
    assert np.array_equal(dense(result), left.dense() + dense(right))
    across = from_table(TABLE, np.arange(40)[None, None, :] % 13, np.zeros((6, 10, 1), dtype=np.int64))
    mixed = apply(np.add, left, across)  # keys along the columns meet a pool along them: dense
    assert np.array_equal(dense(mixed), left.dense() + dense(across))


@pytest.mark.parametrize("axes", [(2,), (0, 2), (1,), (0, 1, 2)])
def test_reductions_match_the_dense_ones(axes: tuple[int, ...]) -> None:
    value = weight()
    result = reduce_over(value, axes, np.sum)
    assert isinstance(result, Rows) == (axes == (2,))  # only a reduction over pool dims stays factored
    assert np.allclose(dense(result), value.dense().astype(np.float64).sum(axis=axes).astype(np.float32))


def test_take_selects_like_numpy_and_compacts() -> None:
    value = weight()
    picks = (np.array([[[2]], [[5]]]), np.arange(3)[None, :, None], np.arange(0, 40, 4)[None, None, :])
    result = take(value, picks)
    assert isinstance(result, Rows) and result.pool.shape[0] == 6  # rows 20..22 and 50..52: six distinct
    assert np.array_equal(dense(result), value.dense()[picks])
    diagonal = (np.arange(6)[:, None], np.zeros((1, 1), dtype=np.int64), np.arange(6)[:, None])
    assert np.array_equal(dense(take(value, diagonal)), value.dense()[diagonal])


def test_narrow_rows_are_merged_by_content() -> None:
    pool = np.array([[1.0], [2.0], [1.0], [2.0]], dtype=np.float32)
    merged = Rows(np.array([0, 1, 2, 3, 0, 2]), pool).compact()
    assert merged.pool.shape[0] == 2
    assert np.array_equal(merged.dense(), np.array([1, 2, 1, 2, 1, 1], dtype=np.float32))


def test_rows_chosen_from_none_are_an_empty_value() -> None:
    """A view of no row (a member's rows in a chunk that holds none) read as extent 1 where the key was
    empty, and its dense form raised 'cannot reshape array of size 0 into shape (1, 1, 32, 128)'."""
    empty = Rows(np.zeros((0, 1), dtype=np.int64), TABLE[:1, None, :])
    assert empty.shape == (0, 40) and empty.size == 0
    assert empty.dense().shape == (0, 40)


def test_a_copy_along_a_key_dim_densifies_as_one_row() -> None:
    copies = Rows(np.zeros((32, 1), dtype=np.int64), TABLE[:1, None, :])
    assert copies.narrowed().dense().shape == (1, 40)
    assert copies.dense().shape == (32, 40)


def test_a_value_too_large_to_factor_is_refused_clearly() -> None:
    side = int(np.sqrt(MAX_ELEMENTS)) + 1
    rows = np.arange(side)[:, None] + np.arange(side)[None, :]  # rows vary along both dims
    with pytest.raises(ExecutionError, match="do not factor by row"):
        from_table(np.zeros((1, 1), dtype=np.float32), rows % 1, rows % 1)


def picks_over(shape: tuple[int, ...], size: int, affine: bool) -> np.ndarray:
    """A random index array of `shape` into a dim of `size`: base + steps along some dims (negative
    and zero steps too), or values with no such form."""
    if not affine:
        return RNG.integers(0, size, shape)
    while True:
        steps = [int(RNG.integers(-2, 3)) if n > 1 else 0 for n in shape]
        low = -sum(min(0, s * (n - 1)) for s, n in zip(steps, shape, strict=True))
        span = sum(abs(s) * (n - 1) for s, n in zip(steps, shape, strict=True))
        if span < size:
            break
    base = low + int(RNG.integers(0, size - span))
    grid = np.indices(shape)
    return base + sum((s * g for s, g in zip(steps, grid, strict=True)), np.zeros(shape, dtype=np.int64))


@pytest.mark.parametrize("affine", [True, False])
def test_take_reads_a_tile_as_a_view_where_it_can_and_always_selects_like_numpy(affine: bool) -> None:
    """Index arrays affine in the result's coordinates (runs, strides, constants) read the pool as a
    read-only view; any other index reads a copy; both select what dense indexing selects."""
    key = (np.arange(3)[:, None, None] % 2) * np.ones((1, 1, 1), dtype=np.int64)
    value = Rows(key, RNG.standard_normal((2, 1, 12, 9)).astype(np.float32))
    for _ in range(40):
        shape = tuple(int(n) for n in RNG.integers(1, 4, 4))
        rows = np.arange(shape[0]).reshape(-1, 1, 1, 1)
        picks = (rows, picks_over((1, *shape[1:]), 12, affine), picks_over((1, *shape[1:]), 9, affine))
        taken = take(value, picks)
        assert isinstance(taken, Rows)
        assert np.array_equal(taken.dense(), np.broadcast_to(value.dense()[picks], taken.shape))
        if affine and taken.pool.shape[0] == value.pool.shape[0]:  # (compacting rows copies them)
            assert not taken.pool.flags.writeable  # a view: nothing may write through it


def test_a_contraction_over_many_dims_sums_what_multiply_and_sum_would() -> None:
    # einsum names each dim with a letter: a stream of 30 dims (a view cut at many digits) needs more
    # than the 26 lower-case ones.
    rng = np.random.default_rng(0)
    left = rng.standard_normal((2, 1, 3, *(1,) * 25, 2, 4)).astype(np.float32)
    right = Rows(np.arange(5).reshape(1, 5, *(1,) * 28), rng.standard_normal((5, 1, 1, 3, *(1,) * 25, 2, 4)))
    expected = np.sum(np.multiply(left, right.dense(), dtype=np.float64), axis=(2, 29)).astype(np.float32)
    assert np.array_equal(dense(contract(left, right, (2, 29))), expected)
