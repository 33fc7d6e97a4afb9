"""One checked reader per file kind (spurious.core.readers), used everywhere: a damaged file of any kind is one line,
``<path>: not a readable <kind> (<reason>); <what to do>``, and no module of the package or workflow script reads a
file another way (a source scan)."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spurious.core import errors, readers
from spurious.core.errors import UnreadableFileError
from tests.conftest import REPO

# A direct read of a file by a library: only spurious.core.readers may (and core.models' from_pretrained for model
# folders). Writes are not reads: np.save, to_parquet, json.dumps are fine anywhere.
DIRECT_READS = {
    "pandas": re.compile(r"\bpd\.read_(parquet|csv|json|table|feather|pickle|excel)\("),
    "pyarrow": re.compile(r"\bpq\.(read_table|read_schema|read_metadata|ParquetFile)\("),
    "json": re.compile(r"\bjson\.load\(|\bjson\.loads\(.*\.read_(text|bytes)\("),
    "numpy": re.compile(r"\bnp\.(load|fromfile|loadtxt|genfromtxt)\("),
    "gzip": re.compile(r"\bgzip\.open\("),
    "torch": re.compile(r"\btorch\.load\("),
    "transformers": re.compile(r"\.from_pretrained\("),
}
ALLOWED = {"src/spurious/core/readers.py": set(DIRECT_READS), "src/spurious/core/models.py": {"transformers"}}


def direct_reads(root: Path) -> list[str]:
    found = []
    for path in sorted([*(root / "src" / "spurious").rglob("*.py"), *(root / "workflow_scripts").rglob("*.py")]):
        relative = path.relative_to(root).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            for kind, pattern in DIRECT_READS.items():
                if pattern.search(code) and kind not in ALLOWED.get(relative, set()):
                    found.append(f"{relative}:{number}: {kind}: {line.strip()}")
    return found


def test_no_module_or_workflow_script_reads_a_file_around_the_readers() -> None:
    """Issue: workflow_scripts/lexical/permutation.py, thinktwice/bias.py, bias_fixed.py and aflite/training_sets.py
    read parquet directly, so a truncated intermediate ended in a raw ArrowInvalid traceback in the job's log."""
    assert direct_reads(REPO) == []


def test_the_scan_finds_a_direct_read(tmp_path: Path) -> None:
    (tmp_path / "src" / "spurious").mkdir(parents=True)
    (tmp_path / "workflow_scripts").mkdir()
    (tmp_path / "workflow_scripts" / "step.py").write_text("import pandas as pd\nframe = pd.read_parquet(path)\n")
    (tmp_path / "src" / "spurious" / "m.py").write_text("meta = json.loads(Path(p).read_text())  # a sidecar\n")
    assert [f.split(": ")[1] for f in direct_reads(tmp_path)] == ["json", "pandas"]


def _damaged_files(folder: Path) -> dict[str, tuple[Path, str]]:
    """One damaged file per kind, and the kind the message must name."""
    frame = pd.DataFrame({"id": ["a", "b"], "x": [1.0, 2.0]})
    frame.to_parquet(folder / "whole.parquet")
    data = (folder / "whole.parquet").read_bytes()
    (folder / "cut.parquet").write_bytes(data[: len(data) // 2])
    (folder / "cut.json").write_text('{"a": 1,')
    with gzip.open(folder / "whole.json.gz", "wt") as fh:
        fh.write(json.dumps({str(i): i for i in range(2000)}))
    data = (folder / "whole.json.gz").read_bytes()
    (folder / "cut.json.gz").write_bytes(data[: len(data) // 2])
    (folder / "bad.csv").write_text('id,x\n"a,1\n')
    np.save(folder / "whole.npy", np.ones((50, 4)))
    data = (folder / "whole.npy").read_bytes()
    (folder / "cut.npy").write_bytes(data[: len(data) // 2])
    (folder / "bad.pt").write_bytes(b"not a torch file")
    return {
        "parquet": (folder / "cut.parquet", "parquet file"),
        "json": (folder / "cut.json", "JSON file"),
        "gzip": (folder / "cut.json.gz", "gzip-compressed JSON file"),
        "csv": (folder / "bad.csv", "CSV file"),
        "numpy": (folder / "cut.npy", "numpy array file"),
        "torch": (folder / "bad.pt", "BiLSTM model file"),
    }


READ = {
    "parquet": readers.read_parquet,
    "json": readers.read_json,
    "gzip": readers.read_json,
    "csv": readers.read_csv,
    "numpy": readers.read_npy,
    "torch": lambda path: readers.load_torch(path, kind="BiLSTM model file"),
}


@pytest.mark.parametrize("kind", list(READ))
def test_a_damaged_file_of_each_kind_is_one_line_naming_it_and_the_fix(kind: str, tmp_path: Path) -> None:
    path, named = _damaged_files(tmp_path)[kind]
    with pytest.raises(UnreadableFileError) as caught:
        READ[kind](path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: not a readable {named} (")
    assert message.endswith(f"); write or download it again (a workflow output: rebuild it with `snakemake --forcerun "
                            f"{path}` with the run's other options (the same --configfile))")


def test_in_a_workflow_job_the_advice_is_the_command_that_rebuilds_the_file(tmp_path: Path) -> None:
    """A workflow job (runlog.setup has run) reads files the workflow wrote: its advice is the Snakemake command."""
    path, _ = _damaged_files(tmp_path)["parquet"]
    script = ("from types import SimpleNamespace\nfrom spurious.core import readers\n"
              "from spurious.workflow import runlog\n"
              "runlog.setup(SimpleNamespace(log=['job.log'], rule='job', wildcards={}))\n"
              f"readers.read_parquet({str(path)!r})\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith(f"rebuild it, and what depends on it, with `snakemake --forcerun {path}` with "
                                        "the run's other options (the same --configfile)")
    assert not errors._IN_WORKFLOW_JOB  # this process is no job


def test_a_key_given_twice_in_a_json_object_is_refused_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "twice.json"
    path.write_text('{"q1": "Paris", "q2": "Rome", "q1": "Berlin"}')
    with pytest.raises(readers.DuplicateKeyError, match=r"1 key\(s\) given more than once in one JSON object \('q1'\)"):
        readers.read_json(path)
    assert json.loads(path.read_text())["q1"] == "Berlin"  # what json alone does: the last one wins


def test_a_damaged_local_model_folder_is_one_line_naming_it(tmp_path: Path) -> None:
    """A model folder whose config.json is cut off (a copy interrupted): transformers' JSONDecodeError becomes the
    readers' line, naming the folder; a hub id's failures stay transformers' own."""
    from spurious.core.models import load_config, resolve_model

    folder = tmp_path / "model"
    folder.mkdir()
    embedded = Path(resolve_model("embedded:all-MiniLM-L6-v2")) / "config.json"
    (folder / "config.json").write_text(embedded.read_text()[:100])
    with pytest.raises(UnreadableFileError) as caught:
        load_config(folder)
    assert str(caught.value).startswith(f"{folder.resolve()}: not a readable model folder (")
    assert str(caught.value).endswith(f"train or download it again (a workflow output: rebuild it with `snakemake "
                                      f"--forcerun {folder}` with the run's other options (the same --configfile))")
