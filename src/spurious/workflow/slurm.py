"""What each SLURM job of a run asks for, checked against the cluster's nodes before the first submission.

SLURM keeps a job that no node of its partition can ever run PENDING forever (Reason=PartitionConfig or Resources),
with no message to the workflow: a run that asks one node for more CPUs, memory, GPUs or time than it has hangs.
``check_workflow`` (called by the Snakefile's ``onstart`` under the slurm executor) computes every pending job's
request the way snakemake-executor-plugin-slurm builds its ``sbatch`` line (group jobs with Snakemake's own layered
group resources), reads the nodes from ``sinfo`` and fails at once, naming the rule, its request, the largest node
of its partition and the setting to change. ``SPURIOUS_SLURM_PLAN=FILE`` writes the requests and the verdicts as
JSON and stops before submitting anything (``spurious slurm-check``).

``apply_size_requests`` (called by the Snakefile) lets the profile ask per size class of the model a job trains or
runs: a resource written ``by_size(bilstm=..., small=..., base=..., large=..., xl=...)`` becomes the value for the
job's model (``spurious.workflow.sizes``), so the BiLSTM control and RoBERTa-large of one rule ask for different jobs.
A value followed by ``* attempt`` (``mem_mb: "by_size(...) * attempt"``, ``"32000 * attempt"``) grows with each
retry of a job (a job killed for memory gets twice its request on the second attempt), never beyond the largest node
of its partition, which the start-up check reads from ``sinfo`` (a larger request would stay PENDING forever).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spurious.workflow.sizes import SIZE_CLASSES, model_size

PLAN_ENV = "SPURIOUS_SLURM_PLAN"
PROFILE_FILE = "profiles/slurm/config.yaml"


class SlurmRequestError(RuntimeError):
    """A job asks for more than any node of its partition has."""


@dataclass(frozen=True)
class Node:
    """One node of one partition, as ``sinfo -N`` reports it (``time_limit_min`` is the partition's; None: none)."""

    name: str
    partition: str
    cpus: int
    mem_mb: int
    gpus: int
    time_limit_min: int | None
    default_partition: bool = False


@dataclass(frozen=True)
class Request:
    """What one submission asks for: a rule's job, or a group job of several rules' jobs."""

    label: str
    rules: tuple[str, ...]
    partition: str | None  # None: the cluster's default partition
    cpus: int
    mem_mb: int
    gpus: int
    runtime_min: int | None
    group: str | None = None
    members: int = 1


# ---------------------------------------------------------------------------------------------------- per size class

SIZE_FUNCTION = "by_size"
ATTEMPT_SUFFIX = re.compile(r"^(?P<base>.+?)\s*\*\s*attempt\s*$")
# the largest memory of a node per partition (None: the default partition), filled by check_workflow from sinfo:
# the cap of a request that grows with the attempt
LARGEST_MEMORY_MB: dict[str | None, int] = {}
# what a model rule tells apply_size_requests: the model spec of a job (checkpoint, init, size_class) and where in
# the config it is (for messages), from the job's wildcards
ModelOf = Callable[[Any], tuple[Mapping[str, Any], str]]


def size_table(raw: Any, where: str = "a resource") -> dict[str, Any] | None:
    """The per-class values of a profile value written ``by_size(small=..., base=..., ...)``; None for any other.

    Values are literals (numbers or strings); every class a job can have must be given, which the job's own lookup
    checks (``apply_size_requests``)."""
    if not isinstance(raw, str) or not raw.strip().startswith(SIZE_FUNCTION + "("):
        return None
    try:
        call = ast.parse(raw.strip(), mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args):
            raise ValueError("only keyword arguments")
        table = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except (SyntaxError, ValueError) as err:
        raise SlurmRequestError(
            f"{PROFILE_FILE}: {where} = {raw!r} is not by_size(class=value, ...) with literal values ({err})"
        ) from None
    unknown = sorted(set(table) - set(SIZE_CLASSES))
    if None in table or unknown:
        raise SlurmRequestError(
            f"{PROFILE_FILE}: {where} = {raw!r} names unknown size classes {unknown}; the classes are "
            f"{', '.join(SIZE_CLASSES)}"
        )
    return table


def _per_size(setting: str, table: dict[str, Any], model_of: ModelOf) -> Callable[[Any], Any]:
    def value(wildcards: Any) -> Any:
        spec, where = model_of(wildcards)
        size = model_size(spec, where).size_class
        if size not in table:
            raise SlurmRequestError(
                f"{PROFILE_FILE}: {setting} = {SIZE_FUNCTION}(...) gives no value for size class {size!r}, the class "
                f"of {where} ({spec.get('checkpoint') or spec.get('init')}); add {size}=... there"
            )
        return table[size]

    return value


def apply_size_requests(workflow: Any, model_of_rule: Mapping[str, ModelOf]) -> None:
    """Turn every ``by_size(...)`` resource and thread count of the profile into a per-job value, and every value
    ``... * attempt`` into one that grows with the job's attempt (capped at the largest node, ``scaled_by_attempt``).

    ``model_of_rule`` maps each rule that trains or runs a model to the function that finds a job's model; a
    ``by_size`` value on any other rule is an error naming it. Snakemake evaluates the returned functions per job, on
    the submitting host and again inside the job, so both see the same request.
    """
    from snakemake.resources import Resource

    for rule in workflow.rules:
        partition = rule.resources.get("slurm_partition")
        partition_raw = getattr(partition, "raw", None)
        for name, resource in list(rule.resources.items()):
            setting = f"set-threads: {rule.name}" if name == "_cores" else f"set-resources: {rule.name}: {name}"
            raw = resource.raw
            scaled = ATTEMPT_SUFFIX.match(raw) if isinstance(raw, str) else None
            base = scaled.group("base") if scaled else raw
            table = size_table(base, setting)
            if table is None and not scaled:
                continue
            if table is not None and rule.name not in model_of_rule:
                raise SlurmRequestError(
                    f"{PROFILE_FILE}: {setting} is given per size class, but rule {rule.name} trains or runs no "
                    f"model; give it one value (the rules with a model: {', '.join(sorted(model_of_rule))})"
                )
            if table is not None:
                value = _per_size(setting, table, model_of_rule[rule.name])
            else:
                value = _literal(base, setting)
            if scaled:
                value = scaled_by_attempt(value, partition_raw if isinstance(partition_raw, str) else None, name)
            rule.resources[name] = Resource(name, value, raw=resource.raw)


def _literal(text: str, setting: str) -> Callable[[Any], Any]:
    try:
        number = ast.literal_eval(text.strip())
    except (SyntaxError, ValueError):
        number = None
    if not isinstance(number, int | float) or isinstance(number, bool):
        raise SlurmRequestError(f"{PROFILE_FILE}: {setting} = '{text} * attempt': only a number or by_size(...) may "
                                "be multiplied by the attempt")  # fmt: skip
    return lambda wildcards: number


def scaled_by_attempt(value: Callable[[Any], Any], partition: str | None, name: str) -> Callable[[Any, int], Any]:
    """``value × attempt`` (the first attempt's request, the second's twice it, ...); memory never beyond the largest
    node of the partition (``LARGEST_MEMORY_MB``, known to the submitting host once the start-up check read sinfo)."""

    def per_attempt(wildcards: Any, attempt: int) -> Any:
        base = value(wildcards)
        grown = base * attempt
        cap = LARGEST_MEMORY_MB.get(partition) if name == "mem_mb" and attempt > 1 else None
        return max(base, min(grown, cap)) if cap else grown

    return per_attempt


# ---------------------------------------------------------------------------------------------------- sinfo

SINFO_FORMAT = "%N|%P|%c|%m|%G|%l"


def _minutes(limit: str) -> int | None:
    """A SLURM time limit ([days-]hours:minutes:seconds, minutes, infinite) in minutes, rounded down."""
    if limit in ("infinite", "UNLIMITED", "n/a", ""):
        return None
    days, _, rest = limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if len(parts) == 1:  # minutes only
        hours, minutes, seconds = 0, parts[0], 0
    elif len(parts) == 2:  # minutes:seconds
        hours, (minutes, seconds) = 0, parts
    else:
        hours, minutes, seconds = parts
    return (int(days or 0) * 24 + hours) * 60 + minutes + seconds // 60


def _gpus(gres: str) -> int:
    """The GPU count in a GRES string such as ``gpu:1``, ``gpu:a100:4(S:0-1)`` or ``(null)``."""
    total = 0
    for item in gres.split(","):
        m = re.match(r"gpu(?::[^:()]+)?:(\d+)", item.strip())
        if m:
            total += int(m.group(1))
    return total


def parse_sinfo(text: str) -> list[Node]:
    """Nodes from ``sinfo -h -N -o '%N|%P|%c|%m|%G|%l'`` (one line per node and partition)."""
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, partition, cpus, mem, gres, limit = line.strip().split("|")
        nodes.append(
            Node(
                name=name,
                partition=partition.rstrip("*"),
                cpus=int(cpus.rstrip("+")),
                mem_mb=int(mem.rstrip("+")),
                gpus=_gpus(gres),
                time_limit_min=_minutes(limit),
                default_partition=partition.endswith("*"),
            )
        )
    return nodes


def query_nodes() -> list[Node]:
    """The cluster's nodes from ``sinfo`` (SLURM's clients must be on PATH)."""
    if shutil.which("sinfo") is None:
        raise SlurmRequestError("sinfo is not on PATH: run the workflow where SLURM's client commands are installed")
    proc = subprocess.run(["sinfo", "-h", "-N", "-o", SINFO_FORMAT], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SlurmRequestError(f"sinfo failed ({proc.returncode}): {proc.stderr.strip()}")
    return parse_sinfo(proc.stdout)


# ---------------------------------------------------------------------------------------------------- requests


def _int(value: Any, default: int = 0) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def request_of(job: Any) -> Request:
    """The request snakemake-executor-plugin-slurm 2.8 submits for a Snakemake job or group job.

    The same resources the plugin reads (``job.resources``; a group job's are Snakemake's layered sum of its members)
    and the same CPU rule (the jobstep plugin's ``get_cpu_setting``: ``cpus_per_task``, else ``cpus_per_gpu`` per GPU
    for a GPU job, else the job's threads).
    """
    from snakemake_executor_plugin_slurm_jobstep import get_cpu_setting

    res = job.resources
    gres = str(res.get("gres") or "")
    gpus = _int(res.get("gpu")) or _gpus(gres)
    cpu_flag = get_cpu_setting(job, bool(gpus))
    m = re.match(r"--cpus-per-(task|gpu)=(\d+)", cpu_flag)
    per = {"task": 1, "gpu": max(gpus, 1)}
    # no match: a negative setting, for which the plugin passes no CPU flag and SLURM gives one CPU
    cpus = 1 if m is None else int(m.group(2)) * per[m.group(1)]
    mem_mb = _int(res.get("mem_mb"))
    if res.get("mem_mb_per_cpu"):
        mem_mb = _int(res.get("mem_mb_per_cpu")) * cpus
    runtime = res.get("runtime")
    if job.is_group():
        rules = tuple(sorted({j.rule.name for j in job.jobs}))
        label = f"group {job.groupid} ({len(job.jobs)} jobs of rule {', '.join(rules)})"
        group, members = str(job.groupid), len(job.jobs)
    else:
        rules = (job.rule.name,)
        wildcards = ", ".join(f"{k}={v}" for k, v in job.wildcards_dict.items())
        label = f"rule {job.rule.name}" + (f" ({wildcards})" if wildcards else "")
        group, members = None, 1
    return Request(
        label=label,
        rules=rules,
        partition=res.get("slurm_partition") or None,
        cpus=cpus,
        mem_mb=mem_mb,
        gpus=gpus,
        runtime_min=_int(runtime) if runtime is not None else None,
        group=group,
        members=members,
    )


def pending_requests(dag: Any) -> list[Request]:
    """One request per submission the run will make: each pending job outside a group, each group job once.

    Local rules (downloads, reports) run on the submitting host and are left out.
    """
    seen, requests = set(), []
    for job in dag.needrun_jobs():
        unit = dag.get_job_group(job) or job
        if id(unit) in seen or (not unit.is_group() and unit.is_local):
            continue
        seen.add(id(unit))
        requests.append(request_of(unit))
    return sorted(requests, key=lambda r: r.label)


# ---------------------------------------------------------------------------------------------------- checking


def _describe(request: Request) -> str:
    runtime = "no runtime" if request.runtime_min is None else f"{request.runtime_min} min"
    partition = request.partition or "the default partition"
    return f"{request.cpus} CPUs, {request.mem_mb} MB, {request.gpus} GPUs, {runtime} in {partition}"


def _advice(request: Request, short: list[str]) -> str:
    if request.group is not None:
        fixes = {
            "CPUs": "lower `cores` (the searches a group runs at once)",
            "memory": "lower `cores`, or the memory of one search (BIAS_SEARCH_MEM_MB in rules/common.smk)",
            "GPUs": "remove the GPU request of the group's rules",
            "time": "raise the partition's limit or split the group (`group-components`)",
        }
    else:
        rule = request.rules[0]
        fixes = {
            "CPUs": f"set-threads: {rule} (or set-resources: {rule}: cpus_per_gpu / cpus_per_task)",
            "memory": f"set-resources: {rule}: mem_mb",
            "GPUs": f"set-resources: {rule}: gpu",
            "time": f"set-resources: {rule}: runtime",
        }
    where = (
        f"set-resources: {request.rules[0]}: slurm_partition"
        if request.group is None
        else "the rules' slurm_partition"
    )
    changes = "; ".join(f"{what}: {fixes[what]}" for what in short)
    return f"Change in the workflow profile ({PROFILE_FILE}): {changes}; or send it to a larger partition ({where})."


def unmet(request: Request, nodes: list[Node]) -> str | None:
    """Why no node can run ``request`` (a message naming the job, its request, the largest node and what to change),
    or None when one can."""
    default = next((n.partition for n in nodes if n.default_partition), None)
    partition = request.partition or default
    members = [n for n in nodes if n.partition == partition]
    if not members:
        known = sorted({n.partition for n in nodes})
        return (
            f"{request.label} asks for partition {partition!r}, which this cluster does not have (partitions: "
            f"{', '.join(known)}). Change set-resources: {request.rules[0]}: slurm_partition in {PROFILE_FILE}."
        )
    for node in members:
        fits = node.cpus >= request.cpus and node.mem_mb >= request.mem_mb and node.gpus >= request.gpus
        in_time = (
            node.time_limit_min is None or request.runtime_min is None or request.runtime_min <= node.time_limit_min
        )
        if fits and in_time:
            return None
    largest = max(members, key=lambda n: (n.gpus >= request.gpus, n.cpus, n.mem_mb, n.gpus))
    short = [
        what
        for what, ok in (
            ("CPUs", largest.cpus >= request.cpus),
            ("memory", largest.mem_mb >= request.mem_mb),
            ("GPUs", largest.gpus >= request.gpus),
            ("time", largest.time_limit_min is None or (request.runtime_min or 0) <= largest.time_limit_min),
        )
        if not ok
    ]  # never empty: the largest node would fit otherwise
    limit = "no time limit" if largest.time_limit_min is None else f"a {largest.time_limit_min} min limit"
    return (
        f"{request.label} asks for {_describe(request)}, more than any node there can give ({', '.join(short)}): "
        f"the largest node of partition {partition!r}, {largest.name}, has {largest.cpus} CPUs, {largest.mem_mb} MB "
        f"and {largest.gpus} GPUs, with {limit}. SLURM would keep it PENDING forever. {_advice(request, short)}"
    )


def check_requests(requests: list[Request], nodes: list[Node]) -> list[str]:
    """The messages of every request no node can meet (empty when all fit)."""
    return [msg for msg in (unmet(r, nodes) for r in requests) if msg is not None]


# ---------------------------------------------------------------------------------------------------- job states


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def min_job_age_s() -> int | None:
    """slurmctld's MinJobAge: how long a finished job stays visible to squeue."""
    out = _run(["scontrol", "show", "config"]).stdout
    m = re.search(r"^MinJobAge\s*=\s*(\d+)", out, re.M)
    return int(m.group(1)) if m else None


def status_command_problem(status_command: str | None, init_interval_s: int) -> str | None:
    """Why the executor could not follow its jobs, or None.

    The plugin reads job states with ``sacct`` by default. Without SLURM accounting (no slurmdbd) every ``sacct`` call
    fails; after 5 failed queries the plugin drops its jobs and then waits forever ("No active jobs"), ignoring
    SIGTERM. ``squeue`` works without accounting as long as a finished job stays visible long enough: the plugin
    itself falls back to ``sacct`` when MinJobAge is under 3x the first status-check interval.
    """
    command = status_command or "sacct"
    age = min_job_age_s() if command == "squeue" else None
    if command == "squeue" and (age is None or age < 3 * init_interval_s) and shutil.which("sacct"):
        command = "sacct"  # the plugin's own fallback
    if command != "sacct":
        return None
    probe = _run(["sacct", "--noheader", "-X", "-o", "JobID", "--starttime", "now"])
    if probe.returncode == 0:
        return None
    reason = (probe.stderr or probe.stdout).strip() or f"exit status {probe.returncode}"
    fallback = "" if status_command != "squeue" else (
        f" (it was asked for squeue, but MinJobAge = {age} s is under 3 x {init_interval_s} s, "
        "so it falls back to sacct)"
    )
    return (
        f"the executor would read job states with sacct{fallback}, which fails on this cluster: {reason}. Without "
        "accounting it loses track of every job and waits forever. Use squeue: --slurm-status-command squeue on the "
        "command line or `slurm-status-command: squeue` in the profile; squeue needs slurmctld's MinJobAge "
        "(scontrol show config) at least 3 x the first status-check interval "
        f"(--slurm-init-seconds-before-status-checks, now {init_interval_s} s)."
    )


def write_plan(path: Path, requests: list[Request], nodes: list[Node], problems: list[str]) -> None:
    """The requests, the nodes and the verdicts as JSON (written under a temporary name, then renamed)."""
    payload = {
        "requests": [asdict(r) | {"unmet": unmet(r, nodes)} for r in requests],
        "nodes": [asdict(n) for n in nodes],
        "problems": problems,
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2))
    tmp.replace(path)


def survive_time_limit_warning() -> None:
    """Inside a SLURM job, let Snakemake's processes ignore SIGUSR1, the warning the profile asks SLURM to send every
    process of the job's steps before the time limit (``--signal=USR1@600``): the job's training process saves a
    checkpoint and exits (``PreemptionGuard``), and its Snakemake, still alive, reports the job failed, so that the
    retry resumes. The processes Snakemake starts inherit the setting; the training loop installs its own handler."""
    import signal

    if "SLURM_JOB_ID" in os.environ:
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)


def is_slurm_run(workflow: Any) -> bool:
    """Whether this Snakemake process submits jobs to SLURM (not a dry run, not a job running on a node)."""
    plugin = getattr(workflow, "executor_plugin", None)
    return plugin is not None and plugin.name == "slurm" and workflow.exec_mode.name == "DEFAULT"


def check_workflow(workflow: Any) -> None:
    """The start-up check: raise ``SlurmRequestError`` listing every job no node can run, before any submission.

    With ``SPURIOUS_SLURM_PLAN=FILE`` in the environment, write the plan there and stop (nothing is submitted).
    """
    requests = pending_requests(workflow.dag)
    nodes = query_nodes()
    for node in nodes:  # the caps of the requests that grow with the attempt
        for key in {node.partition, None} if node.default_partition else {node.partition}:
            LARGEST_MEMORY_MB[key] = max(LARGEST_MEMORY_MB.get(key, 0), node.mem_mb)
    problems = check_requests(requests, nodes)
    settings = workflow.executor_settings
    status = status_command_problem(settings.status_command, settings.init_seconds_before_status_checks or 40)
    if status:
        problems.append(status)
    plan = os.environ.get(PLAN_ENV)
    if plan:
        write_plan(Path(plan), requests, nodes, problems)
        raise SlurmRequestError(
            f"{PLAN_ENV} is set: wrote the plan of {len(requests)} submissions to {plan}; nothing was submitted"
        )
    if problems:
        raise SlurmRequestError(
            f"this run cannot go through SLURM as configured ({len(requests)} submissions planned); nothing was "
            "submitted:\n- " + "\n- ".join(problems)
        )
