"""Fine-tuning and what it reads and writes: the engine (``engine``, one optimizer step in ``steps``, ``checkpoints``
with ``checkpoint_migration``, ``launch``, ``compiled``, ``packing``, ``tracking``, ``training``), the training
settings (``settings``, ``prediction_settings``), its two users (``qa/`` and ``classifier`` with ``prompt``), frozen
representations (``embeddings``) and stored logits (``logits``)."""
