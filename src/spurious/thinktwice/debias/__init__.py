"""Debiasing objectives for extractive QA: LearnedMixin+H (LMix), Confidence Regularization (CReg) and ReSam.

The paper (§4.3–4.4, App. B.2) applies the three methods to BERT-base fine-tuned on SQuAD; its authors' code
(MIR-MU/isbiased, ``learnedMixinH/`` and ``confidenceRegularization/``) shows what it does where it departs from the
original methods. Our defaults follow the original methods (Clark et al. 2019 for LMix, Utama et al. 2020 for CReg)
and ``compat="isbiased"`` reproduces the authors' code, quirks included, for comparison with their numbers.

Conventions: logits are ``[B, T]`` tensors of start or end scores; gold positions are ``LongTensor [B]``; ``valid_mask``
(``BoolTensor [B, T]``) marks the positions a prediction may take, i.e. the context tokens plus the CLS token (where
HF featurisation labels windows that do not contain the answer). Bias and teacher logits are raw logits aligned to
the same tokens. Losses are computed in float32 whatever the model's dtype (bf16 softmaxes over 384 positions are too
coarse for the small differences these losses are made of).

Masking (the authors' code masks nothing): by default the softmaxes of the main model, the bias model and the teacher
run over valid positions only, so that the loss does not depend on question tokens, padding, or how wide a batch
happens to be padded. The reference code masks nothing; ``mask_non_context=False`` reproduces that in the default
formulas, and ``compat="isbiased"`` never masks.

The bias scale ``s``. The paper contradicts itself about how strongly the bias is rescaled: App. B.2.1 scales bias
probabilities to ⟨0; 0.2⟩ for LMix and ⟨0; 0.1⟩ for CReg, while App. B.2.3–4 fix the interval ⟨0; x⟩ at x = 0.8
(LMix) and x = 0.9 (CReg); the authors' code divides by 10 (LMix, ``scaling_portion``) and by 5 (CReg). We use
s = 0.2 for both by default (the B.2.1 value for LMix, the code's value for CReg) and keep it configurable; the
workflow's ``debias.scale_search`` runs the App. B.2.3–4 search (:func:`choose_scale` picks from its candidates).
The rescaling only tempers the bias inside LMix's mixture: the entropy penalty stays on the unrescaled bias
distribution (:func:`learned_mixin_h_loss`).
"""

from spurious.thinktwice.debias.losses import (
    _COMPAT_CHOICES,
    ENTROPY_ON,
    GATE_INPUTS,
    GATE_KEYS,
    Compat,
    LearnedMixinGate,
    TokenGate,
    _check_compat,
    _check_gold_valid,
    _check_logits,
    _check_positions,
    _check_scale,
    _creg_default_position,
    _creg_isbiased_position,
    _lmix_clark_position,
    _lmix_isbiased_position,
    _log_rescaled_bias,
    _masked_entropy,
    _masked_softmax,
    _resolve_mask,
    confidence_regularization_loss,
    gate_statistics,
    gate_summary,
    learned_mixin_h_loss,
    masked_log_softmax,
    rescale_bias_probs,
)
from spurious.thinktwice.debias.objectives import (
    ConfidenceRegularizationObjective,
    LearnedMixinObjective,
    _batch_masks,
    _check_logit_store,
    _gather_logits,
)
from spurious.thinktwice.debias.resampling import (
    resample_segments,
)
from spurious.thinktwice.debias.scale import (
    choose_scale,
)

__all__ = [
    "Compat",
    "_COMPAT_CHOICES",
    "_check_compat",
    "_check_scale",
    "_check_logits",
    "_check_positions",
    "_resolve_mask",
    "_check_gold_valid",
    "masked_log_softmax",
    "_masked_softmax",
    "_masked_entropy",
    "rescale_bias_probs",
    "_log_rescaled_bias",
    "LearnedMixinGate",
    "TokenGate",
    "_lmix_clark_position",
    "ENTROPY_ON",
    "GATE_INPUTS",
    "GATE_KEYS",
    "gate_summary",
    "gate_statistics",
    "_lmix_isbiased_position",
    "learned_mixin_h_loss",
    "_creg_default_position",
    "_creg_isbiased_position",
    "confidence_regularization_loss",
    "resample_segments",
    "_check_logit_store",
    "_gather_logits",
    "_batch_masks",
    "LearnedMixinObjective",
    "ConfidenceRegularizationObjective",
    "choose_scale",
]
