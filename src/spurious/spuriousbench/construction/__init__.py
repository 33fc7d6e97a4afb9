"""SpuriousBench dataset construction ("What Spurious Features Can Pretrained Language Models Combat?", §2–§3, Table 1,
App. B; no code was released).

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

from spurious.spuriousbench.construction.features import (
    CATEGORIES,
    FEATURES,
    GROUPS,
    KINDS,
    MNLI_FEATURES,
    PAPER_PREVALENCE,
    PAPER_SIZES,
    PAPER_STRENGTH,
    PAPER_TARGET_LABEL,
    SST2_FEATURES,
    SYNTAX_FEATURES,
    FeatureSpec,
    SyntaxParser,
    round_half_up,
)
from spurious.spuriousbench.construction.planting import (
    construct_split,
    construct_test,
    spurious_gap,
)
from spurious.spuriousbench.construction.predicates import (
    can_insert,
    has_feature,
    insert,
    lexical_overlap,
    syntax_features_from_doc,
    syntax_features_from_tree,
    tree_productions,
)
from spurious.spuriousbench.construction.suite import (
    MNLI_LABEL_NAMES,
    balance_supporting_counter,
    build_suite,
    feature_from_path,
    feature_path,
    mnli_pools,
    read_split,
    sst2_pools,
    write_split,
)
from spurious.spuriousbench.construction.text import (
    ParseCache,
    detokenize,
    is_whole_sentence,
    load_nlp,
    whole_sentence_mask,
)

__all__ = [
    "CATEGORIES",
    "FEATURES",
    "FeatureSpec",
    "GROUPS",
    "KINDS",
    "MNLI_FEATURES",
    "MNLI_LABEL_NAMES",
    "PAPER_PREVALENCE",
    "PAPER_SIZES",
    "PAPER_STRENGTH",
    "PAPER_TARGET_LABEL",
    "ParseCache",
    "SST2_FEATURES",
    "SYNTAX_FEATURES",
    "SyntaxParser",
    "balance_supporting_counter",
    "build_suite",
    "can_insert",
    "construct_split",
    "construct_test",
    "detokenize",
    "feature_from_path",
    "feature_path",
    "has_feature",
    "insert",
    "is_whole_sentence",
    "lexical_overlap",
    "load_nlp",
    "mnli_pools",
    "read_split",
    "round_half_up",
    "spurious_gap",
    "sst2_pools",
    "syntax_features_from_doc",
    "syntax_features_from_tree",
    "tree_productions",
    "whole_sentence_mask",
    "write_split",
]
