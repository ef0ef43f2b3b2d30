"""Exact search's similarities are sums of integers below 2**53: the same bits in any summation order,
hence on any machine's BLAS kernel and thread count (issue 30, item 5)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from releval.retrieval.dense import exact_search, grid_bits, grid_pair_products, grid_products, on_grid


def digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


@pytest.mark.parametrize("dimension", [1, 8, 384, 768, 1024, 4096])
def test_every_partial_sum_of_grid_products_is_an_integer_below_2_to_the_53(dimension):
    rng = np.random.default_rng(dimension)
    rows = rng.normal(size=(4, dimension)) * np.array([[1e-30], [1.0], [3e5], [0.0]])
    grid = on_grid(rows, grid_bits(dimension))
    assert np.all(grid.high == np.rint(grid.high)) and np.all(grid.low == np.rint(grid.low))
    assert np.abs(grid.high).max() <= 2.0**grid.bits and np.abs(grid.low).max() <= 2.0 ** (grid.bits - 1)
    # The largest sum of products a dot product adds up, in any order: high·high, then high·low + low·high.
    assert dimension * 2.0 ** (2 * grid.bits) <= 2.0**53
    assert 2 * dimension * 2.0 ** (2 * grid.bits - 1) <= 2.0**53
    back = (grid.high + grid.low * 2.0**-grid.bits) * np.ldexp(1.0, grid.exponent - grid.bits)[:, None]
    # each component kept to 2 * bits bits below its row's largest power of two
    assert np.all(np.abs(back - rows) <= np.ldexp(1.0, grid.exponent - 2 * grid.bits - 1)[:, None])
    assert grid.exponent[3] == 0 and not grid.high[3].any()


def test_similarities_are_the_same_bits_whatever_order_the_products_are_summed_in():
    """What a BLAS kernel of another machine does: sum the same products in another order (here: the
    dimensions permuted, and a sum without BLAS). Plain float64 products move in the last bits; the
    grid's do not, and stay within 1e-12 of them (unit vectors); nor do exact search's similarities."""
    rng = np.random.default_rng(5)
    vectors, queries = (rng.normal(size=(n, 384)) for n in (500, 40))
    vectors, queries = ((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32) for x in (vectors, queries))
    order = rng.permutation(384)
    bits = grid_bits(384)
    a, b = on_grid(queries.astype(np.float64), bits), on_grid(vectors.astype(np.float64), bits)
    a_perm, b_perm = on_grid(queries[:, order].astype(np.float64), bits), on_grid(vectors[:, order], bits)
    grid = grid_products(a, b)
    assert digest(grid) == digest(grid_products(a_perm, b_perm))
    pairs = grid_pair_products(on_grid(np.repeat(queries, 500, 0), bits), on_grid(np.tile(vectors, (40, 1)), bits))
    assert digest(pairs.reshape(40, 500)) == digest(grid)  # row by row, without BLAS: the same bits
    plain = queries.astype(np.float64) @ vectors.astype(np.float64).T
    assert digest(plain) != digest(queries[:, order].astype(np.float64) @ vectors[:, order].astype(np.float64).T)
    np.testing.assert_allclose(grid, plain, rtol=0, atol=1e-12)
    for metric in ("cos", "ip", "l2sq"):
        keys, scores = exact_search(vectors, queries, 500, metric)
        keys_perm, scores_perm = exact_search(vectors[:, order], queries[:, order], 500, metric)
        assert digest(keys) == digest(keys_perm) and digest(scores) == digest(scores_perm)
