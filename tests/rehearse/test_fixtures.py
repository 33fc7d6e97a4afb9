"""The rehearsal fixtures themselves: names copied from the paper configs, the hub loaders reading them as they read
the hub, and QA featurisation with a RoBERTa-kind (byte-level BPE) tokenizer mapping gold answers back exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spurious.core.data.squad import load_squad_json
from spurious.core.train.qa.features import featurize
from tests.rehearse import hub_fixtures

REPO = Path(__file__).resolve().parents[2]
SQUAD = (
    Path(os.environ.get("SPURIOUS_DATA_MIRROR", REPO.parent / "shared" / "data")) / "squad_v1.1" / "dev-v1.1.json.gz"
)


def test_every_hub_name_of_the_paper_configs_is_in_the_layouts():
    splits, checkpoints, files = hub_fixtures.config_hub_names()
    assert hub_fixtures.check_names(hub_fixtures.load_layouts()) == []
    # the scan sees what the configs name (a regression guard on the scan itself)
    assert ("nyu-mll/glue", "mnli", "validation_matched") in splits
    assert ("facebook/anli", None, "test_r3") in splits
    assert {"roberta-large", "bert-base-cased", "EleutherAI/pythia-12b"} <= checkpoints
    assert files == {"data/hans/heuristics_evaluation_set.txt", "data/glue_diagnostics/diagnostic-full.tsv"}


def test_a_name_missing_from_the_layouts_is_reported(tmp_path):
    config = tmp_path / "paper-x.yaml"
    config.write_text(
        "datasets:\n  a: {splits: {dev: {format: hub, hub: {name: nyu-mll/glue, config: mnli, split: dev_matched}}}}\n"
        "  b: {splits: {test: {format: glue_tsv, path: data/hans/heuristics_train_set.txt}}}\n"
        "models:\n  m: {checkpoint: roberta-xl}\n"
    )
    missing = hub_fixtures.check_names(hub_fixtures.load_layouts(), [config])
    assert missing == [
        "file data/hans/heuristics_train_set.txt", "dataset nyu-mll/glue config mnli split dev_matched",
        "model roberta-xl"
    ]


@pytest.fixture(scope="module")
def roberta_tokenizer():
    squad = load_squad_json(SQUAD)
    texts = [*squad["context"].drop_duplicates(), *squad["question"]]
    return hub_fixtures.train_tokenizer("roberta", texts, vocab_size=3000), squad


def test_roberta_kind_tokenizer_has_roberta_inputs_and_trimmed_offsets(roberta_tokenizer):
    tok, _ = roberta_tokenizer
    assert tok.model_input_names == ["input_ids", "attention_mask"]  # no token_type_ids
    enc = tok("Who won?", "The Denver Broncos won.", return_offsets_mapping=True)
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    assert tokens[0] == "<s>" and tokens.count("</s>") == 3  # <s> A </s></s> B </s>
    # "Denver" (characters 4-10 of the context): its first token carries the leading-space marker, its offsets not
    first = [i for i, (a, _) in enumerate(enc["offset_mapping"]) if enc.sequence_ids()[i] == 1 and a == 4]
    assert len(first) == 1 and tokens[first[0]].startswith("Ġ")
    assert 4 < enc["offset_mapping"][first[0]][1] <= 10


@pytest.mark.parametrize("family", ["bert", "roberta", "gpt_neox"])
def test_tokenizers_are_the_same_on_every_build(family):
    """The stand-ins' tokenizers (and so the rehearsal's token ids) do not depend on the build."""
    texts = list(load_squad_json(SQUAD)["context"].drop_duplicates()[:200])
    first, second = (hub_fixtures.train_tokenizer(family, texts, vocab_size=800) for _ in range(2))
    assert first.get_vocab() == second.get_vocab() and len(first) == 800


@pytest.mark.parametrize("lowercase", [False, True])
def test_wordpiece_stand_ins_hold_the_paper_prompts_label_words_as_single_tokens(lowercase):
    from spurious.core.train.prompt import PAPER_PROMPTS, label_word_ids

    texts = list(load_squad_json(SQUAD)["context"].drop_duplicates()[:50])
    tok = hub_fixtures.train_tokenizer("bert", texts, lowercase=lowercase, vocab_size=500)
    for spec in PAPER_PROMPTS.values():
        assert len(set(label_word_ids(tok, spec.label_words))) == 2


def _inside_word(context: str, start: int, end: int) -> bool:
    """The answer starts or ends inside a word (a byte-level BPE token may then run past it)."""
    cut_start = start > 0 and context[start - 1].isalnum() and context[start].isalnum()
    cut_end = end < len(context) and context[end - 1].isalnum() and context[end].isalnum()
    return cut_start or cut_end


def test_qa_featurisation_with_roberta_kind_tokenizer_maps_every_window_back_to_the_gold_text(roberta_tokenizer):
    tok, squad = roberta_tokenizer
    frame = squad.iloc[:600].reset_index(drop=True)
    # short windows, so that most examples span several and many windows miss the answer
    feats = featurize(frame, tok, max_length=96, stride=32)
    assert feats.token_type_ids is None
    exact = cut = without = 0
    for w in range(len(feats)):
        ex = int(feats.example_index[w])
        context = frame.loc[ex, "context"]
        start_char = int(frame.loc[ex, "answers"]["answer_start"][0])
        text = frame.loc[ex, "answers"]["text"][0]
        end_char = start_char + len(text)
        offsets = feats.context_offsets[w]
        in_ctx = offsets[:, 0] >= 0
        # no context token's offsets include the leading space its BPE token carries
        spans = [context[s:e] for s, e in offsets[in_ctx]]
        assert not any(s[:1].isspace() for s in spans), f"window {w}: an offset includes a leading space"
        s, e = int(feats.start_positions[w]), int(feats.end_positions[w])
        covered = offsets[in_ctx][0, 0] <= start_char and offsets[in_ctx][-1, 1] >= end_char
        if not covered:
            assert s == e == int(feats.cls_index[w]) == 0, f"window {w} without the answer must point at <s>"
            without += 1
            continue
        assert in_ctx[s] and in_ctx[e] and s <= e
        span = context[offsets[s, 0] : offsets[e, 1]]
        if span == text:
            exact += 1
        else:
            # only an answer cut inside a word may differ, and then the span holds it whole
            assert _inside_word(context, start_char, end_char), f"window {w}: {span!r} != {text!r}"
            assert text in span
            cut += 1
    assert len(feats) > len(frame)  # several windows per example
    assert without > 100 and exact > 10 * max(cut, 1), (exact, cut, without)


def test_fixture_datasets_load_through_the_hub_loaders_with_the_hub_names(tmp_path):
    """One QA and one classification dataset written as the datasets cache; read with the project's hub loaders
    in a fresh process with HF_HUB_OFFLINE (as the rehearsal does)."""
    layouts = hub_fixtures.load_layouts()
    cache = tmp_path / "datasets"
    cache.mkdir()
    squad = load_squad_json(SQUAD)
    rows = {split: hub_fixtures.squad_records(squad.iloc[i * 5 :], 5)
            for i, split in enumerate(["train", "validation"])}
    squad_layout = layouts["datasets"]["rajpurkar/squad"]["configs"]["plain_text"]
    hub_fixtures.write_hub_dataset("rajpurkar/squad", "plain_text", squad_layout, rows, cache)
    anli = layouts["datasets"]["facebook/anli"]["configs"]["plain_text"]
    pairs = [
        {"uid": f"u{i}", "premise": "The doctor saw the actor.", "hypothesis": hyp, "label": label, "reason": ""}
        for i, (hyp, label) in enumerate([("The actor saw the doctor.", 1), ("The doctor saw.", 0), ("Nobody saw.", 2)])
    ]
    hub_fixtures.write_hub_dataset("facebook/anli", "plain_text", anli, dict.fromkeys(anli["splits"], pairs), cache)
    code = (
        "from spurious.core.data import squad, classification as c\n"
        "q = squad.load_hub('rajpurkar/squad', None, 'validation')\n"
        "a = c.load_hub('facebook/anli', None, 'test_r3', id_column='uid')\n"
        "print(list(q['id']), q.iloc[0]['answers']['text'][0], a.attrs['label_names'], "
        "list(a['id']), list(a['label']))\n"
    )
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split("] ")[0] + "]" == str(list(squad["id"].iloc[5:10]))
    assert squad["answers"].iloc[5]["text"][0] in out
    assert "['entailment', 'neutral', 'contradiction'] ['u0', 'u1', 'u2'] [1, 0, 2]" in out


def test_hans_file_fixture_loads_with_the_paper_configs_source(tmp_path):
    """HANS is read from the authors' TSV (the hub copy is a loading script): the fixture in that layout, read with
    paper-aflite's own source entry, gives the heuristics as groups and the two label names."""
    from spurious.core.data.classification import load_source

    spec = hub_fixtures.load_layouts()["files"]["data/hans/heuristics_evaluation_set.txt"]
    path = tmp_path / "data" / "hans" / "heuristics_evaluation_set.txt"
    hub_fixtures.hans_tsv(hub_fixtures.Text(hub_fixtures.mirror_dir()), path, spec)
    header = path.read_text().splitlines()[0].split("\t")
    assert (header[0] == "gold_label"
            and header[5:11] == ["sentence1", "sentence2", "pairID", "heuristic", "subcase", "template"])
    import yaml

    paper_config = yaml.safe_load((REPO / "configs" / "paper-aflite.yaml").read_text())
    source = paper_config["datasets"]["hans"]["splits"]["validation"]
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the config's path is relative to the workflow's directory
    try:
        df = load_source(source)
    finally:
        os.chdir(cwd)
    assert df.attrs["label_names"] == ["entailment", "non-entailment"]
    assert set(df["groups"]) == {"lexical_overlap", "subsequence", "constituent"}
    assert list(df["id"][:2]) == ["ex0", "ex1"] and sorted(set(df["label"])) == [0, 1]
