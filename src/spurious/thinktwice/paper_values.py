"""The numbers published with "Think Twice" (Mikula et al.), as plain data, for comparison with our runs.

Sources (MIR-MU/isbiased, ``visualization/*.csv``) and the paper's Appendix C. All bias values are *prediction bias* in
percentage points: the distance between the Exact-match bootstrap intervals of the two segments at the best threshold
(100 draws of 800 samples per segment), reported as 0 where no threshold was found. ``average`` is the mean over the
seven heuristics, as stored in the CSVs (the CSVs hold it with more decimals than the per-heuristic values, e.g.
4.041429). The *quantile* tables hold the CSVs' ``quantile`` column, which is about the Exact-match 97.5% quantile of
the worse-performing segment (0 where the model has no valid threshold).

- ``BIAS_MODELS``: ``bias_significance_models.csv`` (Figure 2: the four encoder models fine-tuned on SQuAD).
- ``BIAS_MODELS_ALL`` / ``QUANTILE_MODELS``: ``bias_significance_models_quantiles.csv`` (adds T5-Large, T0,
  Flan-T5-Large, whose fractional values look like means over runs, and the Human reference).
- ``BIAS_METHODS``: ``bias_significance_methods.csv`` (Figure 5: BERT-Base with no debiasing, ReSam, LMix, CReg);
  ``BIAS_METHODS_NEW``: ``bias_significance_methods_new.csv`` (differs only in LMix); ``QUANTILE_METHODS``:
  ``bias_significance_methods_quantiles.csv`` (the *new* LMix values, with quantiles).
- ``BIAS_OOD`` / ``QUANTILE_OOD``: ``bias_significance_ood_quantiles.csv`` (Figure 4: RoBERTa-Large trained on SQuAD,
  AdversarialQA, NaturalQuestions, TriviaQA).
- ``OOD_PERFORMANCE``: ``ood_performance_models.csv`` (Figure 3; the paper's caption says F1, the script logs EM and
  F1).
- ``APPENDIX_C_THRESHOLDS`` / ``APPENDIX_C_WORSE_SIZE``: the paper's Appendix C, the optimal thresholds of
  BERT-BASE-CASED on SQuAD validation (n = 10,570) and the sizes of the under-performing groups. ans-pos has none (no
  threshold). ``appendix_c_reference(h)`` gives one as a search-result-like record (Figure 4's default thresholds).

``paper_run(name)`` looks any of these rows up by name (case-insensitive): a model name (``"BERT-Base"``), an OOD run
(``"RoBERTa-Large_Adv"``), a debiasing method (``"ReSam"``, ``"LMix"``, ``"LMix-new"``, ``"CReg"``; also
``"BERT-Base+ReSam"``), or ``"Human"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HEURISTIC_ORDER: tuple[str, ...] = ("ans-len", "word-dist", "cos-sim", "sim-ents", "sim-word", "subj-pos", "ans-pos")
"""The paper's heuristic order (its figures sort the heuristics by average bias)."""

SAMPLE_SIZE = 800
ITERATIONS = 100
SQUAD_VALID_SIZE = 10570


def _row(values: tuple[float, ...], average: float) -> dict[str, float]:
    row = dict(zip(HEURISTIC_ORDER, values, strict=True))
    row["average"] = average
    return row


#: ``bias_significance_models.csv``
BIAS_MODELS: dict[str, dict[str, float]] = {
    "BERT-Base": _row((12.51, 8.62, 2.63, 2.48, 1.04, 1.01, 0.0), 4.041429),
    "RoBERTa-Base": _row((11.55, 6.55, 2.30, 3.25, 0.68, 0.0, 0.0), 3.475714),
    "Electra-Base": _row((10.31, 8.05, 2.17, 2.74, 0.12, 0.31, 0.0), 3.385714),
    "RoBERTa-Large": _row((10.87, 4.81, 2.43, 0.87, 0.37, 0.0, 0.0), 2.764286),
}

#: The Human reference (identical in every ``*_quantiles.csv``): the minimum over the three annotators.
HUMAN: dict[str, float] = _row((13.55, 0.30, 0.55, 0.74, 0.42, 0.0, 0.0), 2.22)

#: ``bias_significance_models_quantiles.csv`` (values)
BIAS_MODELS_ALL: dict[str, dict[str, float]] = {
    **BIAS_MODELS,
    "T5-Large": _row((12.49375, 4.684375, 2.11875, 1.60625, 0.309375, 0.0, 0.0), 3.030357143),
    "T0": _row((16.73125, 3.171875, 5.74375, 5.428125, 4.309375, 0.0, 0.0), 5.054910714),
    "Flan-T5-Large": _row((13.559375, 1.921875, 0.24375, 0.0, 0.303125, 0.0, 0.0), 2.289732143),
    "Human": HUMAN,
}

HUMAN_QUANTILE: dict[str, float] = _row((69.76, 81.07, 79.88, 82.51, 81.5, 83.94, 84.0), 80.38)

#: ``bias_significance_models_quantiles.csv`` (``quantile`` column)
QUANTILE_MODELS: dict[str, dict[str, float]] = {
    "BERT-Base": _row((69.01, 70.69, 75.44, 78.57, 77.5, 79.19, 82.19), 76.08428571),
    "RoBERTa-Base": _row((74.26, 77.75, 80.69, 83.0, 82.82, 86.26, 86.88), 81.66571429),
    "Electra-Base": _row((74.5, 76.19, 80.25, 82.69, 82.07, 82.69, 85.63), 80.57428571),
    "T5-Large": _row((74.625, 80.940625, 82.75, 85.39375, 85.565625, 88.440625, 87.940625), 83.66517857),
    "RoBERTa-Large": _row((78.13, 82.38, 84.44, 87.51, 86.51, 89.13, 89.38), 85.35428571),
    "T0": _row((67.065625, 78.125, 75.0, 79.315625, 77.065625, 84.5125, 83.565625), 77.80714286),
    "Flan-T5-Large": _row((73.815625, 83.00625, 83.690625, 86.75, 85.940625, 87.696875, 87.5), 84.05714286),
    "Human": HUMAN_QUANTILE,
}

#: ``bias_significance_methods.csv`` (BERT-Base; "None" = no debiasing, identical to ``BIAS_MODELS["BERT-Base"]``)
BIAS_METHODS: dict[str, dict[str, float]] = {
    "None": BIAS_MODELS["BERT-Base"],
    "ReSam": _row((6.87, 6.70, 1.99, 1.62, 0.23, 0.0, 0.0), 2.487143),
    "LMix": _row((10.12, 0.74, 0.0, 3.09, 0.0, 3.61, 0.0), 2.51),
    "CReg": _row((11.18, 9.68, 2.43, 2.37, 1.86, 0.24, 0.0), 3.96),
}

#: ``bias_significance_methods_new.csv``: differs from ``BIAS_METHODS`` only in LMix.
BIAS_METHODS_NEW: dict[str, dict[str, float]] = {
    **BIAS_METHODS,
    "LMix": _row((6.36, 0.0, 0.0, 2.87, 0.68, 4.41, 0.0), 2.05),
}

#: ``bias_significance_methods_quantiles.csv`` (``quantile`` column; LMix = the new LMix). 0 = no threshold found; the
#: CSV's ``average`` of ReSam/LMix/CReg is the mean over the six other heuristics (the ans-pos 0 left out).
QUANTILE_METHODS: dict[str, dict[str, float]] = {
    "None": QUANTILE_MODELS["BERT-Base"],
    "ReSam": _row((69.75, 69.25, 73.57, 79.45, 76.94, 77.44, 0.0), 74.4),
    "LMix": _row((18.52, 38.38, 21.88, 30.76, 20.88, 24.26, 0.0), 25.78),
    "CReg": _row((70.89, 71.63, 76.44, 79.51, 78.76, 79.13, 0.0), 76.06),
    "Human": HUMAN_QUANTILE,
}

#: ``bias_significance_ood_quantiles.csv`` (values): RoBERTa-Large trained on each dataset.
BIAS_OOD: dict[str, dict[str, float]] = {
    "RoBERTa-Large_SQuAD": BIAS_MODELS["RoBERTa-Large"],
    "RoBERTa-Large_Adv": _row((12.35, 1.74, 1.93, 0.0, 0.12, 0.0, 0.0), 2.31),
    "RoBERTa-Large_NQ": _row((8.24, 3.62, 0.0, 5.36, 0.0, 0.0, 0.0), 2.46),
    "RoBERTa-Large_Trivia": _row((43.24, 5.23, 4.8, 3.86, 4.49, 1.74, 0.0), 9.05),
}

#: ``bias_significance_ood_quantiles.csv`` (``quantile`` column)
QUANTILE_OOD: dict[str, dict[str, float]] = {
    "RoBERTa-Large_SQuAD": QUANTILE_MODELS["RoBERTa-Large"],
    "RoBERTa-Large_Adv": _row((71.96, 80.13, 79.13, 83.88, 80.38, 84.5, 85.13), 80.73),
    "RoBERTa-Large_NQ": _row((68.13, 71.56, 77.94, 73.95, 76.94, 77.32, 78.5), 74.90571429),
    "RoBERTa-Large_Trivia": _row((21.26, 52.25, 50.07, 56.14, 52.38, 57.57, 59.95), 49.94571429),
}

#: ``ood_performance_models.csv``: OOD score of the models fine-tuned on SQuAD (no OOD numbers exist for the methods).
OOD_PERFORMANCE: dict[str, dict[str, float]] = {
    "BERT-Base": {"AdversarialQA": 29.76, "NaturalQuestions": 67.85, "TriviaQA": 46.14, "average": 47.92},
    "RoBERTa-Base": {"AdversarialQA": 36.66, "NaturalQuestions": 73.73, "TriviaQA": 49.08, "average": 53.16},
    "Electra-Base": {"AdversarialQA": 37.15, "NaturalQuestions": 72.58, "TriviaQA": 47.90, "average": 52.54},
    "RoBERTa-Large": {"AdversarialQA": 46.64, "NaturalQuestions": 73.06, "TriviaQA": 55.30, "average": 58.33},
}

#: Appendix C: optimal thresholds of BERT-BASE-CASED on SQuAD validation (ans-pos: none found).
APPENDIX_C_THRESHOLDS: dict[str, float] = {
    "word-dist": 7,
    "sim-word": 3,
    "ans-len": 4,
    "cos-sim": 0.1,
    "sim-ents": 0,
    "subj-pos": 1,
}

APPENDIX_C_SOURCE = "Appendix C (the optimal thresholds of BERT-base-cased on SQuAD validation, as published)"
"""How results measured at :data:`APPENDIX_C_THRESHOLDS` name their thresholds' source (``threshold_from``)."""


def appendix_c_reference(heuristic: str) -> dict[str, Any]:
    """App. C's threshold for ``heuristic`` in the layout of a threshold search result (``found``, ``threshold``),
    for measuring a model at it (Fig. 4: "identified as maximal for the SQuAD-trained model (Appx. C)"); ans-pos
    (and any heuristic App. C does not list) has none: ``found`` False, ``threshold`` None."""
    threshold = APPENDIX_C_THRESHOLDS.get(heuristic)
    return {
        "heuristic": heuristic,
        "found": threshold is not None,
        "threshold": None if threshold is None else float(threshold),
        "threshold_from": APPENDIX_C_SOURCE,
    }


#: Appendix C: the sizes of the under-performing groups at those thresholds (of n = 10,570).
APPENDIX_C_WORSE_SIZE: dict[str, int] = {
    "word-dist": 1651,
    "sim-word": 3281,
    "ans-len": 3124,
    "cos-sim": 954,
    "sim-ents": 5006,
    "subj-pos": 1672,
}

#: Every named row: the models (incl. Human), the OOD runs, and the methods (also as ``BERT-Base+<method>``).
PAPER_RUNS: dict[str, dict[str, float]] = {
    **BIAS_MODELS_ALL,
    **BIAS_OOD,
    **{name: row for name, row in BIAS_METHODS.items() if name != "None"},
    "LMix-new": BIAS_METHODS_NEW["LMix"],
    **{f"BERT-Base+{name}": row for name, row in BIAS_METHODS.items() if name != "None"},
    "BERT-Base+LMix-new": BIAS_METHODS_NEW["LMix"],
}

#: The ``quantile`` column for every named row that has one.
PAPER_QUANTILES: dict[str, dict[str, float]] = {
    **QUANTILE_MODELS,
    **QUANTILE_OOD,
    "LMix-new": QUANTILE_METHODS["LMix"],
    "BERT-Base+LMix-new": QUANTILE_METHODS["LMix"],
    **{name: QUANTILE_METHODS[name] for name in ("ReSam", "CReg")},
    **{f"BERT-Base+{name}": QUANTILE_METHODS[name] for name in ("ReSam", "CReg")},
}


def _lookup(table: Mapping[str, dict[str, float]], name: str) -> dict[str, float] | None:
    for key, row in table.items():
        if key.casefold() == name.casefold():
            return dict(row)
    return None


def canonical_run_name(name: str) -> str:
    """The spelling of ``name`` in ``PAPER_RUNS`` (case-insensitive); KeyError listing the names if unknown."""
    for key in PAPER_RUNS:
        if key.casefold() == name.casefold():
            return key
    raise KeyError(f"unknown paper run {name!r}; known: {', '.join(PAPER_RUNS)}")


def paper_run(name: str) -> dict[str, float]:
    """The published prediction bias per heuristic (and ``average``) of the run ``name`` (see the module docstring)."""
    return dict(PAPER_RUNS[canonical_run_name(name)])


def paper_quantiles(name: str) -> dict[str, float] | None:
    """The published worse-segment EM 97.5% quantiles of run ``name``, or None if the paper gives none."""
    return _lookup(PAPER_QUANTILES, canonical_run_name(name))


# ----------------------------------------------------------------------------------------------------------------------
# Table 1 (added for spurious.thinktwice.debias_report)

TABLE1_MODEL = "BERT-Base"
"""The model of the paper's Table 1 (the methods are applied to BERT-Base, §5.3)."""

TABLE1_DATASETS: tuple[str, ...] = ("AdversarialQA", "NaturalQuestions", "TriviaQA")
"""Table 1's OOD datasets, in its order (each cell reads "AdversarialQA / NaturalQuestions / TriviaQA")."""

TABLE1_ORIGINAL: dict[str, float] = {"AdversarialQA": 29.8, "NaturalQuestions": 67.8, "TriviaQA": 46.1}
"""Table 1's "Original model" row (paper text line 269): the absolute OOD score of BERT-Base without debiasing.

The caption says F1, but these are ``OOD_PERFORMANCE["BERT-Base"]`` (29.76 / 67.85 / 46.14) rounded, which the reference
notes read as exact match, and §5.3 (line 281) reads the table in exact match ("improves OOD performance by 2.8% of an
exact match on average and by 7.5 on NaturalQuestions" = the CReg/word-dist row). So the numbers are taken as EM.
"""


def _table1_row(adv: float, nq: float, trivia: float) -> dict[str, float]:
    return dict(zip(TABLE1_DATASETS, (adv, nq, trivia), strict=True))


TABLE1: dict[str, dict[str, dict[str, float]]] = {
    "ReSam": {
        "ans-len": _table1_row(-0.8, -5.6, -1.7),
        "word-dist": _table1_row(+0.5, +1.3, +0.0),
        "cos-sim": _table1_row(-0.1, +0.3, -1.3),
        "sim-ents": _table1_row(+1.1, +1.5, +0.3),
        "sim-word": _table1_row(+0.3, +0.1, +0.4),
        "subj-pos": _table1_row(-1.6, -0.7, -2.2),
    },
    "LMix": {
        "ans-len": _table1_row(-0.9, -19.7, -3.3),
        "word-dist": _table1_row(+0.9, -6.4, +1.5),
        "cos-sim": _table1_row(+0.4, -11.3, -4.1),
        "sim-ents": _table1_row(-0.1, -9.5, -1.2),
        "sim-word": _table1_row(-0.3, -21.4, -2.9),
        "subj-pos": _table1_row(-1.3, -14.8, -1.3),
    },
    "CReg": {
        "ans-len": _table1_row(-0.4, +5.5, +2.1),
        "word-dist": _table1_row(+1.4, +7.5, -0.5),
        "cos-sim": _table1_row(-0.3, +7.4, +1.1),
        "sim-ents": _table1_row(-1.0, +5.9, +2.0),
        "sim-word": _table1_row(-0.7, +3.9, +1.4),
        "subj-pos": _table1_row(+0.0, +5.1, +1.6),
    },
}
"""The paper's Table 1 (paper text ``000_a2bafe98649013f1.txt`` lines 267-277): OOD score of BERT-Base debiased by
each method *for* each heuristic (rows) minus the original model's, per dataset, in points (EM; see
``TABLE1_ORIGINAL``). method → addressed heuristic → dataset → difference. ans-pos has no row (no threshold, so nothing
to debias). The bold "top gains per dataset" did not survive the text extraction."""

TABLE1_AVERAGE: dict[str, float] = {"ReSam": -0.45, "LMix": -5.31, "CReg": 2.33}
"""Table 1's "Average" row (line 277): the mean over the six heuristics and three datasets, as printed (the means of the
printed one-decimal cells are -0.456 / -5.317 / +2.333: the paper averaged unrounded values)."""
