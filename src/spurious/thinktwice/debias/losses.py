"""The debiasing losses on logits and masks: masked softmax pieces, the bias-probability rescaling, LearnedMixin+H
(with its gates) and Confidence Regularization, each in the paper's and the authors' (compat) position conventions.

Every value the losses return (the loss and its logged statistics) is a tensor on the logits' device, so a training
step never waits for the GPU. The checks of values (positions within the batch, gold positions inside the mask,
rows with a valid position) read their tensors on the host (``_host``): free for the CPU tensors a batch is built
from, a wait for device tensors. The training objectives (``objectives``) therefore make them on the host batch
before it moves to the device and call the losses with ``validate=False``; direct callers keep the default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

Compat = Literal["isbiased"] | None


_COMPAT_CHOICES = (None, "isbiased")


def _check_compat(compat: str | None) -> None:
    if compat not in _COMPAT_CHOICES:
        raise ValueError(f"compat must be None or 'isbiased', got {compat!r}")


def _check_scale(scale: float) -> None:
    if not 0.0 <= float(scale) <= 1.0:  # also rejects NaN
        raise ValueError(f"scale must lie in [0, 1], got {scale!r}")


def _check_logits(name: str, logits: Tensor, shape: torch.Size | None = None) -> None:
    if logits.dim() != 2:
        raise ValueError(f"{name} must have shape [B, T], got {tuple(logits.shape)}")
    if shape is not None and logits.shape != shape:
        raise ValueError(f"{name} has shape {tuple(logits.shape)}, expected {tuple(shape)} (as start_logits)")


def _host(tensor: Tensor) -> np.ndarray:
    """A tensor's values for a check: a CPU tensor's own memory (no tensor operation), a device tensor's copy (which
    waits for the device; see the module docstring)."""
    return tensor.detach().cpu().numpy()


def _check_position_shape(name: str, positions: Tensor, batch: int) -> None:
    if positions.dim() != 1 or positions.shape[0] != batch:
        raise ValueError(f"{name} must have shape [{batch}], got {tuple(positions.shape)}")
    if positions.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{name} must be an integer tensor, got {positions.dtype}")


def _check_positions(name: str, positions: Tensor, batch: int, width: int) -> None:
    _check_position_shape(name, positions, batch)
    values = _host(positions)
    if values.size and (values.min() < 0 or values.max() >= width):
        raise ValueError(f"{name} must lie in [0, {width}), got values in [{values.min()}, {values.max()}]")


def _resolve_mask(valid_mask: Tensor | None, like: Tensor, mask_non_context: bool) -> Tensor:
    """The positions a distribution runs over: ``valid_mask``, or every position when masking is switched off."""
    if valid_mask is not None:
        if valid_mask.shape != like.shape:
            raise ValueError(f"valid_mask has shape {tuple(valid_mask.shape)}, expected {tuple(like.shape)}")
        if valid_mask.dtype != torch.bool:
            raise ValueError(f"valid_mask must be a bool tensor, got {valid_mask.dtype}")
    if valid_mask is None or not mask_non_context:
        return torch.ones_like(like, dtype=torch.bool)
    return valid_mask


def _check_gold_valid(mask: Tensor, positions: Tensor, name: str) -> None:
    """A gold position outside the mask would give an infinite loss; it means the mask was built wrongly."""
    if not np.take_along_axis(_host(mask), _host(positions).astype(np.int64)[:, None], axis=1).all():
        raise ValueError(f"some {name} fall on positions that valid_mask excludes (it must include context and CLS)")


def _check_span_positions(start: Tensor, end: Tensor, batch: int, width: int, validate: bool) -> None:
    for name, positions in (("start_positions", start), ("end_positions", end)):
        if validate:
            _check_positions(name, positions, batch, width)
        else:
            _check_position_shape(name, positions, batch)


def check_span_mask(mask: Tensor, start_positions: Tensor, end_positions: Tensor) -> None:
    """The checks of a loss's (resolved) valid mask: every row has a valid position, every gold position is one."""
    _check_rows_have_a_position(mask, "valid_mask")
    _check_gold_valid(mask, start_positions, "start_positions")
    _check_gold_valid(mask, end_positions, "end_positions")


def _check_rows_have_a_position(mask: Tensor, what: str) -> None:
    if not _host(mask).any(axis=-1).all():
        raise ValueError(f"{what}: a row has no valid position")


def masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """Log-softmax over the last dimension restricted to ``mask``; masked positions get ``-inf``.

    Computed in float32. Every row needs at least one valid position (the CLS token always is one); a row without
    any is a bug in the caller's mask, so it raises instead of returning NaNs.
    """
    if mask.shape != logits.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected {tuple(logits.shape)}")
    _check_rows_have_a_position(mask, "masked_log_softmax")
    return _masked_log_softmax(logits, mask)


def _masked_log_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    """``masked_log_softmax`` without its check (the losses check their mask once, or leave it to the caller)."""
    return logits.float().masked_fill(~mask, float("-inf")).log_softmax(dim=-1)


def _masked_softmax(logits: Tensor, mask: Tensor) -> Tensor:
    return _masked_log_softmax(logits, mask).exp()


def _masked_entropy(log_probs: Tensor, mask: Tensor) -> Tensor:
    """Entropy per row of a distribution given by masked log-probabilities (``-inf`` outside the mask).

    The ``-inf`` are replaced by 0 *before* multiplying: ``0 · -inf`` is NaN and its gradient would poison the batch.
    """
    safe = log_probs.masked_fill(~mask, 0.0)
    return -(safe.exp() * mask * safe).sum(dim=-1)


def rescale_bias_probs(p_bias: Tensor, scale: float, mask: Tensor) -> Tensor:
    """LMix rescaling of bias probabilities: ``p' = s·p + (1 − s)/T_valid`` on valid positions, 0 elsewhere.

    A trained bias model is near-certain on the biased segment (App. B.2.1), which would make the main model avoid
    correct answers there; squeezing its probabilities into ⟨(1−s)/T, s + (1−s)/T⟩ tempers it. A plain
    multiplication ``s·p`` would do nothing: under a log-softmax, ``log s`` is a constant shift. Mixing with the
    uniform distribution keeps rows normalised (if the rows of ``p_bias`` sum to 1 over valid positions).
    """
    _check_scale(scale)
    if mask.shape != p_bias.shape:
        raise ValueError(f"mask has shape {tuple(mask.shape)}, expected {tuple(p_bias.shape)}")
    _check_rows_have_a_position(mask, "rescale_bias_probs")
    n_valid = mask.sum(dim=-1, keepdim=True)
    rescaled = scale * p_bias.float() + (1.0 - scale) / n_valid
    return torch.where(mask, rescaled, torch.zeros_like(rescaled))


def _log_rescaled_bias(bias_logits: Tensor, scale: float, mask: Tensor) -> Tensor:
    """``log rescale_bias_probs(softmax(bias), s)``, computed in log space (finite even where ``p_bias`` underflows)."""
    _check_scale(scale)
    log_p = _masked_log_softmax(bias_logits.detach(), mask)
    log_scale = math.log(scale) if scale > 0 else float("-inf")
    log_rest = math.log1p(-scale) if scale < 1 else float("-inf")
    log_uniform = log_rest - mask.sum(dim=-1, keepdim=True).float().log()
    out = torch.logaddexp(log_p + log_scale, log_uniform.expand_as(log_p))
    return out.masked_fill(~mask, float("-inf"))


class LearnedMixinGate(nn.Module):
    """Clark et al. (2019) QA gate: one non-negative scalar per example, shared by the start and end distributions.

    ``g(x) = softplus(a·[maxpool_q(W_q h + b_q); maxpool_p(W_p h + b_p)] + c)``, the max-pools running over the
    question and the passage (context) tokens respectively (Clark et al. 2019; chrisc36/debias, ``LearnedMixin``).
    softplus keeps g ≥ 0, so the main model can down-weight the bias but never invert it.
    """

    def __init__(self, hidden_size: int, dim: int = 50) -> None:
        super().__init__()
        self.question_proj = nn.Linear(hidden_size, dim)
        self.passage_proj = nn.Linear(hidden_size, dim)
        self.output = nn.Linear(2 * dim, 1)

    @staticmethod
    def check_masks(question_mask: Tensor, context_mask: Tensor) -> None:
        """Every example needs a question and a context token (a max-pool over none would be ``-inf``)."""
        for what, mask in (("question", question_mask), ("context", context_mask)):
            if not _host(mask).any(axis=-1).all():
                raise ValueError(f"LearnedMixinGate: an example has no {what} token")

    @staticmethod
    def _maxpool(projected: Tensor, mask: Tensor) -> Tensor:
        return projected.masked_fill(~mask[:, :, None], float("-inf")).amax(dim=1)

    def forward(
        self, hidden_states: Tensor, question_mask: Tensor, context_mask: Tensor, *, validate: bool = True
    ) -> Tensor:
        """``hidden_states [B, T, H]`` and bool masks ``[B, T]`` → gate ``[B]`` (float32, ≥ 0). ``validate=False``
        leaves out ``check_masks`` (the caller made it on the host)."""
        if hidden_states.dim() != 3:
            raise ValueError(f"hidden_states must have shape [B, T, H], got {tuple(hidden_states.shape)}")
        for name, mask in (("question_mask", question_mask), ("context_mask", context_mask)):
            if mask.shape != hidden_states.shape[:2] or mask.dtype != torch.bool:
                raise ValueError(f"{name} must be a bool tensor of shape {tuple(hidden_states.shape[:2])}")
        if validate:
            self.check_masks(question_mask, context_mask)
        h = hidden_states.to(self.output.weight.dtype)
        pooled = torch.cat(
            [
                self._maxpool(self.question_proj(h), question_mask),
                self._maxpool(self.passage_proj(h), context_mask),
            ],
            dim=-1,
        )
        return F.softplus(self.output(pooled).squeeze(-1).float())


class TokenGate(nn.Module):
    """The isbiased gate (MIR-MU/isbiased, ``learnedMixinH/loss.py``): ``g_t = softplus(Linear(h_t))`` for every
    token, shape ``[B, T]``.

    Initialised as the authors' ``post_init`` does (weights N(0, 0.02), bias 0), so compat runs start where theirs did.
    One gate serves both the start and the end distribution, as their single ``learned_bias_scalar`` does.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.linear.weight, mean=0.0, std=0.02)
        nn.init.zeros_(self.linear.bias)

    def forward(self, hidden_states: Tensor) -> Tensor:
        """``hidden_states [B, T, H]`` → gate ``[B, T]`` (float32, ≥ 0)."""
        if hidden_states.dim() != 3:
            raise ValueError(f"hidden_states must have shape [B, T, H], got {tuple(hidden_states.shape)}")
        h = hidden_states.to(self.linear.weight.dtype)
        return F.softplus(self.linear(h).squeeze(-1).float())


def _lmix_clark_position(
    logits: Tensor, gold: Tensor, bias_logits: Tensor, gate: Tensor, mask: Tensor, scale: float, entropy_on: str
) -> tuple[Tensor, Tensor]:
    """Per-example NLL and bias entropy of one position distribution (start or end), Clark's formula.

    The mixed NLL uses the rescaled bias ``p'_b``; the entropy penalty uses ``softmax(g·log p_b)`` of the *unrescaled*
    bias distribution (``entropy_on="bias"``, as Clark et al.'s QA loss, which has no rescaling) or of ``p'_b``
    (``entropy_on="rescaled"``, our round-1 formula). The uniform floor ``(1 − s)/T`` of ``p'_b`` caps its contrast at
    ``log(1 + sT/(1 − s))`` nats, so its entropy only falls once the gate grows large, and a large gate makes the bias
    term dominate the mixture (the main model then learns to cancel it instead of answering).
    """
    log_p_main = _masked_log_softmax(logits, mask)
    log_p_bias = _log_rescaled_bias(bias_logits, scale, mask)
    # zero (not -inf) outside the mask before scaling by g: g·(-inf) is NaN where g underflows to 0
    bias_term = gate[:, None] * log_p_bias.masked_fill(~mask, 0.0)
    combined = _masked_log_softmax(log_p_main.masked_fill(~mask, 0.0) + bias_term, mask)
    nll = -combined.gather(1, gold[:, None]).squeeze(1)
    if entropy_on == "rescaled":
        entropy_term = bias_term
    else:
        entropy_term = gate[:, None] * _masked_log_softmax(bias_logits.detach(), mask).masked_fill(~mask, 0.0)
    entropy = _masked_entropy(_masked_log_softmax(entropy_term, mask), mask)
    return nll, entropy


ENTROPY_ON = ("bias", "rescaled")


# What the gate's gradient reaches: "encoder" (Clark et al.'s code: the gate reads the main model's hidden states
# and its gradient, the entropy penalty's included, flows into the encoder) or "detached" (the gate only).
GATE_INPUTS = ("encoder", "detached")


GATE_KEYS = ("gate", "gate_q10", "gate_q50", "gate_q90", "gate_max")


def gate_summary(train_losses: Sequence[Mapping[str, Any]], final_fraction: float = 0.1) -> dict[str, Any]:
    """The LMix gate at the end of training, from the ``train_losses`` rows of ``train_qa`` (one per step, each with
    the step's batch mean, quantiles and maximum of the gate: :func:`gate_statistics`, averaged over micro-batches).

    ``final_*`` average the last ``final_fraction`` of the steps (at least one): ``final_mean`` is the gate's mean,
    ``final_q10``/``final_q50``/``final_q90`` its quantiles, ``final_max`` the largest value seen in those steps;
    ``first_mean`` is the first step's mean, for contrast. A gate that grows without bound (the bias term taking
    over the mixture) shows here without reading logs.
    """
    rows = [r for r in train_losses if "gate" in r]
    if not rows:
        raise ValueError("no gate values among the training-loss rows (not an LMix run?)")
    if not 0.0 < final_fraction <= 1.0:
        raise ValueError(f"final_fraction must lie in (0, 1], got {final_fraction!r}")
    tail = rows[-max(1, math.ceil(final_fraction * len(rows))) :]

    def mean(key: str) -> float:
        return float(np.mean([r.get(key, r["gate"]) for r in tail]))

    return {
        "steps": len(rows),
        "final_steps": len(tail),
        "first_mean": float(rows[0]["gate"]),
        "final_mean": mean("gate"),
        "final_q10": mean("gate_q10"),
        "final_q50": mean("gate_q50"),
        "final_q90": mean("gate_q90"),
        "final_max": float(max(r.get("gate_max", r["gate"]) for r in tail)),
    }


def gate_statistics(gate: Tensor) -> dict[str, Tensor]:
    """Mean and quantiles (10/50/90 %) and maximum of a batch's gate values, for the training record (0-d tensors on
    the gate's device: the training loop reads them when it logs).

    A gate that runs away (the bias term dominating the mixture) shows here long before it shows in the scores.
    """
    values = gate.detach().float().flatten()
    q = torch.quantile(values, torch.tensor([0.1, 0.5, 0.9], dtype=values.dtype, device=values.device))
    return {"gate": values.mean(), "gate_q10": q[0], "gate_q50": q[1], "gate_q90": q[2], "gate_max": values.max()}


def _lmix_isbiased_position(
    logits: Tensor, gold: Tensor, bias_logits: Tensor, gate: Tensor, scale: float, entropy_weight: float
) -> tuple[Tensor, Tensor, Tensor]:
    """isbiased's ``LearnedMixinHLoss`` for one position: CE(z + s·g·b) + H·mean Entropy(softmax(g·b)), no masking."""
    scaled_bias = gate * bias_logits.detach().float()
    ce = F.cross_entropy(logits.float() + scale * scaled_bias, gold)
    log_q = scaled_bias.log_softmax(dim=-1)
    entropy = -(log_q.exp() * log_q).sum(dim=-1).mean()
    return ce + entropy_weight * entropy, ce, entropy


def learned_mixin_h_loss(
    start_logits: Tensor,
    end_logits: Tensor,
    start_positions: Tensor,
    end_positions: Tensor,
    bias_start_logits: Tensor,
    bias_end_logits: Tensor,
    gate: Tensor,
    *,
    valid_mask: Tensor | None,
    entropy_weight: float = 0.4,
    scale: float = 0.2,
    compat: Compat = None,
    mask_non_context: bool = True,
    entropy_on: str = "bias",
    validate: bool = True,
) -> tuple[Tensor, dict[str, Tensor]]:
    """LearnedMixin+H training loss for span QA; returns ``(loss, stats)``: 0-d tensors for logging, ``nll``,
    ``entropy`` and the gate's distribution over the batch (``gate`` = its mean, ``gate_q10``/``q50``/``q90``,
    ``gate_max``). ``validate=False`` leaves out the checks of values (positions, masks; see the module docstring).

    Default (Clark et al. 2019; chrisc36/debias, ``LearnedMixin``), for start and end separately:
    ``ℓ = log_softmax(z)``, ``log p'_b = log rescale_bias_probs(softmax(b), s)``, NLL of ``softmax(ℓ + g·log p'_b)`` at
    the gold position and the entropy of ``softmax(g·log p_b)`` with ``p_b = softmax(b)`` *unrescaled* (the rescaling
    only tempers the bias in the mixture; Clark's QA loss, which has no rescaling, and the authors' Adaptor objective
    keep it out of the entropy), all softmaxes over ``valid_mask`` (over every position with ``mask_non_context=False``,
    the reference behaviour, or ``valid_mask=None``). With s = 1 this is Clark's loss exactly. ``entropy_on="rescaled"``
    puts the penalty on ``softmax(g·log p'_b)`` instead (our round-1 formula; it drives the gate up, see
    ``_lmix_clark_position``). ``gate`` is ``[B]``, one scalar per example shared by start and end. Loss = mean_B
    (NLL_s + NLL_e)/2 + ``entropy_weight``·mean_B (H_s + H_e)/2. The entropy penalty stops the gate from switching the
    bias off (g = 0 would otherwise be an easy way out).

    ``compat="isbiased"`` (MIR-MU/isbiased, ``learnedMixinH/loss.py``): ``gate`` is per token ``[B, T]``,
    ``s_t = g_t·b_t`` on the *raw* bias logits (no softmax, no rescaling), loss_pos = CE(z + scale·s, gold) +
    entropy_weight·mean_B H(softmax(s)), total = (loss_start + loss_end)/2. The authors divide s by ``scaling_portion``
    κ = 10 in the CE only, so their setting is ``scale=0.1`` (= 1/κ). Nothing is masked (``valid_mask`` and
    ``mask_non_context`` are ignored), as in their code; the loss then depends on the padding width, and they padded
    every window to 384 tokens.

    The bias only shapes training: at test time the main model's logits alone are used. Bias logits are detached.
    """
    _check_compat(compat)
    _check_scale(scale)
    if entropy_on not in ENTROPY_ON:
        raise ValueError(f"entropy_on must be one of {ENTROPY_ON}, got {entropy_on!r}")
    _check_logits("start_logits", start_logits)
    shape = start_logits.shape
    others = {"end_logits": end_logits, "bias_start_logits": bias_start_logits, "bias_end_logits": bias_end_logits}
    for name, tensor in others.items():
        _check_logits(name, tensor, shape)
    batch, width = shape
    _check_span_positions(start_positions, end_positions, batch, width, validate)
    gold_start, gold_end = start_positions.long(), end_positions.long()

    if compat == "isbiased":
        if gate.shape != shape:
            raise ValueError(
                f"compat='isbiased' needs a per-token gate of shape {tuple(shape)}, got {tuple(gate.shape)}"
            )
        gate = gate.float()
        loss_s, ce_s, h_s = _lmix_isbiased_position(
            start_logits, gold_start, bias_start_logits, gate, scale, entropy_weight
        )
        loss_e, ce_e, h_e = _lmix_isbiased_position(end_logits, gold_end, bias_end_logits, gate, scale, entropy_weight)
        loss = (loss_s + loss_e) / 2
        nll, entropy = (ce_s + ce_e) / 2, (h_s + h_e) / 2
    else:
        if gate.shape != (batch,):
            raise ValueError(f"the gate must have shape [{batch}] (one scalar per example), got {tuple(gate.shape)}")
        gate = gate.float()
        mask = _resolve_mask(valid_mask, start_logits, mask_non_context)
        if validate:
            check_span_mask(mask, gold_start, gold_end)
        nll_s, h_s = _lmix_clark_position(start_logits, gold_start, bias_start_logits, gate, mask, scale, entropy_on)
        nll_e, h_e = _lmix_clark_position(end_logits, gold_end, bias_end_logits, gate, mask, scale, entropy_on)
        nll = ((nll_s + nll_e) / 2).mean()
        entropy = ((h_s + h_e) / 2).mean()
        loss = nll + entropy_weight * entropy
    stats = {"nll": nll.detach(), "entropy": entropy.detach(), **gate_statistics(gate)}
    return loss, stats


def _creg_default_position(
    logits: Tensor, gold: Tensor, teacher_logits: Tensor, bias_logits: Tensor, mask: Tensor, scale: float
) -> tuple[Tensor, Tensor]:
    """Per-example soft cross-entropy against the bias-scaled teacher (Utama et al. 2020) and its β."""
    log_p_teacher = _masked_log_softmax(teacher_logits.detach(), mask)
    p_bias = _masked_softmax(bias_logits.detach(), mask)
    beta = scale * p_bias.gather(1, gold[:, None]).squeeze(1)
    # S ∝ p_T^(1−β), in log space; zeros outside the mask first, since (1−β) may be 0 and 0·(-inf) is NaN
    log_target = _masked_log_softmax((1.0 - beta)[:, None] * log_p_teacher.masked_fill(~mask, 0.0), mask)
    target = log_target.exp()
    log_p_student = _masked_log_softmax(logits, mask).masked_fill(~mask, 0.0)
    return -(target * log_p_student).sum(dim=-1), beta


def _creg_isbiased_position(
    logits: Tensor, gold: Tensor, teacher_logits: Tensor, bias_logits: Tensor, scale: float
) -> tuple[Tensor, Tensor]:
    """isbiased's ``SmoothedDistillLoss``, one position: softmax(exp(·)) of teacher and bias, w = 1 − scale·p_B[y]."""
    teacher = teacher_logits.detach().double()
    bias = bias_logits.detach().double()
    p_teacher = torch.softmax(teacher.exp(), dim=-1)
    p_bias = torch.softmax(bias.exp(), dim=-1)
    weight = 1.0 - scale * p_bias.gather(1, gold[:, None])
    powered = p_teacher**weight
    target = (powered / powered.sum(dim=-1, keepdim=True)).float()
    return F.cross_entropy(logits.float(), target), (1.0 - weight.squeeze(1)).float()


def confidence_regularization_loss(
    start_logits: Tensor,
    end_logits: Tensor,
    start_positions: Tensor,
    end_positions: Tensor,
    teacher_start_logits: Tensor,
    teacher_end_logits: Tensor,
    bias_start_logits: Tensor,
    bias_end_logits: Tensor,
    *,
    valid_mask: Tensor | None,
    scale: float = 0.2,
    compat: Compat = None,
    mask_non_context: bool = True,
    validate: bool = True,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Confidence Regularization loss for span QA; returns ``(loss, {"ce", "beta"})`` (0-d tensors for logging).
    ``validate=False`` leaves out the checks of values (positions, masks; see the module docstring).

    Default (Utama et al. 2020, UKPLab's ``SmoothedDistillLoss``, applied to the start and the end distribution
    separately): ``p_T = softmax(teacher)``, ``p_B = softmax(bias)``, ``β = s·p_B[gold]``, ``S ∝ p_T^(1−β)`` and loss =
    mean_B −Σ_j S_j log softmax(z)_j, every softmax over ``valid_mask`` (over all positions with
    ``mask_non_context=False`` or ``valid_mask=None``); total = (start + end)/2. The teacher is distilled less sharply
    on the examples the bias model gets right, so they pull less towards the shortcut. ``s = 0`` is plain distillation
    (S = p_T). ``s`` is the paper's rescaling of the bias probabilities; the original method has s = 1.

    ``compat="isbiased"`` (MIR-MU/isbiased, ``confidenceRegularization/overrides/loss.py``) reproduces the authors'
    code: ``p_T = softmax(exp(teacher))`` and ``p_B = softmax(exp(bias))`` (a double exponentiation, so both are nearly
    one-hot), ``w = 1 − p_B[gold]·scale`` with their ``scaling_portion`` 5, i.e. ``scale=0.2`` (the default),
    ``S ∝ p_T^w``, soft-target CE over all positions, no masking. The inner ``exp`` overflows float32 for logits above
    ~88 (their NaN losses); we do not clamp but compute the targets in float64, which delays the overflow to logits
    above ~709 and otherwise changes nothing (the softmax itself subtracts the maximum, so ``exp(exp(·))`` is never
    formed).

    Teacher and bias logits are detached.
    """
    _check_compat(compat)
    _check_scale(scale)
    _check_logits("start_logits", start_logits)
    shape = start_logits.shape
    others = {
        "end_logits": end_logits,
        "teacher_start_logits": teacher_start_logits,
        "teacher_end_logits": teacher_end_logits,
        "bias_start_logits": bias_start_logits,
        "bias_end_logits": bias_end_logits,
    }
    for name, tensor in others.items():
        _check_logits(name, tensor, shape)
    batch, width = shape
    _check_span_positions(start_positions, end_positions, batch, width, validate)
    gold_start, gold_end = start_positions.long(), end_positions.long()

    if compat == "isbiased":
        ce_s, beta_s = _creg_isbiased_position(start_logits, gold_start, teacher_start_logits, bias_start_logits, scale)
        ce_e, beta_e = _creg_isbiased_position(end_logits, gold_end, teacher_end_logits, bias_end_logits, scale)
        loss = (ce_s + ce_e) / 2
    else:
        mask = _resolve_mask(valid_mask, start_logits, mask_non_context)
        if validate:
            check_span_mask(mask, gold_start, gold_end)
        ce_s, beta_s = _creg_default_position(
            start_logits, gold_start, teacher_start_logits, bias_start_logits, mask, scale
        )
        ce_e, beta_e = _creg_default_position(end_logits, gold_end, teacher_end_logits, bias_end_logits, mask, scale)
        loss = ((ce_s + ce_e) / 2).mean()
    beta = ((beta_s + beta_e) / 2).mean()
    return loss, {"ce": loss.detach(), "beta": beta.detach()}

