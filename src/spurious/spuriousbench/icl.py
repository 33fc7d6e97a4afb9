"""In-context learning with a causal language model (SpuriousBench §5, Figs. 3-5, App. C: the paper's GPT-3 rows).

The model is not trained. For each run (seed), ``shots`` demonstrations are drawn from a feature's training split
with the configured *prevalence* and *strength* of the spurious feature (§5.1: 50 % / 100 %, "all the positive (or
entailment) examples contain the spurious feature"; Fig. 4 also 20 % / 90 %), shuffled, formatted with a template
and concatenated; each test example is appended as the query, and the label is the label word the LM scores highest
(the summed log-probability of the word's tokens after the prompt). Any Hugging Face ``AutoModelForCausalLM`` works;
GPT-3 is not available, so the paper config names an open model.

Demonstrations (:func:`draw_demonstrations`), with ``k`` shots, prevalence ``π`` and strength ``s``: ``n_f =
round(π k)`` rows carry the feature, ``round(s n_f)`` of them with the target label, the rest with the other label;
the ``k − n_f`` feature-free rows fill the labels up to ``k/2`` each (balanced, as the training splits), so the
drawn set has exactly the configured prevalence and strength (up to rounding); ValueError when the split has too few
rows of a kind. The paper does not print its prompt format; ours (:data:`PAPER_TEMPLATES`) puts each example on
lines of its own, with the label words of §5.1 ("0"/"1") or §5.2's meaningful ones ("negative"/"positive"; MNLI
"No"/"Yes" with the pair written PREMISE "DOES IT MEAN" HYPOTHESIS, as §5.2 describes).

A prompt longer than the model's context keeps the query and the latest demonstrations that fit (the earliest are
dropped, counted in ``n_truncated_demos``).
"""

from __future__ import annotations

import inspect
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core.models import from_pretrained
from spurious.core.train.training import pad_multiple, padded_width, pick_device, use_bf16

logger = logging.getLogger(__name__)
LogFn = Callable[[str], None]


@dataclass(frozen=True)
class ICLTemplate:
    """``example``: one demonstration or query with ``{text_a}``, ``{text_b}`` (pairs) and ``{label}`` (last);
    ``separator`` joins the demonstrations; ``label_words``: one word per label id."""

    example: str
    label_words: tuple[str, ...]
    separator: str = "\n\n"

    def __post_init__(self) -> None:
        object.__setattr__(self, "label_words", tuple(self.label_words))
        if not self.example.endswith("{label}"):
            raise ValueError(f"ICL template {self.example!r} must end with {{label}} (the scored continuation)")
        if self.example.count("{label}") != 1 or "{text_a}" not in self.example:
            raise ValueError(f"ICL template {self.example!r} needs {{text_a}} and exactly one {{label}}")
        if len(self.label_words) < 2 or len(set(self.label_words)) != len(self.label_words):
            raise ValueError(f"ICL label words must be at least two distinct words, got {list(self.label_words)}")

    @property
    def is_pair(self) -> bool:
        return "{text_b}" in self.example

    def render(self, text_a: str, text_b: str | None, label: int | None) -> str:
        """The example with its label word, or (``label=None``) the query up to where the label word goes."""
        filled = self.example.replace("{text_a}", text_a.strip()).replace("{text_b}", (text_b or "").strip())
        head = filled[: -len("{label}")]
        return head if label is None else head + self.label_words[label]

    def to_dict(self) -> dict[str, Any]:
        return {"example": self.example, "label_words": list(self.label_words), "separator": self.separator}


PAPER_TEMPLATES: dict[str, dict[str, ICLTemplate]] = {
    # §5.1: "1" and "0" for positive / negative (entailment / non-entailment); §5.2: meaningful words
    "sst2": {
        "digits": ICLTemplate("Sentence: {text_a}\nLabel: {label}", ("0", "1")),
        "words": ICLTemplate("Sentence: {text_a}\nSentiment: {label}", ("negative", "positive")),
    },
    "mnli": {
        "digits": ICLTemplate("Premise: {text_a}\nHypothesis: {text_b}\nLabel: {label}", ("0", "1")),
        "words": ICLTemplate("{text_a} DOES IT MEAN {text_b}? {label}", ("NO", "YES")),
    },
}
"""Our prompt formats for the builders' label ids (0 = negative / non-entailment, 1 = positive / entailment)."""


def draw_demonstrations(
    train: pd.DataFrame, *, shots: int, prevalence: float, strength: float, target_label: int, seed: int
) -> pd.DataFrame:
    """``shots`` rows of a feature's training split (columns ``has_feature`` and ``label``) with the given
    prevalence and strength, labels balanced, in a seeded random order (module docstring)."""
    if shots < 2 or shots % 2:
        raise ValueError(f"ICL shots must be an even number >= 2 (balanced labels), got {shots}")
    if not (0.0 <= prevalence <= 1.0 and 0.0 <= strength <= 1.0):
        raise ValueError(f"prevalence and strength must lie in [0, 1], got {prevalence}, {strength}")
    other = 1 - target_label
    n_feature = int(round(prevalence * shots))
    n_target_feature = int(round(strength * n_feature))
    want = {
        (True, target_label): n_target_feature,
        (True, other): n_feature - n_target_feature,
        (False, target_label): shots // 2 - n_target_feature,
        (False, other): shots // 2 - (n_feature - n_target_feature),
    }
    if min(want.values()) < 0:
        raise ValueError(
            f"{shots} shots cannot have prevalence {prevalence} and strength {strength} with balanced labels "
            f"(would need {want})"
        )
    rng = np.random.default_rng(seed)
    has = train["has_feature"].to_numpy(dtype=bool)
    labels = train["label"].to_numpy()
    picked: list[int] = []
    for (feature, label), n in want.items():
        rows = np.flatnonzero((has == feature) & (labels == label))
        if len(rows) < n:
            raise ValueError(
                f"the training split has {len(rows)} rows {'with' if feature else 'without'} the feature and label "
                f"{label}; {n} are needed for {shots} shots at prevalence {prevalence}, strength {strength}"
            )
        picked += rng.choice(rows, size=n, replace=False).tolist()
    order = rng.permutation(len(picked))
    return train.iloc[[picked[i] for i in order]].reset_index(drop=True)


def load_causal_lm(name_or_path: str | os.PathLike) -> tuple[Any, Any]:
    """The causal LM and its tokenizer (a hub id, a local folder)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = from_pretrained(AutoTokenizer, name_or_path)
    model = from_pretrained(AutoModelForCausalLM, name_or_path)
    if not getattr(model.config, "is_decoder", True) and "CausalLM" not in type(model).__name__:
        raise ValueError(f"{name_or_path}: in-context learning needs a causal LM, got {type(model).__name__}")
    return model, tokenizer


def _context_size(model: Any, tokenizer: Any) -> int:
    for key in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
        value = getattr(model.config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < 1_000_000 else 2048


@torch.no_grad()
def predict_icl(
    model: Any,
    tokenizer: Any,
    demonstrations: pd.DataFrame,
    queries: pd.DataFrame,
    template: ICLTemplate,
    *,
    batch_size: int = 8,
    device: str = "auto",
    bf16: bool | str = "auto",
    log: LogFn | None = None,
    pad_to_multiple_of: int | str = "auto",
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Predict every query row with the demonstrations as the prompt; returns the predictions (``id, label,
    prediction, correct, probabilities`` = the softmax over the label words' summed log-probabilities) and a record
    (prompt length, truncations, time)."""
    emit = log or logger.info
    label_names = list(queries.attrs["label_names"])
    if len(template.label_words) != len(label_names):
        raise ValueError(f"{len(template.label_words)} label words for {len(label_names)} labels {label_names}")
    pair = "text_b" in queries and bool(queries["text_b"].notna().any())
    if pair != template.is_pair:
        raise ValueError(
            f"ICL template {template.example!r} is for {'pairs' if template.is_pair else 'single texts'}, the data "
            f"holds {'pairs' if pair else 'single texts'}"
        )
    dev = pick_device(device)
    dtype = torch.bfloat16 if use_bf16(bf16, dev) else torch.float32
    model.to(dev, dtype=dtype).eval()
    context = _context_size(model, tokenizer)
    multiple = pad_multiple(pad_to_multiple_of, dev)

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def b_of(frame: pd.DataFrame, i: int) -> str | None:
        return str(frame["text_b"].iloc[i]) if pair else None

    demo_ids = [
        encode(template.render(str(demonstrations["text_a"].iloc[i]), b_of(demonstrations, i),
                               int(demonstrations["label"].iloc[i])) + template.separator)
        for i in range(len(demonstrations))
    ]  # fmt: skip
    # where the template puts a space before the label word, the query ends before that space and the word is scored
    # with it (" 1"), as BPE tokenizers spell a word after a space
    spaced = template.example[: -len("{label}")].endswith(" ")
    word_ids = [encode((" " if spaced else "") + w) for w in template.label_words]
    bos = [tokenizer.bos_token_id] if getattr(tokenizer, "bos_token_id", None) is not None else []
    sequences: list[list[int]] = []
    owners: list[tuple[int, int]] = []
    truncated = 0
    prompt_lengths = []
    for q in range(len(queries)):
        head = template.render(str(queries["text_a"].iloc[q]), b_of(queries, q), None)
        query = encode(head[:-1] if spaced else head)
        room = context - len(bos) - len(query) - max(len(w) for w in word_ids)
        kept: list[list[int]] = []
        for ids in reversed(demo_ids):  # the latest demonstrations that fit
            if sum(map(len, kept)) + len(ids) > room:
                break
            kept.insert(0, ids)
        if len(kept) < len(demo_ids):
            truncated += 1
        if room < 0:
            raise ValueError(f"query row {q} alone needs {len(query)} tokens, more than the model's context {context}")
        prefix = bos + [t for ids in kept for t in ids] + query
        prompt_lengths.append(len(prefix))
        for k, word in enumerate(word_ids):
            sequences.append(prefix + word)
            owners.append((q, k))
    scores = np.zeros((len(queries), len(word_ids)))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    t0 = time.perf_counter()
    order = np.argsort([len(s) for s in sequences], kind="stable")  # similar lengths per batch: less padding
    keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
    step = max(1, batch_size)
    for start in range(0, len(order), step):
        rows = order[start : start + step]
        # right padding, masked: a causal LM's logits at a row's own positions do not see it
        width = padded_width(max(len(sequences[r]) for r in rows), multiple, context)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):
            ids[j, : len(sequences[r])] = torch.tensor(sequences[r])
            mask[j, : len(sequences[r])] = 1
        # only the positions that predict a label word's tokens go through the LM head and the softmax over the
        # vocabulary ([B, T, V] for every position would be most of the work and memory): lengths are sorted, so the
        # rows' scored positions lie in one narrow window
        first, window = 0, {}
        if keeps_logits:
            first = min(len(sequences[r]) - len(word_ids[owners[r][1]]) - 1 for r in rows)
            window = {"logits_to_keep": torch.arange(first, max(len(sequences[r]) for r in rows) - 1, device=dev)}
        logits = model(input_ids=ids.to(dev), attention_mask=mask.to(dev), **window).logits
        logprobs = torch.log_softmax(logits.float(), dim=-1)
        for j, r in enumerate(rows):
            q, k = owners[r]
            n = len(word_ids[k])
            end = len(sequences[r])
            positions = torch.arange(end - n - 1 - first, end - 1 - first, device=logprobs.device)
            targets = torch.tensor(word_ids[k], device=logprobs.device)
            scores[q, k] = float(logprobs[j, positions, targets].sum())
        if (start // step) % 50 == 0:
            emit(f"ICL: {min(start + step, len(order))}/{len(order)} scored continuations")
    probs = np.exp(scores - scores.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    labels = queries["label"].to_numpy(dtype=np.int64)
    prediction = scores.argmax(axis=1)
    out = pd.DataFrame(
        {
            "id": queries["id"].astype(str).to_numpy(),
            "label": labels,
            "prediction": prediction,
            "correct": prediction == labels,
            "probabilities": list(probs),
        }
    )
    out.attrs["label_names"] = label_names
    record = {
        "shots": len(demonstrations),
        "context": context,
        "prompt_tokens_mean": float(np.mean(prompt_lengths)) if prompt_lengths else math.nan,
        "n_truncated_demos": truncated,
        "label_word_tokens": [len(w) for w in word_ids],
        "seconds": time.perf_counter() - t0,
    }
    emit(
        f"ICL: {len(queries)} queries, {len(demonstrations)} demonstrations, "
        f"mean prompt {record['prompt_tokens_mean']:.0f} tokens ({truncated} queries with fewer demonstrations to fit "
        f"{context}); accuracy {np.mean(prediction == labels):.4f}"
    )
    return out, record


def template_for(builder: str, spec: Mapping[str, Any] | None) -> ICLTemplate:
    """The configured template: ``{"paper": "digits"|"words"}`` picks :data:`PAPER_TEMPLATES` of the builder, else
    ``{"example", "label_words", "separator"}``."""
    spec = dict(spec or {"paper": "digits"})
    if "paper" in spec:
        return PAPER_TEMPLATES[builder][spec["paper"]]
    return ICLTemplate(str(spec["example"]), tuple(spec["label_words"]), str(spec.get("separator", "\n\n")))


__all__: Sequence[str] = [
    "ICLTemplate",
    "PAPER_TEMPLATES",
    "draw_demonstrations",
    "load_causal_lm",
    "predict_icl",
    "template_for",
]
