"""The heuristics' names, the paper-prose variants, the compatibility modes, the authors' column names and question types; input validation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

HEURISTICS: tuple[str, ...] = ("word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents", "subj-pos")

"""All heuristics, with the paper's names, in the paper's order."""


VARIANTS: dict[str, tuple[str, ...]] = {
    "word-dist": ("between",),
    "cos-sim": ("question-answer",),
    "sim-ents": ("question-type",),
    "subj-pos": ("categories",),
}

"""Named alternative definitions (taken from the paper's text) per heuristic; select with ``variants={h: name}``."""


COMPAT_MODES: tuple[str, ...] = ("isbiased",)


# The reference column names of the authors' code, for readers mapping our output onto theirs.
ISBIASED_COLUMNS: dict[str, str] = {
    "word-dist": "distances",
    "sim-word": "similar_words",
    "ans-pos": "kth_sentence",
    "cos-sim": "cosine_similarity",
    "ans-len": "answer_length",
    "sim-ents": "max_sim_ents",
    "subj-pos": "answer_subject_positions",
}


QUESTION_TYPE_LABELS: dict[str, tuple[str, ...]] = {
    "who": ("PERSON", "ORG", "NORP"),
    "whom": ("PERSON", "ORG", "NORP"),
    "whose": ("PERSON", "ORG", "NORP"),
    "when": ("DATE", "TIME"),
    "where": ("GPE", "LOC", "FAC"),
    "how many": ("CARDINAL", "QUANTITY", "MONEY", "PERCENT"),
    "how much": ("CARDINAL", "QUANTITY", "MONEY", "PERCENT"),
    "how long": ("DATE", "TIME", "QUANTITY"),
    "how old": ("DATE", "CARDINAL"),
    "how far": ("QUANTITY",),
    "how big": ("QUANTITY",),
    "how large": ("QUANTITY", "CARDINAL"),
    "how tall": ("QUANTITY",),
    "how high": ("QUANTITY",),
    "how fast": ("QUANTITY",),
    "what year": ("DATE",),
    "what date": ("DATE",),
    "what day": ("DATE",),
    "what month": ("DATE",),
    "what century": ("DATE",),
    "what decade": ("DATE",),
    "what time": ("TIME", "DATE"),
    "what percentage": ("PERCENT",),
    "what percent": ("PERCENT",),
    "what country": ("GPE",),
    "what city": ("GPE",),
    "what state": ("GPE",),
    "what language": ("LANGUAGE",),
    "what nationality": ("NORP",),
    "what religion": ("NORP",),
    "what company": ("ORG",),
    "what organization": ("ORG",),
    "what team": ("ORG",),
}

"""Question type -> spaCy entity labels, for the ``sim-ents: question-type`` variant (paper: "named entities of the
question type, i.e. personal names if the question starts with 'Who'").  The type of a question is read at its first
wh-word (``who whom whose when where how what which``): the two-word key ``"<wh> <next word>"`` is tried first
(``which`` is looked up as ``what``), then the wh-word alone.  A question whose first wh-word has no entry (plain
"what ...", "why ...", "how did ...") has no type and gets 0."""


def _validate(
    heuristics: Sequence[str] | str, compat: str | None, variants: Mapping[str, str] | None
) -> tuple[list[str], dict[str, str]]:
    if isinstance(heuristics, str):
        heuristics = [heuristics]
    requested = list(dict.fromkeys(heuristics))
    unknown = [h for h in requested if h not in HEURISTICS]
    if unknown:
        raise ValueError(f"unknown heuristic(s) {unknown}; allowed: {', '.join(HEURISTICS)}")
    if not requested:
        raise ValueError(f"no heuristic requested; allowed: {', '.join(HEURISTICS)}")
    if compat is not None and compat not in COMPAT_MODES:
        raise ValueError(
            f"unknown compat mode {compat!r}; allowed: None (fixed definitions) or {', '.join(COMPAT_MODES)}"
        )
    chosen = dict(variants or {})
    allowed = "; ".join(f"{h}: {', '.join(v)}" for h, v in VARIANTS.items())
    for h, v in chosen.items():
        if h not in HEURISTICS:
            raise ValueError(f"variants: unknown heuristic {h!r}; heuristics with variants: {allowed}")
        if v not in VARIANTS.get(h, ()):
            raise ValueError(f"variants: unknown variant {v!r} for heuristic {h!r}; allowed variants: {allowed}")
    if compat is not None and chosen:
        raise ValueError(
            f"variants {chosen} cannot be combined with compat={compat!r}: compat reproduces the authors' code, "
            "variants follow the paper's text; request them in separate calls"
        )
    return requested, chosen

