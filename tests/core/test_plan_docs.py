"""docs/paper-configs.md's plans and docs/slurm.md's table of the profile's requests are generated (`make plan-docs`,
spurious.workflow.plan_docs) from `spurious plan` and profiles/slurm: this fails while either is stale, and while a
runtime of the profile leaves less than 4 × the plan's longest job of its rule and size class on an H200."""

from __future__ import annotations

import pytest
import yaml

from spurious.workflow import plan_docs
from spurious.workflow.sizes import SIZE_CLASSES

RUNTIME_MARGIN = 4  # docs/slurm.md: every runtime leaves at least 4 x the H200 estimate, for slower cards


@pytest.fixture(scope="module")
def plans():
    return plan_docs.paper_plans()


def test_the_generated_sections_are_up_to_date(plans):
    for path, text in plan_docs.render(plans=plans).items():
        assert path.read_text() == text, f"{path} is stale: regenerate it with `{plan_docs.REGENERATE}`"


def test_every_runtime_leaves_four_times_the_longest_job_on_an_h200(plans):
    profile = yaml.safe_load(plan_docs.PROFILE.read_text())
    longest = plan_docs.longest_jobs(plans)
    assert longest[("lexical_train", "large")] > 9  # RoBERTa-large on SNLI, one GPU: about 10 h (not 5 on two)
    short = []
    for (rule, size), hours in longest.items():
        runtime = plan_docs._per_class(profile["set-resources"].get(rule, {}).get("runtime", 60))[size]
        if runtime / 60 < RUNTIME_MARGIN * hours:
            short.append(f"{rule} ({size}): {runtime} min for {hours:.2f} h")
    assert not short, short
    assert set(SIZE_CLASSES) >= {size for _, size in longest}
