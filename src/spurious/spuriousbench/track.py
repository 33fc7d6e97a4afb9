"""SpuriousBench's names, declared once for the workflow: the feature categories of Table 1, the training methods,
and the run names the rules' wildcards match (a feature's category and value, a fine-tuning method).

The Snakefile's wildcard constraints read these; :mod:`spurious.spuriousbench.construction`,
:mod:`spurious.spuriousbench.report` and :mod:`spurious.spuriousbench.gap_figures` take their categories and methods
from here; the config schema lists the same methods and feature names, and ``tests/spuriousbench/test_track.py`` fails
when the two differ. Importing this module imports nothing heavy: the Snakefile does it on every start."""

from __future__ import annotations

#: The feature categories of Table 1, in the paper's order (a feature is named ``<category>:<value>``).
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
#: The fine-tuning methods (§4): standard fine-tuning, data balancing, prompt-based fine-tuning and BitFit.
FINETUNING_METHODS: tuple[str, ...] = ("finetune", "balanced", "prompt", "bitfit")
#: In-context learning (§5): a prompted causal LM, no training (its runs are ``<model>/icl/seed<s>``).
ICL = "icl"
#: Every method a model may run (``spuriousbench.models.<name>.methods``), in the tables' order.
METHODS: tuple[str, ...] = (*FINETUNING_METHODS, ICL)

#: A wildcard ``category``: one of the feature categories.
CATEGORY_WILDCARD = "|".join(CATEGORIES)
#: A wildcard ``fvalue``: a feature's value, the part of its name after the category.
FEATURE_VALUE_WILDCARD = r"[a-z0-9_]+"
#: A feature's name, ``<category>:<value>`` (the config's ``features`` and ``train_features``).
FEATURE_NAME_PATTERN = rf"[a-z]+:{FEATURE_VALUE_WILDCARD}"
#: A wildcard ``sb_method``: a fine-tuning method (in-context learning has a rule of its own).
SB_METHOD_WILDCARD = "|".join(FINETUNING_METHODS)
