"""`make gpu-check`: every GPU code path of the project, run for real on the demo data, in one command.

On one H100 or H200 (or any CUDA card) it calls the same entry points the workflow's adapters call, in turn:

* ``qa``: QA fine-tuning with ``config.yaml``'s demo settings (MiniLM, 300 steps of 16, length-grouped, width buckets)
  on the demo's SQuAD train split, then prediction on its validation split (EM / F1);
* ``qa_cuda_defaults`` (CUDA only): the same run with the CUDA defaults of the training benchmark, ``compile: on`` and
  ``attention: packed`` (prediction packed, ``compile: auto``: eager at this size): its EM must be within 1 point of
  ``qa``'s (asserted);
* ``losses_vs_eager`` (CUDA only): 20 steps of MiniLM QA at dropout 0 in bf16, eager and padded, then compiled, packed,
  and both: every step's loss within 1 % of the eager one (asserted);
* ``bias_model``, ``feature_logits``, ``resam``, ``lmix``, ``creg``: a bias model trained on the biased segment, its
  logits and the original model's (the teacher's) stored per training window, then ReSam, LearnedMixin+H and
  Confidence Regularization, a few dozen steps each. The segments here split the training questions by answer
  length (the quantity of the ans-len heuristic, computed without spaCy, which the GPU image lacks): a stand-in for
  the workflow's threshold search that exercises the same objectives;
* ``classifier``, ``prompt_classifier``: SpuriousBench's fine-tuning (MiniLM on SST-2, dev accuracy) and its
  prompt-based variant (the masked-LM head at the mask; trained from MiniLM's weights, whose MLM head is new);
* ``lexical_reweight``, ``weighted_classifier``, ``bilstm``: Stubborn Lexical Bias's q weights solved on the device,
  a transformer trained on them, and the BiLSTM control (CBOW on the CPU, the BiLSTM on the device);
* ``icl``: in-context scoring with a small GPT-NeoX built from a config (random weights: the path, not the skill);
* ``aflite``: MiniLM embeddings of SST-2 and one AFLite filtering phase (predictability scores) on the device;
* ``bench_train_loop``: the training benchmark (``benchmarks/bench_train_loop.py``), short: MiniLM b16 L256 over 400
  questions, 16 steps (4 warm-up), the fair Trainer eager, tuned and with ``torch_compile=True``, ours eager,
  compiled, and with the CUDA defaults. Its whole report stays in ``--out``: ``bench_train_loop.{json,md,txt}``; a
  variant that failed is a failed expectation (the others' rows stand).

It writes ``gpu_check.json`` and ``gpu_check.md`` (time, the check's numbers, peak device memory per check; the card,
torch, transformers, CUDA, the model) to ``--out``, after every check (a run cut short keeps what ran). Any error stops
it with the traceback and a non-zero exit, after writing what ran; a failed assertion (``qa_cuda_defaults``,
``losses_vs_eager``) is recorded and the checks go on, and the run exits non-zero at the end. ``--quick`` runs the same
checks with tiny sizes (a few steps, a few dozen examples) on the CPU in about a minute, the CUDA-only ones listed as
skipped with the reason; ``make test`` runs it (tests/core/test_gpu_check.py), with ``--model`` set to a small random
BERT (every check, and the benchmark, then train that model instead of MiniLM). Compilations go to one inductor cache,
fresh for the run (``TORCHINDUCTOR_CACHE_DIR`` unless set), so the benchmark's compile seconds may include hits from the
checks before it (its report says so).

Run on a GPU node: ``make gpu-check`` (or ``python benchmarks/gpu_check.py --out results/gpu_check``) with the data
mirror in ``SPURIOUS_DATA_MIRROR`` (or ``--data``). Budget: under 8 minutes on one H100/H200, start-up excluded
(docs/testing.md gives the estimate per check).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
MINILM = "embedded:all-MiniLM-L6-v2"
CHECKS = ("qa", "qa_cuda_defaults", "losses_vs_eager", "bias_model", "feature_logits", "resam", "lmix", "creg",
          "classifier", "prompt_classifier", "lexical_reweight", "weighted_classifier", "bilstm", "icl", "aflite",
          "bench_train_loop")
# The CUDA defaults of the training benchmark, and what they must keep: the demo's EM within this many points of the
# eager run's, and at dropout 0 every step's loss within this relative distance of the eager loss (bf16)
CUDA_DEFAULTS = {"compile": "on", "attention": "packed"}
EM_TOLERANCE = 1.0
LOSS_RTOL = 0.01
LOSS_STEPS = 20


def sizes(quick: bool) -> dict[str, Any]:
    """How much each check does: the demo's sizes, or a few steps and examples for ``--quick``."""
    if quick:
        return {"qa_train": 60, "qa_valid": 30, "qa_steps": 3, "debias_steps": 2, "clf_train": 48, "clf_dev": 32,
                "clf_steps": 3, "bilstm_epochs": 1, "icl_queries": 8, "aflite_n": 200, "aflite_m": 4, "aflite_t": 50,
                # our eager loop alone (one process), through the whole report
                "bench": ["--steps", "3", "--warmup", "2", "--questions", "40", "--max-length", "128", "--stride", "64",
                          "--batch-size", "4", "--variants", "ours_grouped"]}
    return {"qa_train": None, "qa_valid": None, "qa_steps": None, "debias_steps": 40, "clf_train": 3000,
            "clf_dev": 872, "clf_steps": 200, "bilstm_epochs": 3, "icl_queries": 872, "aflite_n": 20000,
            "aflite_m": 64, "aflite_t": 5000,
            # the new variants, short (the benchmark's own defaults and the BERT-base rows: make bench, docs/gpu.md)
            "bench": ["--steps", "16", "--warmup", "4", "--questions", "400", "--compile-cache", "shared", "--variants",
                      "trainer_fair,trainer_compiled,trainer_tuned,ours_grouped,ours_compiled,ours_defaults"]}


class Checker:
    """Runs the checks in order, timing each on the device and recording its peak memory and numbers, and the
    expectations a check states (``expect``): a failed one is recorded in its row and in ``failures``."""

    def __init__(self, device: torch.device, skip: frozenset[str] = frozenset(),
                 after_each: Callable[[], None] | None = None) -> None:  # fmt: skip
        self.device, self.rows, self.skip = device, [], skip
        self.failures: list[str] = []
        self.after_each = after_each  # the reports rewritten after every check: a run cut short keeps what ran

    def _add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if self.after_each is not None:
            self.after_each()

    def expect(self, name: str, ok: bool, what: str) -> bool:
        """Record ``what`` (the expectation and the measured values) as failed unless ``ok``."""
        if not ok:
            self.failures.append(f"{name}: {what}")
            print(f"gpu-check: {name} FAILED: {what}", flush=True)
        return ok

    def run(self, name: str, fn: Callable[[], dict[str, Any]], cuda_only: str | None = None) -> dict[str, Any]:
        """Run check ``name``; ``cuda_only``: why it needs a GPU (on another device it is listed as skipped with it)."""
        if name in self.skip:  # asked for: listed in the report as skipped, never silently left out
            self._add({"check": name, "seconds": 0.0, "skipped": True, "reason": "--skip"})
            print(f"gpu-check: {name} skipped (--skip)", flush=True)
            return {}
        if cuda_only and self.device.type != "cuda":
            reason = f"CUDA only: {cuda_only}"
            self._add({"check": name, "seconds": 0.0, "skipped": True, "reason": reason})
            print(f"gpu-check: {name} skipped on {self.device.type} ({reason})", flush=True)
            return {}
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        print(f"gpu-check: {name} ...", flush=True)
        t0 = time.perf_counter()
        numbers = fn()
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        row = {"check": name, "seconds": round(time.perf_counter() - t0, 2), **numbers}
        failed = [f.split(": ", 1)[1] for f in self.failures if f.startswith(f"{name}: ")]
        if failed:
            row["failed"] = "; ".join(failed)
        if self.device.type == "cuda":
            row["peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        self._add(row)
        print(f"gpu-check: {name} done in {row['seconds']} s: {numbers}", flush=True)
        return numbers


def packing_problem(device: torch.device, model_name: str) -> str | None:
    """Why ``attention: packed`` cannot run the model on this device (the check a run makes at start), or None."""
    from spurious.core.models import load_qa_model
    from spurious.core.train import packing

    try:
        packing.enable(load_qa_model(model_name), "packed", device=device, bf16=True)
    except packing.PackedAttentionUnavailable as exc:
        return str(exc)
    return None


def machine(device: torch.device) -> dict[str, Any]:
    import transformers

    info = {"device": str(device), "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "cuda": torch.version.cuda}
    if device.type == "cuda":
        info["card"] = torch.cuda.get_device_name(device)
    else:
        info["card"] = f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} torch threads)"
    return info


def _head(frame: pd.DataFrame, n: int | None) -> pd.DataFrame:
    out = frame if n is None else frame.iloc[:n]
    out = out.reset_index(drop=True)
    out.attrs = frame.attrs
    return out


def qa_data(mirror: Path, size: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """The demo's SQuAD split (dev by article title, seed 0, a third for validation) and its training settings."""
    from spurious.core.data import squad

    config = yaml.safe_load((REPO / "config.yaml").read_text())
    derive = config["datasets"]["squad"]["derive"]
    dev = squad.load_squad_json(mirror / "squad_v1.1" / "dev-v1.1.json.gz")
    train, valid = squad.split_by_title(dev, validation_fraction=derive["validation_fraction"], seed=derive["seed"])
    settings = dict(config["models"]["minilm"]["training"])
    if size["qa_steps"] is not None:
        settings.update(max_steps=size["qa_steps"], batch_size=4, eval_every=None, eval_max_examples=16,
                        max_length=128, stride=64)
    return _head(train, size["qa_train"]), _head(valid, size["qa_valid"]), settings


def sst2(mirror: Path, size: dict[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    from spurious.core.data import classification

    names = ["negative", "positive"]
    train = classification.load_glue_tsv(mirror / "sst2" / "train.tsv.gz", label_names=names)
    dev = classification.load_glue_tsv(mirror / "sst2" / "dev.tsv", label_names=names)
    train = train.sample(n=min(size["clf_train"], len(train)), random_state=0)
    return _head(train, None), _head(dev, size["clf_dev"])


def run_checks(args: argparse.Namespace, work: Path, checker: Checker) -> None:
    from spurious.core.metrics import evaluate
    from spurious.core.train import classifier, embeddings, logits, qa
    from spurious.lexical import bilstm, reweight
    from spurious.lexical.features.tokens import feature_matrix
    from spurious.spuriousbench import icl
    from spurious.thinktwice import debias

    size = sizes(args.quick)
    model_name = args.model
    device = str(checker.device.type)
    mirror = Path(args.data)
    train, valid, qa_settings = qa_data(mirror, size)
    qa_settings.update(device=device, threads=None)
    model_dir = work / "qa" / "model"

    def qa_check() -> dict[str, Any]:
        summary = qa.train_qa(train, valid, model_name_or_path=model_name, output_dir=model_dir,
                              checkpoint_dir=work / "qa" / "ck", settings=qa_settings, log=lambda m: None)
        t0 = time.perf_counter()
        predictions = qa.predict_qa(model_dir, valid, settings=qa_settings)
        scores = evaluate(valid, predictions)
        return {"steps": summary["steps"], "train_s": round(summary["train_wall_time_s"], 2),
                "predict_s": round(time.perf_counter() - t0, 2), "questions": len(valid),
                "em": round(scores["exact_match"], 2), "f1": round(scores["f1"], 2)}

    eager = checker.run("qa", qa_check)
    packed_problem = packing_problem(checker.device, model_name) if checker.device.type == "cuda" else None
    if packed_problem:  # a failed expectation; the checks below then run compiled but padded
        checker.expect("qa_cuda_defaults", False, f"attention: packed cannot run here: {packed_problem}")
    defaults = dict(CUDA_DEFAULTS, attention="padded" if packed_problem else "packed")

    def qa_cuda_defaults() -> dict[str, Any]:
        """The demo's QA run with the CUDA defaults: its EM within EM_TOLERANCE points of the eager run's."""
        settings = dict(qa_settings, **defaults)
        out = work / "qa_cuda_defaults"
        summary = qa.train_qa(train, valid, model_name_or_path=model_name, output_dir=out / "model",
                              checkpoint_dir=out / "ck", settings=settings, log=lambda m: None)
        t0 = time.perf_counter()
        # prediction packed, compile at its default (auto: eager for a few hundred batches)
        predictions = qa.predict_qa(out / "model", valid, settings=dict(settings, compile="auto"))
        scores = evaluate(valid, predictions)
        em, record = round(scores["exact_match"], 2), summary["compile"]
        diff = round(em - eager["em"], 2)
        checker.expect("qa_cuda_defaults", abs(diff) <= EM_TOLERANCE,
                       f"EM {em} with compile on and packed windows, {eager['em']} eager: {diff:+.2f} points, more "
                       f"than {EM_TOLERANCE}")  # fmt: skip
        return {"steps": summary["steps"], "attention": settings["attention"],
                "train_s": round(summary["train_wall_time_s"], 2), "predict_s": round(time.perf_counter() - t0, 2),
                "em": em, "f1": round(scores["f1"], 2), "em_vs_eager": diff, "compiled_shapes": len(record["shapes"]),
                "eager_passes": record["eager_passes"], "compile_s": round(record["compile_s"] or 0, 1),
                "capture_s": record.get("capture_s")}

    checker.run("qa_cuda_defaults", qa_cuda_defaults, cuda_only="varlen_attn needs it; compiling the steps as CUDA "
                "graphs is what is checked")

    def losses_vs_eager() -> dict[str, Any]:
        """20 steps at dropout 0 in bf16: compiled, packed, and both, against eager padded steps."""
        from spurious.core.models import load_qa_model, load_tokenizer

        folder = work / "model_dropout0"
        torch.manual_seed(0)  # the new QA head
        model = load_qa_model(model_name)
        model.config.hidden_dropout_prob = model.config.attention_probs_dropout_prob = 0.0
        model.save_pretrained(folder)
        load_tokenizer(model_name).save_pretrained(folder)
        settings = {"max_length": 128, "stride": 64, "batch_size": 16, "max_steps": LOSS_STEPS, "learning_rate": 1e-4,
                    "eval_every": None, "eval_max_examples": 16, "checkpoint_every": 1000, "log_every": 1, "seed": 0,
                    "group_by_length": False, "pad_to_multiple_of": 64, "device": device, "bf16": True}
        losses = {}
        runs = {"eager": {"compile": "off"}, "compiled": {"compile": "on"},
                "packed": {"attention": "packed", "compile": "off"}, "both": defaults}
        if packed_problem:
            del runs["packed"], runs["both"]
        for name, extra in runs.items():
            summary = qa.train_qa(_head(train, 400), valid.iloc[:16], model_name_or_path=str(folder),
                                  output_dir=work / "losses" / name, checkpoint_dir=work / "losses" / f"ck-{name}",
                                  settings=dict(settings, **extra), log=lambda m: None)  # fmt: skip
            losses[name] = np.array([r["loss"] for r in summary["train_losses"]])
        first_last = [round(float(losses["eager"][i]), 4) for i in (0, -1)]
        numbers: dict[str, Any] = {"steps": len(losses["eager"]), "eager_first_last": first_last}
        for name in list(runs)[1:]:
            worst = float(np.max(np.abs(losses[name] / losses["eager"] - 1)))
            numbers[f"{name}_max_rel"] = round(worst, 5)
            checker.expect("losses_vs_eager", len(losses[name]) == LOSS_STEPS and worst <= LOSS_RTOL,
                           f"{name}: a step's loss {100 * worst:.2f} % from the eager one (at most "
                           f"{100 * LOSS_RTOL:g} %)")
        return numbers

    checker.run("losses_vs_eager", losses_vs_eager, cuda_only="bf16 kernels, varlen_attn and CUDA graphs")

    # segments by answer length (words of the first gold answer): the ans-len heuristic's quantity, without spaCy
    answer_words = train["answers"].map(lambda a: len(str(a["text"][0]).split()))
    biased, unbiased = _head(train[answer_words <= 2], None), _head(train[answer_words > 2], None)
    short = dict(qa_settings, max_steps=size["debias_steps"], eval_every=None)
    bias_dir = work / "bias" / "model"

    def bias_model() -> dict[str, Any]:
        summary = qa.train_qa(biased, valid, model_name_or_path=model_name, output_dir=bias_dir,
                              checkpoint_dir=work / "bias" / "ck", settings=short, log=lambda m: None)
        return {"steps": summary["steps"], "biased_questions": len(biased)}

    checker.run("bias_model", bias_model)

    def feature_logits() -> dict[str, Any]:
        for name, source in (("bias", bias_dir), ("teacher", model_dir)):
            qa.infer_feature_logits(source, train, tokenizer_from=model_name, settings=short,
                                    output_path=work / f"{name}_logits.npy", log=lambda m: None)
        return {"windows_of": len(train)}

    checker.run("feature_logits", feature_logits)
    from spurious.core.models import load_config

    hidden = load_config(model_name).hidden_size  # as the train_debiased adapter reads it

    def debiased(name: str, frame: pd.DataFrame, factory: Callable[[Any], Any] | None, objective_id: str | None):
        def check() -> dict[str, Any]:
            summary = qa.train_qa(frame, valid, model_name_or_path=model_name, output_dir=work / name / "model",
                                  checkpoint_dir=work / name / "ck", settings=short, log=lambda m: None,
                                  objective_factory=factory, objective_id=objective_id)
            last = summary["train_losses"][-1]
            return {"steps": summary["steps"], "last_loss": round(last["loss"], 4)}

        return check

    resampled, _ = debias.resample_segments(biased, unbiased, policy="upsample", ratio=1.0, seed=0)
    checker.run("resam", debiased("resam", resampled, None, None))

    def store(name: str, features: Any) -> np.ndarray:
        return logits.load_feature_logits(work / f"{name}_logits.npy", logits.features_fingerprint(features))

    lmix = lambda f: debias.LearnedMixinObjective(store("bias", f), hidden_size=hidden)  # noqa: E731
    checker.run("lmix", debiased("lmix", train, lmix, "gpu-check lmix"))
    creg = lambda f: debias.ConfidenceRegularizationObjective(store("bias", f), store("teacher", f))  # noqa: E731
    checker.run("creg", debiased("creg", train, creg, "gpu-check creg"))

    clf_train, clf_dev = sst2(mirror, size)
    clf_settings = {"max_steps": size["clf_steps"], "batch_size": 16, "learning_rate": 5e-5, "max_length": 64,
                    "device": device, "log_every": 50}

    def train_and_predict(name: str, **kwargs: Any) -> Callable[[], dict[str, Any]]:
        def check() -> dict[str, Any]:
            out = work / name
            settings = dict(clf_settings, eval_every="epoch" if "eval_frame" in kwargs else None)
            classifier.train_classifier(clf_train, model_name_or_path=model_name, output_dir=out / "model",
                                        checkpoint_dir=out / "ck", settings=settings, log=lambda m: None, **kwargs)
            predicted = classifier.predict_classifier(out / "model", clf_dev, device=device, log=lambda m: None)
            return {"train": len(clf_train), "dev_accuracy": round(float(predicted["correct"].mean()), 4)}

        return check

    checker.run("classifier", train_and_predict("classifier", eval_frame=clf_dev))  # dev accuracy every epoch
    from spurious.core.train.prompt import PAPER_PROMPTS

    # MiniLM ships without its masked-LM head: the prompt path runs on a randomly initialised MLM of the model's shape
    checker.run("prompt_classifier",
                train_and_predict("prompt_classifier", prompt=PAPER_PROMPTS["sst2"], init="scratch"))

    q_weights: dict[str, np.ndarray] = {}

    def lexical_reweight() -> dict[str, Any]:
        matrix, vocabulary = feature_matrix(clf_train["text_a"], clf_train["text_b"], counting="types")
        labels = clf_train["label"].to_numpy()
        selection = reweight.select_features(matrix, labels, 2, vocabulary, min_count=max(2, len(clf_train) // 50))
        result = reweight.solve_weights(matrix[:, selection.columns], labels, 2, device=device, log=lambda m: None)
        q_weights["q"] = result.q * len(clf_train)
        return {"features": len(selection.columns), "steps": result.steps, "converged": bool(result.converged)}

    checker.run("lexical_reweight", lexical_reweight)
    checker.run("weighted_classifier", train_and_predict("weighted_classifier", weights=q_weights.get("q")))

    def bilstm_check() -> dict[str, Any]:
        out = work / "bilstm" / "model"
        settings = {"epochs": size["bilstm_epochs"], "device": device, "cbow_epochs": 2 if args.quick else 10}
        bilstm.train_bilstm(clf_train, output_dir=out, settings=settings,
                            weights=q_weights.get("q"), log=lambda m: None)
        predicted = bilstm.predict_bilstm(out, clf_dev, device=device, log=lambda m: None)
        return {"dev_accuracy": round(float(predicted["correct"].mean()), 4)}

    checker.run("bilstm", bilstm_check)

    def icl_check() -> dict[str, Any]:
        from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

        from spurious.core.models import load_tokenizer

        tok = load_tokenizer(model_name)
        torch.manual_seed(0)
        config = GPTNeoXConfig(vocab_size=tok.vocab_size, hidden_size=128, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=256, max_position_embeddings=512)
        lm_dir = work / "neox"
        GPTNeoXForCausalLM(config).save_pretrained(lm_dir)
        tok.save_pretrained(lm_dir)
        model, tokenizer = icl.load_causal_lm(lm_dir)
        # a stand-in feature (a comma in the sentence) for the demonstrations' prevalence and strength
        pool = clf_train.assign(has_feature=clf_train["text_a"].str.contains(",", regex=False))
        demos = icl.draw_demonstrations(pool, shots=8, prevalence=0.25, strength=1.0, target_label=1, seed=0)
        queries = _head(clf_dev, size["icl_queries"])
        out, record = icl.predict_icl(model, tokenizer, demos, queries, icl.PAPER_TEMPLATES["sst2"]["words"],
                                      batch_size=16, device=device, log=lambda m: None)
        return {"queries": len(out), "accuracy": round(float(out["correct"].mean()), 4), "shots": record["shots"]}

    checker.run("icl", icl_check)

    def aflite_check() -> dict[str, Any]:
        from spurious.aflite import filtering

        pool = _head(pd.concat([clf_train, clf_dev]), size["aflite_n"])
        pool.attrs = clf_train.attrs
        vectors = embeddings.embed(pool, model_name, max_length=64, batch_size=256, device=device)
        scores = filtering.predictability_scores(vectors, pool["label"].to_numpy(), m=size["aflite_m"],
                                                 t=min(size["aflite_t"], len(pool) // 2), seed=0, device=device)
        return {"n": len(pool), "mean_heldout_accuracy": round(scores.mean_heldout_accuracy, 4)}

    checker.run("aflite", aflite_check)

    def bench() -> dict[str, Any]:
        """The benchmark's whole report kept in --out: JSON, Markdown, and its printed text."""
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        json_path, text_path = out / "bench_train_loop.json", out / "bench_train_loop.txt"
        cmd = [sys.executable, str(REPO / "benchmarks" / "bench_train_loop.py"), *size["bench"], "--device", device,
               "--data", str(mirror / "squad_v1.1" / "dev-v1.1.json.gz"), "--json", str(json_path),
               "--markdown", str(out / "bench_train_loop.md"), "--model", model_name]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        text_path.write_text(proc.stdout + (f"\n[stderr]\n{proc.stderr}" if proc.returncode != 0 else ""))
        if proc.returncode != 0 and not json_path.is_file():
            raise RuntimeError(f"bench_train_loop failed ({proc.returncode}), its output in {text_path}:\n"
                               f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")  # fmt: skip
        report = json.loads(json_path.read_text())
        numbers: dict[str, Any] = {"report": "bench_train_loop.{json,md,txt}"}
        for r in report["results"]:  # a failed variant is a failed expectation; the others' rows stand
            if checker.expect("bench_train_loop", "error" not in r, f"variant {r['variant']}: {r.get('error')}"):
                ratio = r["ratio_vs_trainer"]
                numbers[r["variant"]] = f"{r['s_per_step']:.4f} s/step" + ("" if ratio is None else
                                                                           f", {ratio:.2f}x real tokens/s")
            else:
                numbers[r["variant"]] = "FAILED"
        numbers["targets_met"] = f"{sum(c['met'] is True for c in report['targets'])} of {len(report['targets'])}"
        return numbers

    checker.run("bench_train_loop", bench)


def write_reports(out: Path, info: dict[str, Any], rows: list[dict[str, Any]], error: str | None,
                  failures: list[str] = ()) -> None:  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    payload = {"machine": info, "checks": rows, "error": error, "failures": list(failures),
               "total_seconds": round(sum(r["seconds"] for r in rows), 1)}
    tmp = out / "gpu_check.json.tmp"
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    tmp.replace(out / "gpu_check.json")
    lines = [f"# gpu-check on {info['card']}", "",
             f"torch {info['torch']}, transformers {info['transformers']}, CUDA {info['cuda']}, "
             f"Python {info['python']}; model {info['model']}; "
             f"total {payload['total_seconds']} s" + (f"; **FAILED**: {error.splitlines()[-1]}" if error else "")
             + "".join(f"; **FAILED**: {failure}" for failure in failures), "",
             "| check | seconds | peak GB | numbers |", "|---|---:|---:|---|"]
    for r in rows:
        numbers = ", ".join(f"{k} {v}" for k, v in r.items() if k not in ("check", "seconds", "peak_gb"))
        lines.append(f"| {r['check']} | {r['seconds']} | {r.get('peak_gb', '')} | {numbers} |")
    (out / "gpu_check.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes (on the CPU unless --device says otherwise)")
    ap.add_argument("--device", default=None, help="cuda, cpu or auto (default: cpu with --quick, else cuda)")
    ap.add_argument("--data", default=os.environ.get("SPURIOUS_DATA_MIRROR", str(REPO.parent / "shared" / "data")))
    ap.add_argument("--out", default=str(REPO / "results" / "gpu_check"))
    ap.add_argument("--model", default=MINILM, help="the encoder every check trains, predicts with and embeds with (a "
                    "BERT-like checkpoint with a fast tokenizer; default: MiniLM, as in the demo). The test suite's "
                    "--quick run gives it a small random BERT: the paths, not the numbers")
    ap.add_argument("--skip", default="", help="checks to leave out, comma-separated (reported as skipped), e.g. "
                    "bilstm where gensim cannot be installed, bench_train_loop")
    args = ap.parse_args(argv)
    skip = frozenset(filter(None, args.skip.split(",")))
    if skip - set(CHECKS):
        ap.error(f"--skip: unknown checks {sorted(skip - set(CHECKS))}; known: {', '.join(CHECKS)}")
    from spurious.core.train.training import pick_device

    device = pick_device(args.device or ("cpu" if args.quick else "cuda"))
    info = dict(machine(device), model=args.model)
    out = Path(args.out)
    checker = Checker(device, skip)
    checker.after_each = lambda: write_reports(out, info, checker.rows, None, checker.failures)
    error = None
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        # one inductor cache for the run, fresh (cold compilations, as on a new machine), shared with the benchmark
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(tmp) / "inductor"))
        try:
            run_checks(args, Path(tmp), checker)
        except Exception:  # noqa: BLE001 - reported whole, then a non-zero exit
            error = traceback.format_exc()
    write_reports(out, info, checker.rows, error, checker.failures)
    print((out / "gpu_check.md").read_text())
    if error:
        print(error, file=sys.stderr)
    if checker.failures:
        print("gpu-check: failed expectations:\n" + "\n".join(checker.failures), file=sys.stderr)
    return 1 if error or checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
