"""The training engine over several processes (DDP with gloo on CPU): the same model as one process with the same
global batch, and a run killed with SIGTERM resumes to the same result. Also the pieces that need no processes."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from spurious.core.data import classification
from spurious.core.models import load_tokenizer
from spurious.core.train import checkpoints, classifier, engine, launch, steps, training
from tests.conftest import SHARED  # the data mirror: $SPURIOUS_SHARED (make data's mirror/), else ../shared

QNLI_DEV = SHARED / "data" / "qnli" / "validation" / "0000.parquet"
# batch 7 over 2 processes: shares of 4 and 3 rows; 45 rows: the epoch's last micro-batch has 3 (2 and 1)
SETTINGS = {
    "batch_size": 7,
    "gradient_accumulation_steps": 2,
    "max_steps": 6,
    "max_length": 48,
    "learning_rate": 3e-3,
    "warmup_ratio": 0.2,
    "device": "cpu",
    "threads": 1,
    "checkpoint_every": 0,
    "log_every": 1,
}


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> Path:
    """A 2-layer BERT (hidden 32) without dropout, with MiniLM's tokenizer: dropout masks are drawn per process, so
    a model with dropout cannot give the same weights over 1 and 2 processes."""
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = load_tokenizer("embedded:all-MiniLM-L6-v2")
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        classifier_dropout=0.0,
    )
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_bert") / "model"
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def train_rows():
    df = classification.load_hf_parquet(QNLI_DEV)
    train = df.head(45).copy()
    train.attrs = df.attrs
    weights = np.linspace(0.5, 1.5, len(train))  # per-example loss weights travel with the rows' shares
    return train, weights


def _train(model: Path, rows, out: Path, processes: int, log=None) -> dict:
    train, weights = rows
    return classifier.train_classifier(
        train,
        model_name_or_path=str(model),
        output_dir=out / "model",
        checkpoint_dir=out / "ck",
        settings=dict(SETTINGS, processes=processes),
        weights=weights,
        log=log,
    )


@pytest.fixture(scope="module")
def one_and_two(tiny_bert, train_rows, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("engine")
    return tmp, _train(tiny_bert, train_rows, tmp / "one", 1), _train(tiny_bert, train_rows, tmp / "two", 2)


def test_two_processes_train_the_same_model_as_one(one_and_two, tiny_bert):
    """Same global batch (7 rows x 2 micro-batches), same data order, same initial weights: the gradients differ only
    by the order of floating-point sums (each process's share, then gloo's all-reduce). Measured: weights within
    1.8e-7 of each other after 6 AdamW steps that moved them by up to 8.8e-3, losses within 1e-7 (relative). With
    the share scaling left out (each process's plain mean, so the 3-row share weighs as much as the 4-row one) the
    weights differ by 9.8e-3 and the losses by 12 %: the tolerances (1e-5, 1e-5) separate the two by far."""
    tmp, one, two = one_and_two
    assert (one["processes"], two["processes"]) == (1, 2)
    assert [r["step"] for r in two["train_losses"]] == list(range(1, 7))
    np.testing.assert_allclose(
        [r["loss"] for r in two["train_losses"]], [r["loss"] for r in one["train_losses"]], rtol=1e-5
    )
    a, b = (load_file(tmp / "one" / "model" / "model.safetensors"),
            load_file(tmp / "two" / "model" / "model.safetensors"))
    assert a.keys() == b.keys()
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst < 1e-5
    # the model did train: its weights moved from the initial ones by far more than the tolerance
    initial = load_file(tiny_bert / "model.safetensors")
    assert max(float((a[k] - initial[k]).abs().max()) for k in a) > 1e-3


def test_losses_read_in_batches_are_the_losses_of_every_step(one_and_two, tiny_bert, train_rows, tmp_path):
    """issue 28: the loop reads each step's loss from the device only at a log line, an evaluation, a checkpoint or the
    end (a read waits for the GPU). The fixture's one-process run logs every step; with log_every 4 and a checkpoint
    every 3 steps the losses are read at steps 3, 4 and 6: the same 6 numbers, bit for bit, the same model, and
    progress lines at steps 4 and 6 only."""
    tmp, one, _ = one_and_two
    lines: list[str] = []
    batched = _train_with(tiny_bert, train_rows, tmp_path, dict(SETTINGS, processes=1, log_every=4, checkpoint_every=3),
                          lines.append)
    assert batched["train_losses"] == one["train_losses"] and len(one["train_losses"]) == 6
    a = load_file(tmp / "one" / "model" / "model.safetensors")
    b = load_file(tmp_path / "model" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    logged = [ln.split()[1] for ln in lines if ln.startswith("step ")]
    assert logged == ["4/6", "6/6"], lines


def test_width_buckets_change_no_classifier_loss_or_probability(one_and_two, tiny_bert, train_rows, tmp_path):
    """issue 28: classifier batches padded up to a multiple of 16 instead of their longest row (on CPU): the same
    training losses and class probabilities up to float noise."""
    tmp, one, _ = one_and_two
    bucketed = _train_with(tiny_bert, train_rows, tmp_path, dict(SETTINGS, processes=1, pad_to_multiple_of=16), None)
    np.testing.assert_allclose(
        [r["loss"] for r in bucketed["train_losses"]], [r["loss"] for r in one["train_losses"]], rtol=1e-5
    )
    clf = classifier.load_trained_classifier(tmp / "one" / "model", device="cpu")
    data = classifier.encode(train_rows[0], clf.tokenizer, clf.max_length)
    assert {data.collate([i], 16)["input_ids"].shape[1] % 16 for i in range(len(data))} <= {0, clf.max_length % 16}
    exact, padded = (
        classifier.class_probabilities(clf.model, data, n_labels=2, batch_size=5, device=clf.device, bf16=False,
                                       multiple=multiple)
        for multiple in (1, 16)
    )
    np.testing.assert_allclose(padded, exact, atol=1e-6)


def _train_with(model: Path, rows, out: Path, settings: dict, log) -> dict:
    train, weights = rows
    return classifier.train_classifier(
        train, model_name_or_path=str(model), output_dir=out / "model", checkpoint_dir=out / "ck", settings=settings,
        weights=weights, log=log,
    )


def test_a_two_process_run_killed_with_sigterm_resumes_to_the_same_result(one_and_two, tiny_bert, train_rows):
    """SIGTERM to the launching process (as SLURM sends it) after step 3: it is forwarded to both processes, which
    agree on the step to stop at, checkpoint, and fail with TrainingPreempted; the rerun resumes and ends with the
    uninterrupted 2-process run's losses and weights, bit for bit."""
    tmp, _, two = one_and_two
    out = tmp / "killed"

    def kill_after_step_3(message: str) -> None:
        if message.startswith("step 3/"):
            os.kill(os.getppid(), signal.SIGTERM)  # the launcher (this test's process), which forwards it
            time.sleep(1.0)  # the forwarded signals arrive before the processes compare their flags

    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(classifier.TrainingPreempted) as exc:
        _train(tiny_bert, train_rows, out, 2, log=kill_after_step_3)
    assert exc.value.step == 3 and exc.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before
    assert [p.name for p in (out / "ck").iterdir()] == ["step-00000003"]
    assert not (out / "model").exists()
    resumed = _train(tiny_bert, train_rows, out, 2)
    assert resumed["resumed_from_step"] == 3
    assert resumed["train_losses"] == two["train_losses"]
    a, b = load_file(tmp / "two" / "model" / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_compiled_two_process_run_killed_with_sigterm_resumes_to_the_eager_result(
    one_and_two, tiny_bert, train_rows, monkeypatch
):
    """compile: on over 2 processes (``aot_eager``: dynamo's graphs without inductor's code generation; see
    tests/core/test_step.py): each process compiles the shapes of its own shares (rows 4 and 3, widths of 16) and
    warms them outside DDP, so no collective waits for a process still compiling; SIGTERM after step 3, and the
    resumed run ends with the eager 2-process run's losses and weights (the same float operations, up to the order
    of sums: 1e-5 as above)."""
    from spurious.core.train import compiled

    monkeypatch.setenv(compiled.BACKEND_VARIABLE, "aot_eager")
    tmp, _, two = one_and_two
    out = tmp / "compiled"
    settings = dict(SETTINGS, processes=2, compile="on", pad_to_multiple_of=16)

    def kill_after_step_3(message: str) -> None:
        if message.startswith("step 3/"):
            os.kill(os.getppid(), signal.SIGTERM)
            time.sleep(1.0)

    with pytest.raises(classifier.TrainingPreempted) as exc:
        _train_with(tiny_bert, train_rows, out, settings, kill_after_step_3)
    assert exc.value.step == 3
    resumed = _train_with(tiny_bert, train_rows, out, settings, None)
    # rank 0's record: step 4 is the epoch's short last micro-batch (a share of 2 rows, met once: eager), steps 5 and
    # 6 two full ones each (shares of 4 rows: compiled)
    record = resumed["compile"]
    assert resumed["resumed_from_step"] == 3 and record["enabled"] and record["graph_breaks"] == 0
    assert {rows for rows, _ in record["shapes"]} == {4} and (sum(record["passes"]), record["eager_passes"]) == (4, 1)
    np.testing.assert_allclose(
        [r["loss"] for r in resumed["train_losses"]], [r["loss"] for r in two["train_losses"]], rtol=1e-5
    )
    a, b = load_file(tmp / "two" / "model" / "model.safetensors"), load_file(out / "model" / "model.safetensors")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-5


def test_a_checkpoint_of_two_processes_is_not_resumed_by_one(tiny_bert, train_rows, tmp_path):
    out = tmp_path / "r"

    def kill_after_step_2(message: str) -> None:
        if message.startswith("step 2/"):
            os.kill(os.getppid(), signal.SIGTERM)
            time.sleep(1.0)

    with pytest.raises(classifier.TrainingPreempted):
        _train(tiny_bert, train_rows, out, 2, log=kill_after_step_2)
    with pytest.raises(RuntimeError, match="over 2 processes and this one has 1"):
        _train(tiny_bert, train_rows, out, 1)


def test_a_checkpoint_of_the_former_adamw_kernel_is_not_resumed(tiny_bert, train_rows, tmp_path):
    """Checkpoints written before the engine chose fused AdamW have no ``optimizer_impl`` in their state: resuming one
    would continue another kernel's updates, so it is refused with what to do. (A 4-step run leaves its step-2
    checkpoint behind; the adapter, not the function, removes the folder.)"""
    out = tmp_path / "r"
    rows, weights = train_rows
    classifier.train_classifier(
        rows, model_name_or_path=str(tiny_bert), output_dir=out / "model", checkpoint_dir=out / "ck",
        settings=dict(SETTINGS, max_steps=4, checkpoint_every=2), weights=weights,
    )
    state_file = training.latest_checkpoint(out / "ck") / checkpoints.STATE_FILE
    state = json.loads(state_file.read_text())
    assert state["optimizer_impl"] == "fused"
    del state["optimizer_impl"]
    state_file.write_text(json.dumps(state))
    with pytest.raises(RuntimeError, match="default AdamW kernel and this run uses the fused one"):
        classifier.train_classifier(
            rows, model_name_or_path=str(tiny_bert), output_dir=out / "again", checkpoint_dir=out / "ck",
            settings=dict(SETTINGS, max_steps=4, checkpoint_every=2), weights=weights,
        )


def _checkpoint_of_a_4_step_run(tiny_bert, train_rows, out: Path) -> tuple[dict, Path]:
    """A 4-step run that checkpoints every 2 steps: its summary and the step-2 checkpoint it leaves behind (the
    adapter, not the function, removes the folder); rerun with ``_resume_4_step_run`` it resumes there."""
    summary = _resume_4_step_run(tiny_bert, train_rows, out, "first")
    return summary, training.latest_checkpoint(out / "ck")


def _resume_4_step_run(tiny_bert, train_rows, out: Path, name: str) -> dict:
    rows, weights = train_rows
    return classifier.train_classifier(
        rows, model_name_or_path=str(tiny_bert), output_dir=out / name, checkpoint_dir=out / "ck",
        settings=dict(SETTINGS, max_steps=4, checkpoint_every=2), weights=weights,
    )  # fmt: skip


def test_resuming_loads_every_file_of_a_checkpoint_with_the_weights_only_unpickler(
    tiny_bert, train_rows, tmp_path, monkeypatch
):
    """Model, optimizer, RNG states (which Accelerate loads, swallowing any error) and the best weights: none is
    unpickled with ``weights_only=False`` and none fails; the schedule is JSON, and the run resumes exactly."""
    first, ckpt = _checkpoint_of_a_4_step_run(tiny_bert, train_rows, tmp_path)
    assert ckpt.name == "step-00000002"
    loads = []
    real_load = torch.load

    def spy(f, *args, **kwargs):
        try:
            result = real_load(f, *args, **kwargs)
        except Exception as exc:
            loads.append((Path(f).name, kwargs.get("weights_only"), repr(exc)))
            raise
        loads.append((Path(f).name, kwargs.get("weights_only"), None))
        return result

    monkeypatch.setattr(torch, "load", spy)
    resumed = _resume_4_step_run(tiny_bert, train_rows, tmp_path, "again")
    assert resumed["resumed_from_step"] == 2
    assert resumed["train_losses"] == first["train_losses"]
    assert {"pytorch_model.bin", "optimizer.bin", "random_states_0.pkl"} <= {name for name, _, _ in loads}
    assert all(weights_only is True and error is None for _, weights_only, error in loads), loads
    # after 1 warmup step (0.2 x 4 steps, rounded up) the rate falls linearly to 0 at step 4: 3e-3 x 2/3 at step 2
    assert json.loads((ckpt / "schedule.json").read_text()) == {"step": 2, "learning_rates": [2e-3, 2e-3]}
    assert [p.name for p in ckpt.glob("*.pkl")] == ["random_states_0.pkl"]


class _RunsCode:
    """Unpickled, it creates the folder ``marker``: code run by loading a file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


def test_a_checkpoint_holding_a_pickle_that_runs_code_is_refused_without_running_it(tiny_bert, train_rows, tmp_path):
    """An earlier version's checkpoint holds the schedule as ``custom_checkpoint_0.pkl``; one made to run code (here:
    create a folder) is refused, the code not run, the file left as it was."""
    _, ckpt = _checkpoint_of_a_4_step_run(tiny_bert, train_rows, tmp_path)
    (ckpt / "schedule.json").unlink(missing_ok=True)
    marker = tmp_path / "code-ran"
    plain = {"base_lrs": [3e-3, 3e-3], "last_epoch": 2, "_step_count": 3, "_last_lr": [2e-3, 2e-3],
             "lr_lambdas": [{}, {}]}
    torch.save({**plain, "payload": _RunsCode(marker)}, ckpt / "custom_checkpoint_0.pkl")
    with pytest.raises(RuntimeError, match=r"custom_checkpoint_0\.pkl: not the plain state of a learning-rate "
                                           r"schedule.*could run code"):
        _resume_4_step_run(tiny_bert, train_rows, tmp_path, "again")
    assert not marker.exists()
    assert (ckpt / "custom_checkpoint_0.pkl").is_file()  # left as it was
    assert not (tmp_path / "again").exists()


def test_a_checkpoint_with_an_earlier_versions_pickled_schedule_resumes_exactly(tiny_bert, train_rows, tmp_path):
    """Earlier versions registered the schedule with Accelerate, which pickled its state (a LambdaLR's: plain numbers)
    as ``custom_checkpoint_0.pkl``. Such a checkpoint is read as plain data, converted to ``schedule.json`` and
    resumes to the uninterrupted run's losses, bit for bit."""
    from accelerate.checkpointing import save_custom_state

    first, ckpt = _checkpoint_of_a_4_step_run(tiny_bert, train_rows, tmp_path)
    (ckpt / "schedule.json").unlink(missing_ok=True)
    # the schedule of that run at step 2, saved as Accelerate saved a registered object (two parameter groups)
    params = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.LayerNorm(2))
    settings = dict(SETTINGS, weight_decay=0.0)
    _, schedule = steps.optimizer_and_schedule(params, None, settings, 4, torch.device("cpu"))
    for _ in range(2):
        schedule.optimizer.step()
        schedule.step()
    save_custom_state(schedule, str(ckpt), 0)
    resumed = _resume_4_step_run(tiny_bert, train_rows, tmp_path, "again")
    assert resumed["resumed_from_step"] == 2
    assert resumed["train_losses"] == first["train_losses"]
    assert not (ckpt / "custom_checkpoint_0.pkl").exists()
    assert json.loads((ckpt / "schedule.json").read_text()) == {"step": 2, "learning_rates": [2e-3, 2e-3]}


def test_adamw_is_fused_where_torch_has_the_kernel_and_matches_the_default_one():
    """Fused on CPU (and CUDA), torch's default elsewhere; the fused update is the default one up to rounding: 10
    steps with the same inputs, weight decay on one group, moved the weights by 0.049 and left the two within 3e-8 of
    each other (measured)."""
    settings = {"weight_decay": 0.01, "learning_rate": 1e-2, "warmup_ratio": 0.1}

    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.Linear(16, 2))

    fused_model, default_model = make(), make()
    fused, fused_schedule = steps.optimizer_and_schedule(fused_model, None, settings, 10, torch.device("cpu"))
    # a device without the fused kernel (only the choice depends on it; the parameters stay on the CPU)
    default, default_schedule = steps.optimizer_and_schedule(default_model, None, settings, 10, torch.device("meta"))
    assert fused.param_groups[0]["fused"] is True
    assert not default.param_groups[0]["fused"]
    assert [g["weight_decay"] for g in fused.param_groups] == [0.01, 0.0]
    generator = torch.Generator().manual_seed(1)
    for _ in range(10):
        x = torch.randn(32, 8, generator=generator)
        for model, optimizer, schedule in (
            (fused_model, fused, fused_schedule),
            (default_model, default, default_schedule),
        ):
            optimizer.zero_grad()
            model(x).pow(2).mean().backward()
            optimizer.step()
            schedule.step()

    def largest_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
        return max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))

    moved = largest_difference(fused_model, make())
    worst = largest_difference(fused_model, default_model)
    assert moved > 1e-2  # the steps did move the weights
    assert worst < 1e-6


def test_a_failing_process_is_reported_with_its_traceback(tmp_path):
    def fail() -> None:
        rank, _ = engine.world()
        if rank == 1:
            raise ValueError("rank one cannot go on")
        time.sleep(60)  # left waiting, as in a collective; the launcher stops it

    t0 = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"(?s)training process 1 of 2 failed.*rank one cannot go on"):
        launch.launch(fail, 2)
    assert time.perf_counter() - t0 < 30


def _port_held_and_sum(offset: int) -> tuple[bool, float, int]:
    """In each launched process: whether its rendezvous port was already taken when it started (by its launcher),
    then the sum over the processes of ``offset + rank``, through the process group Accelerate sets up."""
    import socket

    from accelerate import PartialState

    port = int(os.environ["MASTER_PORT"])
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            held = False
        except OSError:
            held = True
    total = torch.tensor([float(offset + PartialState(cpu=True).process_index)])
    torch.distributed.all_reduce(total)
    return held, float(total), port


def _launch_after(barrier, results, offset: int) -> None:
    import traceback

    barrier.wait()
    try:
        results.put((offset, launch.launch(_port_held_and_sum, 2, offset)))
    except BaseException:  # noqa: BLE001 - reported to the test
        results.put((offset, traceback.format_exc()))


def test_two_launches_at_once_each_meet_on_a_port_their_launcher_holds():
    """Two launches of 2 processes each, started together (two jobs on one node): each process finds its rendezvous
    port taken before any process group exists (its launcher serves the store: no other job can bind the port in
    between), and each launch sums its own ranks (10 + 11, 100 + 101) over its own port."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(2), context.SimpleQueue()
    launchers = [context.Process(target=_launch_after, args=(barrier, results, offset)) for offset in (10, 100)]
    for launcher in launchers:
        launcher.start()
    for launcher in launchers:
        launcher.join(120)
    got = dict(results.get() for _ in launchers)
    assert [launcher.exitcode for launcher in launchers] == [0, 0], got
    assert (got[10][:2], got[100][:2]) == ((True, 21.0), (True, 201.0)), got
    assert got[10][2] != got[100][2]


@pytest.mark.parametrize(
    ("rows", "processes", "rank", "expected_rows", "factor"),
    [
        ([10, 11, 12, 13, 14, 15, 16], 2, 0, [10, 11, 12, 13], 8 / 7),
        ([10, 11, 12, 13, 14, 15, 16], 2, 1, [14, 15, 16], 6 / 7),
        ([10, 11, 12], 1, 0, [10, 11, 12], 1.0),
        ([10], 2, 1, [10], 0.0),  # no row of its own: one row with factor 0 (DDP needs every process)
    ],
)
def test_split_shares_a_micro_batch_so_the_mean_of_the_scaled_means_is_the_batch_mean(
    rows, processes, rank, expected_rows, factor
):
    mine, got = steps._split(np.array(rows), rank, processes)
    assert mine.tolist() == expected_rows and got == pytest.approx(factor)
    # the averaged loss over processes equals the micro-batch's mean loss, for per-row losses equal to the row value
    shares = [steps._split(np.array(rows), r, processes) for r in range(processes)]
    averaged = sum(np.mean(m) * f for m, f in shares) / processes
    assert averaged == pytest.approx(np.mean(rows))


def test_processes_setting_is_validated():
    assert launch.processes_setting({}) == 1 and launch.processes_setting({"processes": 4}) == 4
    for bad in (0, -1, 1.5, "2", True):
        with pytest.raises(ValueError, match="processes must be a positive integer"):
            launch.processes_setting({"processes": bad})


@pytest.mark.parametrize(
    "n_rows, settings, expected",
    [
        # 45 rows in batches of 7: 7 micro-batches (6 full, one of 3); by 2 per step: 4 steps per epoch
        (45, {"batch_size": 7, "gradient_accumulation_steps": 2, "epochs": 3, "max_steps": None}, (7, 4, 12)),
        # fractional epochs round up: 1.5 x 4 = 6; max_steps wins over epochs
        (45, {"batch_size": 7, "gradient_accumulation_steps": 2, "epochs": 1.5, "max_steps": 0}, (7, 4, 6)),
        (45, {"batch_size": 7, "gradient_accumulation_steps": 2, "epochs": 3, "max_steps": 5}, (7, 4, 5)),
        (16, {"batch_size": 16, "gradient_accumulation_steps": 1, "epochs": 2, "max_steps": None}, (1, 1, 2)),
    ],
)
def test_step_counts_by_hand(n_rows, settings, expected):
    assert engine.step_counts(n_rows, settings) == expected


def test_step_counts_reject_an_empty_batch():
    with pytest.raises(ValueError, match="must be at least 1"):
        engine.step_counts(10, {"batch_size": 0, "gradient_accumulation_steps": 1, "epochs": 1, "max_steps": None})


def test_step_micro_batches_take_consecutive_slices_and_stop_at_the_epoch_end():
    order = np.arange(100, 145)  # 45 rows, batch 7: micro-batches 0..5 full, 6 holds 3 rows
    grouped = [steps.step_micro_batches(order, b, 7, 2) for b in (0, 2, 4, 6)]
    assert [[len(m) for m in step] for step in grouped] == [[7, 7], [7, 7], [7, 7], [3]]
    assert grouped[1][0].tolist() == list(range(114, 121)) and grouped[3][0].tolist() == [142, 143, 144]
    assert np.concatenate([m for step in grouped for m in step]).tolist() == order.tolist()


class _Tempered(torch.nn.Module):
    """A QA objective with a parameter of its own (a learned log-temperature on the span logits): DDP must
    synchronise its gradient with the model's, or the processes' temperatures drift apart."""

    needs_hidden_states = False

    def __init__(self) -> None:
        super().__init__()
        self.log_t = torch.nn.Parameter(torch.zeros(()))

    def batch_inputs(self, feature_index, batch):
        return {}

    def forward(self, start, end, hidden, batch):
        from spurious.core.train.qa.inference import qa_loss

        scale = self.log_t.exp()
        loss = qa_loss(start * scale, end * scale, batch["start_positions"], batch["end_positions"],
                       batch["attention_mask"])
        return loss, {"t": scale.detach()}


def test_qa_over_two_processes_with_an_objective_matches_one_process(squad_dev, tmp_path):
    """The QA path (train_qa, a training objective with its own parameter, validation and checkpoint selection on
    every process): 1 and 2 processes end with the same model, objective and evaluations."""
    from transformers import BertConfig, BertForQuestionAnswering

    from spurious.core.train import qa

    tokenizer = load_tokenizer("embedded:all-MiniLM-L6-v2")
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    torch.manual_seed(0)
    folder = tmp_path / "tiny_qa"
    BertForQuestionAnswering(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    short = squad_dev[squad_dev["context"].str.len() < 400]
    train, valid = short.iloc[:11].reset_index(drop=True), short.iloc[200:206].reset_index(drop=True)
    settings = {
        "batch_size": 5, "gradient_accumulation_steps": 1, "max_steps": 5, "max_length": 128, "stride": 32,
        "learning_rate": 3e-3, "eval_every": 2, "device": "cpu", "threads": 1, "checkpoint_every": 0, "log_every": 1,
    }  # fmt: skip

    def run(processes: int) -> dict:
        return qa.train_qa(
            train, valid, model_name_or_path=str(folder), output_dir=tmp_path / f"p{processes}" / "model",
            checkpoint_dir=tmp_path / f"p{processes}" / "ck", settings=dict(settings, processes=processes),
            objective_factory=lambda features: _Tempered(), objective_id="tempered",
        )  # fmt: skip

    one, two = run(1), run(2)
    assert two["processes"] == 2 and [r["step"] for r in two["train_losses"]] == [1, 2, 3, 4, 5]
    for a, b in zip(one["train_losses"], two["train_losses"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5) and b["t"] == pytest.approx(a["t"], rel=1e-6)
    assert one["train_losses"][-1]["t"] != 1.0  # the objective's parameter was trained
    assert [r["step"] for r in two["validation_losses"]] == [2, 4, 5]
    for a, b in zip(one["validation_losses"], two["validation_losses"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
    assert two["best_step"] == one["best_step"] and two["saved_step"] == one["saved_step"]
    wa, wb = (load_file(tmp_path / f"p{n}" / "model" / "model.safetensors") for n in (1, 2))
    # Two parameters shift every position's start (end) logit by the same amount, and the span cross-entropy is
    # invariant to such a shift: their true gradient is exactly 0, their computed one rounding noise, which AdamW
    # normalises into lr-sized steps of random sign. They differ between any two summation orders (measured: 1.4e-3
    # and 1.1e-4); every other weight agrees within 3e-7.
    shift_invariant = {"qa_outputs.bias", "bert.encoder.layer.1.output.LayerNorm.bias"}
    assert max(float((wa[k] - wb[k]).abs().max()) for k in wa if k not in shift_invariant) < 1e-5


def test_job_settings_take_the_process_count_from_the_jobs_gpus():
    """The rules' adapters: N = the job's `gpu` resource (profiles/slurm), 1 without one; threads shared."""
    from types import SimpleNamespace

    base = {"batch_size": 16}
    assert launch.job_settings(base, threads=8, resources=SimpleNamespace(gpu=2)) == {
        "batch_size": 16, "threads": 4, "processes": 2,
    }  # fmt: skip
    assert launch.job_settings(base, threads=2, resources=SimpleNamespace()) == {
        "batch_size": 16, "threads": 2, "processes": 1,
    }  # fmt: skip
    assert launch.job_settings(base, threads=1, resources=SimpleNamespace(gpu=4))["threads"] == 1
    assert base == {"batch_size": 16}  # not changed in place


def test_a_damaged_checkpoint_is_named_with_what_to_do(tiny_bert, train_rows, tmp_path):
    """A truncated model file in the checkpoint (a disk that filled up, a copy cut off): the rerun stops with the
    checkpoint's path, what is wrong and what to do (the CLI's and a workflow job's one line), not Accelerate's
    traceback."""
    from spurious.core.errors import UnreadableFileError

    out = tmp_path / "r"
    rows, weights = train_rows
    settings = dict(SETTINGS, max_steps=4, checkpoint_every=2)
    classifier.train_classifier(rows, model_name_or_path=str(tiny_bert), output_dir=out / "model",
                                checkpoint_dir=out / "ck", settings=settings, weights=weights)
    ckpt = training.latest_checkpoint(out / "ck")
    (model_file,) = [p for p in ckpt.iterdir() if p.name.startswith(("pytorch_model", "model"))]
    model_file.write_bytes(model_file.read_bytes()[:1000])
    with pytest.raises(UnreadableFileError) as exc:
        classifier.train_classifier(rows, model_name_or_path=str(tiny_bert), output_dir=out / "again",
                                    checkpoint_dir=out / "ck", settings=settings, weights=weights)
    message = str(exc.value)
    assert message.startswith(f"{ckpt}: not a readable training checkpoint (")
    assert message.endswith(f"; delete {out / 'ck'} to start the run afresh (only the newest checkpoint is kept)")
    assert "\n" not in message


def test_a_stop_and_a_resume_are_said_on_the_processs_own_stderr_too(monkeypatch, capfd):
    """Snakemake empties a rule's log before each retry: where a job's logging goes to that log (runlog.setup
    replaces sys.stderr), a stop or a resume is also written to the process's own stderr (each attempt's SLURM log),
    by the first process only."""
    import io
    import sys

    logged: list[str] = []
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    engine._announce(logged.append, "received SIGUSR1: checkpoint saved at step 5 in ckpt", 0)
    engine._announce(logged.append, "received SIGUSR1: checkpoint saved at step 5 in ckpt (rank 1)", 1)
    assert logged == ["received SIGUSR1: checkpoint saved at step 5 in ckpt",
                      "received SIGUSR1: checkpoint saved at step 5 in ckpt (rank 1)"]
    assert capfd.readouterr().err == "spurious: received SIGUSR1: checkpoint saved at step 5 in ckpt\n"
    monkeypatch.setattr(sys, "stderr", sys.__stderr__)  # not redirected: the log line is the stderr line already
    engine._announce(logged.append, "resuming from ckpt (step 5/40)", 0)
    assert capfd.readouterr().err == ""
