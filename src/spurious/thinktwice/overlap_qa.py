"""A lexical-overlap bias model for extractive QA: a span predictor that sees the context and *where* the question's
words occur in it, but not what the question asks.

Think Twice's bias models (App. B.2.1) are the main architecture trained from random weights on the biased segment
for 88k steps; what they learn is the shortcut, because they never become competent readers. On a CPU budget neither
random weights (which learn nothing in a few hundred steps) nor the pretrained encoder (which learns reading
comprehension before any shortcut) reproduces that (docs/measured-results.md). This model is restricted by
construction instead (the issue's "restrict it" option; in the spirit of Clark et al.'s bias-only models):

* **Input per context token**: its frozen word-piece embedding (taken from the main model's checkpoint, so the
  vocabulary is the main model's: the logits align with its windows), projected to ``hidden_size``; whether the
  same token occurs in the question (exact match); the largest cosine similarity between its embedding and any
  question token's (soft match). Question tokens themselves enter only through these two features: their
  embeddings are zeroed, so the model cannot learn what kind of answer a question asks for.
* **Encoder**: a BiLSTM over the window (``num_layers`` layers, ``hidden_size`` per direction), then a linear
  start/end head; the [CLS] position (the no-answer target of windows without the answer) has its own indicator.

Trained like any bias model (``train_qa`` with ``init="overlap"``), it learns *answers lie next to words of the
question*, which is the word-dist and sim-word shortcut. It is saved and loaded with ``save_pretrained`` /
``AutoModelForQuestionAnswering.from_pretrained`` (the config's ``model_type`` is registered on import of this
module), so the feature-logit and prediction rules treat it like any other QA model.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForQuestionAnswering, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import QuestionAnsweringModelOutput

MODEL_TYPE = "spurious_overlap_qa"
N_FEATURES = 4  # exact match, soft match, is-context, is-[CLS]


class OverlapQAConfig(PretrainedConfig):
    model_type = MODEL_TYPE

    def __init__(
        self,
        vocab_size: int = 30522,
        embedding_dim: int = 384,
        hidden_size: int = 64,
        num_layers: int = 1,
        dropout: float = 0.1,
        cls_token_id: int = 101,
        sep_token_id: int = 102,
        pad_token_id: int = 0,
        embeddings_from: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.vocab_size = vocab_size
        self.embedding_dim = embedding_dim
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = dropout
        self.cls_token_id = cls_token_id
        self.embeddings_from = embeddings_from
        super().__init__(pad_token_id=pad_token_id, sep_token_id=sep_token_id, **kwargs)


class OverlapQAModel(PreTrainedModel):
    """See the module docstring. ``forward`` takes the usual QA inputs and returns start/end logits."""

    config_class = OverlapQAConfig
    base_model_prefix = "overlap"

    def __init__(self, config: OverlapQAConfig) -> None:
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_dim)
        self.embeddings.weight.requires_grad_(False)  # frozen: the model may not learn new word meanings
        self.project = nn.Linear(config.embedding_dim, config.hidden_size)
        self.encoder = nn.LSTM(
            config.hidden_size + N_FEATURES,
            config.hidden_size,
            num_layers=config.num_layers,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
            bidirectional=True,
            batch_first=True,
        )
        self.dropout = nn.Dropout(config.dropout)
        self.qa_outputs = nn.Linear(2 * config.hidden_size, 2)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        # Linear layers as torch initialises them; the LSTM keeps torch's uniform init; the embeddings are copied in.
        if isinstance(module, nn.Linear):
            module.reset_parameters()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def token_features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(embeddings [B, W, E], features [B, W, 4], context mask [B, W])`` of a batch of windows.

        The question is every non-special token before the first separator; the context every non-special,
        attended token after it (BERT's ``[CLS] q [SEP] c [SEP]`` and RoBERTa's ``<s> q </s></s> c </s>`` alike).
        """
        width = input_ids.shape[1]
        positions = torch.arange(width, device=input_ids.device)[None, :]
        first_sep = (input_ids == self.config.sep_token_id).int().argmax(dim=1)[:, None]
        c = self.config
        ordinary = (
            (input_ids != c.cls_token_id) & (input_ids != c.sep_token_id) & (input_ids != c.pad_token_id)
        ) & attention_mask.bool()
        question = ordinary & (positions < first_sep)
        context = ordinary & (positions > first_sep)
        exact = ((input_ids[:, :, None] == input_ids[:, None, :]) & question[:, None, :]).any(-1) & context
        embedded = self.embeddings(input_ids).detach()  # frozen even where a loader re-enabled its gradient
        unit = nn.functional.normalize(embedded.float(), dim=-1)
        similarity = (unit @ unit.transpose(1, 2)).masked_fill(~question[:, None, :], -1.0).amax(-1)
        soft = similarity.clamp(min=0.0) * context
        is_cls = input_ids == self.config.cls_token_id
        features = torch.stack([exact.float(), soft, context.float(), is_cls.float()], dim=-1)
        return embedded, features, context

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,  # accepted for the QA interface; segments come from [SEP]
        output_hidden_states: bool = False,
        return_dict: bool | None = None,
        **_: Any,
    ) -> QuestionAnsweringModelOutput:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        embedded, features, context = self.token_features(input_ids, attention_mask)
        words = self.project(embedded) * context[..., None]  # question tokens: features only
        inputs = self.dropout(torch.cat([words, features.to(words.dtype)], dim=-1))
        lengths = attention_mask.sum(dim=1).clamp(min=1)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None, :]
        if not torch.equal(attention_mask.bool(), positions < lengths[:, None]):
            raise ValueError(
                "the overlap bias model packs right-padded windows only; this batch is padded on the left (a tokenizer "
                "with padding_side='left'): use a right-padding tokenizer for the bias model's checkpoint"
            )
        lengths = lengths.cpu()
        packed = nn.utils.rnn.pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        encoded, _ = self.encoder(packed)
        hidden, _ = nn.utils.rnn.pad_packed_sequence(encoded, batch_first=True, total_length=input_ids.shape[1])
        logits = self.qa_outputs(self.dropout(hidden))
        start, end = logits.unbind(dim=-1)
        return QuestionAnsweringModelOutput(
            start_logits=start.contiguous(),
            end_logits=end.contiguous(),
            hidden_states=(hidden,) if output_hidden_states else None,
        )


def register() -> None:
    """Make ``AutoConfig``/``AutoModelForQuestionAnswering`` know this model type (idempotent)."""
    with contextlib.suppress(ValueError):  # already registered
        AutoConfig.register(MODEL_TYPE, OverlapQAConfig)
    with contextlib.suppress(ValueError):
        AutoModelForQuestionAnswering.register(OverlapQAConfig, OverlapQAModel)


register()


def from_checkpoint(model_name_or_path: str, *, hidden_size: int = 64, num_layers: int = 1) -> OverlapQAModel:
    """A fresh overlap model whose frozen embeddings (and vocabulary) are those of ``model_name_or_path``.

    The other weights are drawn from torch's global RNG, which ``train_qa`` seeds first.
    """
    from transformers import AutoModel

    from spurious.core.models import from_pretrained, load_tokenizer

    tokenizer = load_tokenizer(model_name_or_path)
    encoder = from_pretrained(AutoModel, model_name_or_path)
    weights = encoder.get_input_embeddings().weight.detach().clone()
    missing = [name for name in ("cls_token_id", "sep_token_id", "pad_token_id") if getattr(tokenizer, name) is None]
    if missing:
        raise ValueError(
            f"init 'overlap' needs a tokenizer with [CLS], [SEP] and padding tokens; {model_name_or_path} has no "
            f"{', '.join(missing)}"
        )
    config = OverlapQAConfig(
        vocab_size=weights.shape[0],
        embedding_dim=weights.shape[1],
        hidden_size=hidden_size,
        num_layers=num_layers,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        embeddings_from=str(model_name_or_path),
    )
    model = OverlapQAModel(config)
    with torch.no_grad():
        model.embeddings.weight.copy_(weights)
    return model
