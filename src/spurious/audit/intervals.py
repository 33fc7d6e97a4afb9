"""95 % intervals of the audit's effects, closed forms without resampling: Wilson's score interval of a proportion,
and Newcombe's square-and-add (hybrid score) intervals of a difference of two proportions built from two Wilson
intervals.

* :func:`difference_interval`: two independent samples (Newcombe 1998, *Stat. Med.* 17:873, method 10), for the
  permutation test's ACC(U) − ACC(N), which treats U and N as two samples of one pool as the test does;
* :func:`paired_difference_interval`: the same examples measured twice (Newcombe 1998, *Stat. Med.* 17:2635, method
  10, with its correction of the correlation term), for an inserted feature's net shift (the share of examples
  predicted the label after the insertion minus before).

Both are checked against the published examples of Fagerland, Lydersen and Laake (*Statistical Analysis of
Contingency Tables*, 2017; ``tests/audit/test_insertion.py``). They are not adjusted for the number of features
tested: the verdicts come from the tests (:mod:`spurious.audit.verdict`), not from the intervals.
"""

from __future__ import annotations

import math

#: The standard normal's 97.5 % quantile (a two-sided 95 % interval).
Z_95 = 1.959963984540054


def wilson_interval(k: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson's score interval of the proportion ``k / n``; (NaN, NaN) when ``n`` is 0."""
    if n <= 0:
        return math.nan, math.nan
    p = k / n
    scale = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n)) / scale
    return centre - half, centre + half


def difference_interval(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """95 % interval of ``k1/n1 − k2/n2``, two independent samples; (NaN, NaN) when either is empty."""
    if n1 <= 0 or n2 <= 0:
        return math.nan, math.nan
    p1, p2 = k1 / n1, k2 / n2
    (l1, u1), (l2, u2) = wilson_interval(k1, n1), wilson_interval(k2, n2)
    d = p1 - p2
    return d - math.hypot(p1 - l1, u2 - p2), d + math.hypot(u1 - p1, p2 - l2)


def paired_difference_interval(both: int, first_only: int, second_only: int, neither: int) -> tuple[float, float]:
    """95 % interval of P(first) − P(second) = (``first_only`` − ``second_only``) / n on ``n`` paired examples:
    ``both`` have the property in both measurements, ``first_only`` in the first only, ``second_only`` in the second
    only, ``neither`` in neither. (NaN, NaN) without examples."""
    n = both + first_only + second_only + neither
    if n <= 0:
        return math.nan, math.nan
    first, second = both + first_only, both + second_only
    p1, p2 = first / n, second / n
    (l1, u1), (l2, u2) = wilson_interval(first, n), wilson_interval(second, n)
    margins = first * (n - first) * second * (n - second)
    # the correlation of the two measurements, with Newcombe's correction towards 0 (none for |A| <= n / 2 above 0)
    a = both * neither - first_only * second_only
    phi = 0.0 if margins == 0 else (a - n / 2 if a > n / 2 else min(a, 0)) / math.sqrt(margins)
    d = p1 - p2
    low = d - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = d + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return low, high
