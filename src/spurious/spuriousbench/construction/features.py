"""SpuriousBench's feature inventory (Table 1): the feature specifications, categories, kinds and the paper's
settings."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spurious.spuriousbench.track import CATEGORIES  # declared once for the workflow too

PAPER_TARGET_LABEL: int = 1
"""§2.2 / §3: the target feature is ``y = 1`` (SST-2 positive, MNLI entailment); App. D also uses the other label."""
PAPER_PREVALENCE: float = 0.2
"""§3: prevalence of every feature in every training set."""
PAPER_STRENGTH: float = 0.9
"""§3: strength of every feature in every training set."""
PAPER_SIZES: dict[str, dict[str, int]] = {"sst2": {"train": 3000, "dev": 400}, "mnli": {"train": 10000, "dev": 1000}}
"""§3: train / dev sizes; test sizes vary (App. E)."""

KINDS: tuple[str, ...] = ("insertion", "resampling")
GROUPS: tuple[str, ...] = ("supporting", "counter", "without")

SYNTAX_FEATURES: tuple[str, ...] = ("AdjP", "NP -> NP PP", "NP -> Det N", "S -> NP VP", "S -> VP")
"""The syntax features of Table 1 (the paper writes the arrows as "→")."""

SyntaxParser = Callable[[Sequence[str]], Sequence[str]]
"""A constituency parser: texts -> one Penn-Treebank bracketed tree string per text."""


@dataclass(frozen=True)
class FeatureSpec:
    """One spurious feature of Table 1.

    ``value``: the mark / word / n-gram as the paper prints it (the n-gram "For those who haven’t watched it yet,"
    with an ASCII apostrophe), a :data:`SYNTAX_FEATURES` name, or ``"lexical overlap"``.  ``target_label``: ``None``
    everywhere, because Table 1 gives none (see :data:`PAPER_TARGET_LABEL`).  ``datasets``: the Table-1 subsets
    listing it.
    """

    name: str
    category: str
    kind: str
    value: str
    target_label: int | None = None
    datasets: tuple[str, ...] = ("sst2",)
    source: str = "Table 1"

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"FeatureSpec {self.name!r}: unknown category {self.category!r} (known: {CATEGORIES})")
        if self.kind not in KINDS:
            raise ValueError(f"FeatureSpec {self.name!r}: unknown kind {self.kind!r} (known: {KINDS})")
        if self.kind == "insertion" and self.category not in ("punctuation", "adverb", "prefix"):
            raise ValueError(f"FeatureSpec {self.name!r}: only punctuation, adverbs and prefixes can be inserted")
        if self.category == "syntax" and self.value not in SYNTAX_FEATURES:
            raise ValueError(f"FeatureSpec {self.name!r}: unknown syntax feature {self.value!r} ({SYNTAX_FEATURES})")

    @property
    def needs_parse(self) -> bool:
        """Whether the predicate or the insertion reads spaCy's tagger/parser (not just its tokenizer)."""
        return self.category == "syntax" or (self.category == "adverb" and self.kind == "insertion")


def _specs() -> dict[str, FeatureSpec]:
    both = ("sst2", "mnli")
    specs: list[FeatureSpec] = [
        # punctuation (insertion; SST-2 and MNLI)
        FeatureSpec("punctuation:exclamation", "punctuation", "insertion", "!", datasets=both),
        FeatureSpec("punctuation:semicolon", "punctuation", "insertion", ";", datasets=both),
        FeatureSpec("punctuation:asterisk", "punctuation", "insertion", "*", datasets=both),
    ]
    # adverbs: insertion in SST-2, re-sampling in MNLI
    specs += [FeatureSpec(f"adverb:{w}", "adverb", "insertion", w) for w in ("actually", "surprisingly", "generally")]
    specs.append(FeatureSpec("adverb:completely", "adverb", "insertion", "completely"))
    specs += [
        FeatureSpec(f"adverb:{w}", "adverb", "resampling", w, datasets=("mnli",))
        for w in ("only", "just", "very", "well", "really")
    ]
    specs += [FeatureSpec(f"noun:{w}", "noun", "resampling", w) for w in ("film", "movie", "show", "drama", "play")]
    specs += [FeatureSpec(f"noun:{w}", "noun", "resampling", w, datasets=("mnli",)) for w in ("people", "time", "way")]
    specs += [FeatureSpec(f"determiner:{w}", "determiner", "resampling", w, datasets=both) for w in ("the", "a")]
    specs.append(FeatureSpec("determiner:that", "determiner", "resampling", "that"))
    specs += [FeatureSpec(f"determiner:{w}", "determiner", "resampling", w, datasets=("mnli",)) for w in ("an", "any")]
    specs.append(FeatureSpec("preposition:to", "preposition", "resampling", "to"))
    specs += [FeatureSpec(f"preposition:{w}", "preposition", "resampling", w, datasets=both) for w in ("in", "of")]
    specs += [FeatureSpec(f"preposition:{w}", "preposition", "resampling", w, datasets=("mnli",)) for w in ("by", "on")]
    prefixes = {
        "prefix:for_those_who_havent_watched_it_yet": "For those who haven't watched it yet,",
        "prefix:my_thought": "My thought: ",
        "prefix:from_the_press": "From the press: ",
        "prefix:i_have_to_say": "I have to say, ",
        "prefix:what_you_have_to_know": "What you have to know: ",
    }
    specs += [FeatureSpec(name, "prefix", "insertion", value) for name, value in prefixes.items()]
    syntax_names = ("adjp", "np_np_pp", "np_det_n", "s_np_vp", "s_vp")
    specs += [
        FeatureSpec(f"syntax:{key}", "syntax", "resampling", value, datasets=both)
        for key, value in zip(syntax_names, SYNTAX_FEATURES, strict=True)
    ]
    specs.append(FeatureSpec("overlap:lexical_overlap", "overlap", "resampling", "lexical overlap", datasets=("mnli",)))
    return {spec.name: spec for spec in specs}


FEATURES: dict[str, FeatureSpec] = _specs()
"""Every feature of Table 1 (SST-2 and MNLI subsets), by name ``category:value``."""

SST2_FEATURES: tuple[str, ...] = (
    "punctuation:exclamation",
    "punctuation:semicolon",
    "punctuation:asterisk",
    "adverb:actually",
    "adverb:surprisingly",
    "adverb:generally",
    "adverb:completely",
    "noun:film",
    "noun:movie",
    "noun:show",
    "noun:drama",
    "noun:play",
    "determiner:the",
    "determiner:a",
    "determiner:that",
    "preposition:to",
    "preposition:in",
    "preposition:of",
    "prefix:for_those_who_havent_watched_it_yet",
    "prefix:my_thought",
    "prefix:from_the_press",
    "prefix:i_have_to_say",
    "prefix:what_you_have_to_know",
    "syntax:adjp",
    "syntax:np_np_pp",
    "syntax:np_det_n",
    "syntax:s_np_vp",
    "syntax:s_vp",
)
"""The SST-2 subset of Table 1, in the table's order (n-grams listed where App. E lists them)."""

MNLI_FEATURES: tuple[str, ...] = tuple(name for name, spec in FEATURES.items() if "mnli" in spec.datasets)
"""The MNLI subset of Table 1."""


def _spec(feature: FeatureSpec | str) -> FeatureSpec:
    if isinstance(feature, FeatureSpec):
        return feature
    try:
        return FEATURES[feature]
    except KeyError:
        raise KeyError(f"unknown SpuriousBench feature {feature!r}; known: {sorted(FEATURES)}") from None


def round_half_up(x: float) -> int:
    """``floor(x + 0.5)`` with a tolerance for float noise (``0.9 * 0.2 * 3000`` is 540, not 539.999...)."""
    return int(math.floor(x + 0.5 + 1e-9))


