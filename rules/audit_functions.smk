# Helper functions of rules/audit.smk; the Snakefile includes this file before the rules, and `all` calls
# audit_report_files().

AUDIT = config.get("audit") or {}


def audit_inputs(wildcards):
    """The audited model when the workflow builds it (a path under results/), and the configured splits. A QA audit
    without its own tfidf_reference fits cos-sim's TF-IDF on the heuristics rule's (heuristics.tfidf_reference,
    tfidf_reference_input), as the workflow does."""
    spec = AUDIT[wildcards.name]
    inputs = {}
    if spec["model"].startswith("results/"):
        inputs["model"] = spec["model"]
    else:  # a hub id, a package model or a local folder: loaded through its fetch record
        inputs["fetched"] = model_record({"checkpoint": spec["model"]})
    for key in ("data", "train", "tfidf_reference"):
        if spec.get(key):
            inputs[key] = split_file(spec[key]["dataset"], spec[key]["split"])
    if spec["task"] == "qa" and "tfidf_reference" not in inputs:
        inputs.update(tfidf_reference_input(wildcards))
    return inputs


def audit_report_files():
    return expand(
        "results/audit/{name}/{file}",
        name=list(AUDIT),
        file=["audit.json", "report.html"],
    )
