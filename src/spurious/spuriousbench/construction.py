"""SpuriousBench dataset construction ("What Spurious Features Can Pretrained Language Models Combat?", §2–§3, Table 1,
App. B; reference-notes §H).

For a *spurious feature* ``s(x)`` (a boolean function of the input, §2.2) and a target label ``y*`` the benchmark
builds

* **train / dev splits** in which ``s`` is correlated with ``y*``: of ``N`` examples (labels balanced, ``N/2`` each)
  exactly ``round(π·N)`` have the feature (*prevalence* ``π``, default 20 %) and of those exactly ``round(s·π·N)``
  have label ``y*`` (*strength* ``s``, default 90 %) (:func:`construct_split`);
* **a test set** in which ``s`` and the label are independent (equal numbers of feature-bearing examples per label,
  the same feature rate in each label), grouped into *supporting* (``s(x)=1, y=y*``), *counter* (``s(x)=1,
  y≠y*``) and *without* (``s(x)=0``) examples (:func:`construct_test`); the **spurious gap** is
  ``acc(supporting) − acc(counter)`` (:func:`spurious_gap`).

Rounding is half-up (``round_half_up``), so the counts do not depend on Python's banker's rounding.

Two constructions (§3 "Introducing spurious correlations", App. B):

* **insertion** (punctuation, SST-2 adverbs, n-gram prefixes): the feature-bearing examples are drawn uniformly from
  the examples that have the feature already or can receive it; the feature is inserted into those that do not
  have it (column ``inserted``); an example that already has it is used unchanged ("we do not insert and directly
  consider them to contain the spurious feature"); the examples without the feature are drawn from those that do
  not contain it.  Punctuation: the final punctuation run is removed and the mark appended (:func:`insert`);
  adverbs: inserted before the first adjective (spaCy ``pos_ == "ADJ"``; an input with no adjective cannot
  receive it); n-grams: prepended.
* **re-sampling** (nouns, determiners, prepositions, MNLI adverbs, syntax, lexical overlap): the pool is split into
  the four cells ``{s, y}`` and each cell is sub-sampled to its exact count.

A pool that cannot supply a count raises ``ValueError`` naming the feature, the cell and the counts.

**Feature predicates** (§3 "Categories of spurious features"): a unigram / n-gram feature is 1 if ``x`` contains it.
Words (nouns, determiners, prepositions, adverbs) are matched case-insensitively against whole spaCy tokens ("film"
does not match "films"; the part of speech is *not* checked, as in the paper's definition).  spaCy splits hyphenated
compounds, so "b-movie" contains "movie" and "run-of-the-mill" contains "of" and "the" (a model sees those words
too; on SST-2 this adds 1–34 rows per word over GLUE's whitespace tokens); punctuation marks are
matched as characters anywhere in the text ("?!?" contains "!"); n-grams as case-insensitive substrings (their
surrounding spaces stripped).  For sentence pairs (MNLI) every predicate reads the premise ``text_a`` (§3), except
lexical overlap, which reads both (:func:`lexical_overlap`).

**Syntax features** (:data:`SYNTAX_FEATURES`): the paper reads them from an off-the-shelf *constituency* parse.  No
constituency parser is available offline and SST-2 (GLUE) ships no trees, so by default each production is
approximated from spaCy's dependency parse (``en_core_web_sm``, ClearNLP labels):

* ``AdjP``: an adjective (``pos_ == "ADJ"``) that is predicative (``dep_`` in ``acomp``, ``oprd``, ``attr`` or the
  root; the Penn Treebank puts predicative adjectives in an ADJP) or that has a modifier / complement / conjunct
  (a child with ``dep_`` in ``advmod``, ``npadvmod``, ``prep``, ``xcomp``, ``ccomp``, ``conj``: "very good",
  "full of life", "hard to watch", "funny and sad" are ADJPs; a bare attributive adjective is not);
* ``NP → NP PP``: a noun, proper noun, pronoun or number with a ``prep`` child to its right (a PP post-modifier);
* ``NP → Det N``: a noun or proper noun whose only left dependent is a ``det`` immediately before it ("the film",
  also when followed by a PP or a relative clause, where the Penn Treebank nests the base NP ``DT NN``; "the good
  film", "his film", "all the films" do not count);
* ``S → NP VP``: a verb or auxiliary with a nominal subject (``nsubj``, ``nsubjpass`` or ``expl``) to its left
  (a subject after its verb is a question or inversion, SQ / SINV in the Penn Treebank);
* ``S → VP``: a verb or clause-heading auxiliary heading a clause with no subject (``dep_`` in ``ROOT``, ``xcomp``,
  ``ccomp``, ``advcl``, ``csubj``, ``csubjpass``, ``pcomp``, or ``acl`` with an infinitival "to"; no child
  ``nsubj``, ``nsubjpass``, ``expl``, ``csubj``, ``csubjpass``): imperatives, subjectless fragments, infinitival
  and gerund clauses (Penn Treebank ``S → VP`` once empty subjects are removed).  Conjoined verbs (VP
  coordination) do not count.

The hook ``syntax_parser`` (a callable mapping a list of texts to Penn-Treebank bracketed strings, one per text)
replaces the approximation with the paper's definition on real constituency trees (:func:`tree_productions`):
``AdjP`` = a node labelled ``ADJP``; the other four are exact productions (children labels after removing function
tags, indices, empty elements ``-NONE-`` and punctuation; ``N`` = ``NN``, ``NNS``, ``NNP``, ``NNPS``).

**SST-2 sources** (:func:`sst2_pools`): GLUE's SST-2 train file holds every phrase of the treebank, dev only whole
sentences.  Train / dev pools come from the train file's *whole sentences* (:func:`whole_sentence_mask`): rows that
pass :func:`is_whole_sentence` (at least ``min_tokens`` = 3 tokens, ending with sentence-final punctuation ``.``,
``!``, ``?``, ``...``, possibly followed by closing quotes / brackets) and that are not a proper token suffix of
another such row.  The treebank attaches the final "." inside binarised trees, so sub-phrases such as "demonstrates
just how far his storytelling skills have eroded ." also end with "."; the suffix rule removes them.  It keeps 6,933
distinct rows of the 67,349 (3,610 positive, 3,323 negative; SST's train split has 6,920 sentences, 3,610 positive
and 3,310 negative).  The test pool is all of dev.tsv plus a held-out part of those train sentences; the three
pools are disjoint by text.  Texts are detokenised (:func:`detokenize`) before anything reads them.

**Target label**: Table 1 gives no per-feature target label; §2.2 / §3 define the target as ``y = 1`` (positive
sentiment for SST-2, entailment for MNLI collapsed to entailment vs non-entailment), and App. D also uses the
negative label, so ``target_label`` is a parameter of every construction function, defaulting to
:data:`PAPER_TARGET_LABEL` = 1 (labels must be 0/1).

spaCy work is batched (``nlp.pipe``) over distinct texts and cached per text in a :class:`ParseCache`, shared by all
features of a suite (:func:`build_suite`): the whole SST-2 suite (28 features, train 3,000 / dev 400, largest test
sets) takes ~13 s after loading spaCy on 2 CPU cores, 9 s of it parsing the 7,805 pool texts once.

**Not determinable from the paper**: the constituency parser and tree definitions of the syntax features; whether
word features match tokens or substrings, and how texts were tokenised; the paper's test sets (App. E) are all the
sentences left after train/dev (SST-2: 3,262 / 2,949 for insertion features, i.e. train + dev + test of SST minus
3,400) and are *not* label-independent for re-sampling features, while here (as the issue asks) the test sets are
balanced per label and drawn from fixed pools; App. E's noun test sizes (e.g. "show": 702 + 1,170) are far more than
the SST sentences containing the word (< 1 %), so their predicate is unknown; the MNLI "lexical overlap (template)"
test set is not described.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

__all__ = [
    "PAPER_TARGET_LABEL",
    "PAPER_PREVALENCE",
    "PAPER_STRENGTH",
    "PAPER_SIZES",
    "CATEGORIES",
    "KINDS",
    "SYNTAX_FEATURES",
    "FeatureSpec",
    "FEATURES",
    "SST2_FEATURES",
    "MNLI_FEATURES",
    "GROUPS",
    "SyntaxParser",
    "round_half_up",
    "load_nlp",
    "ParseCache",
    "detokenize",
    "is_whole_sentence",
    "whole_sentence_mask",
    "lexical_overlap",
    "syntax_features_from_doc",
    "tree_productions",
    "syntax_features_from_tree",
    "has_feature",
    "can_insert",
    "insert",
    "construct_split",
    "construct_test",
    "spurious_gap",
    "sst2_pools",
    "mnli_pools",
    "balance_supporting_counter",
    "feature_path",
    "write_split",
    "read_split",
    "feature_from_path",
    "build_suite",
]

PAPER_TARGET_LABEL: int = 1
"""§2.2 / §3: the target feature is ``y = 1`` (SST-2 positive, MNLI entailment); App. D also uses the other label."""
PAPER_PREVALENCE: float = 0.2
"""§3: prevalence of every feature in every training set."""
PAPER_STRENGTH: float = 0.9
"""§3: strength of every feature in every training set."""
PAPER_SIZES: dict[str, dict[str, int]] = {"sst2": {"train": 3000, "dev": 400}, "mnli": {"train": 10000, "dev": 1000}}
"""§3: train / dev sizes; test sizes vary (App. E)."""

CATEGORIES: tuple[str, ...] = (
    "punctuation",
    "adverb",
    "prefix",
    "noun",
    "determiner",
    "preposition",
    "syntax",
    "overlap",
)
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


# ---------------------------------------------------------------------------------------------------------------
# spaCy
# ---------------------------------------------------------------------------------------------------------------


def load_nlp(**kwargs: Any) -> Language:
    """The project's spaCy model (``spurious.core.resources.load_spacy``) with tagger and parser, without ner/lemmatizer."""
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


# ---------------------------------------------------------------------------------------------------------------
# Feature predicates
# ---------------------------------------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------------------------------------------


def _check_pool(pool: pd.DataFrame, spec: FeatureSpec, target_label: int) -> np.ndarray:
    missing = [c for c in ("text_a", "label") if c not in pool.columns]
    if missing:
        raise ValueError(f"{spec.name}: the pool lacks the columns {missing}")
    labels = pool["label"].to_numpy()
    bad = sorted(set(labels.tolist()) - {0, 1})
    if bad:
        raise ValueError(f"{spec.name}: labels must be 0/1 (collapse MNLI to entailment vs not first); found {bad}")
    if target_label not in (0, 1):
        raise ValueError(f"{spec.name}: target_label must be 0 or 1, got {target_label!r}")
    return labels.astype(int)


def _target(spec: FeatureSpec, target_label: int | None) -> int:
    if target_label is not None:
        return int(target_label)
    return spec.target_label if spec.target_label is not None else PAPER_TARGET_LABEL


@dataclass
class _Cells:
    """Per label: ``has`` (feature present), ``ins`` (absent but insertable), ``bare`` (absent, not insertable)."""

    has: dict[int, np.ndarray] = field(default_factory=dict)
    ins: dict[int, np.ndarray] = field(default_factory=dict)
    bare: dict[int, np.ndarray] = field(default_factory=dict)

    def capable(self, y: int) -> int:
        return len(self.has[y]) + len(self.ins[y])

    def absent(self, y: int) -> int:
        return len(self.ins[y]) + len(self.bare[y])


def _cells(
    pool: pd.DataFrame,
    spec: FeatureSpec,
    labels: np.ndarray,
    cache: ParseCache,
    syntax_parser: SyntaxParser | None,
    stop_words: Iterable[str] | None,
) -> tuple[_Cells, np.ndarray]:
    texts = pool["text_a"].astype(str).tolist()
    if spec.needs_parse and not (spec.category == "syntax" and syntax_parser is not None):
        cache.docs(texts)  # one batch for the predicate and insertability
    has = has_feature(pool, spec, cache=cache, syntax_parser=syntax_parser, stop_words=stop_words)
    insertable = can_insert(pool, spec, cache=cache) & ~has
    cells = _Cells()
    for y in (0, 1):
        is_y = labels == y
        cells.has[y] = np.flatnonzero(is_y & has)
        cells.ins[y] = np.flatnonzero(is_y & insertable)
        cells.bare[y] = np.flatnonzero(is_y & ~has & ~insertable)
    return cells, has


def _infeasible(spec: FeatureSpec, what: str, y: int, need: int, have: int, n: int) -> ValueError:
    return ValueError(
        f"{spec.name}: the pool ({n} rows) cannot supply {need} {what} examples with label {y}: it has {have}"
    )


def _select(
    cells: _Cells, y: int, n_feature: int, n_without: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n_feature`` examples of label ``y`` with (or receiving) the feature and ``n_without`` without it, disjoint.

    The feature examples are drawn uniformly from ``has ∪ ins`` except that at most ``|ins| + |bare| − n_without``
    come from ``ins`` (so enough absent examples remain); the absent ones uniformly from what is left."""
    capable = np.concatenate([cells.has[y], cells.ins[y]])
    is_ins = np.concatenate([np.zeros(len(cells.has[y]), bool), np.ones(len(cells.ins[y]), bool)])
    max_ins = len(cells.ins[y]) + len(cells.bare[y]) - n_without
    order = rng.permutation(len(capable))
    chosen: list[int] = []
    n_ins = 0
    for k in order:
        if len(chosen) == n_feature:
            break
        if is_ins[k]:
            if n_ins >= max_ins:
                continue
            n_ins += 1
        chosen.append(int(capable[k]))
    feature_idx = np.array(sorted(chosen), dtype=int)
    left = np.setdiff1d(np.concatenate([cells.ins[y], cells.bare[y]]), feature_idx)
    without_idx = np.sort(rng.choice(left, size=n_without, replace=False)) if n_without else np.array([], int)
    return feature_idx, without_idx


def _feasible(cells: _Cells, y: int, n_feature: int, n_without: int) -> bool:
    total = cells.capable(y) + len(cells.bare[y])
    return n_feature <= cells.capable(y) and n_without <= cells.absent(y) and n_feature + n_without <= total


def _check_feasible(spec: FeatureSpec, cells: _Cells, y: int, n_feature: int, n_without: int, n: int) -> None:
    kind_note = " (already having it or able to receive it)" if spec.kind == "insertion" else ""
    if n_feature > cells.capable(y):
        raise _infeasible(spec, f"feature-bearing{kind_note}", y, n_feature, cells.capable(y), n)
    if n_without > cells.absent(y):
        raise _infeasible(spec, "feature-free", y, n_without, cells.absent(y), n)
    total = cells.capable(y) + len(cells.bare[y])
    if n_feature + n_without > total:
        raise _infeasible(spec, "feature-bearing + feature-free", y, n_feature + n_without, total, n)


def _assemble(
    pool: pd.DataFrame,
    spec: FeatureSpec,
    picks: list[tuple[np.ndarray, bool]],
    cache: ParseCache,
    rng: np.random.Generator,
    syntax_parser: SyntaxParser | None,
    stop_words: Iterable[str] | None,
    has: np.ndarray,
) -> pd.DataFrame:
    """Rows ``picks`` = [(indices, with_feature)], insertions done, shuffled; columns has_feature / inserted /
    original_text added; ``has_feature`` re-measured on the final texts and checked."""
    idx = np.concatenate([p for p, _ in picks]).astype(int)
    want = np.concatenate([np.full(len(p), flag, dtype=bool) for p, flag in picks])
    frame = pool.iloc[idx].reset_index(drop=True).copy()
    frame["original_text"] = frame["text_a"]
    inserted = want & ~has[idx]
    if inserted.any():
        texts = frame["text_a"].astype(str).tolist()
        ins_rows = np.flatnonzero(inserted)
        docs = cache.docs([texts[i] for i in ins_rows]) if spec.category == "adverb" else [None] * len(ins_rows)
        for i, doc in zip(ins_rows, docs, strict=True):
            texts[i] = insert(texts[i], spec, doc)
        frame["text_a"] = texts
    frame["inserted"] = inserted
    measured = has_feature(frame, spec, cache=cache, syntax_parser=syntax_parser, stop_words=stop_words)
    if not np.array_equal(measured, want):  # pragma: no cover - an insertion that does not create its feature
        bad = frame.loc[measured != want, "text_a"].head(3).tolist()
        raise RuntimeError(f"{spec.name}: constructed rows do not have the intended feature value, e.g. {bad}")
    frame["has_feature"] = measured
    order = rng.permutation(len(frame))
    frame = frame.iloc[order].reset_index(drop=True)
    frame.attrs = dict(pool.attrs)
    return frame


def construct_split(
    pool: pd.DataFrame,
    feature: FeatureSpec | str,
    *,
    size: int,
    prevalence: float = PAPER_PREVALENCE,
    strength: float = PAPER_STRENGTH,
    target_label: int | None = None,
    seed: int,
    nlp: Language | None = None,
    cache: ParseCache | None = None,
    syntax_parser: SyntaxParser | None = None,
    stop_words: Iterable[str] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A train or dev split of ``size`` rows (even) with the exact prevalence and strength (§2.2, §3, App. B).

    Counts: ``n_f = round(π·N)`` with the feature, ``n_f* = round(s·n_f)`` of them with ``y*`` (the target label)
    and ``n_f − n_f*`` with the other label; ``N/2 − n_f*`` and ``N/2 − (n_f − n_f*)`` without the feature, so both
    labels have ``N/2`` rows.  Returns the rows (shuffled; ``text_a`` after insertion, ``original_text`` before it,
    ``has_feature``, ``inserted``) and the stats: measured prevalence / strength / sizes next to the configured ones
    (also in ``frame.attrs["spuriousbench"]``).  ``ValueError`` when the pool cannot supply a count.
    """
    spec = _spec(feature)
    y_star = _target(spec, target_label)
    labels = _check_pool(pool, spec, y_star)
    if size <= 0 or size % 2:
        raise ValueError(f"{spec.name}: size must be a positive even number (balanced labels), got {size}")
    if not (0.0 <= prevalence <= 1.0 and 0.0 <= strength <= 1.0):
        raise ValueError(f"{spec.name}: prevalence and strength must lie in [0, 1], got {prevalence}, {strength}")
    n_f = round_half_up(prevalence * size)
    n_ft = round_half_up(strength * n_f)
    n_fo = n_f - n_ft
    half = size // 2
    if n_ft > half or n_fo > half:
        raise ValueError(
            f"{spec.name}: prevalence {prevalence} and strength {strength} need {n_ft} feature rows with label "
            f"{y_star} and {n_fo} with the other, more than the {half} rows per label of a balanced split of {size}"
        )
    y_other = 1 - y_star
    need = {y_star: (n_ft, half - n_ft), y_other: (n_fo, half - n_fo)}
    cache = _cache(cache, nlp)
    cells, has = _cells(pool, spec, labels, cache, syntax_parser, stop_words)
    for y, (nf, nw) in need.items():
        _check_feasible(spec, cells, y, nf, nw, len(pool))
    rng = np.random.default_rng(seed)
    picks: list[tuple[np.ndarray, bool]] = []
    for y in (y_star, y_other):
        f_idx, w_idx = _select(cells, y, *need[y], rng)
        picks += [(f_idx, True), (w_idx, False)]
    frame = _assemble(pool, spec, picks, cache, rng, syntax_parser, stop_words, has)

    f = frame["has_feature"].to_numpy()
    y = frame["label"].to_numpy()
    n_feat = int(f.sum())
    stats: dict[str, Any] = {
        "feature": spec.name,
        "kind": spec.kind,
        "target_label": y_star,
        "seed": seed,
        "size": len(frame),
        "size_config": size,
        "prevalence": n_feat / len(frame),
        "prevalence_config": prevalence,
        "strength": float((f & (y == y_star)).sum() / n_feat) if n_feat else math.nan,
        "strength_config": strength,
        "n_feature": n_feat,
        "n_feature_target": int((f & (y == y_star)).sum()),
        "n_feature_other": int((f & (y != y_star)).sum()),
        "n_without_target": int((~f & (y == y_star)).sum()),
        "n_without_other": int((~f & (y != y_star)).sum()),
        "n_label": {int(k): int((y == k).sum()) for k in (0, 1)},
        "n_inserted": int(frame["inserted"].sum()),
        "pool_size": len(pool),
    }
    frame.attrs["spuriousbench"] = stats
    return frame, stats


def construct_test(
    pool: pd.DataFrame,
    feature: FeatureSpec | str,
    *,
    size: int | None = None,
    feature_rate: float | None = None,
    target_label: int | None = None,
    seed: int,
    nlp: Language | None = None,
    cache: ParseCache | None = None,
    syntax_parser: SyntaxParser | None = None,
    stop_words: Iterable[str] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A test set in which the feature and the label are independent (§2.2, §3).

    Per label ``f`` rows with the feature (inserted for insertion features when absent) and ``w`` without, the same
    ``f`` and ``w`` for both labels, so labels are balanced and ``P(s | y)`` is the same for both.  Column
    ``group``: ``"supporting"`` (feature, ``y = y*``), ``"counter"`` (feature, ``y ≠ y*``), ``"without"``.

    * ``size`` and ``feature_rate`` both ``None`` (default): the largest such set, ``f = min_y |rows of label y that
      have or can receive the feature|`` and ``w`` the most feature-free rows left in both labels (for punctuation
      and prefixes every row can receive the feature, so ``w = 0``, as in the paper's all-inserted tests);
    * ``feature_rate`` ``r``: per label ``f = round(r·n)``, ``w = n − f`` with ``n = size/2`` or, without ``size``,
      the largest feasible ``n``;
    * ``size`` alone: ``r`` is the rate of the largest set.
    """
    spec = _spec(feature)
    y_star = _target(spec, target_label)
    labels = _check_pool(pool, spec, y_star)
    cache = _cache(cache, nlp)
    cells, has = _cells(pool, spec, labels, cache, syntax_parser, stop_words)
    if size is not None and (size <= 0 or size % 2):
        raise ValueError(f"{spec.name}: size must be a positive even number (balanced labels), got {size}")
    if feature_rate is not None and not 0.0 <= feature_rate <= 1.0:
        raise ValueError(f"{spec.name}: feature_rate must lie in [0, 1], got {feature_rate}")
    f_max = min(cells.capable(0), cells.capable(1))
    # feature-free rows left per label when f_max rows are taken for the feature, has-rows first
    w_max = min(cells.absent(y) - max(0, f_max - len(cells.has[y])) for y in (0, 1))
    rate = feature_rate
    if rate is None and size is not None:
        rate = f_max / (f_max + w_max) if f_max + w_max else 0.0
    if rate is None:
        n_f, n_w = f_max, w_max
    else:
        if size is not None:
            n = size // 2
        else:
            n = 0
            hi = min(cells.capable(y) + len(cells.bare[y]) for y in (0, 1))
            for cand in range(hi, 0, -1):
                cf = round_half_up(rate * cand)
                if all(_feasible(cells, y, cf, cand - cf) for y in (0, 1)):
                    n = cand
                    break
        n_f = round_half_up(rate * n)
        n_w = n - n_f
    for y in (0, 1):
        _check_feasible(spec, cells, y, n_f, n_w, len(pool))
    if n_f == 0:
        raise ValueError(f"{spec.name}: no test rows with the feature (pool of {len(pool)} rows)")
    rng = np.random.default_rng(seed)
    picks: list[tuple[np.ndarray, bool]] = []
    for y in (y_star, 1 - y_star):
        f_idx, w_idx = _select(cells, y, n_f, n_w, rng)
        picks += [(f_idx, True), (w_idx, False)]
    frame = _assemble(pool, spec, picks, cache, rng, syntax_parser, stop_words, has)
    f = frame["has_feature"].to_numpy()
    y = frame["label"].to_numpy()
    frame["group"] = np.where(f & (y == y_star), "supporting", np.where(f, "counter", "without"))
    counts = frame["group"].value_counts()
    stats: dict[str, Any] = {
        "feature": spec.name,
        "kind": spec.kind,
        "target_label": y_star,
        "seed": seed,
        "size": len(frame),
        "n_supporting": int(counts.get("supporting", 0)),
        "n_counter": int(counts.get("counter", 0)),
        "n_without": int(counts.get("without", 0)),
        "n_label": {int(k): int((y == k).sum()) for k in (0, 1)},
        "feature_rate": {int(k): float(f[y == k].mean()) for k in (0, 1)},
        "n_inserted": int(frame["inserted"].sum()),
        "pool_size": len(pool),
    }
    frame.attrs["spuriousbench"] = stats
    return frame, stats


def spurious_gap(correct: np.ndarray | Sequence[bool], group: np.ndarray | Sequence[str]) -> dict[str, float | int]:
    """§2.2: ``acc(supporting) − acc(counter)`` from per-row correctness and :func:`construct_test`'s groups; also
    the accuracy without the feature and overall (``nan`` for an empty group)."""
    correct = np.asarray(correct, dtype=bool)
    group = np.asarray(group, dtype=object)
    if correct.shape != group.shape:
        raise ValueError(f"correct and group differ in shape: {correct.shape} vs {group.shape}")
    unknown = sorted(set(group.tolist()) - set(GROUPS))
    if unknown:
        raise ValueError(f"unknown groups {unknown}; expected {GROUPS}")

    def acc(mask: np.ndarray) -> float:
        return float(correct[mask].mean()) if mask.any() else math.nan

    sup, cnt, wo = (group == g for g in GROUPS)
    out: dict[str, float | int] = {
        "acc_supporting": acc(sup),
        "acc_counter": acc(cnt),
        "n_supporting": int(sup.sum()),
        "n_counter": int(cnt.sum()),
        "acc_without": acc(wo),
        "n_without": int(wo.sum()),
        "accuracy": acc(np.ones(len(correct), dtype=bool)),
    }
    out["gap"] = out["acc_supporting"] - out["acc_counter"]
    return out


# ---------------------------------------------------------------------------------------------------------------
# SST-2 pools and the suite
# ---------------------------------------------------------------------------------------------------------------


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
    from spurious.core import io

    meta = io.read_parquet_metadata(path)
    if "label_names" not in meta:
        raise ValueError(f"{path}: not a SpuriousBench split (no label names in its metadata); build it with spurious_build")
    frame = pd.read_parquet(path)
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
