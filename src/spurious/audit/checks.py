"""What both audits check of their inputs, below both (:mod:`spurious.audit.classification` and
:mod:`spurious.audit.qa` import it, neither imports the other): the error a bad input raises
(:class:`AuditInputError`), that a local model folder carries its tokenizer (:func:`check_tokenizer_files`), and the
model's ``transformers`` config (:func:`read_model_config`)."""

from __future__ import annotations

import os
from typing import Any

from spurious.core.errors import InputError

TOKENIZER_FILES = (
    "tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model", "tokenizer.model"
)


class AuditInputError(InputError, ValueError):
    """A problem with the audit's inputs, described in one line that names it and the fix (the CLI: exit 2)."""


def check_tokenizer_files(model: str | os.PathLike) -> None:
    """AuditInputError when a local transformers folder has no tokenizer files: transformers 5 then builds an empty
    tokenizer from ``config.json`` alone instead of failing, and every prediction would be garbage."""
    from spurious.core.models import resolve_model

    local = resolve_model(model)
    if os.path.isdir(local) and not any(os.path.isfile(os.path.join(local, f)) for f in TOKENIZER_FILES):
        raise AuditInputError(
            f"{model}: the folder has no tokenizer files ({', '.join(TOKENIZER_FILES)}); save the tokenizer beside the "
            "model (tokenizer.save_pretrained)"
        )


def read_model_config(model: str | os.PathLike) -> Any:
    """The model's ``transformers`` config; AuditInputError when transformers cannot read one there."""
    from spurious.core.models import ModelResolutionError, load_config

    try:
        return load_config(model)
    except ModelResolutionError:  # no such folder, an unknown embedded name: its own one line
        raise
    except (OSError, ValueError) as exc:
        raise AuditInputError(f"{model}: not a model folder or hub id that transformers can read ({exc})") from None
