"""AFLite's names, declared once for the workflow: the training sets a text classifier is trained on, the inputs it
reads, and the run names the rules' wildcards match (the synthetic experiment's separations, the filtered sets).

The rules read these (``rules/aflite_functions.smk``, ``rules/aflite.smk``); the config schema lists the same
training sets, and ``tests/aflite/test_track.py`` fails when the two differ. Importing this module imports nothing
heavy: the Snakefile does it on every start."""

from __future__ import annotations

#: D: a dataset's whole pool, the same for every filter.
FULL = "full"
#: D_rand (a seeded random subset of D of the filtered size) and D(AFLite) (what the filter kept): one per filter.
FILTERED_TRAIN_SETS: tuple[str, ...] = ("random", "aflite")
#: The training sets of Tables 3-4, in the tables' order.
TRAIN_SETS: tuple[str, ...] = (FULL, *FILTERED_TRAIN_SETS)
#: What a classifier reads: the full input, or the partial input (hypothesis / answer only).
INPUTS: tuple[str, ...] = ("full", "partial")

#: A wildcard ``separation`` of the synthetic experiment (App. A.3): a separation in [0, 1), as the config writes it.
SEPARATION_WILDCARD = r"0\.\d+"
#: The part a ``filters.<name>`` set adds to its folder and its training sets' names (``_<name>``).
FILTER_SUFFIX = r"_[a-z0-9_]+"
#: A wildcard ``variant`` of a filtered set: the dataset's own filter (empty) or a ``filters.<name>`` set.
VARIANT_WILDCARD = rf"({FILTER_SUFFIX})?"
#: A wildcard ``variant`` of a ``filters.<name>`` set alone.
FILTERS_VARIANT_WILDCARD = FILTER_SUFFIX
#: A wildcard ``train_set``: D, or the D_rand and D(AFLite) of the dataset's own filter or of a ``filters.<name>``
#: set (``random_<name>``, ``aflite_<name>``).
TRAIN_SET_WILDCARD = rf"{FULL}|(?:{'|'.join(FILTERED_TRAIN_SETS)})(?:{FILTER_SUFFIX})?"
#: A wildcard ``train_set`` of the dataset's own filter (the text experiments' predictions on its dev set).
OWN_TRAIN_SET_WILDCARD = "|".join(TRAIN_SETS)
#: A wildcard ``inputs``.
INPUTS_WILDCARD = "|".join(INPUTS)
