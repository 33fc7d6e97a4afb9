"""Model sizes without loading the models: parameter counts against the published ones and against the models
transformers builds from the same configs (on the meta device: no memory, no weights), and the size classes."""

from __future__ import annotations

import pytest

from spurious.workflow.sizes import KNOWN, ModelSizeError, model_size


def test_totals_equal_the_published_counts():
    # bert-base-uncased's BertModel (the figure transformers prints for it), Pythia's model cards
    assert KNOWN["bert-base-uncased"].parameters() == 109_482_240
    assert KNOWN["EleutherAI/pythia-1b"].parameters() == 1_011_781_632
    assert KNOWN["EleutherAI/pythia-12b"].parameters() == 11_846_072_320


@pytest.mark.parametrize("checkpoint", ["bert-base-cased", "bert-large-uncased", "roberta-large",
                                        "google/electra-base-discriminator", "EleutherAI/pythia-12b"])
def test_counts_equal_the_models_transformers_builds(checkpoint):
    import torch
    from transformers import AutoModel, BertConfig, ElectraConfig, GPTNeoXConfig, GPTNeoXForCausalLM, RobertaConfig

    arch = KNOWN[checkpoint]
    dims = dict(num_hidden_layers=arch.layers, hidden_size=arch.hidden, intermediate_size=arch.intermediate,
                vocab_size=arch.vocab)
    with torch.device("meta"):
        if arch.family == "gpt_neox":
            model = GPTNeoXForCausalLM(GPTNeoXConfig(**dims, num_attention_heads=40, tie_word_embeddings=False))
        else:
            kind = {"bert": BertConfig, "roberta": RobertaConfig, "electra": ElectraConfig}[
                "roberta" if "roberta" in checkpoint else "electra" if "electra" in checkpoint else "bert"]
            cfg = kind(**dims, max_position_embeddings=arch.positions, type_vocab_size=arch.token_types,
                       num_attention_heads=16 if arch.hidden == 1024 else 12,
                       **({"embedding_size": arch.hidden} if kind is ElectraConfig else {}))
            model = AutoModel.from_config(cfg)
    total = sum(p.numel() for p in model.parameters())
    layers = sum(p.numel() for name, p in model.named_parameters() if ".layer." in name or ".layers." in name)
    assert total == arch.parameters()
    assert layers == arch.non_embedding_parameters()


def test_size_classes_of_the_paper_configs_models():
    classes = {name: model_size({"checkpoint": name}).size_class for name in
               ("embedded:all-MiniLM-L6-v2", "bert-base-cased", "roberta-base", "google/electra-base-discriminator",
                "bert-large-uncased", "roberta-large", "EleutherAI/pythia-1b", "EleutherAI/pythia-12b")}
    assert list(classes.values()) == ["small", "base", "base", "base", "large", "large", "large", "xl"]
    assert model_size({"init": "bilstm"}).size_class == "bilstm"
    # a randomly initialised model has its checkpoint's size; the config's size_class wins
    assert model_size({"checkpoint": "roberta-large", "init": "scratch"}).size_class == "large"
    named = model_size({"checkpoint": "roberta-large", "size_class": "small"})
    assert named.size_class == "small" and named.parameters == 355_359_744


def test_a_checkpoint_of_unknown_size_names_the_model_and_the_fix():
    with pytest.raises(ModelSizeError, match=r"models\.mine: the size of checkpoint 'org/unknown' is not known.*"
                                             r"Add `size_class:`"):
        model_size({"checkpoint": "org/unknown"}, "models.mine")
    with pytest.raises(ModelSizeError, match="size_class 'huge' is not one of bilstm, small, base, large, xl"):
        model_size({"checkpoint": "roberta-large", "size_class": "huge"})


def test_a_local_checkpoint_is_sized_from_its_config():
    from spurious.core.models import resolve_model

    local = model_size({"checkpoint": resolve_model("embedded:all-MiniLM-L6-v2")})
    assert (local.size_class, local.parameters) == ("small", 22_713_216)  # the sum over the loaded model's weights
