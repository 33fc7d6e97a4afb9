"""Lexical (unigram / bigram) bias in classification data and models (Serrano, Dodge & Smith 2023, §2–§4, §6).

The paper asks whether word-label correlations in *training* data reappear as a model bias, using the evaluated
(test) data even though that data is itself biased.  The pieces, in pipeline order:

1. **Features** (:func:`tokenize`, :func:`feature_matrix`, :func:`bigram_matrix`).  Tokenisation is the one of the
   Gardner et al. (2021) z-statistics script: lower-case, delete :data:`DELETED_CHARACTERS`,
   split on whitespace.  An instance is the concatenation of its two segments (premise + hypothesis, question +
   sentence, question pair), so a word counts once for the instance whichever segment it sits in.
2. **z-scores** (:func:`label_counts`, :func:`z_scores`, :func:`zscore_table`): for feature ``w`` and label ``ℓ``,
   ``p̂ = count(w, ℓ) / n_w`` and ``z = (p̂ − p0) / sqrt(p0 (1 − p0) / n_w)`` with the *uniform* ``p0 = 1/|labels|``
   (not the label prior), exactly as the script does.  ``counting="types"`` (default) counts a word once per
   instance, so ``n_w`` is the number of instances containing ``w``; ``"tokens"`` counts repeats, the public
   script's default (its printout wrongly calls them types).
3. **Feature selection** (:func:`top_features`, :func:`feature_stop_words`, :func:`associated_labels`): per label the
   ``k = 50`` highest-z non-stop-word types on train (NLTK's list, tokenised like the features: ``don't`` →
   ``dont``); each selected feature's most-associated label ``y_j = argmax_y p̂(y | w)`` on train.
4. **Usual / unusual sets** (:func:`usual_unusual`) on the evaluated data: ``U_j`` = instances containing ``j`` whose
   gold label is ``y_j``, ``N_j`` = those with another gold label; ``U = ∪ U_j`` and ``N = ∪ N_j`` may overlap.
5. **Exact permutation test** (:func:`permutation_test`, :func:`log_hypergeom_sf`): under H0 the correct
   predictions are spread uniformly over the pooled multiset ``U ⊎ N``, so the number correct in ``U`` is
   hypergeometric and ``p = P(X ≥ observed)``.  The paper reports p down to ``1e-762``, far below the smallest
   double, so the tail is taken in log space (SciPy's ``hypergeom.logsf``) and ``log10 p`` is the number to report.
6. **Bigrams** (§6, :func:`sample_bigrams`): adjacent token pairs within a segment, sampled uniformly (seeded) from
   those present in at least one instance of every label.

Label ids are integers ``0 .. n_labels − 1`` everywhere; label names are only attached in tables.
"""

from spurious.lexical.features.permutation import (
    UsualUnusual,
    correct_predictions,
    log_hypergeom_sf,
    model_bias_test,
    permutation_test,
    sample_bigrams,
    usual_unusual,
)
from spurious.lexical.features.tokens import (
    COUNTING_MODES,
    DELETED_CHARACTERS,
    TOP_FEATURE_COLUMNS,
    ZSCORE_COLUMNS,
    bigram_matrix,
    feature_matrix,
    tokenize,
)
from spurious.lexical.features.zscores import (
    associated_labels,
    english_stop_words,
    feature_stop_words,
    label_counts,
    select_features,
    top_features,
    z_scores,
    zscore_table,
)

__all__ = [
    "DELETED_CHARACTERS",
    "COUNTING_MODES",
    "ZSCORE_COLUMNS",
    "TOP_FEATURE_COLUMNS",
    "tokenize",
    "feature_matrix",
    "bigram_matrix",
    "label_counts",
    "z_scores",
    "zscore_table",
    "top_features",
    "english_stop_words",
    "feature_stop_words",
    "select_features",
    "associated_labels",
    "UsualUnusual",
    "usual_unusual",
    "log_hypergeom_sf",
    "permutation_test",
    "sample_bigrams",
    "correct_predictions",
    "model_bias_test",
]
