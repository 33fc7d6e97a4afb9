# Helper functions of rules/audit.smk; the Snakefile includes this file before the rules, and `all` calls
# audit_report_files().

AUDIT = config.get("audit") or {}


def audit_inputs(wildcards):
    """The audited model when the workflow builds it (a path under results/), and the configured splits."""
    spec = AUDIT[wildcards.name]
    inputs = {}
    if spec["model"].startswith("results/"):
        inputs["model"] = spec["model"]
    for key in ("data", "train", "tfidf_reference"):
        if spec.get(key):
            inputs[key] = split_file(spec[key]["dataset"], spec[key]["split"])
    return inputs


def audit_report_files():
    return expand(
        "results/audit/{name}/{file}",
        name=list(AUDIT),
        file=["audit.json", "report.html"],
    )
