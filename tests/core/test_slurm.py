"""The SLURM start-up check's pure parts: sinfo parsing and the verdict on a request (the real cluster: tests/slurm);
the requests per model as Snakemake resolves them from the shipped profile."""

from __future__ import annotations

import pytest
import yaml

from spurious.workflow.slurm import (
    Node,
    Request,
    SlurmRequestError,
    _gpus,
    _minutes,
    check_requests,
    parse_sinfo,
    size_table,
    unmet,
)
from tests.conftest import REPO

# `sinfo -h -N -o '%N|%P|%c|%m|%G|%l'` of a small cluster: two CPU nodes, one with 4 A100s in a 2-day partition.
SINFO = """\
c1|cpu*|32|192000|(null)|infinite
c2|cpu*|64|256000|(null)|infinite
g1|gpu|48|512000|gpu:a100:4(S:0-1)|2-00:00:00
"""


def _request(**kw) -> Request:
    base = dict(label="rule train (model=m, seed=0)", rules=("train",), partition="gpu", cpus=8, mem_mb=32000,
                gpus=1, runtime_min=720)
    return Request(**(base | kw))


def test_sinfo_lines_become_nodes_with_their_partition_limits():
    nodes = parse_sinfo(SINFO)
    assert [(n.name, n.partition, n.cpus, n.mem_mb, n.gpus, n.time_limit_min) for n in nodes] == [
        ("c1", "cpu", 32, 192000, 0, None),
        ("c2", "cpu", 64, 256000, 0, None),
        ("g1", "gpu", 48, 512000, 4, 2880),
    ]
    assert [n.default_partition for n in nodes] == [True, True, False]


def test_time_limits_and_gres_strings():
    assert _minutes("1-12:30:00") == 36 * 60 + 30
    assert _minutes("45") == 45 and _minutes("10:30") == 10 and _minutes("infinite") is None
    assert _gpus("gpu:2") == 2 and _gpus("gpu:h100:8(S:0-1),tmpfs:1") == 8 and _gpus("(null)") == 0


def test_a_request_that_fits_one_node_passes():
    nodes = parse_sinfo(SINFO)
    assert unmet(_request(), nodes) is None
    assert unmet(_request(partition=None, gpus=0, cpus=64, mem_mb=256000, runtime_min=None), nodes) is None


def test_too_many_cpus_names_the_rule_the_request_the_largest_node_and_the_setting():
    msg = unmet(_request(cpus=96), parse_sinfo(SINFO))
    assert msg.startswith("rule train (model=m, seed=0) asks for 96 CPUs, 32000 MB, 1 GPUs, 720 min in gpu")
    assert "(CPUs)" in msg and "the largest node of partition 'gpu', g1, has 48 CPUs, 512000 MB and 4 GPUs" in msg
    assert "with a 2880 min limit" in msg and "PENDING forever" in msg
    assert "set-threads: train (or set-resources: train: cpus_per_gpu / cpus_per_task)" in msg


def test_each_short_dimension_is_named_with_its_setting():
    nodes = parse_sinfo(SINFO)
    assert "(GPUs)" in unmet(_request(gpus=8), nodes) and "set-resources: train: gpu" in unmet(_request(gpus=8), nodes)
    assert "(time)" in unmet(_request(runtime_min=3000), nodes)
    msg = unmet(_request(partition=None, gpus=0, mem_mb=300000), nodes)  # the default partition: cpu
    assert "(memory)" in msg and "partition 'cpu', c2" in msg and "set-resources: train: mem_mb" in msg
    # a GPU on a partition without any
    assert "(GPUs)" in unmet(_request(partition="cpu"), nodes)


def test_no_single_node_with_everything_at_once():
    # one node has the CPUs, the other the memory: no node has both, and the largest (by CPUs) lacks the memory
    nodes = [Node("a", "p", 64, 1000, 0, None, True), Node("b", "p", 2, 500000, 0, None, True)]
    msg = unmet(_request(partition="p", gpus=0, cpus=32, mem_mb=400000), nodes)
    assert "more than any node there can give (memory)" in msg and "node of partition 'p', a, has 64 CPUs" in msg


def test_an_unknown_partition_lists_the_known_ones():
    msg = unmet(_request(partition="a100"), parse_sinfo(SINFO))
    assert "partition 'a100', which this cluster does not have (partitions: cpu, gpu)" in msg


def test_group_advice_points_at_the_group_width():
    group = _request(label="group bias_m/seed0 (28 jobs of rule bias)", rules=("bias",), partition="cpu", gpus=0,
                     cpus=8, mem_mb=400000, group="bias_m/seed0", members=28)
    msg = unmet(group, parse_sinfo(SINFO))
    assert "lower `cores`" in msg and "BIAS_SEARCH_MEM_MB" in msg
    assert check_requests([group, _request()], parse_sinfo(SINFO)) == [msg]


# ---------------------------------------------------------------------------------------------------- per model

def test_by_size_values_are_read_as_literals_per_class():
    assert size_table("by_size(bilstm=4, small=4, base=8, large='gpu-80g', xl=8)") == {
        "bilstm": 4, "small": 4, "base": 8, "large": "gpu-80g", "xl": 8}
    assert size_table(8) is None and size_table("2 if wildcards.model == 'x' else 1") is None
    with pytest.raises(SlurmRequestError, match=r"names unknown size classes \['huge'\]"):
        size_table("by_size(small=1, huge=2)", "set-resources: train: gpu")
    with pytest.raises(SlurmRequestError, match="not by_size"):
        size_table("by_size(small=threads * 2)", "set-resources: train: mem_mb")


def _lexical_requests(tmp_path, config=None, profile=REPO / "profiles" / "slurm"):
    """lexical_train's resources per (model, dataset) as Snakemake resolves them for configs/paper-lexical.yaml."""
    from spurious.workflow.plan import planned_jobs

    cfg = tmp_path / "paper-lexical.yaml"
    cfg.write_text(yaml.safe_dump(config or yaml.safe_load((REPO / "configs" / "paper-lexical.yaml").read_text())))
    _, jobs = planned_jobs([cfg], profile, tmp_path / "work")
    keys = ("gpu", "cpus_per_gpu", "mem_mb", "runtime", "slurm_partition", "slurm_extra")
    return {(j.wildcards["model"], j.wildcards["dataset"]): ({k: j.resources[k] for k in keys}, j.threads)
            for j in jobs if j.rule == "lexical_train"}


def test_the_bilstm_control_asks_for_a_small_job_roberta_large_for_a_large_one(tmp_path):
    requests = _lexical_requests(tmp_path)
    bilstm, large = requests[("bilstm", "snli")], requests[("roberta_large", "snli")]
    warning = "--signal=USR1@600"  # SIGUSR1 ten minutes before the time limit: checkpoint, exit, resume on the retry
    assert bilstm == ({"gpu": 1, "cpus_per_gpu": 4, "mem_mb": 16000, "runtime": 240, "slurm_partition": "gpu",
                       "slurm_extra": warning}, 4)  # fmt: skip
    # one GPU: a batch of 16 x 128 tokens leaves RoBERTa-large's step launch-bound (spurious plan), a second would idle
    assert large == ({"gpu": 1, "cpus_per_gpu": 8, "mem_mb": 64000, "runtime": 2880, "slurm_partition": "gpu",
                      "slurm_extra": warning}, 8)  # fmt: skip
    # every dataset's jobs ask by their model alone
    assert all(r == (bilstm if model == "bilstm" else large) for (model, _), r in requests.items())


def test_size_class_in_the_config_overrides_the_checkpoints(tmp_path):
    config = yaml.safe_load((REPO / "configs" / "paper-lexical.yaml").read_text())
    config["lexical"]["models"]["roberta_large"]["size_class"] = "base"
    requests = _lexical_requests(tmp_path, config)
    assert requests[("roberta_large", "qqp")] == (
        {"gpu": 1, "cpus_per_gpu": 8, "mem_mb": 32000, "runtime": 720, "slurm_partition": "gpu",
         "slurm_extra": "--signal=USR1@600"}, 8)


def test_a_class_the_profile_does_not_give_and_a_rule_without_a_model_fail_naming_the_setting(tmp_path):
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    profile["set-resources"]["lexical_train"]["mem_mb"] = "by_size(large=64000)"
    (tmp_path / "p1").mkdir()
    (tmp_path / "p1" / "config.yaml").write_text(yaml.safe_dump(profile))
    with pytest.raises(Exception, match=r"set-resources: lexical_train: mem_mb = by_size\(\.\.\.\) gives no value for "
                                        r"size class 'bilstm', the class of lexical\.models\.bilstm"):
        _lexical_requests(tmp_path, profile=tmp_path / "p1")
    profile["set-resources"]["lexical_train"]["mem_mb"] = 64000
    profile["set-resources"]["lexical_reweight"]["mem_mb"] = "by_size(small=1000, large=2000)"
    (tmp_path / "p2").mkdir()
    (tmp_path / "p2" / "config.yaml").write_text(yaml.safe_dump(profile))
    with pytest.raises(SlurmRequestError, match="set-resources: lexical_reweight: mem_mb is given per size class, but "
                                                "rule lexical_reweight trains or runs no model"):
        _lexical_requests(tmp_path, profile=tmp_path / "p2")


def test_memory_grows_with_the_attempt_up_to_the_largest_node(monkeypatch):
    """mem_mb "... * attempt": a retried job (killed for memory, say) asks for twice its memory, then three times,
    never more than the largest node of its partition has (SLURM would keep it PENDING forever), once sinfo is read."""
    from spurious.workflow import slurm

    monkeypatch.setattr(slurm, "LARGEST_MEMORY_MB", {})
    grow = slurm.scaled_by_attempt(lambda wildcards: 16000, "gpu", "mem_mb")
    assert [grow(None, attempt) for attempt in (1, 2, 3)] == [16000, 32000, 48000]
    slurm.LARGEST_MEMORY_MB["gpu"] = 40000
    assert [grow(None, attempt) for attempt in (1, 2, 3)] == [16000, 32000, 40000]
    slurm.LARGEST_MEMORY_MB["gpu"] = 8000  # a first request beyond the node is the start-up check's to report
    assert grow(None, 2) == 16000
    runtime = slurm.scaled_by_attempt(lambda wildcards: 60, "gpu", "runtime")  # not capped by memory
    assert runtime(None, 3) == 180
    with pytest.raises(SlurmRequestError, match="only a number or by_size"):
        slurm._literal("threads", "set-resources: x: mem_mb")
    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    grows = {rule: r["mem_mb"] for rule, r in profile["set-resources"].items() if "mem_mb" in r}
    assert all(value.endswith("* attempt") for value in grows.values()), grows
    assert profile["default-resources"]["mem_mb"].endswith("* attempt") and profile["retries"] == 2
