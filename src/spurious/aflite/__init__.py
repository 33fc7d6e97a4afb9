"""AFLite (Le Bras et al., ICML 2020): predictability scores and the greedy filter, the synthetic experiment
(Table 7), filtering text datasets (Tables 3-4) and out-of-distribution evaluation (Tables 1-2).

Importing the package registers the check of the config's ``aflite`` section
(:func:`spurious.aflite.config.config_problems`: the text track's datasets, filters and OOD sets) with
:mod:`spurious.core.registry`; the check imports nothing heavy.
"""

from __future__ import annotations

from spurious.aflite import config
from spurious.core import registry

registry.register_config_check("aflite", config.config_problems)
