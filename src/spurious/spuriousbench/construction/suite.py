"""SST-2 and MNLI pools, the balanced supporting/counter sets, the suite of splits and their files."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from spacy.language import Language
from spurious.spuriousbench.construction.features import (
    PAPER_PREVALENCE,
    PAPER_SIZES,
    PAPER_STRENGTH,
    SST2_FEATURES,
    FeatureSpec,
    SyntaxParser,
    _spec,
    round_half_up,
)
from spurious.spuriousbench.construction.planting import (
    construct_split,
    construct_test,
)
from spurious.spuriousbench.construction.text import (
    ParseCache,
    _cache,
    detokenize,
    whole_sentence_mask,
)


def sst2_pools(
    train_frame: pd.DataFrame,
    dev_frame: pd.DataFrame,
    *,
    seed: int,
    dev_fraction: float = 0.12,
    test_fraction: float = 0.08,
    min_tokens: int = 3,
) -> dict[str, pd.DataFrame]:
    """Disjoint SST-2 pools: ``train`` / ``dev`` from the train file's whole sentences (:func:`whole_sentence_mask`,
    distinct texts), in a seeded random partition with ``dev_fraction`` for dev and ``test_fraction`` held out;
    ``test`` = every distinct dev.tsv row plus the held-out train sentences.

    The default fractions leave the train pool (80 %, ~5,550 sentences) enough rows for the paper's train size with
    the most features (see the feasibility note of :func:`build_suite`).  Columns: ``id`` (``"train-<row>"`` /
    ``"dev-<row>"``), ``text_a`` (detokenised), ``text_b`` (None), ``label``, ``glue_text`` (the GLUE row),
    ``source`` (``"train"``/``"dev"``).  Disjoint by GLUE text and by detokenised text (checked).
    """
    if dev_fraction < 0 or test_fraction < 0 or dev_fraction + test_fraction >= 1:
        raise ValueError(f"bad fractions: dev {dev_fraction}, test {test_fraction}")

    def prepared(frame: pd.DataFrame, source: str, mask: np.ndarray | None) -> pd.DataFrame:
        glue = frame["text_a"].astype(str).map(lambda t: " ".join(t.split()))
        out = pd.DataFrame(
            {
                "id": [f"{source}-{i}" for i in frame["id"]],
                "glue_text": glue,
                "label": frame["label"].astype(int).to_numpy(),
                "source": source,
            }
        )
        if mask is not None:
            out = out[mask]
        out = out.drop_duplicates("glue_text", keep="first")
        out["text_a"] = out["glue_text"].map(detokenize)
        out["text_b"] = None
        return out.drop_duplicates("text_a", keep="first").reset_index(drop=True)

    train = prepared(train_frame, "train", whole_sentence_mask(train_frame["text_a"].tolist(), min_tokens=min_tokens))
    dev = prepared(dev_frame, "dev", None)
    dev = dev[~dev["text_a"].isin(set(train["text_a"]))]
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(train))
    n_dev = round_half_up(dev_fraction * len(train))
    n_test = round_half_up(test_fraction * len(train))
    parts = {
        "dev": train.iloc[np.sort(order[:n_dev])],
        "held_out": train.iloc[np.sort(order[n_dev : n_dev + n_test])],
        "train": train.iloc[np.sort(order[n_dev + n_test :])],
    }
    columns = ["id", "text_a", "text_b", "label", "glue_text", "source"]
    pools = {
        "train": parts["train"][columns].reset_index(drop=True),
        "dev": parts["dev"][columns].reset_index(drop=True),
        "test": pd.concat([dev[columns], parts["held_out"][columns]], ignore_index=True),
    }
    names = train_frame.attrs.get("label_names") or ["negative", "positive"]
    for name, frame in pools.items():
        frame.attrs.update(label_names=list(names), source=f"sst2-spuriousbench:{name}", is_pair=False)
    for a, b in (("train", "dev"), ("train", "test"), ("dev", "test")):
        for col in ("text_a", "glue_text", "id"):
            if set(pools[a][col]) & set(pools[b][col]):  # pragma: no cover - guaranteed by construction
                raise RuntimeError(f"sst2_pools: pools {a} and {b} share {col} values")
    return pools


MNLI_LABEL_NAMES: list[str] = ["non_entailment", "entailment"]
"""§3: MNLI collapsed to two labels; entailment is label 1, the paper's target label."""


def mnli_pools(
    train_frame: pd.DataFrame,
    test_frame: pd.DataFrame,
    *,
    seed: int,
    dev_fraction: float = 0.1,
) -> dict[str, pd.DataFrame]:
    """Disjoint MNLI pools, collapsed to entailment (1) vs non-entailment (0) as the paper does (§3): ``train`` and
    ``dev`` from a seeded random partition of the training file (``dev_fraction`` for dev), ``test`` = the matched
    dev set.  Pairs whose premise + hypothesis appear in an earlier pool are dropped from the later one.

    The frames are classification frames (``id``, ``text_a`` premise, ``text_b`` hypothesis, ``label``) whose
    ``attrs["label_names"]`` contain ``"entailment"``; every other label becomes non-entailment."""
    if not 0 < dev_fraction < 1:
        raise ValueError(f"dev_fraction must lie in (0, 1), got {dev_fraction}")

    def collapsed(frame: pd.DataFrame, source: str) -> pd.DataFrame:
        names = list(frame.attrs.get("label_names") or [])
        if "entailment" not in names:
            raise ValueError(
                f"mnli_pools: the {source} frame's labels {names} have no 'entailment'; give MNLI with its label names"
            )
        entail = names.index("entailment")
        out = pd.DataFrame(
            {
                "id": [f"{source}-{i}" for i in frame["id"]],
                "text_a": frame["text_a"].astype(str).to_numpy(),
                "text_b": frame["text_b"].astype(str).to_numpy(),
                "label": (frame["label"].astype(int).to_numpy() == entail).astype(int),
                "source": source,
            }
        )
        key = out["text_a"] + "\x1f" + out["text_b"]
        return out[~key.duplicated()].reset_index(drop=True)

    train = collapsed(train_frame, "train")
    test = collapsed(test_frame, "test")
    seen = set(train["text_a"] + "\x1f" + train["text_b"])
    test = test[~(test["text_a"] + "\x1f" + test["text_b"]).isin(seen)].reset_index(drop=True)
    order = np.random.default_rng(seed).permutation(len(train))
    n_dev = round_half_up(dev_fraction * len(train))
    pools = {
        "train": train.iloc[np.sort(order[n_dev:])].reset_index(drop=True),
        "dev": train.iloc[np.sort(order[:n_dev])].reset_index(drop=True),
        "test": test,
    }
    for name, frame in pools.items():
        frame.attrs.update(label_names=list(MNLI_LABEL_NAMES), source=f"mnli-spuriousbench:{name}", is_pair=True)
    return pools


def balance_supporting_counter(frame: pd.DataFrame, *, target_label: int, seed: int) -> pd.DataFrame:
    """The data-balancing baseline of §4.2 (Idrissi et al. 2022): among the training rows with the feature, the
    counter examples (label ≠ ``target_label``) are up-sampled by duplication and the supporting ones (label =
    ``target_label``) down-sampled until both number ``m = round_half_up((n_supporting + n_counter) / 2)``, so the
    feature keeps its prevalence and its strength becomes 50 %; rows without the feature are kept as they are.

    Up-sampling repeats every counter row ``m // n_counter`` times and adds a seeded sample (without replacement)
    of ``m mod n_counter`` more; down-sampling is a seeded sample without replacement.  The result is shuffled
    (seeded); column ``balance_copy`` numbers the copies of a row (0 for the first).  ``frame`` needs
    ``has_feature`` and ``label`` (a constructed split of :func:`construct_split`)."""
    for column in ("has_feature", "label"):
        if column not in frame.columns:
            raise ValueError(f"balance_supporting_counter: the frame has no {column!r} column (a constructed split)")
    f = frame["has_feature"].to_numpy(dtype=bool)
    y = frame["label"].to_numpy()
    supporting = np.flatnonzero(f & (y == target_label))
    counter = np.flatnonzero(f & (y != target_label))
    if len(counter) == 0 or len(supporting) == 0:
        raise ValueError(
            f"balance_supporting_counter: {len(supporting)} supporting and {len(counter)} counter examples; "
            "balancing needs both"
        )
    rng = np.random.default_rng(seed)
    m = round_half_up((len(supporting) + len(counter)) / 2)
    kept_supporting = np.sort(rng.choice(supporting, size=m, replace=False)) if m < len(supporting) else supporting
    repeats, extra = divmod(m, len(counter))
    counter_rows = np.concatenate([np.tile(counter, repeats), np.sort(rng.choice(counter, size=extra, replace=False))])
    rows = np.concatenate([np.flatnonzero(~f), kept_supporting, counter_rows])
    out = frame.iloc[rows].copy()
    out["balance_copy"] = pd.Series(rows).groupby(rows).cumcount().to_numpy()
    out = out.iloc[rng.permutation(len(out))].reset_index(drop=True)
    # the copies of a counter row get distinct ids ("<id>#<copy>"): ids identify rows downstream
    ids = out["id"].astype(str)
    out["id"] = ids.where(out["balance_copy"] == 0, ids + "#" + out["balance_copy"].astype(str))
    out.attrs = dict(frame.attrs)
    return out


def feature_path(name: str) -> str:
    """``"punctuation:exclamation"`` → ``"punctuation/exclamation"``: the feature as two path components."""
    spec = _spec(name)
    return spec.name.replace(":", "/", 1)


def feature_from_path(path: str) -> str:
    """Inverse of :func:`feature_path`."""
    return _spec(path.replace("/", ":", 1)).name


def write_split(frame: pd.DataFrame, path: str | Path, stats: Mapping[str, Any] | None = None) -> None:
    """A pool or constructed split as parquet with every column (``has_feature``, ``inserted``, ``group``, ...),
    the label names, ``is_pair`` and the construction's stats in the metadata; written atomically."""
    from spurious.core import io

    out = frame.copy()
    out["id"] = out["id"].astype(str)
    if "text_b" in out.columns:
        out["text_b"] = [None if b is None or b != b else str(b) for b in out["text_b"]]
    meta = {
        "task": "classification",
        "label_names": list(frame.attrs["label_names"]),
        "is_pair": bool(frame.attrs.get("is_pair", False)),
        "spuriousbench": dict(stats or frame.attrs.get("spuriousbench") or {}),
    }
    io.write_parquet(out, path, metadata=meta)


def read_split(path: str | Path) -> pd.DataFrame:
    """Inverse of :func:`write_split`: ``attrs`` carries ``label_names``, ``is_pair`` and ``spuriousbench``."""
    from spurious.core import io, readers

    meta = io.read_parquet_metadata(path)
    if "label_names" not in meta:
        raise ValueError(
            f"{path}: not a SpuriousBench split (no label names in its metadata); build it with spurious_build"
        )
    frame = readers.read_parquet(path)
    if "text_b" not in frame.columns:
        frame["text_b"] = None
    frame.attrs.update(label_names=list(meta["label_names"]), is_pair=bool(meta.get("is_pair")))
    frame.attrs["spuriousbench"] = meta.get("spuriousbench", {})
    return frame


def _derived_seed(seed: int, *parts: str) -> int:
    digest = hashlib.sha256("\x1f".join([str(seed), *parts]).encode()).digest()
    return int.from_bytes(digest[:4], "little")


def build_suite(
    pools: Mapping[str, pd.DataFrame],
    features: Sequence[str | FeatureSpec] = SST2_FEATURES,
    *,
    train_size: int = PAPER_SIZES["sst2"]["train"],
    dev_size: int = PAPER_SIZES["sst2"]["dev"],
    test_size: int | None = None,
    test_feature_rate: float | None = None,
    prevalence: float = PAPER_PREVALENCE,
    strength: float = PAPER_STRENGTH,
    target_label: int | None = None,
    seed: int = 0,
    nlp: Language | None = None,
    cache: ParseCache | None = None,
    syntax_parser: SyntaxParser | None = None,
    errors: str = "record",
) -> dict[str, Any]:
    """Every feature's train / dev / test sets from ``pools`` (:func:`sst2_pools`), sharing one :class:`ParseCache`
    (all pool texts parsed once, up front, when a feature needs the parser).

    Each feature and split gets its own seed derived from ``seed``, the feature name and the split.  ``errors``:
    ``"record"`` stores a feature whose pool is too small under ``result["errors"][name]`` (the ``ValueError``
    message) and goes on; ``"raise"`` re-raises.  Returns ``{"features": {name: {"train": (frame, stats), "dev":
    ..., "test": ...}}, "errors": {...}, "seconds": {...}, "n_parsed": int}``.

    Feasibility with the default SST-2 pools (seed 0) at the paper's sizes (3,000 / 400, 20 % / 90 %, target
    positive): 18 of the 28 features build.  The five nouns lack positive rows with the word (train 3,000 needs
    540; the train pool has 433 with "film", 281 "movie", 73 "drama", 13 "show", 10 "play"; the largest feasible
    train sizes are 2,400 / 1,560 / 400 / 60 / 40); "the", AdjP, NP → NP PP, NP → Det N and S → NP VP are in so
    many sentences that the pool lacks feature-*free* rows (1,440 negative ones needed; S → NP VP: 960 positive;
    largest feasible train sizes 2,500 / 2,700 / 2,740 / 2,400 / 1,100).
    """
    if errors not in ("record", "raise"):
        raise ValueError(f"errors must be 'record' or 'raise', got {errors!r}")
    specs = [_spec(f) for f in features]
    cache = _cache(cache, nlp)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    if any(s.needs_parse and not (s.category == "syntax" and syntax_parser) for s in specs):
        for name in ("train", "dev", "test"):
            cache.docs(pools[name]["text_a"].astype(str).tolist())
    seconds["parse"] = time.perf_counter() - start
    out: dict[str, Any] = {"features": {}, "errors": {}, "seconds": seconds}
    common = {"cache": cache, "syntax_parser": syntax_parser, "target_label": target_label}
    for spec in specs:
        t0 = time.perf_counter()
        try:
            entry = {
                split: construct_split(
                    pools[split],
                    spec,
                    size=size,
                    prevalence=prevalence,
                    strength=strength,
                    seed=_derived_seed(seed, spec.name, split),
                    **common,
                )
                for split, size in (("train", train_size), ("dev", dev_size))
            }
            entry["test"] = construct_test(
                pools["test"],
                spec,
                size=test_size,
                feature_rate=test_feature_rate,
                seed=_derived_seed(seed, spec.name, "test"),
                **common,
            )
            out["features"][spec.name] = entry
        except ValueError as exc:
            if errors == "raise":
                raise
            out["errors"][spec.name] = str(exc)
        seconds[spec.name] = time.perf_counter() - t0
    seconds["total"] = time.perf_counter() - start
    out["n_parsed"] = cache.n_parsed
    return out
