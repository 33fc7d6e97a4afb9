"""The generated parts of docs/paper-configs.md (the four paper configs' plans, their GPU-hours per card) and of
docs/slurm.md (what the shipped profile asks for per rule and size class, against the plan's longest job).

``python -m spurious.workflow.plan_docs`` (``make plan-docs``) rewrites the text between the
``<!-- generated: NAME -->`` and ``<!-- end: NAME -->`` markers of both pages; ``--check`` only compares
(tests/core/test_plan_docs.py fails while they are stale). Everything comes from ``spurious plan``'s own functions
over configs/paper-*.yaml with profiles/slurm, and from profiles/slurm/config.yaml.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from spurious.workflow import plan
from spurious.workflow.sizes import SIZE_CLASSES
from spurious.workflow.slurm import ATTEMPT_SUFFIX, size_table

ROOT = Path(__file__).resolve().parents[3]
PAPERS = ("squad", "aflite", "spurious", "lexical")
PAPER_CONFIGS = ROOT / "docs" / "paper-configs.md"
SLURM_DOC = ROOT / "docs" / "slurm.md"
PROFILE = ROOT / "profiles" / "slurm" / "config.yaml"
REGENERATE = "make plan-docs"

# What each GPU or heavy rule does (docs/slurm.md's table); a rule the profile names but this does not is an error.
WHY = {
    "train": "QA fine-tuning, 3 epochs over SQuAD or a Figure 4 dataset",
    "predict": "QA inference on an evaluated split",
    "train_bias_model": "a bias model trained from scratch (88,000 steps, Think Twice App. D)",
    "train_debiased": "debiased training, up to 100k steps (LMix needs 60-100k)",
    "train_plain": "the matched control of the debiased runs",
    "scale_search_train": "one debiased model per value of the scale grid (App. B.2.3-4)",
    "scale_search_score": "its in-distribution score",
    "feature_logits": "a bias or teacher model's logits on the training windows",
    "heuristics": "spaCy parses and the seven heuristics over a split, on all the job's CPUs",
    "lexical_train": "RoBERTa-large, 15 epochs over SNLI/QQP; the BiLSTM control",
    "lexical_predict": "inference on a test split",
    "lexical_reweight": "the reweighting's optimisation on the GPU",
    "aflite_warmup": "a warm-up on 10 % of a training split",
    "aflite_embed": "[CLS] embeddings of the pool and the dev set",
    "aflite_filter": "the m linear models of an iteration fit on the GPU; the pool's embeddings in host memory",
    "aflite_train_classifier": "classifiers on D, D_rand and D(AFLite)",
    "aflite_predict": "inference on a dev set",
    "aflite_ood_finetune": "an SNLI model fine-tuned on an Adversarial NLI round",
    "aflite_ood_predict": "inference on the OOD sets",
    "spurious_train": "BERT-base/large on 3k-10k pairs, 6 epochs",
    "spurious_predict": "inference on the test and dev sets",
    "spurious_icl": (
        "a causal LM scoring every row with its demonstrations; Pythia-12b's weights pass through host memory"
    ),
    "audit": "inference on one GPU, the QA audit's heuristics on the job's CPUs",
}


def paper_plans(root: Path = ROOT) -> dict[str, tuple[dict[str, Any], list[plan.PlannedJob]]]:
    """The jobs of each paper config as Snakemake plans them with profiles/slurm (a fresh directory each)."""
    plans = {}
    for name in PAPERS:
        with tempfile.TemporaryDirectory(prefix="spurious-plan-docs-") as work:
            plans[name] = plan.planned_jobs([root / "configs" / f"paper-{name}.yaml"], root / "profiles" / "slurm",
                                            Path(work), root)  # fmt: skip
    return plans


def _hours(value: float) -> str:
    return plan._fmt(value)


def paper_configs_markdown(plans: Mapping[str, tuple[dict[str, Any], list[plan.PlannedJob]]]) -> str:
    """Each config's plan on the H200 (``spurious plan --configfile ...``), then GPU-hours per config and card."""
    parts, totals = [], {}
    for name, (config, jobs) in plans.items():
        rules, bases = plan.estimate(config, jobs)
        parts.append(plan.markdown(f"paper-{name}.yaml", rules, bases))
        totals[name] = {card: plan._total(plan.estimate(config, jobs, card)[0]) for card in plan.CARDS}
    cards = list(plan.CARDS)
    lines = ["### GPU-hours and the longest job per card", "",
             "`spurious plan --gpu CARD`: the H200's GPU times × the card's factor (start-up and disk unchanged).", "",
             "| config | " + " | ".join(f"{c.upper()} (× {plan.CARDS[c].factor():.2f})" for c in cards) + " |",
             "|---|" + "---:|" * len(cards)]  # fmt: skip
    for name, per_card in totals.items():
        cells = [f"{_hours(t.gpu_hours)} GPU-h, longest {_hours(t.longest_job_h)} h" for t in per_card.values()]
        lines.append(f"| paper-{name}.yaml | " + " | ".join(cells) + " |")
    total = {c: sum(t[c].gpu_hours for t in totals.values()) for c in cards}
    lines.append("| **all four** | " + " | ".join(f"**{_hours(total[c])} GPU-h**" for c in cards) + " |")
    h200 = {name: t["h200"] for name, t in totals.items()}
    summary = (f"Across the four: about {sum(t.gpu_hours for t in h200.values()):,.0f} GPU-hours on an H200 by these "
               f"estimates ({', '.join(f'{n} {t.gpu_hours:,.0f}' for n, t in h200.items())}), some "
               f"{sum(t.cpu_hours for t in h200.values()):,.0f} CPU-hours and "
               f"{sum(t.disk_gb for t in h200.values()):,.0f} GB of disk.")  # fmt: skip
    return "\n\n".join(parts) + "\n" + "\n".join(lines) + "\n\n" + summary + "\n"


def _per_class(raw: Any) -> dict[str, Any]:
    """A profile value per size class (a literal counts for every class); ``* attempt`` left off."""
    if isinstance(raw, str) and (match := ATTEMPT_SUFFIX.match(raw)):
        raw = match.group("base")
    table = size_table(raw)
    if table is None:
        value = yaml.safe_load(raw) if isinstance(raw, str) else raw
        return dict.fromkeys(SIZE_CLASSES, value)
    return table


def _classes(values: Mapping[str, Any], unit: float = 1.0) -> str:
    seen = [values.get(c) for c in SIZE_CLASSES]
    shown = [("–" if v is None else f"{v / unit:g}" if isinstance(v, int | float) else str(v)) for v in seen]
    return shown[0] if len(set(shown)) == 1 else " / ".join(shown)


def longest_jobs(plans: Mapping[str, tuple[dict[str, Any], list[plan.PlannedJob]]]) -> dict[tuple[str, str], float]:
    """The longest job's wall hours on an H200 per (rule, size class) over the paper configs."""
    longest: dict[tuple[str, str], float] = {}
    for config, jobs in plans.values():
        planner = plan.Planner(config)
        for job in jobs:
            if job.model is None:
                continue
            cost = planner.job(job)
            hours = (cost.gpu_s / max(cost.gpus, 1) if cost.gpus else cost.cpu_s / max(cost.threads, 1)) / 3600
            key = (job.rule, planner.size(*job.model).size_class)
            longest[key] = max(longest.get(key, 0.0), hours)
    return longest


def profile_markdown(plans: Mapping[str, tuple[dict[str, Any], list[plan.PlannedJob]]],
                     profile: Path = PROFILE) -> str:
    """The profile's request per rule (``bilstm / small / base / large / xl`` where they differ) and each class's
    runtime against the plan's longest job of that rule and class on an H200."""
    settings = yaml.safe_load(profile.read_text())
    default = settings.get("default-resources", {})
    longest = longest_jobs(plans)
    unknown = sorted(set(settings["set-resources"]) - set(WHY))
    if unknown:
        raise ValueError(f"{profile}: rules {unknown} have no description in spurious.workflow.plan_docs.WHY")
    lines = ["| rule | GPUs | CPUs per GPU | memory (GB, first attempt) | runtime (min) | longest job on an H200 (h): "
             "runtime ÷ it | why |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for rule, res in settings["set-resources"].items():
        runtime = _per_class(res.get("runtime", default.get("runtime")))
        checks = []
        for size in SIZE_CLASSES:
            hours = longest.get((rule, size))
            if hours:
                minutes = runtime[size]
                checks.append(f"{size} {hours:.2f}: {minutes / 60 / hours:.1f}×" if hours >= 0.01 else
                              f"{size} < 0.01")  # fmt: skip
        cpus = res.get("cpus_per_gpu", res.get("cpus_per_task", settings.get("set-threads", {}).get(rule, 1)))
        lines.append(
            f"| `{rule}` | {_classes(_per_class(res.get('gpu', 0)))} | {_classes(_per_class(cpus))} "
            f"| {_classes(_per_class(res.get('mem_mb', default.get('mem_mb'))), 1000)} | {_classes(runtime)} "
            f"| {'; '.join(checks) or 'not in the paper configs'} | {WHY[rule]} |"
        )
    return "\n".join(lines) + "\n"


def replace_section(text: str, name: str, body: str, path: Path) -> str:
    begin, end = f"<!-- generated: {name} ({REGENERATE}) -->", f"<!-- end: {name} -->"
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path}: no section between '{begin}' and '{end}'")
    return pattern.sub(lambda m: f"{begin}\n{body}{end}", text)


def render(root: Path = ROOT, plans: Mapping[str, Any] | None = None) -> dict[Path, str]:
    """The two pages with their generated sections brought up to date (``plans``: ``paper_plans(root)``)."""
    plans = plans if plans is not None else paper_plans(root)
    pages = {}
    text = PAPER_CONFIGS.read_text()
    pages[PAPER_CONFIGS] = replace_section(text, "paper plans", paper_configs_markdown(plans), PAPER_CONFIGS)
    text = SLURM_DOC.read_text()
    pages[SLURM_DOC] = replace_section(text, "profile requests", profile_markdown(plans), SLURM_DOC)
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when a page is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in render().items():
        if path.read_text() != text:
            stale.append(path)
            if not args.check:
                path.write_text(text)
                print(f"wrote {path}")
    if args.check and stale:
        print(f"stale: {', '.join(map(str, stale))}; run {REGENERATE}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
