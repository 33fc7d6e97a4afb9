"""Adapter: derive train/validation from one split (QA by article title; classification at random, stratified by label,
grouped by the first text segment, or QNLI by SQuAD article, optionally with QNLI-style pairs from SQuAD)."""

from typing import TYPE_CHECKING

from spurious.core.data import classification, qnli, squad
from spurious.workflow import runlog

if TYPE_CHECKING:
    from snakemake.iocontainers import snakemake

log = runlog.setup(snakemake)
seed = int(snakemake.wildcards.seed)
fraction = snakemake.params.validation_fraction
if snakemake.params.task == "classification":
    frame = classification.read_parquet(snakemake.input.source)
    by = snakemake.params.by
    if by == "squad_article":
        squad = squad.read_qa_parquet(snakemake.input.squad)
        train, validation, how = qnli.derive_by_article(
            frame, squad, validation_fraction=fraction, seed=seed, squad_pairs=snakemake.params.squad_pairs,
            source=str(snakemake.input.source), log=log.info,
        )
        how["squad"] = str(snakemake.input.squad)
        parts = (train, validation)
    elif by == "text_a":
        parts = classification.split_grouped(frame, validation_fraction=fraction, seed=seed, column="text_a")
        how = {"by": "text_a", "groups": "records with the same text_a stay on one side"}
    else:
        parts = classification.split_random(frame, validation_fraction=fraction, seed=seed)
        how = {"by": "random", "stratified_by": "label"}
    for name, part in zip(("train", "validation"), parts, strict=True):
        meta = {"derived_from": str(snakemake.input.source), **how, "seed": seed,
                "validation_fraction": fraction, "n_examples": len(part)}
        log.info("%s: %d examples, label counts %s", name, len(part),
                 part["label"].value_counts().sort_index().to_dict())
        classification.write_parquet(part, snakemake.output[name], metadata=meta)
else:
    frame = squad.read_qa_parquet(snakemake.input.source)
    train, validation = squad.split_by_title(frame, validation_fraction=fraction, seed=seed)
    for name, part in (("train", train), ("validation", validation)):
        meta = {
            "derived_from": str(snakemake.input.source),
            "by": "title",
            "seed": seed,
            "validation_fraction": fraction,
            "n_questions": len(part),
            "n_titles": int(part["title"].nunique()),
        }
        log.info("%s: %d questions from %d articles", name, meta["n_questions"], meta["n_titles"])
        squad.write_qa_parquet(part, snakemake.output[name], metadata=meta)
