"""How big a model is: its parameters and its size class, from its checkpoint, without loading it.

The SLURM profile asks for a job's GPUs, CPUs, memory, runtime and partition by the size class of the model the job
trains or runs (``by_size(...)`` in profiles/slurm/config.yaml, ``spurious.workflow.slurm.apply_size_requests``), and
``spurious plan`` scales measured step times by a model's non-embedding parameters. Both read the numbers here.

The parameters follow from the architecture: a transformer layer of width h and feed-forward width i has
4h² + 4h (attention) + 2hi + i + h (feed-forward) + 4h (two layer norms) = 4h² + 2hi + i + 9h weights, for the
BERT, RoBERTa and ELECTRA encoders and for GPT-NeoX (Pythia) alike. The embeddings add (vocabulary + positions +
token types) × h + 2h (BERT-style; GPT-NeoX: an input and an untied output embedding, vocabulary × h each, and a
final layer norm), BERT and RoBERTa a pooler (h² + h). The architectures below are those of the checkpoints'
config.json files; the totals they give equal the published counts (bert-base-uncased 109,482,240, Pythia-1b
1,011,781,632, Pythia-12b 11,846,072,320; tests/core/test_sizes.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spurious.core.errors import rebuild_advice

BILSTM_LAYERS = 3  # the BiLSTM control of Stubborn Lexical Bias: three bidirectional layers
SIZE_CLASSES = ("bilstm", "small", "base", "large", "xl")
# total parameters below which a transformer is in a class (xl: everything above)
CLASS_LIMITS = (("small", 70_000_000), ("base", 200_000_000), ("large", 2_000_000_000))
SIZE_CLASS_HELP = (
    "bilstm: the BiLSTM control (init: bilstm); by total parameters: small < 70M (MiniLM) ≤ base < 200M (BERT-base, "
    "RoBERTa-base, ELECTRA-base) ≤ large < 2B (BERT-large, RoBERTa-large, Pythia-1b) ≤ xl (Pythia-12b)"
)


class ModelSizeError(ValueError):
    """A model's size cannot be known without its config: name the size class in the config instead."""


@dataclass(frozen=True)
class Architecture:
    """What the parameter count depends on (from a checkpoint's config.json)."""

    family: str  # "encoder" (BERT, RoBERTa, ELECTRA) or "gpt_neox" (Pythia)
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    positions: int = 0
    token_types: int = 0
    pooler: bool = False

    def layer_parameters(self) -> int:
        h, i = self.hidden, self.intermediate
        return 4 * h * h + 2 * h * i + i + 9 * h

    def non_embedding_parameters(self) -> int:
        return self.layers * self.layer_parameters()

    def embedding_parameters(self) -> int:
        h = self.hidden
        if self.family == "gpt_neox":  # embed_in and the untied embed_out, the final layer norm
            return 2 * self.vocab * h + 2 * h
        return (self.vocab + self.positions + self.token_types) * h + 2 * h

    def parameters(self) -> int:
        pooler = self.hidden * self.hidden + self.hidden if self.pooler else 0
        return self.embedding_parameters() + self.non_embedding_parameters() + pooler


_BERT_BASE = dict(family="encoder", layers=12, hidden=768, intermediate=3072, positions=512, token_types=2, pooler=True)
_BERT_LARGE = dict(_BERT_BASE, layers=24, hidden=1024, intermediate=4096)
_ROBERTA_BASE = dict(_BERT_BASE, vocab=50265, positions=514, token_types=1)
_ROBERTA_LARGE = dict(_ROBERTA_BASE, layers=24, hidden=1024, intermediate=4096)

# The checkpoints the configs name, under every id they go by (the hub's legacy ids redirect to the new ones).
KNOWN: dict[str, Architecture] = {}
for _names, _arch in (
    (("embedded:all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"),
     Architecture(**dict(_BERT_BASE, layers=6, hidden=384, intermediate=1536, vocab=30522))),
    (("bert-base-cased", "google-bert/bert-base-cased"), Architecture(**dict(_BERT_BASE, vocab=28996))),
    (("bert-base-uncased", "google-bert/bert-base-uncased"), Architecture(**dict(_BERT_BASE, vocab=30522))),
    (("bert-large-cased", "google-bert/bert-large-cased"), Architecture(**dict(_BERT_LARGE, vocab=28996))),
    (("bert-large-uncased", "google-bert/bert-large-uncased"), Architecture(**dict(_BERT_LARGE, vocab=30522))),
    (("roberta-base", "FacebookAI/roberta-base"), Architecture(**_ROBERTA_BASE)),
    (("roberta-large", "FacebookAI/roberta-large"), Architecture(**_ROBERTA_LARGE)),
    (("google/electra-base-discriminator",), Architecture(**dict(_BERT_BASE, vocab=30522, pooler=False))),
    (("EleutherAI/pythia-1b",), Architecture("gpt_neox", layers=16, hidden=2048, intermediate=8192, vocab=50304)),
    (("EleutherAI/pythia-12b",), Architecture("gpt_neox", layers=36, hidden=5120, intermediate=20480, vocab=50688)),
):
    for _name in _names:
        KNOWN[_name] = _arch


@dataclass(frozen=True)
class ModelSize:
    """A model's size class and, where known, its parameters (None: the class was named in the config)."""

    size_class: str
    parameters: int | None
    non_embedding_parameters: int | None
    layers: int | None
    source: str  # where the numbers come from, for the plan's basis column


def _architecture_from_config(path: Path) -> Architecture | None:
    """The architecture in a local checkpoint's config.json (BERT-like or GPT-NeoX), or None when it is not one."""
    from spurious.core import readers

    cfg = readers.read_json(path, kind="model config", fix=rebuild_advice(path.parent))
    try:
        family = "gpt_neox" if cfg.get("model_type") == "gpt_neox" else "encoder"
        return Architecture(
            family=family,
            layers=int(cfg["num_hidden_layers"]),
            hidden=int(cfg["hidden_size"]),
            intermediate=int(cfg["intermediate_size"]),
            vocab=int(cfg["vocab_size"]),
            positions=0 if family == "gpt_neox" else int(cfg.get("max_position_embeddings", 0)),
            token_types=0 if family == "gpt_neox" else int(cfg.get("type_vocab_size", 0)),
            pooler=family == "encoder" and cfg.get("model_type") in ("bert", "roberta"),
        )
    except (KeyError, TypeError, ValueError):
        return None


def architecture(checkpoint: str) -> Architecture | None:
    """A known checkpoint's architecture, else a local checkpoint folder's (its config.json), else None."""
    if checkpoint in KNOWN:
        return KNOWN[checkpoint]
    config = Path(checkpoint).expanduser() / "config.json"
    return _architecture_from_config(config) if config.is_file() else None


def size_class_of(parameters: int) -> str:
    """The transformer size class of a parameter count."""
    for name, limit in CLASS_LIMITS:
        if parameters < limit:
            return name
    return "xl"


def model_size(spec: Mapping[str, Any], where: str = "the model") -> ModelSize:
    """The size of a model spec from the config (``checkpoint``, ``init``, optional ``size_class``).

    ``size_class`` in the config wins; ``init: bilstm`` is the BiLSTM control; otherwise the checkpoint's
    architecture decides (a randomly initialised model, ``init: scratch``, has its checkpoint's size).
    """
    arch = architecture(str(spec["checkpoint"])) if spec.get("checkpoint") else None
    params = (arch.parameters(), arch.non_embedding_parameters(), arch.layers) if arch else (None, None, None)
    named = spec.get("size_class")
    if named is not None:
        if named not in SIZE_CLASSES:
            raise ModelSizeError(f"{where}: size_class {named!r} is not one of {', '.join(SIZE_CLASSES)}")
        return ModelSize(named, *params, source="size_class in the config")
    if spec.get("init") == "bilstm":
        return ModelSize("bilstm", None, None, BILSTM_LAYERS, source="init: bilstm")
    if arch is None:
        raise ModelSizeError(
            f"{where}: the size of checkpoint {spec.get('checkpoint')!r} is not known here (not one of the "
            f"configs' checkpoints, and no local folder with a config.json). Add `size_class:` to the model in the "
            f"config ({SIZE_CLASS_HELP})."
        )
    return ModelSize(size_class_of(params[0]), *params, source=f"{spec['checkpoint']} architecture")
