"""The compatibility modes and the question types of sim-ents' paper-text variant (the heuristics themselves, their
names, variants and the authors' column names: :mod:`spurious.thinktwice.heuristics.catalog`)."""

from __future__ import annotations

#: ``compat="isbiased"``: the authors' code, bugs included.
COMPAT_MODES: tuple[str, ...] = ("isbiased",)


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
