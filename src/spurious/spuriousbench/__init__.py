"""What spurious features can pretrained language models combat? (SpuriousBench): datasets with a planted feature
of controlled prevalence and strength, the spurious gap, in-context learning, and the paper's figures.

Importing the package registers the check of the config's ``spuriousbench`` section
(:func:`spurious.spuriousbench.config.config_problems`) with :mod:`spurious.core.registry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spurious.core import registry


def _config_problems(cfg: dict[str, Any], task: Mapping[str, str], schema: Mapping[str, Any]) -> list[str]:
    # imported when a config is validated, not when the package is: the check needs pandas (the feature inventory)
    from spurious.spuriousbench.config import config_problems

    return config_problems(cfg, task)


registry.register_config_check("spuriousbench", _config_problems)
