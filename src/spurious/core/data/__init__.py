"""Records and where they come from: SQuAD-format QA records (``squad``), classification records
(``classification``), QNLI by SQuAD article and QNLI-style pairs (``qnli``), a user's files for the CLI and the audit
(``inputs``), fetch records of models and datasets (``hub``), checked downloads (``urlfetch``) and the data mirror
(``mirror``)."""
