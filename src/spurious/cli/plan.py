"""`spurious plan`: the cost of a config (jobs, GPU-hours, CPU-hours, memory, disk) before it is submitted."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from spurious.cli.inputs import CLIError
from spurious.workflow.plan import CARDS

EPILOG = """\
examples:
  spurious plan --configfile configs/paper-squad.yaml
  spurious plan --configfile configs/paper-lexical.yaml --json plan.json
  spurious plan results/lexical/snli/models/bilstm/q/seed0/model --configfile configs/paper-lexical.yaml
  spurious plan --configfile my.yaml --directory .
  spurious plan --configfile configs/paper-squad.yaml --gpu a100
"""
DESCRIPTION = """\
Estimate a config's jobs, GPU-hours, CPU-hours, memory per job and disk, per rule and in total.

Snakemake plans the job graph of the config with the checkout's Snakefile and the workflow profile's requests
(nothing runs, nothing is submitted, no network needed); each job then gets an estimate whose basis is printed with
it. With --directory, only what is left of a run begun there is planned. docs/paper-configs.md explains the formula
and carries the table of the four paper configs."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="what a config will cost before it is submitted: jobs, GPU-hours, CPU-hours, memory, disk per rule",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="files or rules to plan for, as for snakemake, before --configfile (default: the whole run)")
    p.add_argument("--configfile", required=True, nargs="+", metavar="FILE",
                   help="the config(s), as for snakemake --configfile (several are merged in order)")
    p.add_argument("--profile", default=None, metavar="DIR",
                   help="the workflow profile whose requests the jobs get (default: the checkout's profiles/slurm)")
    p.add_argument("--directory", default=None, metavar="DIR",
                   help="plan what is left to run in this working directory (default: a fresh one, the whole run)")
    p.add_argument("--gpu", default="h200", choices=sorted(CARDS), metavar="CARD",
                   help=f"the card to cost the GPU jobs for ({', '.join(sorted(CARDS))}; default h200, where the steps "
                        "were measured): the H200's GPU times scaled by the card's factor from its published bf16 peak "
                        "and memory bandwidth")  # fmt: skip
    p.add_argument("--json", default=None, metavar="OUT.json", help="also write the plan as JSON")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    from spurious.core.data.inputs import check_output
    from spurious.workflow import plan
    from spurious.workflow.config import load_config_file

    if args.json:
        check_output(args.json, "--json")
    configs = [Path(c) for c in args.configfile]
    for path in configs:
        if not path.is_file():
            raise CLIError(f"{path}: no such config file")
        load_config_file(path)  # a file YAML cannot parse: its line and column, before Snakemake's vaguer message
    try:
        root = plan.workflow_root()
    except plan.PlanError as exc:
        raise CLIError(str(exc)) from None
    profile = Path(args.profile) if args.profile else root / "profiles" / "slurm"
    if not (profile / "config.yaml").is_file() and not profile.is_file():
        raise CLIError(f"{profile}: no workflow profile there (a folder with config.yaml)")
    name = " + ".join(p.name for p in configs) + (f", {args.gpu.upper()}" if args.gpu != "h200" else "")
    with tempfile.TemporaryDirectory(prefix="spurious-plan-") as fresh:
        workdir = Path(args.directory) if args.directory else Path(fresh)
        try:
            config, jobs = plan.planned_jobs(configs, profile, workdir.resolve(), root, args.targets)
            rules, bases = plan.estimate(config, jobs, args.gpu)
        except plan.PlanError as exc:
            raise CLIError(str(exc)) from None
        except Exception as exc:  # a config Snakemake or the schema refuses, a size the plan cannot know
            raise CLIError(f"Snakemake could not plan {name}: {exc}") from None
    print(plan.markdown(name, rules, bases))
    print(f"Formula: {plan.FORMULA}\n\nUncertainty: {plan.UNCERTAINTY}")
    if args.json:
        from spurious.core.io import write_json

        write_json(plan.as_json(name, rules, bases), args.json)
    return 0
