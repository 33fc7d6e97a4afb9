"""Every figure function of the package, drawn on small in-memory fixtures and checked by
:func:`spurious.core.report.figures.check_figure`: its real cases, its empty cases (nothing found, nothing measured),
and, where it draws names from data, a config or an argument, the names ``$\\x$`` and ``a_b^c`` (drawn as written).

The registry is the list of figure functions; a function in ``src/spurious`` that creates a figure without being
registered fails :func:`test_every_function_that_creates_a_figure_is_registered`, and a registered function
without cases here fails :func:`test_every_registered_figure_function_has_cases`.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import spurious
from spurious.core.report import figures

SRC = Path(spurious.__file__).parent
NAMES = ("$\\x$", "a_b^c")
HEURISTICS = ("word-dist", "sim-word", "ans-pos", "cos-sim", "ans-len", "sim-ents", "subj-pos")
SHORT = ("word-dist", "ans-len")  # for the names cases: small and quick
EXCL = "punctuation:exclamation"


def drawn_texts(fig: Any) -> list[Any]:
    """The Text artists a draw of ``fig`` puts on the canvas (non-empty, visible, inside the view), in drawing order:
    the texts :func:`~spurious.core.report.figures.check_figure` reads."""
    return figures._draw_recording_texts(fig)[1]


@pytest.fixture(autouse=True)
def _checked_here_not_when_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests check each figure themselves (and see every problem), so saving does not check it a second time
    (tests/conftest.py turns that on for the rest of the suite)."""
    monkeypatch.delenv(figures.CHECK_ENV, raising=False)


def _figure_modules(root: Path = SRC) -> list[str]:
    """The modules under ``root`` that create a figure or use ``figure_function`` (so that importing them fills the
    registry without importing the whole package, torch included)."""
    modules = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "figure_function" in text or "Figure(" in text or "plt." in text:
            parts = path.relative_to(root.parent).with_suffix("").parts
            modules.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return [m for m in modules if m != "spurious.core.report.figures"]


def _import_figure_modules() -> None:
    for module in _figure_modules():
        importlib.import_module(module)


# ----------------------------------------------------------------------------------------------------------------------
# which functions create figures


_CREATORS = {("Figure",), ("plt", "subplots"), ("plt", "figure"), ("plt", "subplot_mosaic"), ("pyplot", "subplots"),
             ("pyplot", "figure")}  # fmt: skip


def _callee(node: ast.Call) -> tuple[str, ...]:
    func = node.func
    if isinstance(func, ast.Name):
        return (func.id,)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return (func.value.id, func.attr)
    return ()


def figure_creating_functions(root: Path = SRC) -> set[str]:
    """``module.qualname`` of every function under ``root`` whose own body (not a nested function's) calls
    ``Figure(...)``, ``plt.subplots``, ``plt.figure`` or ``plt.subplot_mosaic``."""
    found: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

        def visit(node: ast.AST, prefix: str, module: str = module) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    qualname = f"{prefix}{child.name}"
                    if any(isinstance(n, ast.Call) and _callee(n) in _CREATORS for n in _own_nodes(child)):
                        found.add(f"{module}.{qualname}")
                    visit(child, f"{qualname}.<locals>.")
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")
                else:
                    visit(child, prefix)

        visit(ast.parse(path.read_text(encoding="utf-8")), "")
    return found


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    out: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def test_the_scan_finds_a_figure_function_it_is_shown(tmp_path):
    package = tmp_path / "spurious"
    (package / "paper").mkdir(parents=True)
    (package / "paper" / "report.py").write_text(
        "from matplotlib.figure import Figure\n"
        "import matplotlib.pyplot as plt\n"
        "def drawn():\n    fig = Figure()\n"
        "def pyplot_drawn():\n    fig, ax = plt.subplots()\n"
        "def outer():\n    def inner():\n        return Figure()\n    return inner\n"
        "def table():\n    return 1\n"
    )
    assert figure_creating_functions(package) == {
        "spurious.paper.report.drawn",
        "spurious.paper.report.pyplot_drawn",
        "spurious.paper.report.outer.<locals>.inner",
    }


def test_every_function_that_creates_a_figure_is_registered():
    _import_figure_modules()
    creators = figure_creating_functions()
    assert len(creators) >= 12  # the papers' and the audit's figures
    unregistered = sorted(creators - set(figures.registered_figures()))
    assert unregistered == [], f"decorate these with @spurious.core.report.figures.figure_function: {unregistered}"


# ----------------------------------------------------------------------------------------------------------------------
# fixtures: Think Twice


def _search(model: str, heuristic: str, bias: float, *, dataset: str = "squad", found: bool = True, **extra) -> dict:
    from tests.thinktwice.test_report import result

    if not found:
        extra.setdefault("reason", "no_significant_difference")
    return result(model, heuristic, bias, found=found, dataset=dataset, **extra)


def _paper_models(dataset: str = "squad") -> list[dict]:
    """Four models and Human on the seven heuristics, one without a threshold per model (ans-pos)."""
    out = []
    for k, model in enumerate(("bert-base", "roberta-base", "bert-large", "roberta-large", "Human")):
        for j, h in enumerate(HEURISTICS):
            if h == "ans-pos":
                out.append(_search(model, h, 0.0, dataset=dataset, found=False))
            else:
                out.append(_search(model, h, round(1.0 + 2.7 * j + 0.9 * k, 2), dataset=dataset,
                                   **({"annotator": 0} if model == "Human" else {})))
    return out


def _no_threshold(sample_size: int = 20, n_evaluated: int = 30) -> list[dict]:
    """The tiny demo's case: too few questions for the sample size, no threshold on any heuristic."""
    return [
        _search("minilm", h, 0.0, found=False, reason="too_few_rows", sample_size=sample_size,
                n_evaluated=n_evaluated, n_dropped_negative=0)
        for h in HEURISTICS
    ]


def _tt_figure2(results: list[dict], **kw) -> Callable[[Path], Any]:
    from spurious.thinktwice import report

    return lambda tmp: report.figure2(results, tmp / "f.png", tmp / "f.svg", **kw)


def _methods(
    models: tuple[str, ...] = ("bert",), dataset: str = "squad", split: str = "validation",
    heuristics: tuple[str, ...] = HEURISTICS,
) -> list[dict]:
    """Original, plain and the three debiasing methods, each addressing every heuristic but ans-pos, measured on all
    seven (Figure 5 uses the addressed one; Figures 6/7 all), and Human."""
    out = []
    for model in models:
        for j, h in enumerate(heuristics):
            found = h != "ans-pos"
            out.append(_search(model, h, 4.0 + j if found else 0.0, dataset=dataset, found=found, method="original",
                               split=split, model_seed=0))
            out.append(_search(model, h, 3.5 + j if found else 0.0, dataset=dataset, found=found, method="plain",
                               split=split, model_seed=0))
        for m, method in enumerate(("resam", "lmix", "creg")):
            for addressed in heuristics:
                if addressed == "ans-pos":
                    continue
                for j, h in enumerate(heuristics):
                    found = h != "ans-pos"
                    value = 2.0 + j - (2.5 if h == addressed else 0.0) + 0.3 * m
                    out.append(_search(model, h, value if found else 0.0, dataset=dataset, found=found, method=method,
                                       addressed=addressed, split=split, model_seed=0))
    out += [_search("Human", h, 0.5, dataset=dataset, split=split, annotator=0) for h in heuristics]
    return out


def _methods_none_found() -> list[dict]:
    out = []
    for method, addressed in (("original", None), ("plain", None), ("resam", "word-dist"), ("lmix", "word-dist")):
        out += [
            _search("minilm", h, 0.0, found=False, reason="too_few_rows", sample_size=20, n_evaluated=30,
                    method=method, addressed=addressed, split="validation", model_seed=0)
            for h in ("word-dist", "ans-len")
        ]
    return out


def _debias(name: str, data: list[dict], **kw) -> Callable[[Path], Any]:
    from spurious.thinktwice import debias_report as dr

    fn = getattr(dr, name)
    return lambda tmp: fn(data, tmp / "f.png", tmp / "f.svg", **kw)


def _ood_metrics(models: tuple[str, ...] = ("bert", "roberta", "bert-large", "roberta-large")) -> list[dict]:
    from tests.thinktwice.test_debias_report import metrics

    out = []
    for k, model in enumerate(models):
        for j, dataset in enumerate(("adversarialqa", "nq", "triviaqa")):
            for seed in (0, 1):
                out.append(metrics(model, dataset, 20.0 + 10 * j + 5 * k + seed, 30.0 + 10 * j + 5 * k + seed, seed))
    return out


def _loss_summaries(steps: tuple[int, ...] = (1, 2, 3, 4)) -> list[dict]:
    """The demo's short runs: a few validation points at steps 1..4, the original, plain, and the three methods
    (LMix with its gate)."""

    def run(name: str, method: str, addressed: str | None, offset: float) -> dict:
        curve = [{"step": s, "loss": 3.0 / (1 + s) + offset} for s in steps]
        ood = [{"step": s, "loss": 4.0 / (1 + s) + offset} for s in steps]
        return {"run": name, "model": "minilm", "seed": 0, "method": method, "addressed": addressed,
                "validation_curves": {"validation": curve, "nq": ood, "triviaqa": ood}}

    lmix = run("minilm/lmix/word-dist/seed0", "lmix", "word-dist", 0.1)
    lmix["train_losses"] = [{"step": s, "loss": 2.0, "gate": 0.4 + s / 10, "gate_q10": 0.2, "gate_q90": 0.9}
                            for s in steps]
    return [
        run("minilm/seed0", "original", None, 0.0),
        run("minilm/plain/seed0", "plain", None, 0.05),
        lmix,
        run("minilm/resam/word-dist/seed0", "resam", "word-dist", -0.2),
        run("minilm/creg/word-dist/seed0", "creg", "word-dist", -0.1),
    ]


# ----------------------------------------------------------------------------------------------------------------------
# fixtures: SpuriousBench, Stubborn Lexical Bias, AFLite, the audit


def _sb_records(dataset: str, models: dict[str, str], methods: tuple[str, ...], features: list[str]) -> list[dict]:
    from tests.spuriousbench.test_spuriousbench_report import record

    out = []
    for f, feature in enumerate(features):
        for model, paper_name in models.items():
            for method in methods:
                for seed in (0, 1, 2):
                    r = record("minilm", method, feature, seed, 0.05 * (f % 7) + 0.02 * seed)
                    r.update(dataset=dataset, model=model, paper_name=paper_name, category=feature.partition(":")[0])
                    out.append(r)
    return out


def _sb_features(dataset: str) -> list[str]:
    from spurious.spuriousbench.construction import FEATURES

    return [name for name, spec in FEATURES.items() if dataset in spec.datasets]


def _sb_real() -> list[dict]:
    models = {"minilm": "BERT-base", "scratch": "BERT-random"}
    out = _sb_records("sst2", models, ("finetune",), _sb_features("sst2"))
    out += _sb_records("sst2", {"minilm": "BERT-base"}, ("balanced", "prompt"), _sb_features("sst2"))
    out += _sb_records("mnli", models, ("finetune",), _sb_features("mnli"))
    return out


def _sb_icl_on_one_dataset() -> list[dict]:
    """Finetuning on SST-2 and MNLI, in-context learning on SST-2 only: Figure 3 has no MNLI panel."""
    from tests.spuriousbench.test_spuriousbench_report import ICL_FIG4

    feats = ["punctuation:exclamation", "adverb:very"]
    return _sb_records("sst2", {"minilm": "BERT-base"}, ("finetune",), feats) + _sb_records(
        "mnli", {"minilm": "BERT-base"}, ("finetune",), feats
    ) + [dict(r, dataset="sst2") for r in ICL_FIG4]


def _sb_named() -> list[dict]:
    return _sb_records(NAMES[1], {"minilm": NAMES[0], "scratch": NAMES[1]}, ("finetune", "balanced"),
                       ["punctuation:exclamation", f"adverb:{NAMES[0]}"])


def _sb(name: str, metrics: list[dict]) -> Callable[[Path], Any]:
    from spurious.spuriousbench import gap_figures

    fn = getattr(gap_figures, name)
    return lambda tmp: fn(metrics, tmp / "f.png", tmp / "f.svg")


def _balances(features: list[tuple[str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(features, columns=["feature", "balance_uniform", "balance_q"])


def _lexical_real() -> dict[str, pd.DataFrame]:
    """The tiny demo's SNLI panel: 11 features, rare single-label types coinciding at the same balance, some q makes
    worse (labelled), long ones among them."""
    snli = _balances([
        ("world", 0.4444, 0.5012), ("newcastle", 0.4444, 0.5012), ("around", 0.4444, 0.5012),
        ("sleeping", 0.4444, 0.4980), ("outside", 0.3012, 0.2511), ("nobody", 0.6667, 0.6101),
        ("cat", 0.6667, 0.6101), ("tall", 0.2222, 0.2500), ("asleep", 0.6667, 0.7001),
        ("playing", 0.1111, 0.0800), ("instrument", 0.6600, 0.6950),
    ])  # fmt: skip
    mnli = _balances([(f"type{i}", 0.05 * i, 0.05 * i - 0.01 * (i % 3)) for i in range(1, 12)])
    return {"snli": snli, "mnli": mnli}


def _lexical(balances: dict[str, pd.DataFrame]) -> Callable[[Path], Any]:
    from spurious.lexical import report

    return lambda tmp: report.figure2(balances, tmp / "f.png", tmp / "f.svg")


def _iterations(n: int, start: int = 1000) -> pd.DataFrame:
    rows = [{"iteration": i + 1, "size_before": start - 50 * i, "size_after": start - 50 * (i + 1),
             "mean_heldout_accuracy": 0.8 - 0.03 * i} for i in range(n)]
    return pd.DataFrame(rows, columns=["iteration", "size_before", "size_after", "mean_heldout_accuracy"])


def _aflite_iterations(iterations: dict[str, pd.DataFrame], **kw) -> Callable[[Path], Any]:
    from spurious.aflite import report

    return lambda tmp: report.iterations_figure(iterations, tmp / "f.png", tmp / "f.svg", **kw)


def _synthetic_runs() -> list[dict]:
    from spurious.aflite import synthetic as syn

    settings = asdict(syn.SyntheticSettings())
    settings["flip_at"] = list(settings["flip_at"])
    return [
        {"separation": s, "seed": 0, "settings": settings, "kept": list(range(0, 2000, 3)),
         "before": {"SVM-RBF": 95.0 - 5 * k, "Logistic Reg.": 90.0 - 5 * k},
         "after": {"SVM-RBF": 85.0 - 5 * k, "Logistic Reg.": 55.0 - k}}
        for k, s in enumerate(syn.SEPARATIONS)
    ]  # fmt: skip


def _synthetic(runs: list[dict]) -> Callable[[Path], Any]:
    from spurious.aflite import synthetic as syn

    return lambda tmp: syn.figure2(runs, str(tmp / "f.png"), str(tmp / "f.svg"))


def _qa_result(heuristics: tuple[str, ...] = HEURISTICS, human: bool = True, found: bool = True) -> dict:
    rows = [
        {"heuristic": h, "prediction_bias": (1.5 + 3.1 * j) if found and h != "ans-pos" else 0.0,
         "found": found and h != "ans-pos", "reason": None if found and h != "ans-pos" else "too_few_rows",
         "human_bias": (0.4 + 0.2 * j) if human else None}
        for j, h in enumerate(heuristics)
    ]  # fmt: skip
    searches = {r["heuristic"]: {"found": r["found"], "reason": r.pop("reason"), "sample_size": 20, "n_evaluated": 30}
                for r in rows}  # fmt: skip
    for r in rows:
        r["threshold"] = 0.5 if r.pop("found") else None
    return {"task": "qa", "bias": rows, "model_bias": searches, "bias_settings": {"sample_size": 20, "iterations": 100},
            "n_examples": 30}


def _insertion_result(features: list[tuple[str, str]], labels: tuple[str, str] = ("negative", "positive")) -> dict:
    rows = []
    for k, (feature, label) in enumerate(features):
        rate = 0.05 + 0.11 * k
        rows.append({"feature": feature, "label": label, "n_applicable": 18 - k, "flips_towards": 5 - k % 3,
                     "flips_away": 1, "flip_rate": rate, "flip_rate_ci": [max(rate - 0.08, 0.0), rate + 0.1],
                     "net_shift": rate - 0.02, "flagged": k % 2 == 0})
    perm = {"n_usual": 40, "acc_usual": 0.85, "n_unusual": 12, "acc_unusual": 0.5, "accuracy_gap_points": 35.0,
            "flagged": True}
    return {"task": "classification", "insertion": rows, "permutation_test": perm, "label_names": list(labels)}


def _overview_result(features: list[tuple[str, str]], *, gap: float | None = -11.5) -> dict:
    """A classification audit's result as the overview figure reads it: the accuracy gap with its interval and each
    inserted feature's net shift with its interval (fractions), one flagged."""
    rows = [{"feature": f, "label": lab, "p": 0.5 / (k + 1), "net_shift": 0.02 * k - 0.01, "flagged": k == 1,
             "net_shift_ci": [0.02 * k - 0.03, 0.02 * k + 0.01]} for k, (f, lab) in enumerate(features)]
    rows.append({"feature": "prefix:never_applicable", "n_applicable": 0})  # not tested: not drawn
    perm = {"accuracy_gap_points": gap, "accuracy_gap_ci_points": None if gap is None else [gap - 15.7, gap + 16.6],
            "flagged": False}
    return {"task": "classification", "insertion": rows, "permutation_test": perm}


def _audit(name: str, result: dict) -> Callable[[Path], Any]:
    from spurious.audit import report

    return lambda tmp: getattr(report, name)(result)


# ----------------------------------------------------------------------------------------------------------------------
# the cases of every figure function

TT = "spurious.thinktwice"
CASES: dict[str, dict[str, Callable[[], Callable[[Path], Any]]]] = {
    f"{TT}.report.figure2": {
        "four models and Human": lambda: _tt_figure2(_paper_models()),
        "two datasets (Figure 4)": lambda: _tt_figure2(_paper_models("squad") + _paper_models("nq")),
        "no threshold anywhere": lambda: _tt_figure2(_no_threshold()),
        "names": lambda: _tt_figure2(
            [_search(NAMES[0], "word-dist", 5.0, dataset=NAMES[1]), _search(NAMES[1], "ans-len", 3.0,
                                                                            dataset=NAMES[1])], title=NAMES[0]),
    },
    f"{TT}.debias_report.bias_tables.figure5": {
        "every method": lambda: _debias("figure5", _methods()),
        "no threshold anywhere": lambda: _debias("figure5", _methods_none_found()),
        "names": lambda: _debias("figure5", _methods((NAMES[0],), dataset=NAMES[1], heuristics=SHORT)),
    },
    f"{TT}.debias_report.bias_tables.figure_cross_bias": {
        "every method": lambda: _debias("figure_cross_bias", _methods(), dataset="squad", split="validation"),
        "no threshold anywhere": lambda: _debias("figure_cross_bias", _methods_none_found(), dataset="squad",
                                                 split="validation"),
        "names": lambda: _debias("figure_cross_bias", _methods((NAMES[0],), NAMES[1], NAMES[0], SHORT),
                                 dataset=NAMES[1], split=NAMES[0]),
    },
    f"{TT}.debias_report.bias_tables.figure6": {
        "every method": lambda: _debias("figure6", _methods(), dataset="squad", split="validation"),
        "names": lambda: _debias("figure6", _methods((NAMES[0],), NAMES[1], NAMES[0], SHORT),
                                 dataset=NAMES[1], split=NAMES[0]),
    },
    f"{TT}.debias_report.ood_performance.figure3": {
        "four models": lambda: _debias("figure3", _ood_metrics(), paper_names={"bert": "BERT-Base"}),
        "a missing dataset": lambda: _debias("figure3", [m for m in _ood_metrics(("bert", "roberta"))
                                                         if (m["model"], m["dataset"]) != ("roberta", "nq")]),
        "names": lambda: _debias("figure3", [dict(m, dataset=NAMES[1]) for m in _ood_metrics((NAMES[0],))
                                             if m["dataset"] == "nq"]),
    },
    f"{TT}.debias_report.training_runs.figure_loss_curves": {
        "the demo's short runs": lambda: _debias("figure_loss_curves", _loss_summaries()),
        "long runs": lambda: _debias("figure_loss_curves", _loss_summaries(tuple(range(0, 12001, 500))),
                                     max_step=10_000),
        "a run without points": lambda: _debias("figure_loss_curves", [
            {"run": "minilm/seed0", "method": "original", "validation_losses": []}]),
        "names": lambda: _debias("figure_loss_curves", [
            dict(s, run=f"{NAMES[0]}/{s['run']}", validation_curves={NAMES[1]: s["validation_curves"]["nq"]})
            for s in _loss_summaries()[:3]], id_name=NAMES[1], title=NAMES[0]),
    },
    "spurious.spuriousbench.gap_figures.figure1": {
        "SST-2 and MNLI": lambda: _sb("figure1", _sb_real()),
        "one feature, one seed": lambda: _sb("figure1", [r for r in _sb_real()[:6] if r["seed"] == 0]),
        "names": lambda: _sb("figure1", _sb_named()),
    },
    "spurious.spuriousbench.gap_figures.figure2": {
        "SST-2 and MNLI": lambda: _sb("figure2", _sb_real()),
        "in-context learning on one dataset": lambda: _sb("figure2", _sb_icl_on_one_dataset()),
        "names": lambda: _sb("figure2", _sb_named()),
    },
    "spurious.spuriousbench.gap_figures.figure3": {
        "in-context learning on one dataset": lambda: _sb("figure3", _sb_icl_on_one_dataset()),
        "no in-context results": lambda: _sb("figure3", _sb_real()),
        "names": lambda: _sb("figure3", [dict(r, method="icl") for r in _sb_named() if r["method"] == "finetune"]),
    },
    "spurious.lexical.report.figure2": {
        "SNLI and MNLI": lambda: _lexical(_lexical_real()),
        "no features": lambda: _lexical({"snli": _balances([])}),
        "names": lambda: _lexical({NAMES[0]: _balances([(NAMES[1], 0.2, 0.4), (NAMES[0], 0.3, 0.1)])}),
    },
    "spurious.aflite.report.iterations_figure": {
        "two datasets": lambda: _aflite_iterations({"snli": _iterations(4), "mnli": _iterations(2, 800)}),
        "one iteration": lambda: _aflite_iterations({"snli": _iterations(1)}),
        "no iterations": lambda: _aflite_iterations(
            {"snli": _iterations(0)}, stopped={"snli": "|S| = 800 reached the target size n = 1000"}),
        "one of two without iterations": lambda: _aflite_iterations(
            {"snli": _iterations(3), "mnli": _iterations(0)},
            stopped={"mnli": "fewer than k=10 instances reach tau=0.75"}),
        "names": lambda: _aflite_iterations({NAMES[0]: _iterations(3), NAMES[1]: _iterations(2)}),
    },
    "spurious.aflite.synthetic.figure2": {
        "four separations": lambda: _synthetic(_synthetic_runs()),
    },
    "spurious.audit.report.qa_figure": {
        "seven heuristics and Human": lambda: _audit("qa_figure", _qa_result()),
        "no threshold, no Human": lambda: _audit("qa_figure", _qa_result(human=False, found=False)),
        "names": lambda: _audit("qa_figure", _qa_result(heuristics=NAMES)),
    },
    "spurious.audit.report.insertion_figure": {
        # the features of the audit's test of a planted token (tests/audit/test_audit.py)
        "nine features": lambda: _audit("insertion_figure", _insertion_result(
            [("punctuation:exclamation", "negative"), ("punctuation:semicolon", "negative"),
             ("punctuation:asterisk", "negative"), ("prefix:for_those_who_havent_watched_it_yet", "negative"),
             ("prefix:my_thought", "negative"), ("prefix:from_the_press", "positive"),
             ("prefix:i_have_to_say", "negative"), ("prefix:what_you_have_to_know", "positive"),
             ("token:zxq", "positive")])),
        "no feature applicable": lambda: _audit("insertion_figure", {
            "task": "classification", "permutation_test": {},
            "insertion": [{"feature": "zxq", "label": "positive", "n_applicable": 0, "flip_rate": float("nan"),
                           "flip_rate_ci": [float("nan")] * 2, "flagged": False}]}),
        "names": lambda: _audit("insertion_figure", _insertion_result([(NAMES[0], NAMES[1]), (NAMES[1], NAMES[0])],
                                                                      labels=NAMES)),
    },
    "spurious.audit.report.overview_figure": {
        "ten features and the lexical cues": lambda: _audit("overview_figure", _overview_result(
            [("token:zxq", "positive"), ("prefix:for_those_who_havent_watched_it_yet", "negative")]
            + [(f"punctuation:mark{k}", "negative") for k in range(8)])),
        "QA with the Human reference": lambda: _audit("overview_figure", _qa_result() | {"bias": [
            dict(r, flagged=r["prediction_bias"] > r["human_bias"]) for r in _qa_result()["bias"]]}),
        "QA without a threshold or Human": lambda: _audit("overview_figure", _qa_result(human=False, found=False) | {
            "bias": [dict(r, flagged=False) for r in _qa_result(human=False, found=False)["bias"]]}),
        "nothing tested": lambda: _audit("overview_figure", _overview_result([], gap=None)),
        "names": lambda: _audit("overview_figure", _overview_result([(NAMES[0], NAMES[1]), (NAMES[1], NAMES[0])])),
    },
    "spurious.audit.report.permutation_figure": {
        "usual and unusual": lambda: _audit("permutation_figure", _insertion_result([("zxq", "positive")])),
        "no unusual instance": lambda: _audit("permutation_figure", {"permutation_test": {
            "n_usual": 40, "acc_usual": 0.85, "n_unusual": 0, "acc_unusual": float("nan")}}),
    },
}


def test_every_registered_figure_function_has_cases():
    _import_figure_modules()
    package = {name for name in figures.registered_figures() if name.startswith("spurious.")}  # not the tests' own
    missing = sorted(package - set(CASES))
    assert missing == [], f"add cases for these figure functions to CASES: {missing}"
    assert set(CASES) <= set(figures.registered_figures())


def draw(name: str, case: str, tmp_path: Path, *, write: bool = False) -> list[Any]:
    """The figures the case's function drew (written to ``tmp_path`` only with ``write``: saving takes most of the
    time, and the layout is what these tests check)."""
    with figures.capture_figures(write=write) as captured:
        CASES[name][case]()(tmp_path)
    assert captured, f"{name} ({case}) wrote no figure through core.report.figures"
    return captured


@pytest.mark.parametrize(("name", "case"), [(n, c) for n, cases in CASES.items() for c in cases])
def test_figure_is_readable(name: str, case: str, tmp_path: Path):
    for fig in draw(name, case, tmp_path):
        figures.assert_readable(fig)


@pytest.mark.parametrize("name", [n for n, cases in CASES.items() if "names" in cases])
def test_names_are_drawn_as_written(name: str, tmp_path: Path):
    """Every name the case passes in is drawn somewhere as written (a whole text or part of one), and no drawn text
    is read as mathtext."""
    (fig,) = draw(name, "names", tmp_path, write=True)  # saving parses the texts again
    texts = [t.get_text() for t in drawn_texts(fig)]
    for name_ in NAMES:
        assert any(name_ in t for t in texts), (name_, texts)
    for t in drawn_texts(fig):
        assert t._preprocess_math(t.get_text())[1] is False, t.get_text()


# ----------------------------------------------------------------------------------------------------------------------
# what a reader found, one test each


def _texts(fig: Any) -> list[str]:
    return [t.get_text() for t in drawn_texts(fig)]


def test_figure5_and_figure2_fit_the_page_in_rows_of_four_heuristics(tmp_path):
    """Figure 5 of five methods and Human on seven heuristics was one row 23 in wide; Figure 2's four models and
    Human 20 in."""
    for name, case in (("debias_report.bias_tables.figure5", "every method"),
                       ("report.figure2", "four models and Human")):
        (fig,) = draw(f"{TT}.{name}", case, tmp_path)
        assert fig.get_size_inches()[0] <= figures.MAX_WIDTH_IN
        groups = [len(ax.get_xticks()) for ax in fig.axes]
        assert groups == [4, 3], groups  # seven heuristics: a row of four, a row of three


def test_cross_bias_maps_fit_the_page(tmp_path):
    """Three methods' 6 x 7 maps side by side were 16.8 in wide (2,512 px)."""
    (fig,) = draw(f"{TT}.debias_report.bias_tables.figure_cross_bias", "every method", tmp_path)
    assert fig.get_size_inches()[0] <= figures.MAX_WIDTH_IN
    maps = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    assert len(maps) == 3 and len({round(ax.get_position().y0, 3) for ax in maps}) == 2  # a grid of two rows


def test_loss_curves_legend_off_the_panels_distinct_lines_whole_steps(tmp_path):
    """The legend sat on the ReSam panel's title; "the panel's run" and "gate mean" were both thin black lines; the
    step axis of a short run had ticks at 1.5, 2.5."""
    from spurious.thinktwice import debias_report as dr

    with figures.capture_figures(write=False) as captured:
        dr.figure_loss_curves(_loss_summaries(steps=(1, 2, 3)), tmp_path / "f.png", tmp_path / "f.svg")
    (fig,) = captured
    problems = figures.check_figure(fig)
    assert not [p for p in problems if "legend" in p], problems
    for ax in fig.axes:
        if ax.get_visible() and ax.get_xlabel() == "step":
            lo, hi = ax.get_xlim()
            ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
            assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert problems == []


def test_a_panel_without_a_threshold_says_why_and_bias_labels_carry_their_unit(tmp_path):
    """Think Twice Figure 2 and Figure 5: a panel with no threshold held only rotated "n/a" labels; the bias labels
    (20.24) had no unit."""
    for name in ("report.figure2", "debias_report.bias_tables.figure5"):
        (fig,) = draw(f"{TT}.{name}", "no threshold anywhere", tmp_path)
        texts = _texts(fig)
        assert "n/a" not in texts
        assert any(t.startswith("no threshold: 20-question samples need ≥ 40 questions; 30 searched") for t in texts)
    (fig,) = draw(f"{TT}.report.figure2", "four models and Human", tmp_path)
    values = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_text()[:1].isdigit()]
    assert values and all(t.endswith(" EM pts") for t in values), values
    # where only one heuristic has no threshold, its group says why
    assert "no threshold: the segments' EM intervals overlap at every split" in [t.replace("\n", " ")
                                                                               for t in _texts(fig)]


def test_spuriousbench_figures_2_and_3_have_no_empty_panel_zero_bars_and_upright_labels(tmp_path):
    """Figure 2 drew a panel per (model with several methods, dataset), in-context models included, with empty
    panels where a model had no results ("no bars: no results of icl ..."); feature names stood at 90° even when a
    few short ones fit side by side. Now the fine-tuning methods and the in-context models are separate figures
    with panels only for what ran, and what is left out is named under them."""
    (fig,) = draw("spurious.spuriousbench.gap_figures.figure3", "in-context learning on one dataset", tmp_path)
    assert figures.check_figure(fig) == []
    (sst2,) = fig.axes  # no MNLI panel: it has no in-context results
    assert "Not drawn: mnli (no in-context runs)" in fig._supxlabel.get_text()
    assert all(t.get_rotation() == 0 for t in sst2.get_xticklabels())  # "exclamation", "very": side by side
    (fig,) = draw("spurious.spuriousbench.gap_figures.figure2", "in-context learning on one dataset", tmp_path)
    assert len(fig.axes) == 2 and "in-context learning (Figure 3)" in fig._supxlabel.get_text()
    (fig,) = draw("spurious.spuriousbench.gap_figures.figure3", "no in-context results", tmp_path)
    assert any(t.startswith("no in-context results") for t in _texts(fig))
    # a gap of exactly 0 is a visible line at 0
    from spurious.spuriousbench import gap_figures

    zero = {"gap": 0.0, "acc_supporting": 0.5, "acc_counter": 0.5}
    metrics = [{**r, **zero} for r in _sb_records("sst2", {"minilm": "BERT-base"}, ("finetune",), [EXCL])]
    with figures.capture_figures(write=False) as captured:
        gap_figures.figure2(metrics, tmp_path / "z.png", tmp_path / "z.svg")
    (bar,) = [p for p in captured[0].axes[0].patches]
    assert bar.get_height() == 0.0 and bar.get_linewidth() > 0 and bar.get_edgecolor()[3] > 0
    # many features: upright, as side by side they would touch
    (fig,) = draw("spurious.spuriousbench.gap_figures.figure2", "SST-2 and MNLI", tmp_path)
    assert all(t.get_rotation() == 90 for ax in fig.axes for t in ax.get_xticklabels())


def test_lexical_figure2_labels_inside_and_coincident_points_counted(tmp_path):
    """The label "world, newcastle, around" ran off the right edge and overlapped others; the title said 11
    features where about 5 points were visible."""
    (fig,) = draw("spurious.lexical.report.figure2", "SNLI and MNLI", tmp_path)
    assert figures.check_figure(fig) == []
    snli = fig.axes[0]
    (points,) = snli.collections
    assert len(points.get_offsets()) == 6  # 11 features, some within 2 % of each other
    assert snli.get_title().endswith("6 points: features within 2% share one")
    inside = snli.get_window_extent()
    for label in snli.texts:
        box = label.get_window_extent()
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
    labelled = " ".join(t.get_text() for t in snli.texts)
    for feature in ("world", "newcastle", "around", "asleep", "instrument", "tall"):  # every feature q worsens
        assert feature in labelled


def test_report_command_draws_a_model_named_like_mathtext(tmp_path, capsys):
    """`spurious report` on results of `spurious bias --model '$\\x$'` failed with matplotlib's mathtext
    ParseFatalException; the name is drawn as written."""
    import json

    from spurious.cli import main
    from tests.thinktwice.test_report import result

    path = tmp_path / "r.json"
    path.write_text(json.dumps([result(NAMES[0], "word-dist", 3.0), result(NAMES[0], "ans-len", 1.0)]))
    with figures.capture_figures() as captured:
        assert main(["report", str(path), "--out-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "figure2.png").stat().st_size > 0
    assert NAMES[0] in _texts(captured[0])  # the legend entry, as written
