"""Training throughput (features/s) of our QA loop ``train_qa`` against a plain ``transformers.Trainer``, in one run.

Both train the same model on the same SQuAD dev windows (the first ``--questions`` questions, featurised once with our
``featurize``: question + context, ``max_length``/``stride`` sliding windows), with the same batch size, gradient
accumulation, learning rate, linear schedule, gradient clipping (1.0) and seed, on the same device; with CUDA both use
bf16 autocast (ours: ``bf16: auto``; Trainer: ``bf16=True``), on CPU both run in fp32.

* **ours** calls ``spurious.core.qa.train_qa`` itself (the real path: our engine ``spurious.core.engine`` on
  Accelerate, one process, dynamic padding in ``QAFeatures.collate``, masked
  ``qa_loss``, AdamW), once with ``group_by_length: true`` and once with ``false`` (random order, dynamic padding only).
  Timing: ``log_every: 1`` makes the loop call our ``log`` callback after every optimizer step; the callback
  synchronises CUDA and stamps ``time.perf_counter()``. Throughput is measured between the stamp of step ``--warmup``
  and that of the last step, so model loading, featurisation, the one validation pass at the end and the model saving
  are all outside the timed window.
* **Trainer, fair** (the baseline of the ratios): the Trainer as a careful user configures it: unpadded windows,
  ``DataCollatorWithPadding`` (each batch padded to its longest window) and ``group_by_length=True`` (its
  ``LengthGroupedSampler``), the model's own QA loss, the Trainer's default optimizer, no evaluation, no saving, no
  logging. Timing: a ``TrainerCallback`` synchronises CUDA and stamps ``on_step_end`` (after the optimizer step);
  the same window as ours. Its padding share is counted in the collator on the timed micro-batches.
* **Trainer, our batches**: the fair Trainer fed our engine's length-grouped window order (``epoch_order``, seed 0)
  through its sampler, so it trains on exactly the batches ours does (checked: the widths of every timed micro-batch
  must equal ours). Against ours this is the one-difference comparison: same model, data, batches, widths,
  optimizer kind and seed; only the training loops differ. Its ratio is printed as "same batches".
* **Trainer, run_qa default** (for reference): the same, but windows padded to ``max_length`` (``run_qa.py``'s
  default ``pad_to_max_length``) with ``default_data_collator`` and no length grouping.

features/s = windows trained on in the timed steps / timed seconds (both loops split an epoch the same way: full
batches and a last partial one, ``gradient_accumulation_steps`` micro-batches per step, fewer at an epoch's end), so
the counts are exact and identical for both. ``pad %`` is the share of padding tokens in the batches the model saw.
tokens/s = features/s x the mean padded width: the two length-grouped samplers (ours, the Trainer's
``LengthGroupedSampler``) put different windows into the few timed steps, and a loop whose timed batches happen to
be narrower gains features/s without being faster; both ratios are printed, and the same-batches ratio removes the
samplers from the comparison. Each variant runs in a fresh Python process (in one process the later of two equal
loops measured 1-4 % slower), and the same-batches pair runs twice, in the order A B B A, its rows the means of the
two runs (single runs scatter by about 3 % on a 2-core CPU);
``--ours-first`` runs our loop before the Trainers (a check on the order of the runs).

**Host-device syncs (issue 28).** The engine used to read every micro-batch's loss with ``float(loss.detach())``,
which on a GPU waits for the step to finish, so the host could not queue the next step's kernels meanwhile. It now
keeps each step's loss and logged values on the device and reads them at a log line (``log_every``), an evaluation,
a checkpoint and the end, with the same numbers (``tests/core/test_engine.py``). On CPU this buys nothing (there is
no device to wait for); what it buys on a GPU is not measured yet (no GPU was lent), and this benchmark's timing
(``log_every: 1``, a CUDA sync per step) cannot show it. Collation (``QAFeatures.collate``) stays in the training
process: the CPU profile of the earlier runs put our own Python work, collation included, under 1 ms of a 1.77 s step.

Both need ``accelerate`` (a project dependency: our engine is built on it, and so is the Trainer).
Example (CPU; on a GPU machine the default ``--device auto`` picks CUDA and bf16):

    HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false .venv/bin/python benchmarks/bench_train_loop.py \\
        --steps 30 --warmup 3 --json results/bench_train_loop_cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spurious.core.data import MIRROR_ENV, load_squad_json
from spurious.core.models import load_qa_model, load_tokenizer, quiet_transformers
from spurious.core.qa import QAFeatures, epoch_order, featurize, pick_device, train_qa, use_bf16

DEFAULT_MIRROR = "/work/shared/data"
SQUAD_DEV = "squad_v1.1/dev-v1.1.json.gz"
VALID_QUESTIONS = 16  # train_qa needs a validation frame; it is evaluated once, after the last (timed) step


def default_data() -> str:
    return str(Path(os.environ.get(MIRROR_ENV) or DEFAULT_MIRROR) / SQUAD_DEV)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (cuda)"
    return f"cpu ({torch.get_num_threads()} threads; {platform.processor() or platform.machine()})"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def step_micro_batches(n_features: int, batch_size: int, accum: int, steps: int) -> list[list[tuple[int, int, int]]]:
    """Per optimizer step, its micro-batches as (epoch, first position in the epoch order, size).

    Mirrors ``train_qa`` (and the Trainer, which groups an epoch's batches the same way): ``ceil(n / batch_size)``
    micro-batches per epoch, the last one partial, ``accum`` micro-batches per step and fewer for an epoch's last step.
    """
    micro_per_epoch = math.ceil(n_features / batch_size)
    out: list[list[tuple[int, int, int]]] = []
    epoch = in_epoch = 0
    for _ in range(steps):
        group = min(accum, micro_per_epoch - in_epoch)
        micro = []
        for m in range(group):
            lo = (in_epoch + m) * batch_size
            micro.append((epoch, lo, min(batch_size, n_features - lo)))
        out.append(micro)
        in_epoch += group
        if in_epoch >= micro_per_epoch:
            epoch, in_epoch = epoch + 1, 0
    return out


def timed_features(plan: list[list[tuple[int, int, int]]], warmup: int) -> int:
    """Windows trained on in steps ``warmup+1 .. steps`` (the timed ones)."""
    return sum(size for step in plan[warmup:] for _, _, size in step)


def our_timed_batches(
    feats: QAFeatures, plan, warmup: int, *, batch_size: int, seed: int, group_by_length: bool
) -> list[np.ndarray]:
    """The window lengths of each timed micro-batch of our loop, in training order (its epochs' ``epoch_order``)."""
    orders: dict[int, np.ndarray] = {}
    batches = []
    for step in plan[warmup:]:
        for epoch, lo, size in step:
            if epoch not in orders:
                orders[epoch] = epoch_order(
                    feats.lengths, batch_size=batch_size, seed=seed, epoch=epoch, group_by_length=group_by_length
                )
            batches.append(feats.lengths[orders[epoch][lo : lo + size]])
    return batches


def our_padding(feats: QAFeatures, plan, warmup: int, *, batch_size: int, seed: int, group_by_length: bool) -> dict:
    """Real and padded tokens of our timed batches (dynamic padding: each batch padded to its longest window)."""
    batches = our_timed_batches(feats, plan, warmup, batch_size=batch_size, seed=seed, group_by_length=group_by_length)
    real = sum(int(rows.sum()) for rows in batches)
    padded = sum(int(rows.max()) * len(rows) for rows in batches)
    return {"mean_batch_width": padded / max(1, sum(len(rows) for rows in batches)), "real": real, "padded": padded}


def _rate(stamps: dict[int, float], steps: int, warmup: int, n_timed: int) -> dict:
    seconds = stamps[steps] - stamps[warmup]
    return {
        "timed_steps": steps - warmup,
        "timed_seconds": seconds,
        "s_per_step": seconds / (steps - warmup),
        "features_per_s": n_timed / seconds,
    }


def bench_ours(
    model_name: str,
    train_frame,
    valid_frame,
    feats: QAFeatures,
    *,
    group_by_length: bool,
    args: argparse.Namespace,
    device: torch.device,
    bf16: bool,
) -> dict:
    stamps: dict[int, float] = {}
    lines: list[str] = []

    def log(message: str) -> None:
        if message.startswith("step "):
            _sync(device)
            stamps[int(message.split()[1].split("/")[0])] = time.perf_counter()
        lines.append(message)

    settings = {
        "max_steps": args.steps,
        "eval_every": None,
        "early_stopping_patience": None,
        "checkpoint_every": args.steps + 1,
        "group_by_length": group_by_length,
        "batch_size": args.batch_size,
        "gradient_accumulation_steps": args.grad_accum,
        "max_length": args.max_length,
        "stride": args.stride,
        "learning_rate": args.learning_rate,
        "device": str(device),
        "bf16": bf16,
        "threads": args.threads,
        "log_every": 1,
        "seed": 0,
    }
    with tempfile.TemporaryDirectory(prefix="bench_train_loop_") as tmp:
        t0 = time.perf_counter()
        summary = train_qa(
            train_frame,
            valid_frame,
            model_name_or_path=model_name,
            output_dir=Path(tmp) / "model",
            checkpoint_dir=Path(tmp) / "checkpoints",
            settings=settings,
            log=log,
        )
        call_seconds = time.perf_counter() - t0
    if summary["n_train_features"] != len(feats):
        raise RuntimeError(f"train_qa made {summary['n_train_features']} windows, featurize {len(feats)}")
    plan = step_micro_batches(len(feats), args.batch_size, args.grad_accum, args.steps)
    n_timed = timed_features(plan, args.warmup)
    pad = our_padding(feats, plan, args.warmup, batch_size=args.batch_size, seed=0, group_by_length=group_by_length)
    if args.warmup in stamps and args.steps in stamps:
        timing = _rate(stamps, args.steps, args.warmup, n_timed)
        method = "per-step log callback stamps (CUDA-synchronised), warm-up steps excluded"
    else:  # the progress line format changed: fall back to the loop's own wall time (includes the warm-up steps)
        n_all = timed_features(plan, 0)
        seconds = float(summary["train_wall_time_s"])
        timing = {
            "timed_steps": args.steps,
            "timed_seconds": seconds,
            "s_per_step": seconds / args.steps,
            "features_per_s": n_all / seconds,
        }
        method = "summary train_wall_time_s over all steps (no per-step log lines found; warm-up included)"
    return {
        "name": f"ours (train_qa, dynamic padding, group_by_length={str(group_by_length).lower()})",
        "loop": "ours",
        "group_by_length": group_by_length,
        **timing,
        "timed_features": n_timed,
        "pad_fraction": 1 - pad["real"] / pad["padded"],
        "mean_batch_width": pad["mean_batch_width"],
        "final_loss": summary["train_losses"][-1]["loss"] if summary["train_losses"] else None,
        "bf16": summary["bf16"],
        "device": summary["device"],
        "train_qa_call_s": call_seconds,
        "timing_method": method,
    }


class _PaddedWindows(torch.utils.data.Dataset):
    """run_qa.py-style training rows: every window padded to ``max_length``, with start/end positions."""

    def __init__(self, feats: QAFeatures, max_length: int) -> None:
        batch = feats.collate(np.arange(len(feats)), pad_to=max_length)
        keys = ["input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions"]
        self.columns = {k: batch[k] for k in keys if k in batch}

    def __len__(self) -> int:
        return len(self.columns["input_ids"])

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {k: v[i] for k, v in self.columns.items()}


class _Windows(torch.utils.data.Dataset):
    """Unpadded training rows (one window each, its own length), for a collator that pads per batch."""

    def __init__(self, feats: QAFeatures) -> None:
        keys = ["input_ids", "attention_mask", "token_type_ids", "start_positions", "end_positions"]
        self.rows = []
        for i in range(len(feats)):
            batch = feats.collate(np.array([i]))
            self.rows.append({k: batch[k][0] for k in keys if k in batch})

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.rows[i]


class _CountingCollator:
    """Pads each batch to its longest window (``DataCollatorWithPadding``) and records real and padded tokens."""

    def __init__(self, tokenizer) -> None:
        from transformers import DataCollatorWithPadding

        self.pad = DataCollatorWithPadding(tokenizer, return_tensors="pt")
        self.batches: list[tuple[int, int, int]] = []  # (real tokens, padded tokens, width) per micro-batch

    def __call__(self, rows: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        features = [{k: (v.tolist() if v.dim() else int(v)) for k, v in row.items()} for row in rows]
        batch = self.pad(features)
        real = int(batch["attention_mask"].sum())
        width = int(batch["input_ids"].shape[1])
        self.batches.append((real, width * len(rows), width))
        return batch


class _OurOrderSampler(torch.utils.data.Sampler):
    """Our engine's window order (``epoch_order``, length-grouped, seed 0), epoch after epoch: hands the Trainer
    exactly the batches our loop trains on, so the two loops can be timed on identical work."""

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int) -> None:
        self.lengths, self.batch_size, self.seed, self.epoch = lengths, batch_size, seed, 0

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        order = epoch_order(
            self.lengths, batch_size=self.batch_size, seed=self.seed, epoch=self.epoch, group_by_length=True
        )
        self.epoch += 1
        return iter(order.tolist())


def _length_grouping(arguments_class: type, on: bool) -> dict[str, Any]:
    """The Trainer's length-grouped sampler: ``train_sampling_strategy`` in transformers 5, ``group_by_length``
    before."""
    if "train_sampling_strategy" in getattr(arguments_class, "__dataclass_fields__", {}):
        return {"train_sampling_strategy": "group_by_length" if on else "random"}
    return {"group_by_length": on}


def bench_trainer(
    model_name: str,
    feats: QAFeatures,
    *,
    args: argparse.Namespace,
    device: torch.device,
    bf16: bool,
    variant: str,
) -> dict:
    """The Trainer: ``fair`` (dynamic padding, ``group_by_length=True``), ``our_batches`` (dynamic padding, windows in
    our engine's length-grouped order: the same batches as ours) or ``padded`` (run_qa.py's default: padded to
    ``max_length``, random order)."""
    from transformers import (
        PrinterCallback,
        ProgressCallback,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        default_data_collator,
    )

    stamps: dict[int, float] = {}

    class StepTimer(TrainerCallback):
        def on_step_end(self, targs, state, control, **kwargs):
            _sync(device)
            stamps[state.global_step] = time.perf_counter()

    if variant not in ("fair", "our_batches", "padded"):
        raise ValueError(f"unknown Trainer variant {variant!r}")
    dynamic_padding = variant != "padded"
    collator = _CountingCollator(load_tokenizer(model_name)) if dynamic_padding else None
    dataset = _Windows(feats) if dynamic_padding else _PaddedWindows(feats, args.max_length)
    if args.threads:
        torch.set_num_threads(args.threads)
    with quiet_transformers():
        model = load_qa_model(model_name)
    with tempfile.TemporaryDirectory(prefix="bench_train_loop_trainer_") as tmp:
        targs = TrainingArguments(
            output_dir=tmp,
            per_device_train_batch_size=args.batch_size,
            gradient_accumulation_steps=args.grad_accum,
            max_steps=args.steps,
            learning_rate=args.learning_rate,
            bf16=bf16,
            use_cpu=device.type == "cpu",
            eval_strategy="no",
            save_strategy="no",
            logging_strategy="no",
            report_to=[],
            seed=0,
            disable_tqdm=True,
            log_level="error",
            dataloader_num_workers=0,
            **_length_grouping(TrainingArguments, variant == "fair"),
        )
        trainer_class = Trainer
        if variant == "our_batches":
            sampler = _OurOrderSampler(feats.lengths, args.batch_size, seed=0)

            class trainer_class(Trainer):  # noqa: N801 - a Trainer that draws our engine's batches
                def _get_train_sampler(self, train_dataset=None):
                    return sampler

        trainer = trainer_class(
            model=model,
            args=targs,
            train_dataset=dataset,
            data_collator=collator if dynamic_padding else default_data_collator,
            callbacks=[StepTimer()],
        )
        for cb in (PrinterCallback, ProgressCallback):
            trainer.remove_callback(cb)
        t0 = time.perf_counter()
        result = trainer.train()
        call_seconds = time.perf_counter() - t0
    plan = step_micro_batches(len(feats), args.batch_size, args.grad_accum, args.steps)
    n_timed = timed_features(plan, args.warmup)
    if dynamic_padding:  # the micro-batches of the timed steps, as the collator saw them
        timed = collator.batches[args.warmup * args.grad_accum : args.steps * args.grad_accum]
        if variant == "our_batches":  # the sampler must have handed the Trainer exactly our batches
            ours = our_timed_batches(feats, plan, args.warmup, batch_size=args.batch_size, seed=0, group_by_length=True)
            if [b[2] for b in timed] != [int(rows.max()) for rows in ours]:
                raise RuntimeError("the Trainer's timed batches are not ours: their widths differ")
        pad_fraction = 1 - sum(b[0] for b in timed) / sum(b[1] for b in timed)
        width = float(np.mean([b[2] for b in timed]))
    else:  # every batch is max_length wide
        pad_fraction, width = 1 - float(feats.lengths.mean()) / args.max_length, float(args.max_length)
    return {
        "name": {
            "fair": "HF Trainer, fair (dynamic padding, group_by_length=true)",
            "our_batches": "HF Trainer, our batches (dynamic padding)",
            "padded": "HF Trainer (padded to max_length)",
        }[variant],
        "loop": {"fair": "trainer_fair", "our_batches": "trainer_our_batches", "padded": "trainer"}[variant],
        "group_by_length": dynamic_padding,  # our_batches: our length-grouped order
        **_rate(stamps, args.steps, args.warmup, n_timed),
        "timed_features": n_timed,
        "pad_fraction": pad_fraction,
        "mean_batch_width": width,
        "final_loss": float(result.training_loss),  # the Trainer reports the mean over all steps
        "bf16": bf16,
        "device": str(targs.device),
        "optimizer": str(targs.optim.value if hasattr(targs.optim, "value") else targs.optim),
        "trainer_call_s": call_seconds,
        "timing_method": "TrainerCallback.on_step_end stamps (CUDA-synchronised), warm-up steps excluded",
    }


def _run_in_subprocess(variant: str, args: argparse.Namespace) -> dict:
    """Run one variant in a fresh Python process with the same options; its result dict."""
    options = {
        "--model": args.model,
        "--data": args.data,
        "--questions": args.questions,
        "--max-length": args.max_length,
        "--stride": args.stride,
        "--batch-size": args.batch_size,
        "--grad-accum": args.grad_accum,
        "--learning-rate": args.learning_rate,
        "--steps": args.steps,
        "--warmup": args.warmup,
        "--device": args.device,
        "--threads": args.threads,
    }
    with tempfile.TemporaryDirectory(prefix="bench_train_loop_variant_") as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, __file__, "--variant", variant, "--result-json", str(out)]
        for flag, value in options.items():
            if value is not None:
                command += [flag, str(value)]
        done = subprocess.run(command, stdout=subprocess.DEVNULL, check=False)
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f"variant {variant} failed (exit status {done.returncode}): {' '.join(command)}")
        return json.loads(out.read_text())


def _mean_of_runs(runs: list[dict]) -> dict:
    """One row from repeated runs of a variant: their mean s/step (features/s from it), the runs' own values kept."""
    if len(runs) == 1:
        return runs[0]
    row = dict(runs[0])
    row["timed_seconds"] = float(np.mean([r["timed_seconds"] for r in runs]))
    row["s_per_step"] = row["timed_seconds"] / row["timed_steps"]
    row["features_per_s"] = row["timed_features"] / row["timed_seconds"]
    row["run_position"] = [r["run_position"] for r in runs]
    row["runs_s_per_step"] = [r["s_per_step"] for r in runs]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="embedded:all-MiniLM-L6-v2")
    ap.add_argument("--data", default=None, help=f"SQuAD v1.1 dev JSON (default $SPURIOUS_DATA_MIRROR/{SQUAD_DEV})")
    ap.add_argument("--questions", type=int, default=2000, help="train on the first N questions")
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--stride", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--grad-accum", type=int, default=1, help="gradient_accumulation_steps (both loops)")
    ap.add_argument("--learning-rate", type=float, default=1e-4)
    ap.add_argument("--steps", type=int, default=30, help="optimizer steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="first steps left out of the timing")
    ap.add_argument("--device", default="auto", help="auto (CUDA if available), cpu or cuda")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--ours-first", action="store_true", help="run our loop before the Trainer's")
    ap.add_argument("--variant", default=None, help=argparse.SUPPRESS)  # internal: run one variant, in this process
    ap.add_argument("--result-json", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if not 0 < args.warmup < args.steps:
        ap.error("need 0 < --warmup < --steps")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    bf16 = use_bf16("auto", device)

    data = args.data or default_data()
    frame = load_squad_json(data)
    train_frame = frame.iloc[: args.questions].reset_index(drop=True)
    valid_frame = frame.iloc[args.questions : args.questions + VALID_QUESTIONS].reset_index(drop=True)
    t0 = time.perf_counter()
    feats = featurize(train_frame, load_tokenizer(args.model), max_length=args.max_length, stride=args.stride)
    featurize_s = time.perf_counter() - t0
    epochs = args.steps * args.batch_size * args.grad_accum / len(feats)
    name = device_name(device)
    print(
        f"device: {name}; bf16 autocast: {bf16}; model {args.model}; {len(train_frame)} questions -> {len(feats)} "
        f"windows (max_length {args.max_length}, stride {args.stride}, featurised in {featurize_s:.1f}s); "
        f"batch {args.batch_size} x accum {args.grad_accum}; {args.steps} steps ({epochs:.2f} epochs), "
        f"first {args.warmup} not timed",
        flush=True,
    )

    def trainer(variant: str):
        return lambda: bench_trainer(args.model, feats, args=args, device=device, bf16=bf16, variant=variant)

    def ours(group: bool):
        return lambda: bench_ours(
            args.model, train_frame, valid_frame, feats, group_by_length=group, args=args, device=device, bf16=bf16
        )

    jobs = {
        "trainer_fair": trainer("fair"),
        "trainer_our_batches": trainer("our_batches"),
        "ours_grouped": ours(True),
        "ours_random": ours(False),
        "trainer_padded": trainer("padded"),
    }
    if args.variant:  # one variant, in this process (how the default mode runs each)
        result = jobs[args.variant]()
        Path(args.result_json).write_text(json.dumps(result) + "\n")
        return
    # Each variant runs in a fresh process (in one process the later of two equal loops measured 1-4 % slower), and
    # the same-batches pair twice, in the order A B B A (ours first with --ours-first), so that a drift of the
    # machine's speed over the run weighs on both alike; their rows are the means of the two runs.
    names = list(jobs)
    run_order = [2, 1, 1, 2, 3, 0, 4] if args.ours_first else [0, 1, 2, 2, 1, 3, 4]
    runs: dict[int, list[dict]] = {}
    for n, position in enumerate(run_order, start=1):
        r = _run_in_subprocess(names[position], args)
        r["run_position"] = n
        runs.setdefault(position, []).append(r)
        print(f"  {r['name']}: {r['features_per_s']:.1f} features/s", flush=True)
    results = [_mean_of_runs(runs[i]) for i in range(len(jobs))]
    base = results[0]["features_per_s"]
    for r in results:
        r["ratio_vs_trainer"] = r["features_per_s"] / base
        # the tokens the model computes on (padding included): the two length-grouped samplers put different windows
        # into the few timed steps, so features/s alone favours the loop whose timed batches happened to be narrower
        r["padded_tokens_per_s"] = r["features_per_s"] * r["mean_batch_width"]
    # the one-difference comparison: ours and the Trainer on identical batches, so only the loops differ
    same_batches = results[1]["s_per_step"] / results[2]["s_per_step"]
    base_tokens = results[0]["padded_tokens_per_s"]
    for r in results:
        r["token_ratio_vs_trainer"] = r["padded_tokens_per_s"] / base_tokens

    print()
    print(
        f"Training throughput on {name} (bf16 autocast: {bf16}); baseline = the fair HF Trainer (dynamic padding, "
        "group_by_length=true) in the same run"
    )
    header = (
        f"{'variant':<58} {'s/step':>8} {'features/s':>11} {'width':>6} {'pad %':>6} {'tokens/s':>9} "
        f"{'vs fair Trainer':>16} {'(tokens/s)':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r['name']:<58} {r['s_per_step']:>8.3f} {r['features_per_s']:>11.1f} {r['mean_batch_width']:>6.0f} "
            f"{100 * r['pad_fraction']:>5.1f}% {r['padded_tokens_per_s']:>9.0f} {r['ratio_vs_trainer']:>15.2f}x "
            f"{r['token_ratio_vs_trainer']:>10.2f}x"
        )
    print(
        "tokens/s: features/s x width (padding included). With length grouping the two loops' samplers put "
        "different windows into the timed steps; where their widths differ, tokens/s compares the work rate."
    )
    print(
        f"Same batches (the Trainer fed our engine's length-grouped order, widths checked equal): ours "
        f"{results[2]['s_per_step']:.3f} s/step, the Trainer {results[1]['s_per_step']:.3f} s/step: ours "
        f"{same_batches:.2f}x the Trainer's speed (>= 1 means ours is at least as fast); means of two runs each, "
        f"ours {', '.join(f'{t:.3f}' for t in results[2]['runs_s_per_step'])}, the Trainer "
        f"{', '.join(f'{t:.3f}' for t in results[1]['runs_s_per_step'])} s/step."
    )
    print()
    print("timing:")
    for r in results:
        print(f"  {r['loop']}: {r['timing_method']}")

    if args.json:
        payload: dict[str, Any] = {
            "benchmark": "bench_train_loop",
            "device": name,
            "device_type": device.type,
            "bf16": bf16,
            "threads": torch.get_num_threads(),
            "model": args.model,
            "data": data,
            "questions": len(train_frame),
            "features": len(feats),
            "max_length": args.max_length,
            "stride": args.stride,
            "batch_size": args.batch_size,
            "gradient_accumulation_steps": args.grad_accum,
            "learning_rate": args.learning_rate,
            "steps": args.steps,
            "warmup_steps": args.warmup,
            "featurize_s": featurize_s,
            "run_order": "ours first" if args.ours_first else "Trainer first",
            "ours_vs_trainer_same_batches": same_batches,
            "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
            "results": results,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
