"""Throughput of our QA training step and of prediction (windows/s, s/step, s per 1,000 questions).

Uses the real SQuAD dev file and the loop's own pieces (featurize, collate with dynamic padding, qa_loss, AdamW), so
the numbers are what ``train_qa`` / ``predict_qa`` will see. Example:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_qa_train.py --lengths 256 384 --steps 10 --predict 1000
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch

from spurious.core.data.squad import load_squad_json, split_by_title
from spurious.core.models import load_qa_model, load_tokenizer
from spurious.core.train.qa import epoch_order, featurize, pick_device, predict_with_model, use_bf16
from spurious.core.train.qa.inference import _plain_loss
from spurious.core.train.training import autocast, to_device

# the data mirror (make data; the Makefile exports SPURIOUS_DATA_MIRROR), else ../shared beside the checkout
DEFAULT_DATA = str(
    Path(os.environ.get("SPURIOUS_DATA_MIRROR") or Path(__file__).resolve().parents[2] / "shared" / "data")
    / "squad_v1.1" / "dev-v1.1.json.gz"
)


def bench_train(
    model_name: str,
    frame,
    *,
    max_length: int,
    stride: int,
    batch_size: int,
    steps: int,
    device,
    bf16: bool,
    group_by_length: bool = False,
) -> dict:
    tokenizer = load_tokenizer(model_name)
    torch.manual_seed(0)
    model = load_qa_model(model_name).to(device).train()
    feats = featurize(frame, tokenizer, max_length=max_length, stride=stride)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    order = epoch_order(feats.lengths, batch_size=batch_size, seed=0, epoch=0, group_by_length=group_by_length)
    times, widths = [], []
    for step in range(steps + 1):  # step 0 warms up (allocator, kernels) and is not timed
        idx = order[step * batch_size : (step + 1) * batch_size]
        t0 = time.perf_counter()
        batch = to_device(feats.collate(idx), device)
        with autocast(device, bf16):
            loss = _plain_loss(model, batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step:
            times.append(time.perf_counter() - t0)
            widths.append(batch["input_ids"].shape[1])
    sec = float(np.mean(times))
    return {
        "max_length": max_length,
        "group_by_length": group_by_length,
        "batch_size": batch_size,
        "steps": steps,
        "s_per_step": sec,
        "s_per_step_median": float(np.median(times)),
        "windows_per_s": batch_size / sec,
        "mean_batch_width": float(np.mean(widths)),
        "windows_per_question": len(feats) / len(frame),
    }


def bench_predict(model_name: str, frame, *, max_length: int, stride: int, n: int, device) -> dict:
    tokenizer = load_tokenizer(model_name)
    model = load_qa_model(model_name).to(device)
    sub = frame.iloc[:n]
    settings = {"max_length": max_length, "stride": stride, "eval_batch_size": 64, "device": str(device.type)}
    predict_with_model(model, tokenizer, frame.iloc[:64], settings=settings)  # warm-up
    t0 = time.perf_counter()
    predict_with_model(model, tokenizer, sub, settings=settings)
    sec = time.perf_counter() - t0
    return {"max_length": max_length, "questions": n, "seconds": sec, "s_per_1000_questions": sec * 1000 / n}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default="embedded:all-MiniLM-L6-v2")
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--lengths", type=int, nargs="+", default=[256, 384])
    ap.add_argument("--stride", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--group-by-length", action="store_true", help="batches of similar length (train_qa option)")
    ap.add_argument("--predict", type=int, default=1000, help="questions to predict (0 = skip)")
    ap.add_argument("--predict-length", type=int, default=256)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    bf16 = use_bf16("auto", device)
    train, valid = split_by_title(load_squad_json(args.data), validation_fraction=0.34, seed=0)
    results = {"device": str(device), "bf16": bf16, "threads": torch.get_num_threads(), "train": [], "predict": None}
    for length in args.lengths:
        r = bench_train(
            args.model,
            train,
            max_length=length,
            stride=args.stride,
            batch_size=args.batch_size,
            steps=args.steps,
            device=device,
            bf16=bf16,
            group_by_length=args.group_by_length,
        )
        results["train"].append(r)
        print(json.dumps(r), flush=True)
    if args.predict:
        results["predict"] = bench_predict(
            args.model, valid, max_length=args.predict_length, stride=args.stride, n=args.predict, device=device
        )
        print(json.dumps(results["predict"]), flush=True)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
