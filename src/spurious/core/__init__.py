"""What every track shares: records and their I/O (``io``, ``data`` for QA, ``classification``), metrics,
configuration, model loading, the QA and classification training loops (``qa``, ``classifier``, ``training``,
``prompt``), frozen representations (``embeddings``), stored logits (``logits``), progress and run logs."""
