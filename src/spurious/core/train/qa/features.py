"""Featurisation of QA records into windows (training and prediction) and the post-processing of span logits into
answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from spurious.core.train import packing
from spurious.core.train.qa.settings import (
    resolve_settings,
)
from spurious.core.train.training import padded_width


@dataclass
class QAFeatures:
    """Tokenised sliding windows of a QA frame (unpadded; batches are padded when collated).

    ``context_offsets[i]`` is an ``(n_tokens, 2)`` array of character offsets into the example's context, ``-1`` for
    tokens outside the context (question, special tokens), which post-processing must never pick.

    The optional fields are filled by ``featurize`` (hand-built features may leave them out): ``sequence_ids[i]`` holds
    the tokenizer's sequence id of every token (``-1`` for special tokens; the question is sequence 0 with right
    padding, 1 with left padding), ``cls_index[i]`` the position of the CLS token (the label of windows without the
    answer), and ``max_length``/``stride``/``tokenizer_name``/``vocab_size`` record how the windows were made, so that
    logits stored per feature (``spurious.core.train.logits``) can be checked against the features that consume them.
    """

    input_ids: list[np.ndarray]
    token_type_ids: list[np.ndarray] | None
    context_offsets: list[np.ndarray]
    example_index: np.ndarray
    start_positions: np.ndarray | None
    end_positions: np.ndarray | None
    example_ids: list[str]
    contexts: list[str]
    pad_token_id: int
    pad_token_type_id: int = 0
    pad_on_right: bool = True
    sequence_ids: list[np.ndarray] | None = None
    cls_index: np.ndarray | None = None
    max_length: int | None = None
    stride: int | None = None
    tokenizer_name: str | None = None
    vocab_size: int | None = None

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.fromiter((len(x) for x in self.input_ids), dtype=np.int64, count=len(self.input_ids))

    @property
    def question_sequence_id(self) -> int:
        """The sequence id of the question: ``featurize`` puts it first with right padding, second with left."""
        return 0 if self.pad_on_right else 1

    def batch_width(
        self, lengths: np.ndarray, pad_to: int | None = None, multiple: int = 1, packed: bool = False
    ) -> int:
        """The sequence length of a collated batch of windows of ``lengths`` tokens (``collate``'s rule): its padded
        width, or with ``packed`` the length of its packed row (``spurious.core.train.packing.row_length``, the windows
        in a layout ``max_length`` wide)."""
        if packed:
            return packing.row_length(lengths, self.batch_width(lengths, pad_to=self.max_length))
        return padded_width(max(int(np.max(lengths)), pad_to or 0), multiple, self.max_length)

    def collate(
        self,
        indices: Sequence[int] | np.ndarray,
        pad_to: int | None = None,
        multiple: int = 1,
        packed_offset: int | None = None,
    ) -> dict[str, torch.Tensor]:
        """Pad the windows ``indices`` into a batch (to the longest one, or to ``pad_to``; rounded up to ``multiple``
        but not beyond ``max_length``: ``spurious.core.train.training.padded_width``), with labels if present.

        ``packed_offset`` (not None for a model that runs packed attention:
        ``spurious.core.train.packing.position_offset``) lays the windows end to end instead (``packing.pack``,
        positions counting from it); the ``[B, W]`` layout the losses read is then ``max_length`` wide, one shape
        whatever the windows (``pad_to`` and ``multiple`` do not apply: there is no padding to round).

        With left padding the label positions move right by the padding added, so they still point at the same token.
        Besides the model inputs, the batch holds boolean ``[B, W]`` masks for training objectives that treat token
        kinds differently: ``context_mask`` (tokens with context offsets), ``cls_mask`` (the CLS position; position 0
        of the window when ``cls_index`` is unknown) and, when ``sequence_ids`` is known, ``question_mask``.
        """
        if packed_offset is not None:
            batch = self.collate(indices, pad_to=self.max_length)
            return packing.pack(batch, position_offset=packed_offset, pad_token_id=self.pad_token_id)
        rows = [self.input_ids[i] for i in indices]
        width = self.batch_width(np.array([len(r) for r in rows]), pad_to, multiple)
        n = len(rows)
        input_ids = np.full((n, width), self.pad_token_id, dtype=np.int64)
        attention = np.zeros((n, width), dtype=np.int64)
        types = np.full((n, width), self.pad_token_type_id, dtype=np.int64) if self.token_type_ids is not None else None
        context = np.zeros((n, width), dtype=bool)
        question = np.zeros((n, width), dtype=bool) if self.sequence_ids is not None else None
        cls = np.zeros((n, width), dtype=bool)
        shift = np.zeros(n, dtype=np.int64)
        for j, (i, row) in enumerate(zip(indices, rows, strict=True)):
            sl = slice(0, len(row)) if self.pad_on_right else slice(width - len(row), width)
            shift[j] = 0 if self.pad_on_right else width - len(row)
            input_ids[j, sl] = row
            attention[j, sl] = 1
            if types is not None:
                types[j, sl] = self.token_type_ids[i]
            context[j, sl] = self.context_offsets[i][:, 0] != -1
            if question is not None:
                question[j, sl] = self.sequence_ids[i] == self.question_sequence_id
            cls[j, shift[j] + (int(self.cls_index[i]) if self.cls_index is not None else 0)] = True
        batch = {"input_ids": torch.from_numpy(input_ids), "attention_mask": torch.from_numpy(attention)}
        if types is not None:
            batch["token_type_ids"] = torch.from_numpy(types)
        batch["context_mask"] = torch.from_numpy(context)
        batch["cls_mask"] = torch.from_numpy(cls)
        if question is not None:
            batch["question_mask"] = torch.from_numpy(question)
        if self.start_positions is not None and self.end_positions is not None:
            idx = np.asarray(indices)
            batch["start_positions"] = torch.from_numpy(self.start_positions[idx] + shift)
            batch["end_positions"] = torch.from_numpy(self.end_positions[idx] + shift)
        return batch


def _first_answer(answers: Mapping[str, Any]) -> tuple[int, str] | None:
    texts, starts = answers["text"], answers["answer_start"]
    if len(texts) == 0:
        return None
    return int(starts[0]), str(texts[0])


def featurize(
    frame: pd.DataFrame,
    tokenizer: Any,
    *,
    max_length: int = 384,
    stride: int = 128,
    labels: bool = True,
    chunk_size: int = 2000,
) -> QAFeatures:
    """Split every (question, context) pair into overlapping windows and, with ``labels``, label each window.

    Labels follow run_qa.py with one fix: the start/end search stays inside the context tokens (run_qa walks past the
    last context token into [SEP]/padding when the answer starts in the final token of a window).
    """
    pad_on_right = tokenizer.padding_side == "right"
    ctx_seq = 1 if pad_on_right else 0
    cls_id = tokenizer.cls_token_id
    questions = [str(q).lstrip() for q in frame["question"]]
    contexts = [str(c) for c in frame["context"]]
    answers = list(frame["answers"]) if labels else None
    want_types = "token_type_ids" in tokenizer.model_input_names
    out_ids: list[np.ndarray] = []
    out_types: list[np.ndarray] = []
    out_offsets: list[np.ndarray] = []
    out_example: list[int] = []
    out_seq: list[np.ndarray] = []
    out_cls: list[int] = []
    starts: list[int] = []
    ends: list[int] = []
    for lo in range(0, len(questions), chunk_size):
        qs, cs = questions[lo : lo + chunk_size], contexts[lo : lo + chunk_size]
        try:
            enc = tokenizer(
                qs if pad_on_right else cs,
                cs if pad_on_right else qs,
                truncation="only_second" if pad_on_right else "only_first",
                max_length=max_length,
                stride=stride,
                return_overflowing_tokens=True,
                return_offsets_mapping=True,
                return_token_type_ids=want_types,
                padding=False,
            )
        except Exception as exc:  # the fast tokenizers' message does not say which setting to change
            raise ValueError(
                f"tokenising questions {lo}..{lo + len(qs) - 1} with max_length={max_length}, stride={stride} failed "
                f"({exc}); a question may be too long for the window: raise max_length or lower stride"
            ) from exc
        for i, sample in enumerate(enc["overflow_to_sample_mapping"]):
            ex = lo + int(sample)
            ids = np.asarray(enc["input_ids"][i], dtype=np.int64)
            seq_ids = np.array([-1 if s is None else s for s in enc.sequence_ids(i)], dtype=np.int8)
            offsets = np.asarray(enc["offset_mapping"][i], dtype=np.int64).reshape(-1, 2)
            in_ctx = seq_ids == ctx_seq
            offsets[~in_ctx] = -1
            out_ids.append(ids)
            if want_types:
                out_types.append(np.asarray(enc["token_type_ids"][i], dtype=np.int64))
            out_offsets.append(offsets)
            out_example.append(ex)
            out_seq.append(seq_ids)
            cls_index = int(np.flatnonzero(ids == cls_id)[0]) if cls_id is not None and (ids == cls_id).any() else 0
            out_cls.append(cls_index)
            if answers is None:
                continue
            start_tok = end_tok = cls_index
            first = _first_answer(answers[ex])
            ctx_tokens = np.flatnonzero(in_ctx)
            if first is not None and len(ctx_tokens):
                start_char, text = first
                end_char = start_char + len(text)
                if offsets[ctx_tokens[0], 0] <= start_char and offsets[ctx_tokens[-1], 1] >= end_char:
                    # last context token starting at or before the answer, first one ending at or after it
                    start_tok = int(ctx_tokens[offsets[ctx_tokens, 0] <= start_char][-1])
                    end_tok = int(ctx_tokens[offsets[ctx_tokens, 1] >= end_char][0])
            starts.append(start_tok)
            ends.append(end_tok)
    pad_type = getattr(tokenizer, "pad_token_type_id", 0) or 0
    return QAFeatures(
        input_ids=out_ids,
        token_type_ids=out_types if want_types else None,
        context_offsets=out_offsets,
        example_index=np.asarray(out_example, dtype=np.int64),
        start_positions=np.asarray(starts, dtype=np.int64) if answers is not None else None,
        end_positions=np.asarray(ends, dtype=np.int64) if answers is not None else None,
        example_ids=[str(i) for i in frame["id"]],
        contexts=contexts,
        pad_token_id=int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
        pad_token_type_id=int(pad_type),
        pad_on_right=pad_on_right,
        sequence_ids=out_seq,
        cls_index=np.asarray(out_cls, dtype=np.int64),
        max_length=int(max_length),
        stride=int(stride),
        tokenizer_name=str(getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__),
        vocab_size=len(tokenizer),
    )


def training_features(
    frame: pd.DataFrame,
    tokenizer: Any,
    settings: Mapping[str, Any] | None = None,
    *,
    tokenizer_name: str | None = None,
) -> QAFeatures:
    """The labelled windows ``train_qa`` trains on; the one place that decides them.

    Per-feature logits of bias and teacher models (``infer_feature_logits``) are addressed by the index of these
    windows, so producer and consumer must call this same function with the same ``max_length``/``stride`` (the only
    settings that matter here) and the same tokenizer. ``tokenizer_name`` is recorded on the features for their
    fingerprint: the model name *as configured* (``train_qa`` records ``model_name_or_path``), not the tokenizer's
    resolved path, which differs between machines for embedded and local models.
    """
    s = resolve_settings(settings)
    features = featurize(frame, tokenizer, max_length=int(s["max_length"]), stride=int(s["stride"]), labels=True)
    if tokenizer_name is not None:
        features.tokenizer_name = str(tokenizer_name)
    return features


# ---------------------------------------------------------------------------------------------------------------------
# Post-processing
# ---------------------------------------------------------------------------------------------------------------------


def best_span(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    context_offsets: np.ndarray,
    *,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> tuple[float, int, int] | None:
    """The best (score, start token, end token) of one window, or None if no candidate is valid.

    Candidates are the ``n_best`` highest start and end logits (run_qa order: descending, ties by later index);
    a pair is valid if both tokens lie in the context, end >= start and it spans at most ``max_answer_length`` tokens.
    Among equal scores the first pair in (start rank, end rank) order wins, as run_qa's stable sort does.
    """
    n = min(len(start_logits), len(end_logits), len(context_offsets))
    start_logits, end_logits = np.asarray(start_logits[:n], float), np.asarray(end_logits[:n], float)
    in_ctx = context_offsets[:n, 0] >= 0
    s_idx = np.argsort(start_logits, kind="stable")[::-1][:n_best]
    e_idx = np.argsort(end_logits, kind="stable")[::-1][:n_best]
    s, e = np.meshgrid(s_idx, e_idx, indexing="ij")
    valid = in_ctx[s] & in_ctx[e] & (e >= s) & (e - s + 1 <= max_answer_length)
    if not valid.any():
        return None
    scores = np.where(valid, start_logits[s] + end_logits[e], -np.inf)
    k = int(np.argmax(scores))
    return float(scores.flat[k]), int(s.flat[k]), int(e.flat[k])


def postprocess_predictions(
    features: QAFeatures,
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    *,
    n_best: int = 20,
    max_answer_length: int = 30,
) -> dict[str, str]:
    """Map per-window logits (unpadded, aligned with ``features``) to one answer string per example."""
    best: dict[int, tuple[float, int, int, int]] = {}
    for f in range(len(features)):
        span = best_span(
            start_logits[f],
            end_logits[f],
            features.context_offsets[f],
            n_best=n_best,
            max_answer_length=max_answer_length,
        )
        if span is None:
            continue
        ex = int(features.example_index[f])
        if ex not in best or span[0] > best[ex][0]:
            best[ex] = (span[0], f, span[1], span[2])
    predictions: dict[str, str] = {}
    for ex, example_id in enumerate(features.example_ids):
        if ex not in best:
            predictions[example_id] = ""
            continue
        _, f, s, e = best[ex]
        offsets = features.context_offsets[f]
        predictions[example_id] = features.contexts[ex][offsets[s, 0] : offsets[e, 1]]
    return predictions


