"""Report of the debiasing experiments: the paper's Table 1, Figures 3, 5, 6/7 (cross-bias) and 8/9 (validation loss).

Inputs, as the workflow writes them:

- per-example predictions per (run, dataset): a frame (or parquet path) with ``id``, ``em`` (0/100) and ``f1`` (0–100);
- metrics dicts (``exact_match``, ``f1``, ``n``, ``model``, ``seed``, ``dataset``, ``split``, ``run``, ``method``,
  ``addressed``);
- bias results: the dicts of ``spurious.thinktwice.bias.search_threshold`` plus ``model``, ``model_seed``, ``run``,
  ``dataset``, ``split``, ``method``, ``addressed``;
- training summaries (``training.json``) with ``validation_curves: {name: [{step, loss}]}``.

``method`` is one of ``original``, ``plain``, ``resam``, ``lmix``, ``creg`` (``biasmodel`` and unknown methods are
ignored); ``addressed`` is the heuristic a debiased model was trained against. ``plain`` is the matched control:
standard fine-tuning with the debiased runs' training data, steps, initialisation and seed, so that a difference to it
is the method's alone. A debiased model is compared with the plain run of the same model name and seed where there is
one and, as a second column group, with the *original* model (the paper's comparison). All values are percentage points.
Tables are DataFrames with a caption in ``df.attrs["caption"]`` (write them with
:func:`spurious.thinktwice.report.write_table`, Table 1 with :func:`write_table1`); figures are written as PNG and SVG,
atomically and byte-reproducibly (Agg canvas, no dates in the metadata).
"""

from spurious.thinktwice.debias_report.bias_tables import (
    cross_bias_matrix,
    cross_bias_table,
    figure5,
    figure6,
    figure6_table,
    figure_cross_bias,
    methods_bias_table,
)
from spurious.thinktwice.debias_report.common import (
    AVERAGE,
    CONTROL,
    DEBIASING_METHODS,
    METHOD_LABELS,
    METRICS,
    N_A,
    ORIGINAL,
    PAPER_METHODS,
    QUANTILES,
    SCORE,
    VS_CONTROL,
    VS_ORIGINAL,
    paper_dataset_name,
)
from spurious.thinktwice.debias_report.ood_performance import (
    figure3,
    ood_performance_table,
)
from spurious.thinktwice.debias_report.table1 import (
    bootstrap_indices,
    load_predictions,
    table1,
    table1_display,
    write_table1,
)
from spurious.thinktwice.debias_report.training_runs import (
    BIAS_MODEL_MIN_GAP,
    FLOORS,
    bias_models_table,
    figure_loss_curves,
    quality_floors,
    runs_table,
)

__all__ = [
    "AVERAGE",
    "BIAS_MODEL_MIN_GAP",
    "CONTROL",
    "FLOORS",
    "METRICS",
    "N_A",
    "ORIGINAL",
    "PAPER_METHODS",
    "QUANTILES",
    "SCORE",
    "VS_CONTROL",
    "VS_ORIGINAL",
    "bias_models_table",
    "DEBIASING_METHODS",
    "METHOD_LABELS",
    "bootstrap_indices",
    "cross_bias_matrix",
    "cross_bias_table",
    "figure3",
    "figure5",
    "figure_cross_bias",
    "figure_loss_curves",
    "load_predictions",
    "methods_bias_table",
    "figure6",
    "figure6_table",
    "ood_performance_table",
    "paper_dataset_name",
    "quality_floors",
    "runs_table",
    "table1",
    "table1_display",
    "write_table1",
]
