"""The choice of the debiasing scale from the scale search (App. B.2.3-4)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from spurious.thinktwice.debias.losses import _check_scale


def choose_scale(candidates: Sequence[Mapping[str, Any]], *, metric: str) -> dict[str, Any]:
    """The best of a scale search's candidates: ``[{"scale": s, metric: value, ...}]`` → the choice record.

    Higher ``metric`` is better (in-distribution EM or F1 of the debiased model, App. B.2.4); ties go to the smaller
    scale (the milder rescaling). Returns ``{"scale", "metric", "score", "candidates"}`` with the candidates sorted by
    scale, so the file that every debiased run of the method reads shows how the choice was made.
    """
    if len(candidates) < 2:
        raise ValueError(f"a scale search needs at least two candidates, got {len(candidates)}")
    rows = []
    for c in candidates:
        if "scale" not in c or metric not in c:
            raise ValueError(f"a scale-search candidate lacks 'scale' or {metric!r}: keys {sorted(c)}")
        _check_scale(c["scale"])
        value = float(c[metric])
        if not math.isfinite(value):
            raise ValueError(f"the candidate at scale {c['scale']} has a non-finite {metric}: {c[metric]!r}")
        rows.append(dict(c, scale=float(c["scale"]), score=value))
    scales = [r["scale"] for r in rows]
    if len(set(scales)) != len(scales):
        raise ValueError(f"a scale appears twice among the candidates: {sorted(scales)}")
    rows.sort(key=lambda r: r["scale"])
    best = max(rows, key=lambda r: (r["score"], -r["scale"]))
    return {"scale": best["scale"], "metric": metric, "score": best["score"], "candidates": rows}

