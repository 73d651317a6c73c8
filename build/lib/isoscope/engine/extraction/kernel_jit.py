"""The numba code of the CPU statistics kernel (:class:`isoscope.engine.extraction.kernel.MomentsKernel`):
the moments of a state and the copy of its sampled rows.

Imported only when the kernel is compiled, since importing numba costs a fraction of a second.
Compiled code is cached on disk (``cache=True``, in ``NUMBA_CACHE_DIR``: the isoscope cache, see
:func:`isoscope.engine.environment.use_kernel_caches`), so a later process loads it instead of
compiling it again.
"""

from __future__ import annotations

import numba
import numpy as np

# Finite inputs only: the caller checks that every sum is finite and otherwise reduces the batch
# with torch, which propagates NaN and infinity as numpy does. Without these flags LLVM keeps the
# scalar NaN-aware min/max and the loops do not vectorize.
_FAST = {"nnan", "ninf", "nsz"}


@numba.njit(nogil=True, cache=True, fastmath=_FAST, boundscheck=False)
def moments_into(x, mean, abs_sum, m2, lo, hi):  # pragma: no cover - compiled by numba
    """Per state ``s`` and dimension of ``x`` (g, n, d; float32 or float64, C-contiguous), over
    the n tokens: the float64 mean, sum |x|, sum of squares about that mean, and the min and max,
    written into the (g, d) output arrays (min and max in their own float dtype).

    Two passes over each state, each a loop over tokens with an inner loop over the contiguous
    dimensions (which LLVM vectorizes): the first sums, the second subtracts the mean computed
    by the first, so the squares are centred in float64 with no cancellation. Four tokens per
    step: the accumulators are read and written once per four rows, not once per row.
    A (tokens, d) state is a megabyte or two, so the second pass reads it from the core's cache.
    """
    g, n, d = x.shape
    top = n - n % 4
    for s in range(g):
        xs = x[s]
        total, absolute, square = mean[s], abs_sum[s], m2[s]
        low, high = lo[s], hi[s]
        for j in range(d):
            total[j] = 0.0
            absolute[j] = 0.0
            square[j] = 0.0
            low[j] = xs[0, j]
            high[j] = xs[0, j]
        for i in range(0, top, 4):
            r0, r1, r2, r3 = xs[i], xs[i + 1], xs[i + 2], xs[i + 3]
            for j in range(d):
                a, b, c, e = r0[j], r1[j], r2[j], r3[j]
                fa, fb, fc, fe = np.float64(a), np.float64(b), np.float64(c), np.float64(e)
                total[j] += (fa + fb) + (fc + fe)
                absolute[j] += (abs(fa) + abs(fb)) + (abs(fc) + abs(fe))
                smallest = min(min(a, b), min(c, e))
                largest = max(max(a, b), max(c, e))
                low[j] = smallest if smallest < low[j] else low[j]
                high[j] = largest if largest > high[j] else high[j]
        for i in range(top, n):
            row = xs[i]
            for j in range(d):
                v = row[j]
                f = np.float64(v)
                total[j] += f
                absolute[j] += abs(f)
                low[j] = v if v < low[j] else low[j]
                high[j] = v if v > high[j] else high[j]
        for j in range(d):
            total[j] /= n
        for i in range(0, top, 4):
            r0, r1, r2, r3 = xs[i], xs[i + 1], xs[i + 2], xs[i + 3]
            for j in range(d):
                t0 = np.float64(r0[j]) - total[j]
                t1 = np.float64(r1[j]) - total[j]
                t2 = np.float64(r2[j]) - total[j]
                t3 = np.float64(r3[j]) - total[j]
                square[j] += (t0 * t0 + t1 * t1) + (t2 * t2 + t3 * t3)
        for i in range(top, n):
            row = xs[i]
            for j in range(d):
                t = np.float64(row[j]) - total[j]
                square[j] += t * t


@numba.njit(nogil=True, cache=True, boundscheck=False)
def copy_rows(src, pick, slots, dst):  # pragma: no cover - compiled by numba
    """``dst[slots[i]] = src[pick[i]]`` for every i: the sampled tokens' rows of one state's
    (n, d) activations (float32 or float64) into their (m, d) float32 sample slots. One pass and
    no temporary, where numpy's fancy indexing gathers into a copy first."""
    d = src.shape[1]
    for i in range(pick.shape[0]):
        a = src[pick[i]]
        b = dst[slots[i]]
        for j in range(d):
            b[j] = a[j]
