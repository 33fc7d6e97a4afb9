"""One label check for the lexical functions (``spurious.lexical.labels``): the z-scores, the usual/unusual sets and
the reweighting accept whole-number floats as label ids (a label column that went through a join comes back as
float64) and refuse fractions, NaN and ids out of range alike, naming the first bad value and its instance."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from spurious.lexical import features as lx
from spurious.lexical import reweight
from spurious.lexical.labels import check_labels, check_n_labels

TEXTS = ["good film", "bad film", "good plot", "bad plot", "good bad"]
LABELS = np.array([0, 1, 0, 1, 0])
FEATURE_LABELS = {"good": 0, "bad": 1}


def _matrix() -> sp.csr_matrix:
    return lx.feature_matrix(TEXTS, None)[0]


def _z_scores(labels):
    return lx.z_scores(_matrix(), labels, 2)


def _usual_unusual(labels):
    matrix, vocabulary = lx.feature_matrix(TEXTS, None)
    sets = lx.usual_unusual(matrix, vocabulary, labels, FEATURE_LABELS)
    return np.concatenate([sets.in_usual, sets.in_unusual])


def _reweight_err(labels):
    return reweight.err(_matrix(), labels, 2)


def _label_balance(labels):
    return reweight.label_balance(_matrix(), labels, 2)


ENTRY_POINTS = [_z_scores, _usual_unusual, _reweight_err, _label_balance]


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__.lstrip("_"))
def test_whole_number_floats_are_label_ids(entry):
    np.testing.assert_array_equal(entry(LABELS.astype(np.float64)), entry(LABELS))


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda f: f.__name__.lstrip("_"))
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (0.5, r"labels must be integers \(label ids\): found 0\.5 at instance 3 \(1 instance\(s\)\); .*a fraction"),
        (np.nan, r"labels must be integers \(label ids\): found nan at instance 3 .*without a gold label"),
        (np.inf, r"labels must be integers \(label ids\): found inf at instance 3"),
    ],
)
def test_fractions_and_missing_labels_are_refused(entry, bad, message):
    labels = LABELS.astype(np.float64)
    labels[3] = bad
    with pytest.raises(ValueError, match=message):
        entry(labels)


@pytest.mark.parametrize("entry", [_z_scores, _reweight_err], ids=lambda f: f.__name__.lstrip("_"))
def test_ids_out_of_range_name_the_first(entry):
    with pytest.raises(ValueError, match=r"labels out of range \[0, 2\): found 2 at instance 1 \(2 instance\(s\)\)"):
        entry(np.array([0, 2, 0, 1, 2]))
    with pytest.raises(ValueError, match=r"found -1 at instance 4 .*non-negative label ids: drop the instances"):
        entry(np.array([0.0, 1, 0, 1, -1]))


def test_check_labels_converts_and_refuses():
    got = check_labels([1.0, 0.0, True], 3, 2)
    assert got.dtype == np.int64 and got.tolist() == [1, 0, 1]
    assert check_labels(np.array([7, 0]), 2, None).tolist() == [7, 0]  # no upper bound without n_labels
    assert check_labels(np.array([], dtype=float), 0, 2).dtype == np.int64
    with pytest.raises(ValueError, match=r"labels must be non-negative: found -3 at instance 1"):
        check_labels([0, -3], 2, None)
    with pytest.raises(ValueError, match="got dtype <U3: map label names to ids"):
        check_labels(["pos", "neg"], 2, 2)
    with pytest.raises(ValueError, match=r"labels must be integers \(label ids\): found 1e\+300"):
        check_labels([0.0, 1e300], 2, None)  # a whole float beyond any label id (and int64)
    with pytest.raises(ValueError, match=r"labels has 2 entries but features has 3 rows .*one entry per instance"):
        check_labels([0, 1], 3, 2)
    with pytest.raises(ValueError, match=r"labels must be 1-D, one entry per instance \(2\); got shape \(1, 2\)"):
        check_labels([[0, 1]], 2, 2)


def test_check_n_labels():
    assert check_n_labels(np.int64(3)) == 3
    assert check_n_labels(1, minimum=1) == 1
    for bad, message in ((1, "at least 2"), (True, "must be an integer, got True"), (2.0, "must be an integer")):
        with pytest.raises(ValueError, match=message):
            check_n_labels(bad)
