"""What every track shares, on three floors of its own: ``data`` (records and where they come from), ``train`` (the
training engine, its settings and users, frozen representations and stored logits) and ``report`` (tables and
figures), on the modules every one of them uses: I/O (``io``, ``readers``), ``errors``, ``metrics``, model loading
(``models``), ``config``, ``provenance``, ``resources``, ``progress``, the ``registry`` of what the papers add, and
what every paper's cost estimate shares (``costs``). What only the workflow needs (the plan, SLURM requests, job logs,
the results index) lives one floor up, in ``spurious.workflow``."""
