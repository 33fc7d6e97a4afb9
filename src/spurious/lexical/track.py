"""Stubborn Lexical Bias's names, declared once for the workflow: the weightings a classifier is trained under and
the run names the rules' wildcards match.

The Snakefile's wildcard constraints read these; the config schema lists the same weightings, and
``tests/lexical/test_track.py`` fails when the two differ. Importing this module imports nothing heavy: the Snakefile
does it on every start."""

from __future__ import annotations

#: The instance weightings of Table 2's classifiers: uniform (every example counts 1) and the reweighting q (§5.1).
WEIGHTINGS: tuple[str, ...] = ("uniform", "q")

#: A wildcard ``weighting``: one of the weightings.
WEIGHTING_WILDCARD = "|".join(WEIGHTINGS)
