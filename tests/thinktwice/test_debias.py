"""Debiasing objectives (LMix, CReg) and ReSam: formulas against independent float64 loop computations, masking,
compat modes, the training-loop objectives on memory-mapped logits, and a synthetic shortcut task on which both
debiasing methods must beat plain training. Runs in a few seconds on CPU.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from spurious.thinktwice import debias as debias_module
from spurious.thinktwice.debias import (
    ConfidenceRegularizationObjective,
    LearnedMixinGate,
    LearnedMixinObjective,
    TokenGate,
    choose_scale,
    confidence_regularization_loss,
    gate_summary,
    learned_mixin_h_loss,
    masked_log_softmax,
    resample_segments,
    rescale_bias_probs,
)

# ---------------------------------------------------------------------------------------------------------------------
# Independent references: plain Python loops over the valid positions of each row, in float64


def _softmax_over(values: np.ndarray, positions: list[int]) -> dict[int, float]:
    total = sum(math.exp(float(values[j])) for j in positions)
    return {j: math.exp(float(values[j])) / total for j in positions}


def _valid_positions(mask: np.ndarray, row: int) -> list[int]:
    return [j for j in range(mask.shape[1]) if mask[row, j]]


def _lmix_clark_reference(z, gold, bias, gate, mask, scale, entropy_weight, entropy_on="bias"):
    """Clark's LearnedMixin+H, one (start or end) side: per-row NLL (rescaled bias in the mixture) and entropy (of
    the unrescaled bias distribution by default, of the rescaled one with ``entropy_on="rescaled"``)."""
    nlls, entropies = [], []
    for b in range(z.shape[0]):
        pos = _valid_positions(mask, b)
        p_main = _softmax_over(z[b], pos)
        p_bias = _softmax_over(bias[b], pos)
        rescaled = {j: scale * p_bias[j] + (1 - scale) / len(pos) for j in pos}
        combined = {j: math.log(p_main[j]) + gate[b] * math.log(rescaled[j]) for j in pos}
        log_norm = math.log(sum(math.exp(v) for v in combined.values()))
        nlls.append(log_norm - combined[gold[b]])
        # softmax(g·log p) written as the normalised power p^g
        penalised = rescaled if entropy_on == "rescaled" else p_bias
        powered = {j: penalised[j] ** gate[b] for j in pos}
        norm = sum(powered.values())
        entropies.append(-sum(v / norm * math.log(v / norm) for v in powered.values()))
    return np.array(nlls), np.array(entropies)


def _creg_reference(z, gold, teacher, bias, mask, scale):
    """Utama's smoothed distillation, one side: per-row soft cross-entropy."""
    losses = []
    for b in range(z.shape[0]):
        pos = _valid_positions(mask, b)
        p_student = _softmax_over(z[b], pos)
        p_teacher = _softmax_over(teacher[b], pos)
        beta = scale * _softmax_over(bias[b], pos)[gold[b]]
        powered = {j: p_teacher[j] ** (1 - beta) for j in pos}
        norm = sum(powered.values())
        losses.append(-sum(powered[j] / norm * math.log(p_student[j]) for j in pos))
    return np.array(losses)


def _t(array, dtype=torch.float32):
    return torch.tensor(np.asarray(array), dtype=dtype)


@pytest.fixture
def span_batch():
    """B=2, T=5. Row 0: CLS, a question token, three context tokens. Row 1: CLS, question, two context, padding."""
    rng = np.random.default_rng(7)
    mask = np.array([[1, 0, 1, 1, 1], [1, 0, 1, 1, 0]], dtype=bool)
    return {
        "mask": mask,
        "start": rng.normal(size=(2, 5)),
        "end": rng.normal(size=(2, 5)),
        "bias_start": rng.normal(scale=2.0, size=(2, 5)),
        "bias_end": rng.normal(scale=2.0, size=(2, 5)),
        "teacher_start": rng.normal(scale=1.5, size=(2, 5)),
        "teacher_end": rng.normal(scale=1.5, size=(2, 5)),
        "gold_start": np.array([2, 0]),  # row 1: no answer in the window, labelled CLS
        "gold_end": np.array([4, 0]),
        "gate": np.array([0.7, 1.3]),
    }


def _lmix(data, **kwargs):
    return learned_mixin_h_loss(
        _t(data["start"]),
        _t(data["end"]),
        _t(data["gold_start"], torch.long),
        _t(data["gold_end"], torch.long),
        _t(data["bias_start"]),
        _t(data["bias_end"]),
        kwargs.pop("gate", _t(data["gate"])),
        valid_mask=kwargs.pop("valid_mask", _t(data["mask"], torch.bool)),
        **kwargs,
    )


def _creg(data, **kwargs):
    return confidence_regularization_loss(
        _t(data["start"]),
        _t(data["end"]),
        _t(data["gold_start"], torch.long),
        _t(data["gold_end"], torch.long),
        _t(data["teacher_start"]),
        _t(data["teacher_end"]),
        _t(data["bias_start"]),
        _t(data["bias_end"]),
        valid_mask=kwargs.pop("valid_mask", _t(data["mask"], torch.bool)),
        **kwargs,
    )


# ---------------------------------------------------------------------------------------------------------------------
# Building blocks


def test_masked_log_softmax_by_hand():
    logits = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 5.0, 0.0]])
    mask = torch.tensor([[True, False, True, True], [True, True, False, True]])
    out = masked_log_softmax(logits, mask)
    norm = math.log(math.e + math.e**3 + math.e**4)
    assert out[0, 0].item() == pytest.approx(1 - norm, abs=1e-6)
    assert out[0, 3].item() == pytest.approx(4 - norm, abs=1e-6)
    assert out[1, 0].item() == pytest.approx(-math.log(3), abs=1e-6)  # the 5.0 is masked: uniform over three
    assert torch.isneginf(out[~mask]).all()
    assert torch.allclose(out.exp().sum(dim=-1), torch.ones(2))
    assert out.dtype == torch.float32 and masked_log_softmax(logits.bfloat16(), mask).dtype == torch.float32


def test_masked_log_softmax_rejects_a_row_without_valid_positions():
    with pytest.raises(ValueError, match="no valid position"):
        masked_log_softmax(torch.zeros(2, 3), torch.tensor([[True, False, False], [False, False, False]]))


def test_rescale_bias_probs_by_hand():
    p_bias = torch.tensor([[0.7, 0.0, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]])
    mask = torch.tensor([[True, False, True, True], [True, True, True, True]])
    out = rescale_bias_probs(p_bias, 0.2, mask)
    # row 0 has 3 valid positions: 0.2·p + 0.8/3
    expected = [0.2 * 0.7 + 0.8 / 3, 0.0, 0.2 * 0.2 + 0.8 / 3, 0.2 * 0.1 + 0.8 / 3]
    assert out[0].tolist() == pytest.approx(expected, abs=1e-6)
    assert out[1].tolist() == pytest.approx([0.25] * 4, abs=1e-6)  # uniform stays uniform
    assert torch.allclose(out.sum(dim=-1), torch.ones(2))
    assert torch.allclose(rescale_bias_probs(p_bias, 1.0, mask)[0], torch.tensor([0.7, 0.0, 0.2, 0.1]))
    assert rescale_bias_probs(p_bias, 0.0, mask)[0].tolist() == pytest.approx([1 / 3, 0, 1 / 3, 1 / 3], abs=1e-6)
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="scale"):
            rescale_bias_probs(p_bias, bad, mask)


def test_learned_mixin_gate_is_per_example_non_negative_and_ignores_masked_tokens():
    torch.manual_seed(0)
    gate = LearnedMixinGate(hidden_size=6, dim=4)
    hidden = torch.randn(3, 7, 6)
    question = torch.zeros(3, 7, dtype=torch.bool)
    question[:, 1:3] = True
    context = torch.zeros(3, 7, dtype=torch.bool)
    context[:, 3:6] = True  # position 0 = CLS and 6 = padding belong to neither
    g = gate(hidden, question, context)
    assert g.shape == (3,) and (g >= 0).all()
    changed = hidden.clone()
    changed[:, 0] += 100.0
    changed[:, 6] -= 100.0
    assert torch.allclose(gate(changed, question, context), g)
    changed[:, 4] += 1.0  # a context token does count
    assert not torch.allclose(gate(changed, question, context), g)
    with pytest.raises(ValueError, match="no question token"):
        gate(hidden, torch.zeros_like(question), context)


def test_token_gate_initialisation_and_shape():
    torch.manual_seed(0)
    gate = TokenGate(hidden_size=400)
    assert torch.count_nonzero(gate.linear.bias) == 0
    assert gate.linear.weight.std().item() == pytest.approx(0.02, rel=0.2)
    g = gate(torch.randn(2, 5, 400))
    assert g.shape == (2, 5) and (g > 0).all()


# ---------------------------------------------------------------------------------------------------------------------
# LearnedMixin+H


def test_lmix_uniform_case_by_hand():
    # all-uniform logits and bias: every distribution is uniform over 3 positions, whatever the gate
    zeros = torch.zeros(1, 3)
    gold = torch.tensor([1])
    loss, stats = learned_mixin_h_loss(
        zeros, zeros, gold, gold, zeros, zeros, torch.tensor([2.5]), valid_mask=None, entropy_weight=0.4
    )
    assert loss.item() == pytest.approx(math.log(3) + 0.4 * math.log(3), abs=1e-6)
    assert stats["nll"] == pytest.approx(math.log(3), abs=1e-6)
    assert stats["entropy"] == pytest.approx(math.log(3), abs=1e-6)
    assert stats["gate"] == pytest.approx(2.5)


def test_lmix_default_matches_loop_reference(span_batch):
    d = span_batch
    loss, stats = _lmix(d, entropy_weight=0.4, scale=0.2)
    nll_s, h_s = _lmix_clark_reference(d["start"], d["gold_start"], d["bias_start"], d["gate"], d["mask"], 0.2, 0.4)
    nll_e, h_e = _lmix_clark_reference(d["end"], d["gold_end"], d["bias_end"], d["gate"], d["mask"], 0.2, 0.4)
    expected = np.mean((nll_s + nll_e) / 2) + 0.4 * np.mean((h_s + h_e) / 2)
    assert loss.item() == pytest.approx(expected, abs=1e-5)
    assert stats["nll"] == pytest.approx(np.mean((nll_s + nll_e) / 2), abs=1e-5)
    assert stats["entropy"] == pytest.approx(np.mean((h_s + h_e) / 2), abs=1e-5)
    assert stats["gate"] == pytest.approx(1.0, abs=1e-6)


def test_lmix_default_ignores_masked_positions_unless_masking_is_off(span_batch):
    base, _ = _lmix(span_batch)
    changed = dict(span_batch)
    for key in ("start", "end", "bias_start", "bias_end"):
        changed[key] = span_batch[key].copy()
        changed[key][:, 1] += 3.0  # question token
        changed[key][1, 4] -= 5.0  # padding
    assert _lmix(changed)[0].item() == pytest.approx(base.item(), abs=1e-6)
    # the reference behaviour: every position of the padded width counts
    unmasked, _ = _lmix(span_batch, mask_non_context=False)
    all_valid = np.ones_like(span_batch["mask"])
    assert unmasked.item() == pytest.approx(_lmix(span_batch, valid_mask=_t(all_valid, torch.bool))[0].item())
    assert _lmix(changed, mask_non_context=False)[0].item() != pytest.approx(unmasked.item(), abs=1e-4)


def test_lmix_scale_zero_is_plain_cross_entropy(span_batch):
    # s = 0: the rescaled bias is uniform, so the bias term is a constant shift and the NLL is the main model's CE
    d = span_batch
    _, stats = _lmix(d, scale=0.0)
    mask = d["mask"]
    ce = []
    for b in range(2):
        pos = _valid_positions(mask, b)
        ce_s = -math.log(_softmax_over(d["start"][b], pos)[d["gold_start"][b]])
        ce_e = -math.log(_softmax_over(d["end"][b], pos)[d["gold_end"][b]])
        ce.append((ce_s + ce_e) / 2)
    assert stats["nll"] == pytest.approx(np.mean(ce), abs=1e-5)
    # the entropy penalty is on the unrescaled bias distribution, so s does not flatten it ...
    _, h_s = _lmix_clark_reference(d["start"], d["gold_start"], d["bias_start"], d["gate"], mask, 0.0, 0.4)
    _, h_e = _lmix_clark_reference(d["end"], d["gold_end"], d["bias_end"], d["gate"], mask, 0.0, 0.4)
    assert stats["entropy"] == pytest.approx(np.mean((h_s + h_e) / 2), abs=1e-5)
    assert stats["entropy"] < np.mean([math.log(4), math.log(3)]) - 0.05
    # ... on the rescaled one (round-1 formula) it is uniform at s = 0
    _, rescaled_stats = _lmix(d, scale=0.0, entropy_on="rescaled")
    assert rescaled_stats["entropy"] == pytest.approx(np.mean([math.log(4), math.log(3)]), abs=1e-5)


# Hand-computed LMix values. Valid positions 0 and 1 (position 2 masked, with logits that would matter if it were
# not), main logits [0, 0] -> p_main = [1/2, 1/2]; bias logits [ln 3, 0] -> p_b = [3/4, 1/4]; gate g = 2; gold 0.
# s = 1: the mixture is p_main·p_b^2 ∝ [9, 1], NLL = ln(10/9); the entropy term softmax(2·ln p_b) = [9/10, 1/10].
# s = 1/2: p'_b = [5/8, 3/8], mixture ∝ [25, 9], NLL = ln(34/25); the entropy stays that of [9/10, 1/10] (unrescaled)
# and is that of [25/34, 9/34] with entropy_on="rescaled".


def _two_point_entropy(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def _hand_batch():
    z = torch.tensor([[0.0, 0.0, 5.0]])
    bias = torch.tensor([[math.log(3.0), 0.0, 7.0]])
    gold = torch.tensor([0])
    mask = torch.tensor([[True, True, False]])
    return z, bias, gold, mask


@pytest.mark.parametrize(
    ("scale", "entropy_on", "nll", "entropy"),
    [
        (1.0, "bias", math.log(10 / 9), _two_point_entropy(0.9)),
        (1.0, "rescaled", math.log(10 / 9), _two_point_entropy(0.9)),
        (0.5, "bias", math.log(34 / 25), _two_point_entropy(0.9)),
        (0.5, "rescaled", math.log(34 / 25), _two_point_entropy(25 / 34)),
    ],
)
def test_lmix_hand_computed_with_masking(scale, entropy_on, nll, entropy):
    z, bias, gold, mask = _hand_batch()
    loss, stats = learned_mixin_h_loss(
        z, z, gold, gold, bias, bias, torch.tensor([2.0]), valid_mask=mask, entropy_weight=0.4, scale=scale,
        entropy_on=entropy_on,
    )
    assert stats["nll"] == pytest.approx(nll, abs=1e-6)
    assert stats["entropy"] == pytest.approx(entropy, abs=1e-6)
    assert loss.item() == pytest.approx(nll + 0.4 * entropy, abs=1e-6)
    assert stats["gate"] == pytest.approx(2.0) and stats["gate_max"] == pytest.approx(2.0)


def test_lmix_at_full_scale_is_clarks_loss_without_rescaling():
    # s = 1: NLL of log_softmax(log_softmax(z) + g·log_softmax(b)) + w·H(softmax(g·log_softmax(b))), written directly
    rng = np.random.default_rng(11)
    z, b = _t(rng.normal(size=(4, 6))), _t(rng.normal(scale=3.0, size=(4, 6)))
    gold, gate = torch.tensor([0, 3, 5, 1]), _t([0.3, 1.0, 2.2, 4.0])
    loss, stats = learned_mixin_h_loss(z, z, gold, gold, b, b, gate, valid_mask=None, entropy_weight=0.7, scale=1.0)
    scaled = gate[:, None] * b.log_softmax(-1)
    clark_nll = F.cross_entropy(z.log_softmax(-1) + scaled, gold)
    q = scaled.log_softmax(-1)
    clark_h = -(q.exp() * q).sum(-1).mean()
    assert loss.item() == pytest.approx((clark_nll + 0.7 * clark_h).item(), abs=1e-5)
    assert stats["gate_q50"] == pytest.approx(float(torch.quantile(gate, 0.5)), abs=1e-6)
    assert stats["gate_q10"] <= stats["gate_q50"] <= stats["gate_q90"] <= stats["gate_max"]


def test_lmix_rejects_an_unknown_entropy_target(span_batch):
    with pytest.raises(ValueError, match="entropy_on"):
        _lmix(span_batch, entropy_on="teacher")


def test_lmix_isbiased_compat_matches_direct_computation(span_batch):
    d = span_batch
    rng = np.random.default_rng(3)
    gate = rng.uniform(0.2, 2.0, size=(2, 5))
    loss, stats = _lmix(d, gate=_t(gate), compat="isbiased", scale=0.1, entropy_weight=0.3)

    def side(z, gold, bias):
        ces, entropies = [], []
        for b in range(2):
            s = [gate[b, t] * bias[b, t] for t in range(5)]
            shifted = [z[b, t] + 0.1 * s[t] for t in range(5)]  # CE(z + s/κ) with κ = 10
            ces.append(math.log(sum(math.exp(v) for v in shifted)) - shifted[gold[b]])
            q = _softmax_over(np.array(s), list(range(5)))
            entropies.append(-sum(v * math.log(v) for v in q.values()))
        return np.mean(ces) + 0.3 * np.mean(entropies)

    expected = (side(d["start"], d["gold_start"], d["bias_start"]) + side(d["end"], d["gold_end"], d["bias_end"])) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-5)
    assert stats["gate"] == pytest.approx(gate.mean(), abs=1e-6)
    # nothing is masked in compat mode: question and padding positions change the loss
    changed = dict(d, bias_start=d["bias_start"].copy())
    changed["bias_start"][1, 4] += 4.0
    assert _lmix(changed, gate=_t(gate), compat="isbiased", scale=0.1)[0].item() != pytest.approx(loss.item())


def test_lmix_gradients_reach_logits_and_gate_but_not_masked_positions(span_batch):
    d = span_batch
    start = _t(d["start"]).requires_grad_()
    gate = _t(d["gate"]).requires_grad_()
    loss, _ = learned_mixin_h_loss(
        start,
        _t(d["end"]),
        _t(d["gold_start"], torch.long),
        _t(d["gold_end"], torch.long),
        _t(d["bias_start"]),
        _t(d["bias_end"]),
        gate,
        valid_mask=_t(d["mask"], torch.bool),
    )
    loss.backward()
    assert torch.isfinite(start.grad).all() and torch.isfinite(gate.grad).all()
    assert (start.grad[~_t(d["mask"], torch.bool)] == 0).all()
    assert (gate.grad != 0).all()


@pytest.mark.parametrize("compat", [None, "isbiased"])
def test_lmix_scale_changes_the_loss(span_batch, compat):
    gate = _t(span_batch["gate"]) if compat is None else torch.full((2, 5), 0.8)
    losses = {s: _lmix(span_batch, gate=gate, compat=compat, scale=s)[0].item() for s in (0.1, 0.2, 0.8)}
    assert len({round(v, 6) for v in losses.values()}) == 3


def test_lmix_validates_inputs(span_batch):
    d = span_batch
    with pytest.raises(ValueError, match="one scalar per example"):
        _lmix(d, gate=torch.ones(2, 5))
    with pytest.raises(ValueError, match="per-token gate"):
        _lmix(d, compat="isbiased")
    with pytest.raises(ValueError, match="compat"):
        _lmix(d, compat="clark")
    with pytest.raises(ValueError, match="scale"):
        _lmix(d, scale=1.2)
    with pytest.raises(ValueError, match="excludes"):
        _lmix(dict(d, gold_start=np.array([1, 0])))  # a question token as gold
    with pytest.raises(ValueError, match="shape"):
        _lmix(dict(d, bias_end=d["bias_end"][:, :4]))
    with pytest.raises(ValueError, match="start_positions"):
        _lmix(dict(d, gold_start=np.array([2, 7])))


# ---------------------------------------------------------------------------------------------------------------------
# Confidence Regularization


def test_creg_default_matches_loop_reference(span_batch):
    d = span_batch
    loss, stats = _creg(d, scale=0.2)
    ref_s = _creg_reference(d["start"], d["gold_start"], d["teacher_start"], d["bias_start"], d["mask"], 0.2)
    ref_e = _creg_reference(d["end"], d["gold_end"], d["teacher_end"], d["bias_end"], d["mask"], 0.2)
    assert loss.item() == pytest.approx(np.mean((ref_s + ref_e) / 2), abs=1e-5)
    assert 0 < stats["beta"] <= 0.2


@pytest.mark.parametrize("scale", [0.2, 1.0])
def test_creg_gradients_are_the_student_minus_the_smoothed_teacher(span_batch, scale):
    # Utama et al.'s loss per row and side is -Σ_j S_j log softmax(z)_j with Σ_j S_j = 1 and S independent of z, so
    # its gradient in z_j is softmax(z)_j - S_j over the valid positions and 0 elsewhere; the total averages the B
    # rows and the two sides: d loss / d z_start[b, j] = (p_j - S_j) / (2 B). Derived here, not from the code.
    d = span_batch
    start, end = (torch.tensor(d[side], dtype=torch.float64, requires_grad=True) for side in ("start", "end"))
    loss, _ = confidence_regularization_loss(
        start, end, _t(d["gold_start"], torch.long), _t(d["gold_end"], torch.long),
        *(torch.tensor(d[k], dtype=torch.float64) for k in ("teacher_start", "teacher_end", "bias_start", "bias_end")),
        valid_mask=_t(d["mask"], torch.bool), scale=scale,
    )  # fmt: skip
    loss.backward()
    for side, logits in (("start", start), ("end", end)):
        expected = np.zeros((2, 5))
        for b in range(2):
            pos = _valid_positions(d["mask"], b)
            p_student = _softmax_over(d[side][b], pos)
            p_teacher = _softmax_over(d[f"teacher_{side}"][b], pos)
            beta = scale * _softmax_over(d[f"bias_{side}"][b], pos)[d[f"gold_{side}"][b]]
            powered = {j: p_teacher[j] ** (1 - beta) for j in pos}
            for j in pos:
                expected[b, j] = (p_student[j] - powered[j] / sum(powered.values())) / (2 * 2)
        # the loss forms its softmaxes in float32 (masked_log_softmax): float32 rounding, measured up to 1.7e-8
        np.testing.assert_allclose(logits.grad.numpy(), expected, rtol=0, atol=5e-8)


def test_creg_scale_zero_is_plain_distillation(span_batch):
    # β = 0: S = p_T, so the loss is the soft-target cross-entropy with the teacher's (masked) softmax
    d = span_batch
    mask = _t(d["mask"], torch.bool)
    loss, stats = _creg(d, scale=0.0)
    expected = 0.0
    for side in ("start", "end"):
        target = torch.softmax(_t(d[f"teacher_{side}"]).masked_fill(~mask, -1e4), dim=-1)
        expected += F.cross_entropy(_t(d[side]).masked_fill(~mask, -1e4), target).item() / 2
    assert loss.item() == pytest.approx(expected, abs=1e-5)
    assert stats["beta"] == 0.0


def test_creg_ignores_masked_positions_unless_masking_is_off(span_batch):
    base, _ = _creg(span_batch)
    changed = dict(span_batch)
    for key in ("start", "end", "teacher_start", "teacher_end", "bias_start", "bias_end"):
        changed[key] = span_batch[key].copy()
        changed[key][:, 1] += 3.0
        changed[key][1, 4] -= 5.0
    assert _creg(changed)[0].item() == pytest.approx(base.item(), abs=1e-6)
    unmasked, _ = _creg(span_batch, mask_non_context=False)
    assert _creg(changed, mask_non_context=False)[0].item() != pytest.approx(unmasked.item(), abs=1e-4)


def test_creg_isbiased_compat_matches_direct_computation(span_batch):
    d = span_batch
    loss, _ = _creg(d, compat="isbiased", scale=0.2)

    def side(z, gold, teacher, bias):
        total = 0.0
        for b in range(2):
            e_teacher = [math.exp(math.exp(v)) for v in teacher[b]]  # softmax(exp(logits)): the double exponential
            e_bias = [math.exp(math.exp(v)) for v in bias[b]]
            p_teacher = [v / sum(e_teacher) for v in e_teacher]
            weight = 1 - e_bias[gold[b]] / sum(e_bias) / 5  # scaling_portion = 5
            powered = [p**weight for p in p_teacher]
            log_norm = math.log(sum(math.exp(v) for v in z[b]))
            total += -sum(w / sum(powered) * (z[b, t] - log_norm) for t, w in enumerate(powered))
        return total / 2

    expected = (
        side(d["start"], d["gold_start"], d["teacher_start"], d["bias_start"])
        + side(d["end"], d["gold_end"], d["teacher_end"], d["bias_end"])
    ) / 2
    assert loss.item() == pytest.approx(expected, abs=1e-5)
    # no masking in compat mode
    changed = dict(d, teacher_end=d["teacher_end"].copy())
    changed["teacher_end"][0, 1] += 2.0
    assert _creg(changed, compat="isbiased")[0].item() != pytest.approx(loss.item())


def test_creg_isbiased_compat_survives_logits_that_overflow_float32():
    # exp(100) ≈ 2.7e43 overflows float32 (the authors' NaN losses); the float64 targets stay finite
    big = torch.tensor([[100.0, 1.0, 0.0]])
    gold = torch.tensor([0])
    loss, _ = confidence_regularization_loss(
        torch.zeros(1, 3), torch.zeros(1, 3), gold, gold, big, big, big, big, valid_mask=None, compat="isbiased"
    )
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(math.log(3), abs=1e-5)  # uniform student, one-hot target


@pytest.mark.parametrize("compat", [None, "isbiased"])
def test_creg_scale_changes_the_loss(span_batch, compat):
    losses = {s: _creg(span_batch, compat=compat, scale=s)[0].item() for s in (0.1, 0.2, 0.9)}
    assert len({round(v, 6) for v in losses.values()}) == 3


def test_creg_validates_inputs(span_batch):
    with pytest.raises(ValueError, match="teacher_start_logits"):
        _creg(dict(span_batch, teacher_start=span_batch["teacher_start"][:1]))
    with pytest.raises(ValueError, match="scale"):
        _creg(span_batch, scale=-0.5)


# ---------------------------------------------------------------------------------------------------------------------
# ReSam


def _segments(n_biased: int, n_unbiased: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    biased = pd.DataFrame({"id": [f"b{i}" for i in range(n_biased)], "x": range(n_biased)})
    unbiased = pd.DataFrame({"id": [f"u{i}" for i in range(n_unbiased)], "x": range(n_unbiased)})
    return biased, unbiased


@pytest.mark.parametrize(
    ("policy", "ratio", "n_biased", "n_unbiased"),
    [("upsample", 1.0, 100, 100), ("upsample", 0.5, 100, 50), ("downsample", 1.0, 30, 30), ("downsample", 0.5, 60, 30)],
)
def test_resample_counts(policy, ratio, n_biased, n_unbiased):
    biased, unbiased = _segments(100, 30)
    out, stats = resample_segments(biased, unbiased, policy=policy, ratio=ratio, seed=1)
    assert (stats["n_biased_after"], stats["n_unbiased_after"]) == (n_biased, n_unbiased)
    assert out["id"].str.startswith("b").sum() == n_biased
    assert out["id"].str.startswith("u").sum() == n_unbiased
    assert stats["n_biased_before"] == 100 and stats["n_unbiased_before"] == 30
    assert stats["upsampled"] == ("unbiased" if policy == "upsample" else None)
    assert list(out.index) == list(range(len(out)))


def test_resample_upsample_keeps_every_row_and_the_ids():
    biased, unbiased = _segments(10, 40)  # here the biased segment is the smaller one
    out, stats = resample_segments(biased, unbiased, policy="upsample", seed=3)
    assert stats["upsampled"] == "biased"
    assert set(out["id"]) == set(biased["id"]) | set(unbiased["id"])
    counts = out["id"].value_counts()
    assert (counts[unbiased["id"]] == 1).all() and (counts[biased["id"]] >= 1).all()
    assert counts[biased["id"]].sum() == 40
    # duplicates are full copies of their original row
    assert (out.merge(biased, on="id", suffixes=("", "_orig")).eval("x == x_orig")).all()


def test_resample_downsample_draws_without_replacement():
    biased, unbiased = _segments(100, 30)
    out, stats = resample_segments(biased, unbiased, policy="downsample", seed=0)
    assert stats["downsampled"] == "biased"
    assert not out["id"].duplicated().any()
    assert set(out["id"]) >= set(unbiased["id"])


def test_resample_is_deterministic_per_seed():
    biased, unbiased = _segments(50, 20)
    first, _ = resample_segments(biased, unbiased, seed=5)
    again, _ = resample_segments(biased, unbiased, seed=5)
    other, _ = resample_segments(biased, unbiased, seed=6)
    pd.testing.assert_frame_equal(first, again)
    assert not first["id"].equals(other["id"])


def test_resample_leaves_balanced_enough_data_alone_and_rejects_bad_input():
    biased, unbiased = _segments(40, 30)
    out, stats = resample_segments(biased, unbiased, ratio=0.5)  # 30/40 is already above 0.5
    assert len(out) == 70 and stats["upsampled"] is None
    with pytest.raises(ValueError, match="empty"):
        resample_segments(biased, unbiased.iloc[:0])
    with pytest.raises(ValueError, match="ratio"):
        resample_segments(biased, unbiased, ratio=0.0)
    with pytest.raises(ValueError, match="policy"):
        resample_segments(biased, unbiased, policy="reweight")


# ---------------------------------------------------------------------------------------------------------------------
# Objectives for the training loop


@pytest.fixture
def loop_batch(tmp_path):
    """A right-padded batch of 3 features (width 7) and memory-mapped logit stores of 5 features × 2 × 9."""
    rng = np.random.default_rng(0)
    stores = {}
    for name in ("bias", "teacher"):
        array = rng.normal(size=(5, 2, 9)).astype(np.float32)
        array[:, :, 7:] = 0.0
        np.save(tmp_path / f"{name}.npy", array)
        stores[name] = np.load(tmp_path / f"{name}.npy", mmap_mode="r")
    lengths = [7, 6, 5]
    attention = torch.tensor([[i < n for i in range(7)] for n in lengths])
    question = torch.zeros(3, 7, dtype=torch.bool)
    question[:, 1:3] = True
    context = attention.clone()
    context[:, :3] = False
    context[torch.arange(3), torch.tensor(lengths) - 1] = False  # the final SEP
    cls = torch.zeros(3, 7, dtype=torch.bool)
    cls[:, 0] = True
    batch = {
        "input_ids": torch.randint(5, 100, (3, 7)),
        "attention_mask": attention.long(),
        "start_positions": torch.tensor([3, 0, 3]),
        "end_positions": torch.tensor([5, 0, 3]),
        "context_mask": context,
        "question_mask": question,
        "cls_mask": cls,
    }
    return stores, batch, np.array([4, 0, 2])


def _with_inputs(objective, batch, index):
    """The batch as the training loop hands it to ``forward``: with the objective's host inputs for these rows."""
    return {**batch, **objective.batch_inputs(index, batch)}


@pytest.mark.parametrize("compat", [None, "isbiased"])
def test_lmix_gate_input_detached_stops_the_gradient_at_the_hidden_states(loop_batch, compat):
    stores, batch, index = loop_batch
    grads = {}
    for gate_input in ("encoder", "detached"):
        torch.manual_seed(0)
        objective = LearnedMixinObjective(stores["bias"], hidden_size=16, gate_dim=8, compat=compat,
                                          gate_input=gate_input)
        start = torch.randn(3, 7, requires_grad=True)
        end = torch.randn(3, 7, requires_grad=True)
        hidden = torch.randn(3, 7, 16, requires_grad=True)
        loss, _ = objective(start, end, hidden, _with_inputs(objective, batch, index))
        loss.backward()
        grads[gate_input] = (loss.item(), hidden.grad, start.grad.clone(),
                             [p.grad.clone() for p in objective.parameters()])
    (loss_e, hidden_e, start_e, gate_e), (loss_d, hidden_d, start_d, gate_d) = grads["encoder"], grads["detached"]
    # the same loss, the same gradients for the logits and the gate; none for the hidden states once detached
    assert loss_d == pytest.approx(loss_e, abs=0) and torch.equal(start_d, start_e)
    assert all(torch.equal(a, b) for a, b in zip(gate_d, gate_e, strict=True))
    assert hidden_e is not None and hidden_e.abs().sum() > 0 and hidden_d is None
    with pytest.raises(ValueError, match="gate_input"):
        LearnedMixinObjective(stores["bias"], hidden_size=16, gate_input="frozen")


def test_lmix_objective_on_memmapped_logits(loop_batch):
    stores, batch, index = loop_batch
    torch.manual_seed(0)
    objective = LearnedMixinObjective(stores["bias"], hidden_size=16, gate_dim=8)
    start = torch.randn(3, 7, requires_grad=True)
    end = torch.randn(3, 7, requires_grad=True)
    hidden = torch.randn(3, 7, 16)
    loss, stats = objective(start, end, hidden, _with_inputs(objective, batch, index))
    assert (torch.isfinite(loss)
            and set(stats) == {"nll", "entropy", "gate", "gate_q10", "gate_q50", "gate_q90", "gate_max"})
    loss.backward()
    grads = [p.grad for p in objective.parameters()]
    assert grads and all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    # the same value as the loss function on the hand-gathered rows
    bias = torch.from_numpy(np.array(stores["bias"])[index, :, :7])
    gate = objective.gate(hidden, batch["question_mask"], batch["context_mask"])
    direct, _ = learned_mixin_h_loss(
        start,
        end,
        batch["start_positions"],
        batch["end_positions"],
        bias[:, 0],
        bias[:, 1],
        gate,
        valid_mask=batch["context_mask"] | batch["cls_mask"],
    )
    assert loss.item() == pytest.approx(direct.item(), abs=1e-6)
    assert set(objective.state_dict()) == {f"gate.{n}" for n, _ in objective.gate.named_parameters()}


def test_lmix_objective_isbiased_uses_the_token_gate(loop_batch):
    stores, batch, index = loop_batch
    objective = LearnedMixinObjective(stores["bias"], hidden_size=16, compat="isbiased", scale=0.1)
    assert isinstance(objective.gate, TokenGate)
    on_device = _with_inputs(objective, batch, index)
    loss, _ = objective(torch.randn(3, 7), torch.randn(3, 7), torch.randn(3, 7, 16), on_device)
    loss.backward()
    assert objective.gate.linear.weight.grad.abs().sum() > 0


def test_creg_objective_on_memmapped_logits(loop_batch):
    stores, batch, index = loop_batch
    objective = ConfidenceRegularizationObjective(stores["bias"], stores["teacher"])
    assert not objective.needs_hidden_states and list(objective.parameters()) == []
    start = torch.randn(3, 7, requires_grad=True)
    loss, stats = objective(start, torch.randn(3, 7), None, _with_inputs(objective, batch, index))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(start.grad).all() and "beta" in stats
    bias = torch.from_numpy(np.array(stores["bias"])[index, :, :7])
    teacher = torch.from_numpy(np.array(stores["teacher"])[index, :, :7])
    direct, _ = confidence_regularization_loss(
        start,
        torch.zeros(3, 7),
        batch["start_positions"],
        batch["end_positions"],
        teacher[:, 0],
        teacher[:, 1],
        bias[:, 0],
        bias[:, 1],
        valid_mask=batch["context_mask"] | batch["cls_mask"],
    )
    assert loss.item() != pytest.approx(direct.item())  # the end logits differ
    zero_end, _ = objective(start, torch.zeros(3, 7), None, _with_inputs(objective, batch, index))
    assert zero_end.item() == pytest.approx(direct.item(), abs=1e-6)
    compat = ConfidenceRegularizationObjective(stores["bias"], stores["teacher"], compat="isbiased")
    assert torch.isfinite(compat(start, torch.zeros(3, 7), None, _with_inputs(compat, batch, index))[0])


def test_objectives_check_the_host_batch_before_it_moves(loop_batch):
    """The checks the losses skip in a training step (``validate=False``: they would read device values) are made by
    ``batch_inputs`` on the host batch: a gold position outside the mask, a position beyond the batch, an example
    without a question token."""
    stores, batch, index = loop_batch
    lmix = LearnedMixinObjective(stores["bias"], hidden_size=16)
    creg = ConfidenceRegularizationObjective(stores["bias"], stores["teacher"])
    question = dict(batch, start_positions=torch.tensor([1, 0, 3]))  # position 1: a question token
    for objective in (lmix, creg):
        with pytest.raises(ValueError, match="excludes"):
            objective.batch_inputs(index, question)
        with pytest.raises(ValueError, match=r"end_positions must lie in \[0, 7\)"):
            objective.batch_inputs(index, dict(batch, end_positions=torch.tensor([5, 0, 7])))
    with pytest.raises(ValueError, match="no question token"):
        lmix.batch_inputs(index, dict(batch, question_mask=torch.zeros(3, 7, dtype=torch.bool)))
    # the authors' convention masks nothing: a gold position on a question token is theirs to take
    LearnedMixinObjective(stores["bias"], hidden_size=16, compat="isbiased").batch_inputs(index, question)


def test_objectives_reject_batches_wider_than_the_stored_logits(loop_batch):
    stores, batch, index = loop_batch
    wide = {k: torch.cat([v, v[:, :3]], dim=1) if v.dim() == 2 and v.shape[1] == 7 else v for k, v in batch.items()}
    objective = ConfidenceRegularizationObjective(stores["bias"], stores["teacher"])
    with pytest.raises(ValueError, match="wide"):
        objective.batch_inputs(index, wide)
    with pytest.raises(ValueError, match=r"\[N_features, 2, L\]"):
        LearnedMixinObjective(np.zeros((5, 9), dtype=np.float32), hidden_size=4)


def _objective_losses(objective_of, squad_dev, packed: bool):
    """An objective's loss and its gradients on a tiny BERT QA model's outputs for real SQuAD windows, with the
    windows padded or packed (``attention: packed``, through the CPU reference)."""
    from transformers import AutoModelForQuestionAnswering, BertConfig

    from spurious.core.models import load_tokenizer
    from spurious.core.train import packing, qa
    from spurious.core.train.qa.inference import _model_outputs
    from tests.core.packing_reference import use_reference

    tokenizer = load_tokenizer("embedded:all-MiniLM-L6-v2")
    features = qa.featurize(squad_dev.iloc[:12], tokenizer, max_length=64, stride=24)
    rows = np.unique(features.lengths, return_index=True)[1][:6]  # the six shortest lengths: padded narrower than 64
    assert features.lengths[rows].max() < 64
    torch.manual_seed(0)
    model = AutoModelForQuestionAnswering.from_config(BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    ))
    if packed:
        use_reference(model, any_precision=True)  # float32, to compare to float32 precision
    batch = features.collate(rows, packed_offset=packing.position_offset(model))
    torch.manual_seed(1)
    objective = objective_of(len(features))
    batch.update(objective.batch_inputs(rows, batch))  # the host part, then the device part (on the CPU here)
    start, end, hidden = _model_outputs(model, batch, hidden=objective.needs_hidden_states)
    loss, _ = objective(start, end, hidden, batch)
    loss.backward()
    return loss.item(), [p.grad for p in model.parameters()] + [p.grad for p in objective.parameters()]


@pytest.mark.parametrize("method", ["lmix", "creg"])
def test_objectives_on_packed_windows_equal_padding(squad_dev, method):
    rng = np.random.default_rng(0)

    def objective_of(n_features):
        bias, teacher = (rng.normal(size=(n_features, 2, 64)).astype(np.float32) for _ in range(2))
        if method == "lmix":
            return LearnedMixinObjective(bias, hidden_size=32, gate_dim=8)
        return ConfidenceRegularizationObjective(bias, teacher)

    padded_loss, padded_grads = _objective_losses(objective_of, squad_dev, packed=False)
    rng = np.random.default_rng(0)
    packed_loss, packed_grads = _objective_losses(objective_of, squad_dev, packed=True)
    assert packed_loss == pytest.approx(padded_loss, rel=1e-5)
    assert len(packed_grads) == len(padded_grads)
    for a, b in zip(padded_grads, packed_grads, strict=True):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_objectives_that_read_the_padding_are_refused_packed(squad_dev, tmp_path, monkeypatch):
    from spurious.core.train import packing, qa

    store = np.zeros((1, 2, 64), dtype=np.float32)
    assert not LearnedMixinObjective(store, hidden_size=4).reads_padding
    assert LearnedMixinObjective(store, hidden_size=4, compat="isbiased").reads_padding
    assert ConfidenceRegularizationObjective(store, store, mask_non_context=False).reads_padding
    assert not ConfidenceRegularizationObjective(store, store).reads_padding
    monkeypatch.setenv(packing.REFERENCE_ENV, "float32")  # past the device and precision checks
    with pytest.raises(ValueError, match="reads them .*set attention: padded"):
        qa.train_qa(
            squad_dev.iloc[:3], squad_dev.iloc[3:5], model_name_or_path="embedded:all-MiniLM-L6-v2",
            output_dir=tmp_path / "model", checkpoint_dir=tmp_path / "ckpt",
            settings={"attention": "packed", "device": "cpu", "max_length": 64, "stride": 16},
            objective_factory=lambda f: LearnedMixinObjective(
                np.zeros((len(f), 2, 64), dtype=np.float32), hidden_size=384, compat="isbiased"
            ),
            objective_id="lmix-isbiased", log=lambda m: None,
        )
    assert not (tmp_path / "ckpt").exists()


# ---------------------------------------------------------------------------------------------------------------------
# A synthetic shortcut task
#
# Spans of one token among T = 12 positions (the first 2 are the "question"). Each position has D = 2 features:
# a weak real signal (+1.5 at the gold position, plus N(0, 1) noise everywhere) and a shortcut marker (1 at one
# context position), plus a token id with a learned per-token score (so models can memorise training
# answers, as BERT memorises SQuAD: the teacher then fits the training set, which CReg's teacher must). In training
# the marker sits on the gold token in 90% of examples; at test it always sits on a wrong one and the tokens are new.
# The bias model sees the marker only. The teacher for CReg is the plain model, as in the paper.

_T, _Q, _D = 12, 2, 2
_VOCAB = 4000


def _shortcut_data(n: int, p_shortcut: float, generator: torch.Generator, vocab: tuple[int, int]):
    features = torch.randn(n, _T, _D, generator=generator)
    gold = torch.randint(_Q, _T, (n,), generator=generator)
    rows = torch.arange(n)
    features[:, :, 1] = 0.0
    features[rows, gold, 0] += 1.5
    wrong = _Q + (gold - _Q + torch.randint(1, _T - _Q, (n,), generator=generator)) % (_T - _Q)
    marker = torch.where(torch.rand(n, generator=generator) < p_shortcut, gold, wrong)
    features[rows, marker, 1] = 1.0
    tokens = torch.randint(vocab[0], vocab[1], (n, _T), generator=generator)
    return features, tokens, gold, marker


class _Scorer(torch.nn.Module):
    """Per-position score: a linear function of the features plus a learned score per token id (zero-initialised)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(_D, 1)
        self.token = torch.nn.Embedding(_VOCAB, 1)
        torch.nn.init.zeros_(self.token.weight)

    def forward(self, features: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        return self.linear(features).squeeze(-1) + self.token(tokens).squeeze(-1)


def _fit(params, loss_fn, steps: int = 250, lr: float = 0.05) -> None:
    optimizer = torch.optim.Adam(params, lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        loss_fn().backward()
        optimizer.step()


def _run_shortcut_task(seed: int) -> dict[str, float]:
    generator = torch.Generator().manual_seed(seed)
    x, tok, gold, _ = _shortcut_data(200, 0.9, generator, (0, _VOCAB // 2))
    x_test, tok_test, gold_test, marker_test = _shortcut_data(2000, 0.0, generator, (_VOCAB // 2, _VOCAB))
    valid = torch.zeros(len(gold), _T, dtype=torch.bool)
    valid[:, _Q:] = True

    def plain_ce(z: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(z.masked_fill(~valid, float("-inf")), gold)

    def predict(model: _Scorer) -> torch.Tensor:
        with torch.no_grad():
            return model(x_test, tok_test)[:, _Q:].argmax(dim=1) + _Q

    weight = torch.zeros(1, requires_grad=True)  # bias model: a scaled marker
    _fit([weight], lambda: plain_ce(weight * x[:, :, 1]), steps=200, lr=0.1)
    bias = (weight * x[:, :, 1]).detach()

    results = {}
    plain = _Scorer()
    _fit(plain.parameters(), lambda: plain_ce(plain(x, tok)))
    teacher = plain(x, tok).detach()
    predicted = predict(plain)
    results["plain"] = (predicted == gold_test).float().mean().item()
    results["plain_on_marker"] = (predicted == marker_test).float().mean().item()
    results["teacher_train"] = (teacher[:, _Q:].argmax(dim=1) + _Q == gold).float().mean().item()

    lmix, gate = _Scorer(), LearnedMixinGate(_D, dim=8)

    def lmix_loss() -> torch.Tensor:
        z = lmix(x, tok)
        g = gate(x, ~valid, valid)  # question = the first two positions, context = the rest
        return learned_mixin_h_loss(z, z, gold, gold, bias, bias, g, valid_mask=valid)[0]  # defaults: s=0.2, H=0.4

    _fit([*lmix.parameters(), *gate.parameters()], lmix_loss)
    results["lmix"] = (predict(lmix) == gold_test).float().mean().item()

    creg = _Scorer()

    def creg_loss() -> torch.Tensor:
        z = creg(x, tok)
        return confidence_regularization_loss(
            z, z, gold, gold, teacher, teacher, bias, bias, valid_mask=valid, scale=1.0
        )[0]

    _fit(creg.parameters(), creg_loss)
    results["creg"] = (predict(creg) == gold_test).float().mean().item()
    return results


@pytest.fixture
def one_thread():
    """The task is hundreds of tiny ops: extra threads only add contention on a shared machine (and nondeterminism)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_debiasing_beats_plain_training_on_a_synthetic_shortcut(seed, one_thread):
    """LMix (defaults: s = 0.2, H = 0.4) and CReg (full strength, s = 1 as in Utama et al.) beat plain training by
    more than 5 points of test accuracy (observed over seeds 0-9: LMix +13 to +32, CReg +10 to +24; chance is 10%).

    The plain model falls for the shortcut: it fits its training data and lands on the marker far more often than
    chance. At s = 0.2 CReg stays within about a point of plain distillation (s = 0) on this task, so the test uses
    the full strength; the gain grows with s (s = 0.5: about +3 points).
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        results = _run_shortcut_task(seed)
    assert results["teacher_train"] > 0.95, results
    assert results["plain_on_marker"] > 0.25, results
    assert results["lmix"] > results["plain"] + 0.05, results
    assert results["creg"] > results["plain"] + 0.05, results


def test_stored_logits_follow_left_padding():
    from spurious.thinktwice.debias import _gather_logits

    store = np.zeros((3, 2, 6), dtype=np.float32)
    store[0, :, :3] = [[1, 2, 3], [4, 5, 6]]  # a 3-token window
    store[2, :, :5] = [[7, 8, 9, 10, 11], [12, 13, 14, 15, 16]]  # a 5-token window
    left = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    start, end = _gather_logits(store, np.array([0, 2]), left)
    assert start.tolist() == [[0, 0, 1, 2, 3], [7, 8, 9, 10, 11]]
    assert end[0].tolist() == [0, 0, 4, 5, 6]
    right = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    start, _ = _gather_logits(store, np.array([0, 2]), right)
    assert start.tolist() == [[1, 2, 3, 0, 0], [7, 8, 9, 10, 11]]


# ---------------------------------------------------------------------------------------------------------------------
# The scale search's choice and the gate summary


def test_choose_scale_takes_the_best_and_breaks_ties_towards_the_smaller_scale():
    candidates = [{"scale": 0.8, "f1": 60.0}, {"scale": 0.2, "f1": 50.0}, {"scale": 0.5, "f1": 60.0}]
    choice = choose_scale(candidates, metric="f1")
    assert choice["scale"] == 0.5 and choice["score"] == 60.0 and choice["metric"] == "f1"
    assert [c["scale"] for c in choice["candidates"]] == [0.2, 0.5, 0.8]
    assert choose_scale([{"scale": 0.9, "exact_match": 3.0}, {"scale": 0.1, "exact_match": 2.0}], metric="exact_match")[
        "scale"
    ] == 0.9
    with pytest.raises(ValueError, match="at least two"):
        choose_scale(candidates[:1], metric="f1")
    with pytest.raises(ValueError, match="appears twice"):
        choose_scale([*candidates, {"scale": 0.2, "f1": 1.0}], metric="f1")
    with pytest.raises(ValueError, match="non-finite"):
        choose_scale([{"scale": 0.2, "f1": float("nan")}, {"scale": 0.4, "f1": 1.0}], metric="f1")
    with pytest.raises(ValueError, match="lacks"):
        choose_scale(candidates, metric="exact_match")


def test_gate_summary_of_the_last_tenth_of_training():
    rows = [{"step": i, "loss": 1.0, "gate": i / 10, "gate_q10": i / 20, "gate_q90": i / 5, "gate_max": i}
            for i in range(1, 21)]
    g = gate_summary([{"step": 0, "loss": 9.0}, *rows])  # rows without a gate (another objective) are skipped
    assert g["steps"] == 20 and g["final_steps"] == 2 and g["first_mean"] == pytest.approx(0.1)
    assert g["final_mean"] == pytest.approx(1.95) and g["final_q10"] == pytest.approx(0.975)
    assert g["final_q90"] == pytest.approx(3.9) and g["final_max"] == 20
    with pytest.raises(ValueError, match="no gate values"):
        gate_summary([{"step": 1, "loss": 1.0}])


def test_the_entropy_penalty_alone_drives_the_gate_up_for_an_uninformative_bias():
    """The mechanism behind the demo's LMix collapse (docs/measured-results.md): H(softmax(g·log p_b)) falls as g
    grows for any non-uniform p_b, so the penalty pushes the gate up whatever the bias knows; only the NLL can hold
    it, and with a bias model that learned no shortcut (near-uniform p_b, logits of spread 0.3 here) the entropy
    stays near its maximum log(T) until g is large. Checked against finite differences of the closed form."""
    torch.manual_seed(0)
    width = 64
    log_pb = F.log_softmax(torch.randn(1, width) * 0.3, dim=-1)
    mask = torch.ones(1, width, dtype=torch.bool)

    def entropy(g: torch.Tensor) -> torch.Tensor:
        return -(F.softmax(g * log_pb, dim=-1) * F.log_softmax(g * log_pb, dim=-1)).sum()

    for g0 in (0.5, 1.0, 2.0, 4.0):
        g = torch.tensor(g0, dtype=torch.float64, requires_grad=True)
        h = entropy(g.to(torch.float32))
        h.backward()
        assert g.grad.item() < 0, g0  # the penalty's gradient always asks for a larger gate
        step = 1e-2
        slope = (entropy(torch.tensor(g0 + step)) - entropy(torch.tensor(g0 - step))) / (2 * step)
        assert g.grad.item() == pytest.approx(slope.item(), rel=1e-2, abs=1e-4)
    # near-uniform: at g = 1 the entropy is within 0.1 nats of log(64) = 4.16, and it keeps falling as g grows
    assert entropy(torch.tensor(1.0)).item() > math.log(width) - 0.1
    values = [entropy(torch.tensor(g)).item() for g in (1.0, 2.0, 4.0, 8.0)]
    assert values == sorted(values, reverse=True) and values[-1] < values[0] - 1.0
    # the module's masked entropy is the same quantity
    log_mixed = F.log_softmax(2.0 * log_pb, dim=-1)
    assert (debias_module._masked_entropy(log_mixed, mask).item()
            == pytest.approx(entropy(torch.tensor(2.0)).item(), rel=1e-6))
