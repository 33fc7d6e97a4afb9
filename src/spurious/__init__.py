"""spurious: measure and remove prediction shortcuts in NLP models.

Importing any part of the package first loads the four papers (:func:`spurious.papers.load_papers`), which register
what they add to core with :mod:`spurious.core.registry`: so every entry point (the Snakefile, the ``spurious``
command, the workflow adapters, the tests) has the papers' model types, training inits and config checks before it
loads a model or validates a config, without ``core`` importing a paper. Registering imports nothing heavy.
"""

from spurious.papers import load_papers

__version__ = "0.1.0"

load_papers()
