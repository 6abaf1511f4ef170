"""The digit algebra: normalisation, merging, refinement and coverage keep index semantics."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chiplore.simulator.toolchain.digits import (
    AxisSystem,
    Digit,
    NoCommonRefinement,
    merge,
    missing,
    normalise,
    overlapping,
    refine,
)

GEMMA = AxisSystem(atoms={"H": 3840, "Ns": 8, "Gs": 2, "Ds": 256}, composites={"Qs": ("Ns", "Gs", "Ds")})


def test_adjacent_digits_merge_as_the_spec_says() -> None:
    digits = [GEMMA.digit("H", [("/", 64), ("%", 30)]), GEMMA.digit("H", [("%", 64)])]
    assert normalise(digits, GEMMA) == [GEMMA.digit("H", [("%", 1920)])] == [Digit("H", 1, 1920)]


def test_composite_digits_normalise_onto_atoms() -> None:
    assert normalise([GEMMA.digit("Qs", [("/", 512)])], GEMMA) == [Digit("Ns", 1, 8)]
    assert normalise([GEMMA.digit("Qs", [("%", 512)])], GEMMA) == [Digit("Gs", 1, 2), Digit("Ds", 1, 256)]
    assert normalise([GEMMA.digit("Qs", [("%", 512), ("/", 16)])], GEMMA) == [Digit("Gs", 1, 2), Digit("Ds", 16, 16)]
    assert normalise([GEMMA.digit("Qs", [])], GEMMA) == [Digit("Ns", 1, 8), Digit("Gs", 1, 2), Digit("Ds", 1, 256)]
    unaligned = GEMMA.digit("Qs", [("/", 100)])
    assert normalise([unaligned], GEMMA) == [unaligned], "a digit cutting an atom stays on the composite axis"


def test_incompatible_cuts_have_no_common_refinement() -> None:
    with pytest.raises(NoCommonRefinement, match="digits of H"):
        refine([Digit("H", 1, 100)], [Digit("H", 64, 60), Digit("H", 1, 64)])


def test_coverage_names_the_missing_digit_and_overlap_the_repeated_one() -> None:
    assert missing("H", 3840, [Digit("H", 128, 30)]) == [Digit("H", 1, 128)]
    assert missing("H", 3840, [Digit("H", 128, 30), Digit("H", 1, 128)]) == []
    assert overlapping([Digit("H", 1, 128), Digit("H", 64, 60)]) == (Digit("H", 1, 128), Digit("H", 64, 60))


factorisations = st.lists(st.integers(min_value=2, max_value=6), min_size=1, max_size=5).filter(
    lambda fs: math.prod(fs) <= 4096
)


def split(factors: list[int], axis: str = "A") -> list[Digit]:
    """The digits of a mixed-radix split, most significant first."""
    digits, stride = [], 1
    for factor in reversed(factors):
        digits.append(Digit(axis, stride, factor))
        stride *= factor
    return list(reversed(digits))


@settings(max_examples=150, deadline=None)
@given(factorisations, st.randoms())
def test_a_split_covers_its_axis_once_and_is_a_bijection(factors: list[int], rng: object) -> None:
    size = math.prod(factors)
    digits = split(factors)
    shuffled = list(digits)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    assert missing("A", size, shuffled) == [] and overlapping(shuffled) is None
    images = {tuple(d.value(i) for d in digits) for i in range(size)}
    assert len(images) == size
    assert all(sum(d.value(i) * d.stride for d in digits) == i for i in range(size))


@settings(max_examples=150, deadline=None)
@given(factorisations, st.data())
def test_dropping_a_digit_is_reported_as_exactly_that_gap(factors: list[int], data: st.DataObject) -> None:
    digits = split(factors)
    dropped = digits.pop(data.draw(st.integers(min_value=0, max_value=len(digits) - 1)))
    assert missing("A", math.prod(factors), digits) == [dropped]


@settings(max_examples=150, deadline=None)
@given(factorisations)
def test_merging_keeps_every_index_value(factors: list[int]) -> None:
    size = math.prod(factors)
    digits = split(factors)
    merged = merge(digits)
    assert merged == [Digit("A", 1, size)]
    assert all(merged[0].value(i) == sum(d.value(i) * d.stride for d in digits) for i in range(size))


def _coarsen(digits: list[Digit], cuts: list[bool]) -> list[Digit]:
    """Merge neighbours where cuts says so: another decomposition with a common refinement."""
    result = [digits[0]]
    for digit, keep in zip(digits[1:], cuts, strict=False):
        if keep:
            result.append(digit)
        else:
            outer = result.pop()
            result.append(Digit(digit.axis, digit.stride, outer.size * digit.size))
    return result


@settings(max_examples=150, deadline=None)
@given(factorisations, st.data())
def test_compatible_decompositions_refine_to_the_same_digits(factors: list[int], data: st.DataObject) -> None:
    fine = split(factors)
    cuts = st.lists(st.booleans(), min_size=len(fine) - 1, max_size=len(fine) - 1)
    first, second = _coarsen(fine, data.draw(cuts)), _coarsen(fine, data.draw(cuts))
    refined_first, refined_second = refine(first, second)
    assert sorted(refined_first) == sorted(refined_second)
    for original in first:
        parts = [p for p in refined_first if original.stride <= p.stride < original.limit]
        assert math.prod(p.size for p in parts) == original.size
        for i in range(0, math.prod(factors), max(1, math.prod(factors) // 97)):
            assert original.value(i) == sum(p.value(i) * (p.stride // original.stride) for p in parts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=2, max_value=8), min_size=2, max_size=3), st.data())
def test_composite_digits_mean_the_same_on_atoms(sizes: list[int], data: st.DataObject) -> None:
    names = [f"X{i}" for i in range(len(sizes))]
    axes = AxisSystem(atoms=dict(zip(names, sizes, strict=True)), composites={"C": tuple(names)})
    total = math.prod(sizes)
    place_values = [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]
    # An aligned digit of C: spans whole atoms from atom `low` to atom `high`.
    high = data.draw(st.integers(min_value=0, max_value=len(sizes) - 1))
    low = data.draw(st.integers(min_value=high, max_value=len(sizes) - 1))
    digit = Digit("C", place_values[low], math.prod(sizes[high : low + 1]))
    atoms = normalise([digit], axes)
    assert [a.axis for a in atoms] == names[high : low + 1]
    for i in range(total):
        atom_index = {n: (i // place_values[j]) % sizes[j] for j, n in enumerate(names)}
        recomposed = 0
        for atom in atoms:
            recomposed = recomposed * atom.size + atom.value(atom_index[atom.axis])
        assert recomposed == digit.value(i)
