"""Think Twice (Mikula et al., EACL 2024): the seven bias heuristics, the bootstrapped prediction bias with its
threshold search, the debiasing objectives (ReSam, LearnedMixin+H, Confidence Regularization) and their bias models,
and the paper's tables and figures."""
