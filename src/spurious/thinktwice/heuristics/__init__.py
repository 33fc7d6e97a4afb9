"""The seven bias-exploiting heuristics of *Think Twice* (paper §4.1; the authors' code: MIR-MU/isbiased,
``isbiased/heuristics.py``).

Each heuristic maps a QA example to a scalar attribute ``A_h`` that the prediction-bias search
(``spurious.thinktwice.bias``) thresholds.  :func:`compute_heuristics` evaluates any subset of them on a QA frame and
returns ``id`` plus one float64 column per heuristic, named as in :data:`HEURISTICS`.

Three definitions are available, because the paper's text, the authors' code and a corrected version of that code
disagree, and each is needed for a different purpose:

* **default** (``compat=None``): the authors' code definition (``MIR-MU/isbiased``, ``isbiased/heuristics.py``) with
  its bugs fixed, so that our numbers are comparable with the paper's thresholds but not tied to accidents:

  - *word-dist* anchors the answer at its ``answer_start`` (the code takes the first occurrence of the answer's
    tokens anywhere in the context) and filters question stop words case-insensitively (the code keeps "What",
    "The", ... because NLTK's list is lower case);
  - *ans-pos* takes the sentence in which the answer starts (at ``answer_start``), not the first sentence that
    happens to contain the answer string;
  - *sim-ents* uses the entity labels of *every* gold answer (the code resets its list inside the answer loop and
    so keeps only the last answer's labels);
  - *subj-pos* is order-independent: the maximum over the question subjects found in the context (the code lets a
    later subject that is missing from the context overwrite an earlier hit with -1).

* ``compat="isbiased"``: the authors' code, bugs included, for checking against their published values.  Two parts
  cannot be exact offline because NLTK's ``punkt`` model is unavailable; see :func:`text._word_tokenize_like`
  (sim-word: NLTK's Punkt algorithm with a listed abbreviation set + NLTK's Treebank tokenizer) and
  :func:`measures._ans_pos` (spaCy dependency-parser sentences instead of ``sent_tokenize``) for the documented
  substitutes.  On the 5,397 questions of the even-numbered SQuAD-dev articles it reproduces the authors' published
  values of word-dist, cos-sim, ans-len, sim-ents and subj-pos for every question
  (``tests/thinktwice/test_heuristics.py``).

* ``variants``: where the paper's prose defines a heuristic differently from the code, that definition is offered
  by name (see :data:`VARIANTS`); variants build on the default definitions.

spaCy work (sentences, entities, question subjects) runs batched with ``nlp.pipe`` over *distinct* texts only and
only for the heuristics that need it, in ``threads`` forked worker processes (:class:`parsing._JobRunner`), because
parsing dominates the run time (SQuAD dev: 10,570 questions but only 2,067 distinct contexts).  All seven heuristics
on SQuAD dev take ~60 CPU-seconds (``benchmarks/bench_heuristics.py``).
"""

# the spaCy loader the heuristics use, for callers that pass their own pipeline (nlp=...)
from spurious.core.resources import load_spacy
from spurious.thinktwice.heuristics.catalog import HEURISTIC_SPECS, HEURISTICS, ISBIASED_COLUMNS, VARIANTS, Heuristic
from spurious.thinktwice.heuristics.compute import compute_heuristics
from spurious.thinktwice.heuristics.definitions import COMPAT_MODES, QUESTION_TYPE_LABELS
from spurious.thinktwice.heuristics.text import fit_tfidf
from spurious.thinktwice.heuristics.values import read_heuristic_values

__all__ = [
    "load_spacy",
    "Heuristic",
    "HEURISTIC_SPECS",
    "HEURISTICS",
    "VARIANTS",
    "COMPAT_MODES",
    "ISBIASED_COLUMNS",
    "QUESTION_TYPE_LABELS",
    "fit_tfidf",
    "compute_heuristics",
    "read_heuristic_values",
]
