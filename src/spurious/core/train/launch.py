"""Several training processes on one node: the ``processes`` setting, a Snakemake job's share of threads per process,
and :func:`launch`, which forks the processes, lets them meet through a store it serves, forwards the preemption
signals and returns rank 0's result."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spurious.core.train.training import PreemptionGuard, TrainingPreempted


def processes_setting(settings: Mapping[str, Any] | None) -> int:
    """The ``processes`` setting (default 1), validated."""
    n = (settings or {}).get("processes")
    n = 1 if n is None else n
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"the setting processes must be a positive integer (the number of GPUs), got {n!r}")
    return int(n)


def job_settings(settings: Mapping[str, Any], *, threads: int, resources: Any) -> dict[str, Any]:
    """A training rule's settings for its Snakemake job: ``processes`` = the job's GPU count (the ``gpu`` resource,
    which ``profiles/slurm`` sets per rule or per model; 1 without one) and the job's threads shared among them."""
    gpus = getattr(resources, "gpu", None)
    processes = processes_setting({"processes": int(gpus) if gpus else 1})
    return {**settings, "threads": max(1, int(threads) // processes), "processes": processes}


def needs_launch(settings: Mapping[str, Any] | None) -> bool:
    """True in the process that must start the others: more than one process asked for and not yet launched."""
    return processes_setting(settings) > 1 and "SPURIOUS_LAUNCHED" not in os.environ


def _rendezvous_store() -> Any:
    """The store through which the launched processes meet, served by the launcher on a port the system picks and the
    launcher holds until they are done. The processes connect to it as clients (torchrun's agent store:
    ``TORCHELASTIC_USE_AGENT_STORE``), so no other job can take the port between its choice and its use, and two
    launches on one node never meet. Created before the processes are forked: no one knows the port yet, so its
    server thread is idle and the children inherit no lock it holds."""
    return torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)


def _child(fn: Callable[..., Any], rank: int, processes: int, port: int, queue: Any, args: tuple, kwargs: dict) -> None:
    for sig in PreemptionGuard.SIGNALS:  # not the launcher's forwarding handler
        signal.signal(sig, signal.SIG_DFL)
    os.environ.update(
        SPURIOUS_LAUNCHED="1",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        TORCHELASTIC_USE_AGENT_STORE="True",  # the launcher serves the store (_rendezvous_store)
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(processes),
        LOCAL_WORLD_SIZE=str(processes),
    )
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)  # the parent's (single-process) state was forked too
    if rank != 0 and "log" in kwargs:
        kwargs = {**kwargs, "log": lambda message: None}  # one process reports
    try:
        result = fn(*args, **kwargs)
        queue.put(("ok", rank, result if rank == 0 else None))
    except TrainingPreempted as exc:
        queue.put(("preempted", rank, (exc.signum, exc.step, str(exc.checkpoint))))
    except BaseException:  # noqa: BLE001 - reported to the launcher, which raises it
        queue.put(("error", rank, traceback.format_exc()))
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def launch(fn: Callable[..., Any], processes: int, *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` in ``processes`` forked processes on this node (rank 0 .. N-1, each with the usual
    ``RANK``/``WORLD_SIZE``/``MASTER_*`` variables, so Accelerate sets up DDP) and return rank 0's result. The
    processes meet through a store this process serves (``_rendezvous_store``): no port is chosen and bound later.

    Forked, not spawned: the training functions take closures (objectives, selections) that cannot be pickled. CUDA
    must therefore not be initialised in this process before (nothing in our code path does). SIGTERM/SIGUSR1 sent
    to this process are forwarded to the children; if they were preempted, ``TrainingPreempted`` is raised here too;
    a child's error is raised here as a RuntimeError with the child's traceback, after the others are stopped.
    """
    context = multiprocessing.get_context("fork")
    queue = context.SimpleQueue()
    store = _rendezvous_store()
    port = store.port
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")  # torch.cuda.is_available() must not init CUDA
    children = [
        context.Process(target=_child, args=(fn, rank, processes, port, queue, args, kwargs), daemon=False)
        for rank in range(processes)
    ]

    def forward(signum: int, frame: Any) -> None:
        for child in children:
            if child.pid is not None and child.is_alive():
                os.kill(child.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in PreemptionGuard.SIGNALS}
    messages: list[tuple[str, int, Any]] = []
    try:
        for child in children:
            child.start()
        while True:
            while not queue.empty():
                messages.append(queue.get())
            if any(kind == "error" for kind, _, _ in messages) or not any(c.is_alive() for c in children):
                break
            time.sleep(0.05)
        if not any(kind == "error" for kind, _, _ in messages):  # else the others wait in a collective: stop them
            deadline = time.monotonic() + 30
            for child in children:
                child.join(timeout=max(0.0, deadline - time.monotonic()))
            while not queue.empty():
                messages.append(queue.get())
    finally:
        for child in children:
            if child.is_alive():  # a failed sibling left it waiting in a collective
                child.kill()
                child.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        del store  # its server stops: the port is free again
    by_kind: dict[str, list[tuple[int, Any]]] = {}
    for kind, rank, payload in messages:
        by_kind.setdefault(kind, []).append((rank, payload))
    if "error" in by_kind:
        rank, text = min(by_kind["error"])
        raise RuntimeError(f"training process {rank} of {processes} failed:\n{text}")
    if "preempted" in by_kind:
        signum, step, checkpoint = dict(by_kind["preempted"]).get(0, by_kind["preempted"][0][1])
        raise TrainingPreempted(signum, step, Path(checkpoint))
    done = dict(by_kind.get("ok", []))
    if len(done) != processes:
        codes = [c.exitcode for c in children]
        raise RuntimeError(
            f"{processes - len(done)} of {processes} training processes ended without a result (exit codes {codes})"
        )
    return done[0]
