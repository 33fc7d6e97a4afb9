"""spaCy for SpuriousBench (the parse cache) and the SST-2 text (detokenisation, whole sentences)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc


def load_nlp(**kwargs: Any) -> Language:
    """The project's spaCy model (``spurious.core.resources.load_spacy``) with tagger and parser, without
    ner/lemmatizer."""
    from spurious.core.resources import load_spacy

    kwargs.setdefault("exclude", ("lemmatizer", "ner"))
    return load_spacy(**kwargs)


class ParseCache:
    """spaCy docs per distinct text: :meth:`docs` parses the texts it has not seen in one ``nlp.pipe`` batch.

    :meth:`tokens` only tokenises (``nlp.make_doc``) unless the text is already parsed.  One cache can serve every
    feature of a suite, so each text is parsed once.
    """

    def __init__(self, nlp: Language, *, batch_size: int = 256) -> None:
        self.nlp = nlp
        self.batch_size = batch_size
        self._docs: dict[str, Doc] = {}
        self.n_parsed = 0

    def __len__(self) -> int:
        return len(self._docs)

    def docs(self, texts: Iterable[str]) -> list[Doc]:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._docs))
        if missing:
            for text, doc in zip(missing, self.nlp.pipe(missing, batch_size=self.batch_size), strict=True):
                self._docs[text] = doc
            self.n_parsed += len(missing)
        return [self._docs[t] for t in texts]

    def tokens(self, texts: Iterable[str]) -> list[list[str]]:
        out = []
        for text in texts:
            doc = self._docs.get(text)
            if doc is None:
                doc = self.nlp.make_doc(text)
            out.append([t.text.lower() for t in doc])
        return out


def _cache(cache: ParseCache | None, nlp: Language | None) -> ParseCache:
    if cache is not None:
        return cache
    return ParseCache(nlp if nlp is not None else load_nlp())


# ---------------------------------------------------------------------------------------------------------------
# SST-2 text
# ---------------------------------------------------------------------------------------------------------------

_DETOK_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), repl)
    for pattern, repl in (
        (r"-lrb-", "("),
        (r"-rrb-", ")"),
        (r"-lsb-", "["),
        (r"-rsb-", "]"),
        (r"-lcb-", "{"),
        (r"-rcb-", "}"),
        (r"``\s*", '"'),  # opening double quote: attach to the next word
        (r"\s*''", '"'),  # closing double quote: attach to the previous word
        (r"\s+(n't|'s|'re|'ve|'ll|'d|'m)\b", r"\1"),  # clitics: it 's -> it's, do n't -> don't, ca n't -> can't
        (r"(?<!\S)`\s+([^`]*?)\s+'(?=\s|$)", r"'\1'"),  # ` quoted ' -> 'quoted' (apostrophes inside are attached)
        (r"(?<=s)\s+'(?=\s|$)", "'"),  # plural possessive: actors ' -> actors'
        (r"\b(gon|wan|got) (na|ta)\b", r"\1\2"),  # gon na -> gonna
        (r"([(\[{$])\s+", r"\1"),  # no space after an opening bracket or $
        (r"\s+([.,;:!?%)\]}])", r"\1"),  # no space before punctuation (also "...")
    )
)


def detokenize(text: str) -> str:
    """Undo GLUE SST-2's PTB-style tokenisation: ``"it 's a charming and often affecting journey . "`` ->
    ``"it's a charming and often affecting journey."``.

    Joins clitics (``'s n't 're 've 'll 'd 'm``; ``ca n't`` -> ``can't``), removes the space before ``. , ; : ! ?
    % ) ] }`` (and ``...``) and after ``( [ { $``, maps ``-lrb-``/``-rrb-`` (and square / curly variants) to
    brackets, `````` x ''`` to ``"x"``, `` ` x '`` to ``'x'`` and ``actors '`` to ``actors'``.  ``--`` and hyphens
    keep their spacing; case is left alone (SST-2 is lower-cased).
    """
    out = " ".join(text.split())
    for pattern, repl in _DETOK_RULES:
        out = pattern.sub(repl, out)
    return " ".join(out.split())


_FINAL_RE = re.compile(r"(?:[.!?]|\.\.\.|…)(?:\s*(?:''|'|\"|\)|-rrb-))*\s*$")


def is_whole_sentence(text: str, *, min_tokens: int = 3) -> bool:
    """Per-row test of a GLUE SST-2 row (tokenised or detokenised): at least ``min_tokens`` whitespace tokens, ends
    with ``.``, ``!``, ``?`` or ``...`` (closing quotes / brackets may follow).  A leading "..." or "," is allowed:
    SST has such sentences ("... a triumph of emotionally and narratively complex filmmaking .").

    Sub-phrases of a sentence can pass too (e.g. "demonstrates just how far his storytelling skills have eroded .");
    :func:`whole_sentence_mask` adds the corpus-level rule that removes them.
    """
    if len(text.split()) < min_tokens:
        return False
    return bool(_FINAL_RE.search(text))


def whole_sentence_mask(texts: Sequence[str], *, min_tokens: int = 3) -> np.ndarray:
    """Rows that are whole sentences: :func:`is_whole_sentence` and not a proper token suffix of another row of
    ``texts`` that ends with sentence-final punctuation (such a row is a phrase of that sentence).  Compared on
    whitespace tokens; duplicates of a whole sentence are all kept (deduplicate separately)."""
    norm = [" ".join(t.split()) for t in texts]
    final = {t for t in norm if _FINAL_RE.search(t)}
    suffixes: set[str] = set()
    for t in final:
        toks = t.split(" ")
        suffixes.update(" ".join(toks[i:]) for i in range(1, len(toks)))
    return np.array([is_whole_sentence(t, min_tokens=min_tokens) and t not in suffixes for t in norm], dtype=bool)


