"""What every track shares: records and their I/O (``io``, ``data`` for QA, ``classification``), metrics,
configuration, model loading, the QA and classification training loops (``qa``, ``classifier``, ``training``,
``prompt``), frozen representations (``embeddings``), stored logits (``logits``), progress, and what every paper's
cost estimate shares (``costs``). What only the workflow needs (the plan, SLURM requests, job logs, the results index)
lives one floor up, in ``spurious.workflow``."""
