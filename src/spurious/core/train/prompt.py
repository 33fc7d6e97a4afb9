"""Prompt-based fine-tuning (Schick & Schütze 2021; Gao et al. 2021, LM-BFF): classification as masked-LM filling.

A :class:`PromptSpec` turns an example into a cloze text holding one mask token (the *template*) and maps each label
to one vocabulary word (the *label words*, index = label id). The classifier's logits are the masked-LM logits at the
mask position restricted to the label-word ids (:class:`PromptClassifier`); cross-entropy over them trains the whole
model, language-modelling head included, as LM-BFF does.

Template placeholders (literal braces are not allowed; each text appears at most once):

* ``{mask}``: the tokenizer's mask token (exactly once).
* ``{text_a}``, ``{text_b}``: the first / second text (``text_b`` only for sentence-pair frames, and required there).
* ``{text_a_nopunct}``, ``{text_b_nopunct}``: the text without its final full stop. LM-BFF's ``*sent-_0*`` drops
  the last character whatever it is; we drop only a final ``.`` (after trailing whitespace), so that a text without
  one keeps its last letter and, above all, a planted punctuation feature (SpuriousBench appends ``!``, ``;`` or
  ``*`` in place of the final punctuation) stays in the model's input: dropping any final mark would delete the
  feature from every prompt and make the prompting gap about 0 by construction.
* ``{text_a_lower}``, ``{text_b_lower}``: the text with its first character lower-cased (LM-BFF's ``*sentl_1*``).

Encoding (:func:`encode_prompts`) never cuts the mask: the templated string is tokenised whole (so template words are
tokenised in context, as in a plain string), and when it is longer than ``max_length`` tokens only the texts' tokens
are removed, from the end of the longer text first (HF's ``longest_first``), never template or special tokens.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core.models import (
    from_pretrained,
    load_config,
    model_attention_mask,
    quiet_transformers,
)

logger = logging.getLogger(__name__)

PROMPT_FILE = "prompt.json"
MASK = "mask"
# placeholder -> (text column, transformation)
TEXT_PLACEHOLDERS: dict[str, tuple[str, str | None]] = {
    "text_a": ("text_a", None),
    "text_a_nopunct": ("text_a", "nopunct"),
    "text_a_lower": ("text_a", "lower"),
    "text_b": ("text_b", None),
    "text_b_nopunct": ("text_b", "nopunct"),
    "text_b_lower": ("text_b", "lower"),
}
_PLACEHOLDER = re.compile(r"\{([A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class PromptSpec:
    """A cloze template (placeholders: see the module docstring) and one label word per label id."""

    template: str
    label_words: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "label_words", tuple(self.label_words))
        names = _PLACEHOLDER.findall(self.template)
        unknown = sorted({n for n in names if n != MASK and n not in TEXT_PLACEHOLDERS})
        if unknown:
            raise ValueError(
                f"prompt template {self.template!r}: unknown placeholders {unknown}; known: "
                f"{['mask', *TEXT_PLACEHOLDERS]}"
            )
        if "{" in _PLACEHOLDER.sub("", self.template) or "}" in _PLACEHOLDER.sub("", self.template):
            raise ValueError(f"prompt template {self.template!r}: a stray brace (literal braces are not supported)")
        if names.count(MASK) != 1:
            raise ValueError(f"prompt template {self.template!r} must hold {{mask}} exactly once")
        columns = [TEXT_PLACEHOLDERS[n][0] for n in names if n != MASK]
        if "text_a" not in columns:
            raise ValueError(f"prompt template {self.template!r} must use text_a ({{text_a}} or a variant)")
        if len(columns) != len(set(columns)):
            raise ValueError(f"prompt template {self.template!r}: each text may appear only once")
        words = self.label_words
        if len(words) < 2 or not all(isinstance(w, str) and w.strip() for w in words):
            raise ValueError(f"prompt label words must be at least two nonempty strings, got {list(words)}")
        if len(set(words)) != len(words):
            raise ValueError(f"prompt label words must be distinct, got {list(words)}")

    @property
    def is_pair(self) -> bool:
        """Whether the template uses ``text_b`` (a sentence-pair task)."""
        return any(TEXT_PLACEHOLDERS.get(n, ("",))[0] == "text_b" for n in _PLACEHOLDER.findall(self.template))

    def to_dict(self) -> dict[str, Any]:
        return {"template": self.template, "label_words": list(self.label_words)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PromptSpec:
        return cls(template=str(data["template"]), label_words=tuple(data["label_words"]))


PAPER_PROMPTS: dict[str, PromptSpec] = {
    # App. A: "<Input Sentence> It was [MASK]." with "great" (positive, label 1) / "terrible" (negative, label 0)
    "sst2": PromptSpec(template="{text_a} It was {mask}.", label_words=("terrible", "great")),
    # App. A: "<Premise>? [MASK], <Hypothesis>" with "Yes" (entailment, label 1) / "No" (non-entailment, label 0);
    # LM-BFF's *sent-_0*?*mask*,*+sentl_1*: the premise loses its final full stop (LM-BFF: its last character; any
    # other final mark stays, as it may be the planted feature), the hypothesis is lower-cased
    "mnli": PromptSpec(template="{text_a_nopunct}? {mask}, {text_b_lower}", label_words=("No", "Yes")),
}
"""The paper's prompts (App. A, from Gao et al. 2021), for its label ids: SST-2 0 = negative, 1 = positive; MNLI
collapsed to two labels, 0 = non-entailment, 1 = entailment."""


def _transform(text: str, how: str | None) -> str:
    if how == "nopunct":  # a final full stop only: any other mark may be the planted feature (module docstring)
        text = text.rstrip()
        return text[:-1] if text.endswith(".") else text
    if how == "lower":
        return text[:1].lower() + text[1:]
    return text


def _render(spec: PromptSpec, texts: Mapping[str, str], mask_token: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """The templated string and the character span of each text (keyed ``text_a``/``text_b``) and of the mask."""
    out: list[str] = []
    spans: dict[str, tuple[int, int]] = {}
    pos, length = 0, 0
    for m in _PLACEHOLDER.finditer(spec.template):
        literal = spec.template[pos : m.start()]
        out.append(literal)
        length += len(literal)
        name = m.group(1)
        if name == MASK:
            piece, key = mask_token, MASK
        else:
            key, how = TEXT_PLACEHOLDERS[name]
            piece = _transform(texts[key], how)
        spans[key] = (length, length + len(piece))
        out.append(piece)
        length += len(piece)
        pos = m.end()
    out.append(spec.template[pos:])
    return "".join(out), spans


def _frame_texts(frame: pd.DataFrame, spec: PromptSpec) -> list[dict[str, str]]:
    """The texts of each row; refuses a template whose pair-ness differs from the frame's (a pair frame under a
    single-text template would silently drop the hypothesis)."""
    is_pair = "text_b" in frame and bool(frame["text_b"].notna().any())
    if is_pair != spec.is_pair:
        raise ValueError(
            f"prompt template {spec.template!r} is for {'sentence pairs' if spec.is_pair else 'single texts'}, but "
            f"the frame holds {'sentence pairs' if is_pair else 'single texts (no text_b)'}"
        )
    a = frame["text_a"].astype(str).tolist()
    if not is_pair:
        return [{"text_a": x} for x in a]
    return [{"text_a": x, "text_b": str(y)} for x, y in zip(a, frame["text_b"].tolist(), strict=True)]


def apply_template(frame: pd.DataFrame, spec: PromptSpec, mask_token: str) -> list[str]:
    """The templated text of every row of a classification frame, ``mask_token`` standing for ``{mask}``."""
    return [_render(spec, texts, mask_token)[0] for texts in _frame_texts(frame, spec)]


def _tokenizer_name(tokenizer: Any) -> str:
    return f"{type(tokenizer).__name__} ({getattr(tokenizer, 'name_or_path', '?')})"


def label_word_ids(tokenizer: Any, words: Sequence[str]) -> list[int]:
    """The vocabulary id of each label word, which must be exactly one token.

    As LM-BFF, the word is first tokenised after a space (the form it takes after a space in the templates: for
    RoBERTa-style BPE the label word of "Yes" is "ĠYes"), else bare; WordPiece and SentencePiece give the same token
    either way. A word of several tokens, an unknown word, or two words of one id raise ValueError."""
    ids: list[int] = []
    for word in words:
        tried: list[list[str]] = []
        found = None
        for form in (" " + word, word):
            pieces = tokenizer(form, add_special_tokens=False)["input_ids"]
            tried.append(tokenizer.convert_ids_to_tokens(pieces))
            if len(pieces) == 1:
                found = int(pieces[0])
                break
        if found is None:
            raise ValueError(
                f"label word {word!r} is not a single token of the tokenizer {_tokenizer_name(tokenizer)}: it is "
                f"{tried[0]} (with a leading space) and {tried[1]} (without); choose a word of one token"
            )
        if tokenizer.unk_token_id is not None and found == tokenizer.unk_token_id:
            raise ValueError(f"label word {word!r} is unknown to the tokenizer {_tokenizer_name(tokenizer)}")
        ids.append(found)
    if len(set(ids)) != len(ids):
        tokens = tokenizer.convert_ids_to_tokens(ids)
        raise ValueError(
            f"label words {list(words)} map to the tokens {tokens} of {_tokenizer_name(tokenizer)}: two labels share a "
            "token (an uncased tokenizer merges words differing in case)"
        )
    return ids


@dataclass
class PromptEncoding:
    """Token ids of templated rows (unpadded) and the index of each row's mask token."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None
    mask_positions: np.ndarray
    n_truncated: int


def encode_prompts(frame: pd.DataFrame, tokenizer: Any, spec: PromptSpec, max_length: int) -> PromptEncoding:
    """Tokenise the templated rows; rows longer than ``max_length`` tokens lose tokens of their texts only (from the
    end of the longer text first), so the mask and the template survive in every row. Needs a fast tokenizer
    (offset mappings locate the texts' tokens). ValueError when the template alone exceeds ``max_length``."""
    mask_token, mask_id = tokenizer.mask_token, tokenizer.mask_token_id
    if mask_token is None or mask_id is None:
        raise ValueError(f"the tokenizer {_tokenizer_name(tokenizer)} has no mask token: prompts need a masked LM")
    rendered = [_render(spec, texts, mask_token) for texts in _frame_texts(frame, spec)]
    with quiet_transformers():  # no "sequence longer than the maximum" warning: rows are trimmed below
        enc = tokenizer([r[0] for r in rendered], return_offsets_mapping=True, truncation=False)
    types = enc.get("token_type_ids")
    input_ids: list[list[int]] = []
    token_type_ids: list[list[int]] | None = [] if types is not None else None
    positions = np.zeros(len(rendered), dtype=np.int64)
    n_truncated = 0
    for i, (_, spans) in enumerate(rendered):
        ids, offsets = enc["input_ids"][i], enc["offset_mapping"][i]
        ms, me = spans[MASK]
        masks = [t for t, (s, e) in enumerate(offsets) if ids[t] == mask_id and s < me and e > ms]
        if len(masks) != 1:
            raise RuntimeError(f"row {i}: found {len(masks)} mask tokens at the template's mask (expected 1)")
        mask_at = masks[0]
        # each text's tokens: those overlapping its span; special tokens have empty offsets and are never removed
        owned: dict[str, list[int]] = {key: [] for key in spans if key != MASK}
        for t, (s, e) in enumerate(offsets):
            if s == e or t == mask_at:
                continue
            for key, (ks, ke) in spans.items():
                if key != MASK and s < ke and e > ks:
                    owned[key].append(t)
                    break
        excess = len(ids) - max_length
        drop: set[int] = set()
        if excess > 0:
            n_truncated += 1
            a, b = owned.get("text_a", []), owned.get("text_b", [])
            if excess > len(a) + len(b):
                raise ValueError(
                    f"max_length {max_length} is too short for the prompt template {spec.template!r}: row {i} needs "
                    f"{len(ids) - len(a) - len(b)} tokens without its texts"
                )
            for _ in range(excess):  # longest_first: one token at a time from the end of the longer text (ties: b)
                victim = a if len(a) > len(b) else b
                drop.add(victim.pop())
        keep = [t for t in range(len(ids)) if t not in drop]
        input_ids.append([ids[t] for t in keep])
        if token_type_ids is not None:
            token_type_ids.append([types[i][t] for t in keep])
        positions[i] = mask_at - sum(1 for t in drop if t < mask_at)
    return PromptEncoding(input_ids, token_type_ids, positions, n_truncated)


@dataclass
class PromptOutput:
    """``logits``: (batch, n_labels), the masked-LM logits at the mask restricted to the label words."""

    logits: torch.Tensor


class PromptClassifier(torch.nn.Module):
    """A masked LM read as a classifier: logit of label ``k`` = the MLM logit of label word ``k`` at the mask.

    The vocabulary projection is only applied at the mask positions (a forward pre-hook on the model's output
    embeddings hands them the mask rows only), which spares the (batch, length, vocabulary) logits of the full
    output; a model whose head does not go through its output embeddings that way gets the full logits, gathered
    afterwards. Either way the result equals the full MLM logits gathered at the mask.

    Packed rows (``spurious.core.train.packing``): ``input_ids`` is one row of texts laid end to end and the packed
    model inputs come as keyword arguments; each text's mask position still counts from its own first token, and the
    text's start is read from ``cu_seq_lens_q``."""

    def __init__(self, mlm: torch.nn.Module, label_word_ids: Sequence[int]) -> None:
        super().__init__()
        self.mlm = mlm
        ids = [int(i) for i in label_word_ids]
        if len(set(ids)) != len(ids) or len(ids) < 2:
            raise ValueError(f"label word ids must be at least two distinct ids, got {ids}")
        self.register_buffer("label_word_ids", torch.tensor(ids, dtype=torch.long), persistent=False)
        self._at: torch.Tensor | None = None  # the mask tokens' indices in the flattened (batch x length) states
        self._shape: tuple[int, int] | None = None
        self._gathered = False
        head = mlm.get_output_embeddings() if hasattr(mlm, "get_output_embeddings") else None
        if isinstance(head, torch.nn.Module):
            head.register_forward_pre_hook(self._gather_at_mask)

    def _gather_at_mask(self, module: torch.nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        hidden = args[0] if args else None
        # only our own forward, and only (batch, length, hidden) states of this input: anything else is left alone
        if self._at is None or not isinstance(hidden, torch.Tensor) or hidden.dim() != 3:
            return None
        if tuple(hidden.shape[:2]) != self._shape:
            return None
        self._gathered = True
        return (hidden.flatten(0, 1)[self._at.to(hidden.device)].unsqueeze(1), *args[1:])

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        mask_positions: torch.Tensor | None = None,
        **packed: Any,
    ) -> PromptOutput:
        if mask_positions is None:
            raise ValueError("PromptClassifier needs mask_positions (the index of each row's mask token)")
        positions = mask_positions.to(input_ids.device)
        if packed:  # one row: each text starts at its cu_seq_lens entry
            at = packed["cu_seq_lens_q"][: len(positions)].long() + positions
        else:
            rows, length = input_ids.shape
            at = torch.arange(rows, device=input_ids.device) * length + positions
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        self._at, self._shape, self._gathered = at, tuple(input_ids.shape), False
        try:
            # no model code reads the mask on the host (packed rows have none: cu_seq_lens bound the texts)
            mask = None if attention_mask is None else model_attention_mask(self.mlm, attention_mask)
            logits = self.mlm(input_ids=input_ids, attention_mask=mask, **extra, **packed).logits
        finally:
            self._at, self._shape = None, None
        at_mask = logits[:, 0] if self._gathered else logits.flatten(0, 1)[at.to(logits.device)]
        return PromptOutput(logits=at_mask[:, self.label_word_ids])


def load_masked_lm(name_or_path: str | os.PathLike, *, from_scratch: bool = False) -> Any:
    """An ``AutoModelForMaskedLM`` of a checkpoint; ``from_scratch``: its architecture with random weights.

    A pretrained checkpoint must hold the masked-LM head: prompt-based fine-tuning starts from the pretrained
    head's word predictions, so a head initialised at random (a bare encoder such as a sentence-embedding model)
    would make the prompt meaningless. It raises ValueError instead."""
    from transformers import AutoModelForMaskedLM

    if from_scratch:
        config = load_config(name_or_path)
        logger.info("%s: masked-LM architecture only, randomly initialised (training from scratch)", name_or_path)
        with quiet_transformers():
            return AutoModelForMaskedLM.from_config(config)
    model, info = from_pretrained(AutoModelForMaskedLM, name_or_path, output_loading_info=True)
    missing = sorted(info.get("missing_keys") or [])
    prefix = f"{model.base_model_prefix}."
    head = [k for k in missing if not k.startswith(prefix)]
    if head:
        architectures = getattr(model.config, "architectures", None)
        raise ValueError(
            f"{name_or_path}: prompt-based fine-tuning needs a checkpoint with a masked-LM head, but this one "
            f"(architectures {architectures}) lacks it: {', '.join(head[:6])} would be newly initialised; use a "
            "masked-LM checkpoint (e.g. bert-base-uncased, roberta-base) or init 'scratch'"
        )
    if missing:
        logger.warning(
            "%s: %d encoder weights were missing and newly initialised (first: %s)",
            name_or_path,
            len(missing),
            ", ".join(missing[:5]),
        )
    return model


def read_prompt_file(model_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The ``prompt.json`` of a saved model directory (template, label_words, label_word_ids, label_names), or
    None for a model of a classification head."""
    path = Path(model_dir) / PROMPT_FILE
    from spurious.core import readers
    from spurious.core.errors import rebuild_advice

    return readers.read_json(path, fix=rebuild_advice(model_dir)) if path.is_file() else None
