"""Hub-layout fixtures for the paper-config rehearsals (``make rehearse``): everything the paper configs download,
built locally and offline, in the exact places the hub code paths look when offline.

* **Models**: every checkpoint in ``hub_layouts.yaml``'s ``models`` becomes a tiny randomly initialised model of
  its family (BERT cased / uncased, RoBERTa, ELECTRA, GPT-NeoX), saved with the heads its hub checkpoint carries,
  in the Hugging Face hub cache layout (``HF_HUB_CACHE/models--org--name/snapshots/REV``, ``refs/main``), so that
  ``from_pretrained("roberta-large")`` resolves it with ``HF_HUB_OFFLINE=1`` and no code of ours changes.
* **Tokenizers**: each model gets a tokenizer of its real kind, trained here with the ``tokenizers`` library on the
  fixture text: WordPiece (BERT, ELECTRA; lower-cased or not) or byte-level BPE with RoBERTa's special tokens and
  offset trimming, or GPT-NeoX's.
* **Datasets**: every hub dataset, config and split in ``hub_layouts.yaml`` becomes a small split with exactly the
  layout's columns, feature types and ClassLabel names, prepared as ``datasets`` caches a hub download
  (``HF_DATASETS_CACHE/org___name/config/0.0.0/HASH``), so that ``datasets.load_dataset(name, config, split=...)``
  in the project's loaders returns it offline. The text is real (SQuAD v1.1 dev, the NQ subset, SST-2, QNLI dev
  from the data mirror); NLI pairs are cut from real sentences with simple cues, labels drawn with a fixed seed.
* **Files** a config reads from a path (GLUE's diagnostic-full.tsv) are written in their own layout.

Everything is deterministic: the same mirror gives the same bytes. ``python tests/rehearse/hub_fixtures.py ROOT``
builds all of it under ROOT (``ROOT/hf/hub``, ``ROOT/hf/datasets``, ``ROOT/files``) and checks that every hub name
the paper configs use is in the layouts.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LAYOUTS = HERE / "hub_layouts.yaml"
PAPER_CONFIGS = sorted((REPO / "configs").glob("paper-*.yaml"))

# Rows per split: small enough for a 2-core rehearsal, large enough for every stage's minimum (two bias segments
# of the overlay's sample size, AFLite's partitions, SpuriousBench's pools).
QA_ROWS = {"train": 240, "validation": 400, "test": 40}
OOD_QA_ROWS = {"train": 160, "validation": 160, "test": 40}
NLI_ROWS = {"train": 600, "validation": 200, "test": 200}
EVAL_ROWS = 60


def load_layouts(path: Path = LAYOUTS) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


# --------------------------------------------------------------------------------------------------------------------
# Names: every hub dataset / config / split and checkpoint the paper configs use must be in the layouts


def _walk(node: Any) -> Iterable[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def config_hub_names(
    config_paths: Iterable[Path] = PAPER_CONFIGS,
) -> tuple[set[tuple[str, str | None, str]], set[str], set[str]]:
    """(hub dataset name, config, split) triples, model checkpoints and data file paths the given configs name."""
    splits: set[tuple[str, str | None, str]] = set()
    checkpoints: set[str] = set()
    files: set[str] = set()
    for path in config_paths:
        for node in _walk(yaml.safe_load(Path(path).read_text())):
            hub = node.get("hub")
            if isinstance(hub, Mapping) and "name" in hub:
                splits.add((hub["name"], hub.get("config"), hub["split"]))
            if "format" in node and isinstance(node.get("path"), str):
                files.add(node["path"])
            ckpt = node.get("checkpoint")
            if isinstance(ckpt, str) and not ckpt.startswith("embedded:"):
                checkpoints.add(ckpt)
    return splits, checkpoints, files


def check_names(layouts: Mapping[str, Any], config_paths: Iterable[Path] = PAPER_CONFIGS) -> list[str]:
    """Every name a config uses that the layouts lack (an empty list when all are covered)."""
    splits, checkpoints, files = config_hub_names(config_paths)
    missing = [f"file {f}" for f in sorted(files) if f not in layouts.get("files", {})]
    for name, config, split in sorted(splits, key=str):
        ds = layouts["datasets"].get(name)
        if ds is None:
            missing.append(f"dataset {name}")
            continue
        configs = ds["configs"]
        if config is None and len(configs) != 1:
            missing.append(f"dataset {name}: no config named but the layouts list {sorted(configs)}")
            continue
        cfg = configs.get(config) if config is not None else next(iter(configs.values()))
        if cfg is None:
            missing.append(f"dataset {name} config {config}")
        elif split not in cfg["splits"]:
            missing.append(f"dataset {name} config {config} split {split}")
    missing += [f"model {c}" for c in sorted(checkpoints) if c not in layouts["models"]]
    return missing


# --------------------------------------------------------------------------------------------------------------------
# Text from the data mirror


def mirror_dir() -> Path:
    mirror = os.environ.get("SPURIOUS_REAL_DATA") or os.environ.get("SPURIOUS_DATA_MIRROR")
    shared = Path(os.environ.get("SPURIOUS_SHARED", REPO.parent / "shared"))
    path = Path(mirror) if mirror else shared / "data"
    if not (path / "squad_v1.1").is_dir():
        raise FileNotFoundError(
            f"{path}: no data mirror with squad_v1.1/ (the fixtures cut their text from it); set SPURIOUS_REAL_DATA"
        )
    return path


class Text:
    """The real records the fixtures are cut from."""

    def __init__(self, mirror: Path):
        import pandas as pd

        from spurious.core.data.squad import load_flat_json, load_squad_json

        self.squad = load_squad_json(mirror / "squad_v1.1" / "dev-v1.1.json.gz")
        self.nq = load_flat_json(mirror / "naturalquestions_isbiased" / "nq_dev_formatted.json.gz")
        self.sst2_train = pd.read_csv(mirror / "sst2" / "train.tsv.gz", sep="\t", quoting=3, keep_default_na=False)
        self.sst2_dev = pd.read_csv(mirror / "sst2" / "dev.tsv", sep="\t", quoting=3, keep_default_na=False)
        self.qnli = pd.read_parquet(mirror / "qnli" / "validation" / "0000.parquet")
        sentences = []
        for context in self.squad["context"].drop_duplicates():
            sentences += [s.strip() for s in re.split(r"(?<=[.!?])\s+", context) if 6 <= len(s.split()) <= 30]
        self.sentences = sorted(set(sentences))
        self.questions = sorted(set(self.qnli["question"]))

    def corpus(self) -> list[str]:
        """What the tokenizers are trained on."""
        return [
            *self.squad["context"].drop_duplicates(),
            *self.squad["question"],
            *self.nq["question"],
            *self.nq["context"].drop_duplicates()[:500],
            *self.sst2_train["sentence"][:20000],
            *self.qnli["sentence"][:3000],
            *self.questions,
        ]

    def squad_articles(self, part: int, parts: int = 4):
        """The SQuAD dev records of one of ``parts`` disjoint groups of articles."""
        titles = sorted(self.squad["title"].unique())
        chosen = set(titles[part::parts])
        return self.squad[self.squad["title"].isin(chosen)].reset_index(drop=True)


# --------------------------------------------------------------------------------------------------------------------
# Tokenizers and models


def prompt_label_words() -> list[str]:
    from spurious.core.train.prompt import PAPER_PROMPTS

    return [w for spec in PAPER_PROMPTS.values() for w in spec.label_words]


def train_tokenizer(family: str, texts: list[str], *, lowercase: bool = False, vocab_size: int = 3000):
    """A tokenizer of the family's real kind trained on ``texts``, wrapped in the family's transformers class."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertTokenizerFast, ElectraTokenizerFast, GPTNeoXTokenizerFast, RobertaTokenizerFast

    if family in ("bert", "electra"):
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=lowercase or None)
        pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        # the WordPiece trainer breaks ties between equally frequent pieces in hash order, so two builds differ;
        # a vocabulary of every character (initial and ##-continuation) and the most frequent words (ties broken
        # alphabetically) is a valid WordPiece vocabulary that is the same on every build
        words: Counter[str] = Counter()
        for text in texts:
            words.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
        chars = sorted({c for w in words for c in w})
        pieces = [*specials, *chars, *(f"##{c}" for c in chars)]
        # the paper prompts' label words are single tokens of the real BERT vocabularies; so they are here
        pieces += list(dict.fromkeys(normalizer.normalize_str(w) for w in prompt_label_words()))
        frequent = sorted((w for w in words if len(w) > 1 and w not in pieces), key=lambda w: (-words[w], w))
        pieces += frequent[: max(0, vocab_size - len(pieces))]
        tok = Tokenizer(models.WordPiece(vocab={p: i for i, p in enumerate(pieces)}, unk_token="[UNK]"))
        tok.normalizer = normalizer
        tok.pre_tokenizer = pre_tokenizer
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)]
        )
        tok.decoder = decoders.WordPiece(prefix="##")
        cls = BertTokenizerFast if family == "bert" else ElectraTokenizerFast
        return cls(
            tokenizer_object=tok, do_lower_case=lowercase, unk_token="[UNK]", sep_token="[SEP]", pad_token="[PAD]",
            cls_token="[CLS]", mask_token="[MASK]", model_max_length=512,
        )
    if family == "roberta":
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(
            texts,
            trainers.BpeTrainer(
                vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
            ),
        )
        # RoBERTa's own post-processor: <s> A </s></s> B </s>, offsets trimmed of the leading-space marker
        tok.post_processor = processors.RobertaProcessing(
            ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")), trim_offsets=True,
            add_prefix_space=False
        )
        return RobertaTokenizerFast(
            tokenizer_object=tok, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
            unk_token="<unk>", pad_token="<pad>", mask_token="<mask>", add_prefix_space=False, trim_offsets=True,
            model_max_length=512,
        )
    if family == "gpt_neox":
        specials = ["<|endoftext|>", "<|padding|>"]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True)
        tok.decoder = decoders.ByteLevel()
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
        tok.train_from_iterator(
            texts,
            trainers.BpeTrainer(
                vocab_size=vocab_size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
            ),
        )
        # Pythia's tokenizer: <|endoftext|> is bos, eos and unk; no padding token is set
        return GPTNeoXTokenizerFast(
            tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>",
            add_prefix_space=False, model_max_length=2048,
        )
    raise ValueError(f"unknown model family {family!r}")


def tiny_model(family: str, vocab_size: int, *, large: bool, seed: int):
    """A randomly initialised model of the family with the heads its hub checkpoint carries."""
    import torch
    from transformers import (
        BertConfig,
        BertForPreTraining,
        ElectraConfig,
        ElectraForPreTraining,
        GPTNeoXConfig,
        GPTNeoXForCausalLM,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    torch.manual_seed(seed)
    size = {
        "hidden_size": 48 if large else 32, "num_hidden_layers": 3 if large else 2,
        "intermediate_size": 96 if large else 64,
    }
    if family == "bert":
        return BertForPreTraining(
            BertConfig(vocab_size=vocab_size, num_attention_heads=2, max_position_embeddings=512, **size)
        )
    if family == "roberta":
        return RobertaForMaskedLM(
            RobertaConfig(
                vocab_size=vocab_size, num_attention_heads=2, max_position_embeddings=514, type_vocab_size=1,
                pad_token_id=1, bos_token_id=0, eos_token_id=2, **size,
            )
        )
    if family == "electra":
        return ElectraForPreTraining(
            ElectraConfig(
                vocab_size=vocab_size, embedding_size=16, num_attention_heads=2, max_position_embeddings=512, **size
            )
        )
    if family == "gpt_neox":
        return GPTNeoXForCausalLM(
            GPTNeoXConfig(
                vocab_size=vocab_size, num_attention_heads=4, max_position_embeddings=2048, rotary_pct=0.25,
                bos_token_id=0, eos_token_id=0, tie_word_embeddings=False, **size,
            )
        )
    raise ValueError(f"unknown model family {family!r}")


def _revision(directory: Path) -> str:
    digest = hashlib.sha1()
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def write_hub_model(
    checkpoint: str, spec: Mapping[str, Any], texts: list[str], hub_cache: Path, tokenizers: dict
) -> Path:
    """The checkpoint's stand-in, in the hub cache layout; the snapshot directory."""
    family = spec["family"]
    key = (family, bool(spec.get("lowercase")))
    if key not in tokenizers:
        tokenizers[key] = train_tokenizer(family, texts, lowercase=bool(spec.get("lowercase")))
    tokenizer = tokenizers[key]
    seed = int(hashlib.sha1(checkpoint.encode()).hexdigest()[:8], 16)
    model = tiny_model(family, len(tokenizer), large=bool(re.search(r"large|12b", checkpoint)), seed=seed)
    repo_dir = hub_cache / ("models--" + checkpoint.replace("/", "--"))
    with tempfile.TemporaryDirectory(dir=hub_cache) as tmp:
        staging = Path(tmp) / "snapshot"
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        revision = _revision(staging)
        snapshot = repo_dir / "snapshots" / revision
        if snapshot.exists():
            shutil.rmtree(snapshot)
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        staging.rename(snapshot)
    (repo_dir / "refs").mkdir(exist_ok=True)
    (repo_dir / "refs" / "main").write_text(revision)
    return snapshot


# --------------------------------------------------------------------------------------------------------------------
# Dataset records


def _rng(*parts: Any) -> random.Random:
    return random.Random(hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest())


def _answers(answers: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"text": t, "answer_start": int(s)} for t, s in zip(answers["text"], answers["answer_start"], strict=True)]


def squad_records(df, n: int) -> list[dict[str, Any]]:
    return [
        {"id": r.id, "title": r.title, "context": r.context, "question": r.question, "answers": _answers(r.answers)}
        for r in df.head(n).itertuples()
    ]


def _whitespace_tokens(text: str) -> list[dict[str, Any]]:
    return [{"tokens": m.group(), "offsets": m.start()} for m in re.finditer(r"\S+", text)]


def mrqa_record(subset: str, qid: str, context: str, question: str, answers: Mapping[str, Any]) -> dict[str, Any]:
    tokens = _whitespace_tokens(context)
    starts = [t["offsets"] for t in tokens]
    detected = []
    for text, start in zip(answers["text"], answers["answer_start"], strict=True):
        start = int(start)
        end = start + len(text) - 1  # MRQA's char spans are inclusive
        first = max(i for i, s in enumerate(starts) if s <= start) if starts and starts[0] <= start else 0
        last = max(i for i, s in enumerate(starts) if s <= end) if starts and starts[0] <= end else 0
        detected.append(
            {"text": text, "char_spans": [{"start": start, "end": end}], "token_spans": [{"start": first, "end": last}]}
        )
    return {
        "subset": subset, "context": context, "context_tokens": tokens, "qid": qid, "question": question,
        "question_tokens": _whitespace_tokens(question), "detected_answers": detected,
        "answers": list(dict.fromkeys(answers["text"])),
    }


NEGATIONS = ("not", "never", "nobody")


def _span(words: list[str], rng: random.Random, low: int = 4) -> list[str]:
    length = rng.randint(min(low, len(words)), max(low, len(words) * 2 // 3))
    start = rng.randint(0, max(0, len(words) - length))
    return words[start : start + length]


CONSTRUCTIONS = ("entailment", "neutral", "contradiction", "unrelated")


def nli_pair(construction: str, premise: str, other: str, rng: random.Random) -> str:
    """A hypothesis with the cues NLI crowd data is known for: a span of the premise (entailment), a negated span
    (contradiction), a span with words of another sentence (neutral), or a span of another sentence alone."""
    words = premise.rstrip(".").split()
    span = _span(words, rng)
    if construction == "entailment":
        return " ".join(span) + "."
    if construction == "contradiction":
        cut = rng.randint(1, max(1, len(span) - 1))
        return " ".join([*span[:cut], rng.choice(NEGATIONS), *span[cut:]]) + "."
    if construction == "neutral":
        return " ".join([*span, *_span(other.rstrip(".").split(), rng, 3)]) + "."
    return " ".join(_span(other.rstrip(".").split(), rng)) + "."


def nli_rows(text: Text, n: int, names: list[str], rng: random.Random, *, unlabeled: int = 0) -> list[dict[str, Any]]:
    """``n`` premise / hypothesis / label rows (``unlabeled`` of them with label -1, as SNLI and the GLUE test splits
    have). ``names`` are the dataset's label names; two-way sets fold neutral and contradiction. A row's hypothesis
    is built the way its label suggests 60 % of the time and any way otherwise, so that every label has rows with
    and without each cue (lexical overlap, negation), as SpuriousBench's feature-free pools need."""
    rows = []
    pool = text.sentences
    for i in range(n):
        premise, other = rng.choice(pool), rng.choice(pool)
        kind = rng.choice(["entailment", "neutral", "contradiction"])
        construction = kind if rng.random() < 0.6 else rng.choice(CONSTRUCTIONS)
        hypothesis = nli_pair(construction, premise, other, rng)
        if i < unlabeled:
            label = -1
        elif kind in names:
            label = names.index(kind)
        else:  # non-entailment / not_entailment
            label = 1
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label})
    return rows


Generator = Callable[[Text, str, str, Mapping[str, Any], random.Random], list[dict[str, Any]]]


def _label_names(features: Mapping[str, Any]) -> list[str]:
    return list(features["label"]["class_label"])


def gen_squad(text: Text, config: str, split: str, layout, rng) -> list[dict[str, Any]]:
    part = {"train": 0, "validation": 1, "test": 1}[split]
    return squad_records(text.squad_articles(part), QA_ROWS[split])


def gen_adversarial_qa(text: Text, config: str, split: str, layout, rng) -> list[dict[str, Any]]:
    df = text.squad_articles(2)
    start = {"train": 0, "validation": OOD_QA_ROWS["train"], "test": OOD_QA_ROWS["train"] + OOD_QA_ROWS["validation"]}
    rows = squad_records(df.iloc[start[split] :], OOD_QA_ROWS[split])
    for row in rows:
        row["id"] = hashlib.sha1(f"advqa/{row['id']}".encode()).hexdigest()
        row["metadata"] = {"split": split, "model_in_the_loop": "Combined"}
        if split == "test":  # the hub's test split has no answers
            row["answers"] = []
    return rows


def gen_mrqa(text: Text, config: str, split: str, layout, rng) -> list[dict[str, Any]]:
    n = OOD_QA_ROWS[split]
    offset = {"train": 0, "validation": n, "test": 2 * n}[split]
    rows = []
    for r in text.nq.iloc[offset : offset + n].itertuples():
        rows.append(mrqa_record("NaturalQuestionsShort", str(r.id), r.context, r.question, r.answers))
    trivia = text.squad_articles(3)
    for r in trivia.iloc[offset : offset + n].itertuples():
        rows.append(mrqa_record("TriviaQA-web", f"tqa-{r.id}", r.context, r.question, r.answers))
    # a third subset, which the subset filter must leave out
    for r in text.squad_articles(0).iloc[:20].itertuples():
        rows.append(mrqa_record("SQuAD", f"sq-{r.id}", r.context, r.question, r.answers))
    rng.shuffle(rows)
    return rows


def gen_nli(text: Text, config: str, split: str, layout, rng) -> list[dict[str, Any]]:
    names = _label_names(layout["features"])
    test = split.startswith("test")
    n = NLI_ROWS["train" if split.startswith("train") else "test" if test else "validation"]
    unlabeled = 3 if config == "plain_text" else 0  # SNLI's pairs without a gold label; GLUE's test labels: gen_glue
    return nli_rows(text, n, names, rng, unlabeled=unlabeled)


def gen_glue(text: Text, config: str, split: str, layout, rng) -> list[dict[str, Any]]:
    names = _label_names(layout["features"])
    hidden = split.startswith("test")  # GLUE's test labels are hidden: -1
    if config == "mnli":
        rows = gen_nli(text, config, split, layout, rng)
    elif config == "qnli":
        q = text.qnli.sample(frac=1.0, random_state=7).reset_index(drop=True)
        start = {"train": 0, "validation": NLI_ROWS["train"], "test": NLI_ROWS["train"] + NLI_ROWS["validation"]}[split]
        n = NLI_ROWS[split]
        rows = [
            {"question": r.question, "sentence": r.sentence, "label": int(r.label)}
            for r in q.iloc[start : start + n].itertuples()
        ]
    elif config == "qqp":
        rows = []
        for _ in range(NLI_ROWS[split]):
            q1 = rng.choice(text.questions)
            duplicate = rng.random() < 0.4
            if duplicate:
                words = q1.rstrip("?").split()
                drop = rng.randrange(len(words))
                q2 = " ".join(w for i, w in enumerate(words) if i != drop or len(words) < 4).lower() + "?"
            else:
                q2 = rng.choice(text.questions)
            rows.append({"question1": q1, "question2": q2, "label": int(duplicate)})
    elif config == "sst2":
        df = text.sst2_dev if split != "train" else text.sst2_train.sample(n=8000, random_state=3)
        rows = [{"sentence": r.sentence, "label": int(r.label)} for r in df.itertuples()]
    else:
        raise ValueError(f"no fixture generator for nyu-mll/glue config {config}")
    for i, row in enumerate(rows):
        row["idx"] = i
        if hidden:
            row["label"] = -1
    assert all(row["label"] < len(names) for row in rows)
    return rows


HANS_HEURISTICS = ("lexical_overlap", "subsequence", "constituent")


def hans_rows(text: Text, rng: random.Random) -> list[dict[str, Any]]:
    """HANS-like pairs: a premise, a hypothesis built from its words by one of the three heuristics, half of them
    entailed (label 0), half not (1)."""
    rows = []
    for i in range(EVAL_ROWS * 2):
        premise = rng.choice(text.sentences)
        words = premise.rstrip(".").split()
        heuristic = HANS_HEURISTICS[i % 3]
        label = (i // 3) % 2  # 0 entailment, 1 non-entailment
        if heuristic == "lexical_overlap":
            chosen = rng.sample(words, k=min(len(words), 5))
            hypothesis = " ".join(chosen if label else sorted(chosen, key=words.index))
        elif heuristic == "subsequence":
            hypothesis = " ".join(_span(words, rng))
        else:
            hypothesis = " ".join(words[len(words) // 2 :])
        hypothesis += "."
        rows.append(
            {
                "premise": premise, "hypothesis": hypothesis, "label": label,
                "parse_premise": f"(ROOT (S {premise}))", "parse_hypothesis": f"(ROOT (S {hypothesis}))",
                "binary_parse_premise": f"( {premise} )", "binary_parse_hypothesis": f"( {hypothesis} )",
                "heuristic": heuristic, "subcase": f"{heuristic[:2]}_fixture_{label}", "template": f"temp{i % 5}",
            }
        )
    return rows


def hans_tsv(text: Text, path: Path, spec: Mapping[str, Any]) -> None:
    """The authors' heuristics_evaluation_set.txt layout: a header row, tab-separated, label names as text."""
    names = list(spec["label_names"])
    lines = ["\t".join(spec["columns"])]
    for i, row in enumerate(hans_rows(text, _rng("hans_tsv"))):
        values = {
            "gold_label": names[row["label"]], "sentence1": row["premise"], "sentence2": row["hypothesis"],
            "sentence1_parse": row["parse_premise"], "sentence2_parse": row["parse_hypothesis"],
            "sentence1_binary_parse": row["binary_parse_premise"],
            "sentence2_binary_parse": row["binary_parse_hypothesis"],
            "pairID": f"ex{i}", "heuristic": row["heuristic"], "subcase": row["subcase"], "template": row["template"],
        }
        lines.append("\t".join(values[c] for c in spec["columns"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def gen_anli(text: Text, config: str, split: str, layout, rng) -> list[dict[str, Any]]:
    names = _label_names(layout["features"])
    n = 120 if split.startswith("train") else EVAL_ROWS
    rows = nli_rows(text, n, names, rng)
    for i, row in enumerate(rows):
        row["uid"] = hashlib.sha1(f"anli/{split}/{i}".encode()).hexdigest()[:8] + f"-{i:04d}"
        row["reason"] = "" if split.startswith("train") and i % 2 else "The statement copies part of the context."
    return rows


def gen_stress(text: Text, config: str, split: str, layout, rng) -> list[dict[str, Any]]:
    names = _label_names(layout["features"])
    rows = []
    for row in nli_rows(text, EVAL_ROWS, names, rng):
        rows.append(
            {
                "sentence1": row["premise"], "sentence2": row["hypothesis"], "label": row["label"], "dtype": split,
                "gold_label": names[row["label"]],
            }
        )
    return rows


GENERATORS: dict[str, Generator] = {
    "rajpurkar/squad": gen_squad,
    "UCLNLP/adversarial_qa": gen_adversarial_qa,
    "mrqa-workshop/mrqa": gen_mrqa,
    "stanfordnlp/snli": gen_nli,
    "nyu-mll/glue": gen_glue,
    "facebook/anli": gen_anli,
    "pietrolesci/stress_tests_nli": gen_stress,
}


# --------------------------------------------------------------------------------------------------------------------
# Datasets' cache layout


def features_of(spec: Mapping[str, Any]):
    """``datasets.Features`` from the layouts' notation."""
    import datasets

    def one(t: Any):
        if isinstance(t, str):
            return datasets.Value(t)
        if "class_label" in t:
            return datasets.ClassLabel(names=list(t["class_label"]))
        if "sequence" in t:
            inner = t["sequence"]
            return datasets.Sequence(
                {k: one(v) for k, v in inner.items()} if isinstance(inner, Mapping) else one(inner)
            )
        return {k: one(v) for k, v in t.items()}

    return datasets.Features({name: one(t) for name, t in spec.items()})


def columnar(spec: Any, value: Any) -> Any:
    """A record's value in the hub's encoding: a ``{sequence: {...}}`` field (a Sequence of a dict) is a dict of
    lists, whatever the record holds (a list of dicts)."""
    if isinstance(spec, Mapping) and "sequence" in spec and isinstance(spec["sequence"], Mapping):
        inner = spec["sequence"]
        return {k: [columnar(t, item[k]) for item in value] for k, t in inner.items()}
    if isinstance(spec, Mapping) and "sequence" not in spec and "class_label" not in spec:
        return {k: columnar(t, value[k]) for k, t in spec.items()}
    return value


def write_hub_dataset(
    name: str, config: str, layout: Mapping[str, Any], rows_by_split: dict[str, list], cache: Path
) -> Path:
    """One config of a hub dataset, prepared as ``datasets`` caches a download; the prepared directory."""
    from datasets import Dataset
    from datasets.packaged_modules.parquet.parquet import Parquet

    features = features_of(layout["features"])
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        files = {}
        for split, rows in rows_by_split.items():
            columns = {col: [columnar(t, row[col]) for row in rows] for col, t in layout["features"].items()}
            path = Path(tmp) / f"{split}.parquet"
            Dataset.from_dict(columns, features=features).to_parquet(str(path))
            files[split] = str(path)
        # the cache folder of a hub dataset is named by the commit it was downloaded at: a commit-like hash of the
        # fixture's bytes, which the download rule records as the dataset's revision
        commit = hashlib.sha1(b"".join(Path(files[s]).read_bytes() for s in sorted(files))).hexdigest()
        builder = Parquet(
            cache_dir=str(Path(tmp) / "build"), dataset_name=name.split("/")[-1], config_name=config,
            data_files=files, hash=commit, features=features,
        )
        builder.download_and_prepare()
        namespace, dataset = name.split("/")
        target = cache / f"{namespace}___{dataset}" / config / "0.0.0" / commit
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(builder.cache_dir, target)
    return target


def diagnostics_tsv(text: Text, path: Path, spec: Mapping[str, Any]) -> None:
    """GLUE's diagnostic-full.tsv layout: the four coarse category columns hold a fine category or nothing."""
    rng = _rng("glue_diagnostics")
    names = list(spec["label_names"])
    fine = {
        "Lexical Semantics": "Lexical entailment", "Predicate-Argument Structure": "Coordination scope",
        "Logic": "Negation", "Knowledge": "World knowledge",
    }
    lines = ["\t".join(spec["columns"])]
    for i, row in enumerate(nli_rows(text, EVAL_ROWS * 2, names, rng)):
        cats = [fine[c] if (i + j) % 3 == 0 else "" for j, c in enumerate(fine)]
        if not any(cats):
            cats[i % 4] = list(fine.values())[i % 4]
        values = {**dict(zip(fine, cats, strict=True)), "Domain": "Fixture", "Premise": row["premise"],
                  "Hypothesis": row["hypothesis"], "Label": names[row["label"]]}
        lines.append("\t".join(values[c] for c in spec["columns"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


FILE_WRITERS = {"hans": hans_tsv, "glue_diagnostics": diagnostics_tsv}


# --------------------------------------------------------------------------------------------------------------------


def build(root: Path, *, layouts: Mapping[str, Any] | None = None, log=print) -> Path:
    """Every fixture under ``root``; a stamp file records the layouts' and this file's hash, so that a rebuild
    happens only when either changes."""
    layouts = layouts or load_layouts()
    missing = check_names(layouts)
    if missing:
        raise SystemExit("the paper configs name what tests/rehearse/hub_layouts.yaml lacks: " + "; ".join(missing))
    stamp = root / "fixtures.sha1"
    digest = hashlib.sha1(LAYOUTS.read_bytes() + Path(__file__).read_bytes()).hexdigest()
    if stamp.exists() and stamp.read_text() == digest:
        log(f"fixtures up to date in {root}")
        return root
    if root.exists():
        shutil.rmtree(root)
    hub, cache, files = root / "hf" / "hub", root / "hf" / "datasets", root / "files"
    for d in (hub, cache, files):
        d.mkdir(parents=True)
    text = Text(mirror_dir())
    corpus = text.corpus()
    tokenizers: dict = {}
    for checkpoint, spec in layouts["models"].items():
        log(f"model {checkpoint} ({spec['family']})")
        write_hub_model(checkpoint, spec, corpus, hub, tokenizers)
    for name, ds in layouts["datasets"].items():
        for config, layout in ds["configs"].items():
            log(f"dataset {name} {config}: {', '.join(layout['splits'])}")
            rows = {
                split: GENERATORS[name](text, config, split, layout, _rng(name, config, split))
                for split in layout["splits"]
            }
            write_hub_dataset(name, config, layout, rows, cache)
    for rel, spec in layouts.get("files", {}).items():
        log(f"file {rel}")
        FILE_WRITERS[spec["kind"]](text, files / rel, spec)
    stamp.write_text(digest)
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="where the fixtures go (rebuilt only when the layouts change)")
    args = parser.parse_args(argv)
    build(args.root.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
