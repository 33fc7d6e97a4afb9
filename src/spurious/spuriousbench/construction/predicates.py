"""Feature predicates (has the feature?) and insertion (App. B)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc
from spurious.spuriousbench.construction.features import (
    SYNTAX_FEATURES,
    FeatureSpec,
    SyntaxParser,
    _spec,
)
from spurious.spuriousbench.construction.text import (
    ParseCache,
    _cache,
)

_WORD_RE = re.compile(r"\w+")


def lexical_overlap(premise: str, hypothesis: str, *, stop_words: Iterable[str] | None = None) -> bool:
    """McCoy et al. (2019) lexical overlap, as §3 defines it: every non-stop-word of the hypothesis occurs in the
    premise.  Words are lower-cased ``\\w+`` runs (so "film's" gives "film" and "s"); stop words are NLTK's English
    list (:func:`spurious.core.resources.english_stopwords`, needs ``NLTK_DATA``).  A hypothesis with no non-stop word
    overlaps (vacuously)."""
    if stop_words is None:
        from spurious.core.resources import english_stopwords

        stop_words = english_stopwords()
    stop = stop_words if isinstance(stop_words, (set, frozenset)) else set(stop_words)
    premise_words = set(_WORD_RE.findall(premise.lower()))
    return all(w in premise_words for w in _WORD_RE.findall(hypothesis.lower()) if w not in stop)


_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "expl"})
_ANY_SUBJECT_DEPS = _SUBJECT_DEPS | {"csubj", "csubjpass"}
_PREDICATIVE_DEPS = frozenset({"acomp", "oprd", "attr", "ROOT"})
_ADJP_CHILD_DEPS = frozenset({"advmod", "npadvmod", "prep", "xcomp", "ccomp", "conj"})
_SUBJECTLESS_CLAUSE_DEPS = frozenset({"ROOT", "xcomp", "ccomp", "advcl", "csubj", "csubjpass", "pcomp"})


def syntax_features_from_doc(doc: Doc) -> dict[str, bool]:
    """The five syntax features approximated from a spaCy dependency parse (mapping in the module docstring)."""
    adjp = np_pp = det_n = s_np_vp = s_vp = False
    for tok in doc:
        pos, dep = tok.pos_, tok.dep_
        children = list(tok.children)
        if pos == "ADJ" and (dep in _PREDICATIVE_DEPS or any(c.dep_ in _ADJP_CHILD_DEPS for c in children)):
            adjp = True
        if pos in ("NOUN", "PROPN", "PRON", "NUM") and any(c.dep_ == "prep" and c.i > tok.i for c in children):
            np_pp = True
        if pos in ("NOUN", "PROPN"):
            lefts = list(tok.lefts)
            if len(lefts) == 1 and lefts[0].dep_ == "det" and lefts[0].i == tok.i - 1:
                det_n = True
        if pos in ("VERB", "AUX"):
            if any(c.dep_ in _SUBJECT_DEPS and c.i < tok.i for c in children):
                s_np_vp = True
            clause = dep in _SUBJECTLESS_CLAUSE_DEPS or (
                dep == "acl" and any(c.dep_ == "aux" and c.tag_ == "TO" for c in children)
            )
            if clause and not any(c.dep_ in _ANY_SUBJECT_DEPS for c in children):
                s_vp = True
    return dict(zip(SYNTAX_FEATURES, (adjp, np_pp, det_n, s_np_vp, s_vp), strict=True))


_TREE_TOKEN_RE = re.compile(r"\(|\)|[^\s()]+")
_PUNCT_LABELS = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-", "#", "$", "HYPH", "NFP"})
_NOUN_LABELS = frozenset({"NN", "NNS", "NNP", "NNPS"})


def _base_label(label: str) -> str:
    if label.startswith("-"):  # -NONE-, -LRB-, -RRB-
        return label
    return re.split(r"[-=]", label, maxsplit=1)[0] or label


def tree_productions(tree: str) -> list[tuple[str, tuple[str, ...]]]:
    """The productions ``(parent, children)`` of a Penn-Treebank bracketed tree, with function tags and indices
    removed (``NP-SBJ-1`` -> ``NP``) and empty elements (``-NONE-``, and constituents left empty by removing them)
    and punctuation children dropped.  Pre-terminals (``(NN film)``) give no production."""
    tokens = _TREE_TOKEN_RE.findall(tree)
    pos = 0
    productions: list[tuple[str, tuple[str, ...]]] = []

    def node() -> str | None:  # returns the node's label, or None when it is empty / a leaf
        nonlocal pos
        if tokens[pos] != "(":
            pos += 1
            return None  # a leaf word
        pos += 1
        label = ""
        if tokens[pos] not in ("(", ")"):
            label = _base_label(tokens[pos])
            pos += 1
        children: list[str] = []
        has_word = False
        while tokens[pos] != ")":
            if tokens[pos] == "(":
                child = node()
                if child is not None:
                    children.append(child)
            else:
                has_word = True
                pos += 1
        pos += 1
        if label == "-NONE-":
            return None
        if has_word and not children:
            return label  # pre-terminal
        if not children:
            return None
        kept = tuple(c for c in children if c not in _PUNCT_LABELS)
        if label:
            productions.append((label, kept))
        return label or None

    while pos < len(tokens):
        if tokens[pos] == "(":
            node()
        else:
            pos += 1
    return productions


def syntax_features_from_tree(tree: str) -> dict[str, bool]:
    """The five syntax features of a constituency tree (the paper's definition; see :func:`tree_productions`)."""
    prods = tree_productions(tree)
    return {
        "AdjP": any(p == "ADJP" for p, _ in prods),
        "NP -> NP PP": any(p == "NP" and c == ("NP", "PP") for p, c in prods),
        "NP -> Det N": any(p == "NP" and len(c) == 2 and c[0] == "DT" and c[1] in _NOUN_LABELS for p, c in prods),
        "S -> NP VP": any(p == "S" and c == ("NP", "VP") for p, c in prods),
        "S -> VP": any(p == "S" and c == ("VP",) for p, c in prods),
    }


def _frame_texts(data: Any) -> tuple[list[str], list[str | None] | None, list[Doc] | None]:
    """(texts read by single-text predicates, hypotheses or None, given docs or None)."""
    if isinstance(data, pd.DataFrame):
        hyps = data["text_b"].tolist() if "text_b" in data.columns else None
        if hyps is not None and all(h is None or (isinstance(h, float) and math.isnan(h)) for h in hyps):
            hyps = None
        return data["text_a"].astype(str).tolist(), hyps, None
    if isinstance(data, str):
        raise TypeError("has_feature takes a sequence of texts, not a single str")
    items = list(data)
    if items and all(isinstance(x, tuple) for x in items):
        return [x[0] for x in items], [x[1] for x in items], None
    if items and all(hasattr(x, "text") and hasattr(x, "vocab") for x in items):
        return [x.text for x in items], None, items
    return [str(x) for x in items], None, None


def has_feature(
    data: pd.DataFrame | Sequence[str] | Sequence[Doc] | Sequence[tuple[str, str]],
    feature: FeatureSpec | str,
    *,
    nlp: Language | None = None,
    cache: ParseCache | None = None,
    syntax_parser: SyntaxParser | None = None,
    stop_words: Iterable[str] | None = None,
) -> np.ndarray:
    """``s(x)`` for every input: a classification frame (``text_a``, optional ``text_b``), texts, spaCy docs or
    (premise, hypothesis) pairs.  Single-text predicates read ``text_a`` (the premise, §3); lexical overlap needs
    pairs.  spaCy (``nlp`` or ``cache``; loaded when neither is given) is used only by token and syntax features;
    ``syntax_parser`` switches the syntax features to constituency trees."""
    spec = _spec(feature)
    texts, hyps, docs = _frame_texts(data)
    if spec.category == "overlap":
        if hyps is None:
            raise ValueError(
                f"{spec.name}: lexical overlap needs sentence pairs (text_a = premise, text_b = hypothesis)"
            )
        stop = None if stop_words is None else frozenset(stop_words)
        if stop is None:
            from spurious.core.resources import english_stopwords

            stop = english_stopwords()
        return np.array([lexical_overlap(p, h or "", stop_words=stop) for p, h in zip(texts, hyps, strict=True)])
    if spec.category == "punctuation":
        return np.array([spec.value in t for t in texts], dtype=bool)
    if spec.category == "prefix":
        needle = " ".join(spec.value.split()).lower()
        return np.array([needle in " ".join(t.split()).lower() for t in texts], dtype=bool)
    if spec.category == "syntax":
        if syntax_parser is not None:
            trees = list(syntax_parser(texts))
            if len(trees) != len(texts):
                raise ValueError(f"syntax_parser returned {len(trees)} trees for {len(texts)} texts")
            return np.array([syntax_features_from_tree(tree)[spec.value] for tree in trees], dtype=bool)
        if docs is None:
            docs = _cache(cache, nlp).docs(texts)
        return np.array([syntax_features_from_doc(doc)[spec.value] for doc in docs], dtype=bool)
    # words
    word = spec.value.lower()
    toks = [[t.text.lower() for t in doc] for doc in docs] if docs is not None else _cache(cache, nlp).tokens(texts)
    return np.array([word in t for t in toks], dtype=bool)


def _first_adjective(doc: Doc) -> Any:
    for tok in doc:
        if tok.pos_ == "ADJ":
            return tok
    return None


def can_insert(
    data: pd.DataFrame | Sequence[str],
    feature: FeatureSpec | str,
    *,
    nlp: Language | None = None,
    cache: ParseCache | None = None,
) -> np.ndarray:
    """Whether :func:`insert` can add the feature: always for punctuation and prefixes (non-empty text), only with
    an adjective for adverbs; never for re-sampling features."""
    spec = _spec(feature)
    texts, _, docs = _frame_texts(data)
    if spec.kind != "insertion":
        return np.zeros(len(texts), dtype=bool)
    if spec.category == "adverb":
        if docs is None:
            docs = _cache(cache, nlp).docs(texts)
        return np.array([_first_adjective(doc) is not None for doc in docs], dtype=bool)
    return np.array([bool(t.strip()) for t in texts], dtype=bool)


_FINAL_PUNCT_RE = re.compile(r"[.!?;:,*…]+(?=[\"')\]]*\s*$)")


def insert(text: str, feature: FeatureSpec | str, doc: Doc | None = None) -> str:
    """Insert an insertion feature into ``text`` (§3, App. B).

    * punctuation: remove the final punctuation run (``.``, ``!``, ``?``, ``;``, ``:``, ``,``, ``*``, ``…``; one
      followed only by closing quotes / brackets counts as final) and append the mark: ``"a fine film."`` ->
      ``"a fine film!"``, ``'he said "wow."'`` -> ``'he said "wow"!'``;
    * adverb: insert ``"<adverb> "`` before the first adjective of ``doc`` (spaCy, ``doc.text == text``);
      ``ValueError`` when there is none.  An indefinite article right before the adjective is re-chosen for the
      adverb, so the sentence stays grammatical (§3): ``"a brilliant film"`` -> ``"an actually brilliant film"``,
      ``"an odd film"`` -> ``"a surprisingly odd film"``;
    * prefix: prepend the n-gram, separated by one space (``"My thought: a fine film."``).
    """
    spec = _spec(feature)
    if spec.kind != "insertion":
        raise ValueError(f"{spec.name} is a re-sampling feature; it cannot be inserted")
    text = text.strip()
    if spec.category == "punctuation":
        matches = list(_FINAL_PUNCT_RE.finditer(text))
        if matches:
            text = text[: matches[-1].start()] + text[matches[-1].end() :]
        return text.rstrip() + spec.value
    if spec.category == "prefix":
        return f"{spec.value.strip()} {text}"
    # adverb
    if doc is None:
        raise ValueError(f"{spec.name}: adverb insertion needs the spaCy doc of the text")
    if doc.text.strip() != text:
        raise ValueError(f"{spec.name}: the doc's text {doc.text!r} is not the text {text!r}")
    adjective = _first_adjective(doc)
    if adjective is None:
        raise ValueError(f"{spec.name}: no adjective in {text!r}, so the adverb cannot be inserted")
    shift = len(doc.text) - len(doc.text.lstrip())
    offset = adjective.idx - shift
    before, after = text[:offset], text[offset:]
    previous = doc[adjective.i - 1] if adjective.i > 0 else None
    if (
        previous is not None
        and previous.lower_ in ("a", "an")
        and not before[previous.idx - shift + len(previous) :].strip()
    ):
        article = "an" if spec.value[:1].lower() in "aeiou" else "a"
        if previous.text[:1].isupper():
            article = article.capitalize()
        start = previous.idx - shift
        before = before[:start] + article + before[start + len(previous) :]
    return f"{before}{spec.value} {after}"


