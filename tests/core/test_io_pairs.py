"""core.io.atomic_paths: files that belong together are replaced together or not at all."""

from __future__ import annotations

import pytest

from spurious.core.io import atomic_paths


def test_a_set_is_replaced_only_when_every_file_was_written(tmp_path):
    page, data = tmp_path / "report.html", tmp_path / "audit.json"
    with atomic_paths(page, data) as (page_tmp, data_tmp):
        assert page_tmp.parent == tmp_path and page_tmp.suffix == ".html" and data_tmp.suffix == ".json"
        page_tmp.write_text("<p>1</p>")
        data_tmp.write_text("1")
        assert not page.exists() and not data.exists()  # nothing is renamed before the block ends
    assert (page.read_text(), data.read_text()) == ("<p>1</p>", "1")

    # the block fails after writing one file: both previous files stay, no temporary file is left
    with pytest.raises(RuntimeError, match="drawing failed"), atomic_paths(page, data) as (page_tmp, data_tmp):
        data_tmp.write_text("2")
        raise RuntimeError("drawing failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "report.html"]
    assert (page.read_text(), data.read_text()) == ("<p>1</p>", "1")

    # the block returns without writing one of them: an error naming it, and nothing replaced
    missing = pytest.raises(ValueError, match=r"nothing was written for .*report\.html")
    with missing, atomic_paths(page, data) as (_, data_tmp):
        data_tmp.write_text("3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.json", "report.html"]
    assert (page.read_text(), data.read_text()) == ("<p>1</p>", "1")
