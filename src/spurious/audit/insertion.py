"""The counterfactual feature-insertion test: does inserting a feature into a text move a model's predictions towards
one label?

This is our extension of SpuriousBench's spurious gap (the paper plants its features at training time) to a
model trained elsewhere. Each feature of SpuriousBench's insertion inventory (punctuation marks, prefixes, adverbs
before the first adjective; :mod:`spurious.spuriousbench.construction`) or a user's token is inserted into every
evaluation example, whatever its label, and the model predicts the example before and after.

Definition, for a feature and a label ``y`` (``n`` examples):

* ``b_y`` = #examples predicted *not* ``y`` before and ``y`` after (flips towards ``y``), ``c_y`` = #examples
  predicted ``y`` before and not after (flips away);
* under the null hypothesis that the insertion carries no information about the labels to the model, a flip is as
  likely to go towards ``y`` as away from it, so ``b_y ~ Binomial(b_y + c_y, 1/2)``: the exact two-sided binomial
  test (McNemar's exact test on the paired predictions);
* the feature's *associated label* is the ``y`` with the largest net shift ``b_y − c_y``; its p-value is multiplied
  by the number of labels when there are more than two (a Bonferroni correction for choosing the label after
  seeing the data; with two labels ``b_0 = c_1`` and the two tests are the same test);
* effect sizes: the *flip rate* ``b_y / m_y`` over the ``m_y`` examples *not* predicted ``y`` before (its
  denominator, ``n_not_predicted_label_before``; ``c_y`` is over the ``n − m_y`` predicted ``y`` before) with its
  exact (Clopper–Pearson) 95 % interval, and the *net shift* ``(b_y − c_y) / n`` of the share of predictions ``y``
  with its 95 % interval for paired data (:func:`spurious.audit.intervals.paired_difference_interval`).

Across features, p-values are adjusted with Holm's method; a feature is *flagged* when its adjusted p-value is
below ``alpha``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from spurious.audit.intervals import paired_difference_interval
from spurious.spuriousbench import construction as sb

DEFAULT_FEATURES: tuple[str, ...] = tuple(
    name for name, spec in sb.FEATURES.items() if spec.kind == "insertion" and spec.category != "adverb"
)
"""SpuriousBench's insertion features that need no parse: its punctuation marks and prefixes (Table 1)."""


@dataclass(frozen=True)
class Insertion:
    """One feature to insert: ``name`` (``category:value``, or ``token:<word>`` for a user's token) and how."""

    name: str
    source: str  # "SpuriousBench Table 1" or "user token"
    needs_parse: bool

    def apply(self, text: str, doc: Any = None) -> str:
        if self.name.startswith("token:"):
            return f"{self.name.removeprefix('token:')} {text.strip()}"
        return sb.insert(text, self.name, doc)

    def applicable(self, texts: Sequence[str], docs: Sequence[Any] | None) -> np.ndarray:
        if self.name.startswith("token:"):
            return np.array([bool(t.strip()) for t in texts], dtype=bool)
        if self.needs_parse:
            return sb.can_insert(list(docs or []), self.name)
        return np.array([bool(t.strip()) for t in texts], dtype=bool)


def insertions(features: Sequence[str] | None = None, tokens: Sequence[str] = ()) -> list[Insertion]:
    """The insertions to test: SpuriousBench features by name (default :data:`DEFAULT_FEATURES`) and user tokens
    (inserted as the first word). An unknown feature name or a token with whitespace raises ValueError (the audit
    checks both before any other step)."""
    names = list(DEFAULT_FEATURES if features is None else features)
    if any(not name.strip() for name in names):  # "--features ''" or "a,,b"
        raise ValueError(
            f"insertion features {','.join(names)!r}: an empty name; name SpuriousBench insertion features, "
            "comma-separated, or leave them out for the default (punctuation and prefixes)"
        )
    for kind, given in (("insertion feature", names), ("inserted token", list(tokens))):
        repeated = [g for i, g in enumerate(given) if g in given[:i]]
        if repeated:
            raise ValueError(
                f"{kind} {repeated[0]!r} given twice; give each once (it would be tested and listed twice)"
            )
    out = []
    for name in names:
        spec = sb.FEATURES.get(name)
        if spec is None or spec.kind != "insertion":
            known = sorted(n for n, s in sb.FEATURES.items() if s.kind == "insertion")
            raise ValueError(f"insertion feature {name!r}: not one of SpuriousBench's; choose from {', '.join(known)}")
        out.append(Insertion(name, "SpuriousBench Table 1", spec.needs_parse))
    for token in tokens:
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"inserted token {token!r}: not one word; pass a single word without whitespace")
        out.append(Insertion(f"token:{token}", "user token", False))
    return out


def flip_counts(before: np.ndarray, after: np.ndarray, label: int) -> tuple[int, int, int]:
    """(b, c, m): flips towards ``label``, flips away from it, and the examples not predicted ``label`` before."""
    before, after = np.asarray(before), np.asarray(after)
    if before.shape != after.shape:
        raise ValueError(f"before and after must have one prediction per example, got {before.shape} and {after.shape}")
    towards = int(np.sum((before != label) & (after == label)))
    away = int(np.sum((before == label) & (after != label)))
    return towards, away, int(np.sum(before != label))


def flip_test(before: np.ndarray, after: np.ndarray, n_labels: int) -> dict[str, Any]:
    """The test of the module docstring for one feature: associated label, counts with their denominators,
    p-value, flip rate with its Clopper–Pearson 95 % interval and the net shift with its paired 95 % interval."""
    n = len(before)
    if n == 0:
        raise ValueError("the insertion test needs at least one example")
    counts = [flip_counts(before, after, y) for y in range(n_labels)]
    label = int(np.argmax([b - c for b, c, _ in counts]))
    b, c, m = counts[label]
    p = binomtest(b, b + c, 0.5).pvalue if b + c else 1.0
    if n_labels > 2:
        p = min(1.0, p * n_labels)
    if m:
        ci = binomtest(b, m).proportion_ci(confidence_level=0.95, method="exact")
        rate, low, high = b / m, float(ci.low), float(ci.high)
    else:
        rate, low, high = float("nan"), float("nan"), float("nan")
    return {
        "label_id": label,
        "n": n,
        "flips_towards": b,
        "flips_away": c,
        "n_not_predicted_label_before": m,
        "n_predicted_label_before": n - m,
        "flip_rate": rate,
        "flip_rate_ci": [low, high],
        "net_shift": (b - c) / n,
        "net_shift_ci": list(paired_difference_interval(n - m - c, b, c, m - b)),
        "p": float(p),
    }


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment (monotone, capped at 1)."""
    p = np.asarray(p_values, dtype=float)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty_like(p)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        adjusted[i] = running
    return adjusted


Predict = Callable[[pd.DataFrame], np.ndarray]


def insertion_table(
    frame: pd.DataFrame,
    predict: Predict,
    features: Sequence[Insertion],
    *,
    n_labels: int,
    label_names: Sequence[str],
    segment: str = "auto",
    nlp: Any = None,
    alpha: float = 0.05,
    progress: Callable[[str], None] | None = None,
    before: np.ndarray | None = None,
) -> pd.DataFrame:
    """Run the test for every feature on ``frame`` (``id, text_a, text_b``; labels are not read).

    ``predict`` maps a frame to predicted label ids. ``segment``: which text receives the feature: ``a``, ``b``, or
    ``auto`` (``b`` for pairs, the hypothesis or answer sentence; ``a`` otherwise). Examples where a feature cannot
    be inserted (an adverb without an adjective) are left out of that feature's test. One row per feature."""
    emit = progress or (lambda message: None)
    is_pair = "text_b" in frame and frame["text_b"].notna().any()
    column = {"auto": "text_b" if is_pair else "text_a", "a": "text_a", "b": "text_b"}.get(segment)
    if column is None or (column == "text_b" and not is_pair):
        raise ValueError(f"segment must be 'a', 'b' (pairs only) or 'auto', got {segment!r}")
    texts = frame[column].astype(str).tolist()
    docs = None
    if any(f.needs_parse for f in features):
        if nlp is None:
            raise ValueError("adverb insertions need a spaCy pipeline (nlp)")
        docs = list(nlp.pipe([t.strip() for t in texts], batch_size=64))
    if before is None:
        emit(f"insertion test: predicting {len(frame)} original examples")
        before = np.asarray(predict(frame))
    rows = []
    for k, feature in enumerate(features, start=1):
        mask = feature.applicable(texts, docs)
        edited = frame[mask].copy()
        edited[column] = [
            feature.apply(t, docs[i] if docs is not None else None) for i, t in enumerate(texts) if mask[i]
        ]
        emit(f"insertion test {k}/{len(features)}: {feature.name} into {int(mask.sum())} examples ({column})")
        after = np.asarray(predict(edited)) if len(edited) else np.zeros(0, dtype=int)
        result = flip_test(before[mask], after, n_labels) if len(edited) else None
        row = {"feature": feature.name, "source": feature.source, "segment": column, "n_applicable": int(mask.sum())}
        if result is not None:
            row.update(result, label=label_names[result["label_id"]])
        rows.append(row)
    table = pd.DataFrame(rows)
    if "p" in table:
        ok = table["p"].notna()
        table.loc[ok, "p_holm"] = holm(table.loc[ok, "p"].to_numpy())
        table["flagged"] = table["p_holm"].fillna(1.0) < alpha
    return table
