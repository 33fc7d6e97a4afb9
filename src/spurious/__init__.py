"""spurious: measure and remove prediction shortcuts in NLP models."""

__version__ = "0.1.0"
