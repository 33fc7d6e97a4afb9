"""The one place that loads the four papers: importing a paper package registers what it adds to core (model types,
QA training inits, config checks; :mod:`spurious.core.registry`). ``spurious/__init__.py`` calls :func:`load_papers`,
so importing anything from the package has done it; ``core`` cannot, as it imports no paper.
"""

from __future__ import annotations

PAPERS = ("thinktwice", "aflite", "spuriousbench", "lexical")


def load_papers() -> tuple[str, ...]:
    """Import the four paper packages (idempotent and cheap: their ``__init__`` registers functions that import the
    heavy modules only when used); returns their names."""
    from spurious import aflite, lexical, spuriousbench, thinktwice  # noqa: F401  (imported for their registrations)

    return PAPERS
