"""Benchmark: all seven Think Twice heuristics on SQuAD dev, ours vs a per-row baseline in the authors' style.

Usage::

    NLTK_DATA=mirror/nltk_data python benchmarks/bench_heuristics.py [--threads 2] [--n-baseline 200]

*Ours* is :func:`spurious.thinktwice.heuristics.compute_heuristics` on the full file (10,570 questions), timed end to
end: spaCy model load, TF-IDF fit (on the dev contexts, one per question) and all seven heuristics.

The *baseline* mirrors the structure of the authors' code (``isbiased/heuristics.py``): a row-wise
``DataFrame.apply``, one ``nlp(text)`` call per text of each row (context, question, each answer; the context parse
is shared by ans-pos and sim-ents) with the full default pipeline (no batching, no de-duplication of the contexts
shared by several questions), ``stopwords.words("english")`` looked up per question
word, and a TF-IDF ``transform`` per row.  It runs on a random subsample of ``--n-baseline`` rows in the same
process, and its per-row time is **extrapolated** linearly to the full file (fixed costs — model load, TF-IDF fit —
are added once).  Sentence splitting and ``word_tokenize`` use the same offline substitutes as our code.

The script prints both times, their ratio and PASS/FAIL against the target (60 s on 2 cores); it exits non-zero
on FAIL.  The wall time depends on what else runs on the machine, so the 1-minute load average and the CPU time
used by this process and its workers are printed too.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

# the data mirror (make data; the Makefile exports SPURIOUS_DATA_MIRROR and NLTK_DATA), else ../shared
DEFAULT_DATA = (
    Path(os.environ.get("SPURIOUS_DATA_MIRROR") or Path(__file__).resolve().parents[2] / "shared" / "data")
    / "squad_v1.1" / "dev-v1.1.json.gz"
)
DEFAULT_NLTK_DATA = Path(os.environ.get("NLTK_DATA") or DEFAULT_DATA.parents[2] / "nltk_data")


def _cpu_seconds() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its finished child processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def run_ours(
    df: pd.DataFrame, *, threads: int, batch_size: int
) -> tuple[float, float, tuple[float, float], pd.DataFrame]:
    """(wall seconds for everything, of which model load, (parent, worker) CPU seconds, result)."""
    from spurious.thinktwice.heuristics import HEURISTICS, compute_heuristics, load_spacy

    own0, children0 = _cpu_seconds()
    t0 = time.perf_counter()
    nlp = load_spacy()
    t_load = time.perf_counter() - t0
    result = compute_heuristics(df, HEURISTICS, nlp=nlp, threads=threads, batch_size=batch_size)
    wall = time.perf_counter() - t0
    own1, children1 = _cpu_seconds()
    return wall, t_load, (own1 - own0, children1 - children0), result


def run_baseline(df: pd.DataFrame, sample: pd.DataFrame) -> tuple[float, float, int]:
    """Authors'-style row-wise computation on ``sample``; returns (fixed seconds, per-row seconds, rows)."""
    import spacy
    from nltk.corpus import stopwords
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    from spurious.core.resources import SPACY_MODEL
    from spurious.thinktwice.heuristics.text import _word_tokenize_like

    t0 = time.perf_counter()
    nlp = spacy.load(SPACY_MODEL)  # full default pipeline, as spacy.load('en_core_web_sm') in the authors' code
    vectorizer = TfidfVectorizer(stop_words="english", use_idf=True).fit(df["context"])
    fixed = time.perf_counter() - t0
    word = re.compile(r"\w+")

    def similar_words(row: pd.Series) -> int:
        c = [w for w in _word_tokenize_like(row["context"]) if w.isalnum()]
        q = [w for w in _word_tokenize_like(row["question"]) if w.isalnum()]
        return len(set(c) & set(q))

    def distances(row: pd.Series) -> int:
        ctx = word.findall(row["context"])
        ans = word.findall(row["answers"]["text"][0])
        anchor = next((i for i in range(len(ctx)) if ctx[i : i + len(ans)] == ans), None) if ans else None
        if anchor is None:
            return -1
        words = [w for w in word.findall(row["question"]) if w not in stopwords.words("english")]
        found = [abs(j - anchor) for w in words if w in ctx for j in range(len(ctx)) if ctx[j] == w]
        return min(found) if found else -1

    def cos_sim(row: pd.Series) -> float:
        return float(
            cosine_similarity(vectorizer.transform([row["context"]]), vectorizer.transform([row["question"]]))[0][0]
        )

    def answer_length(row: pd.Series) -> float:
        texts = row["answers"]["text"]
        return sum(len(word.findall(t)) for t in texts) / len(texts)

    def spacy_heuristics(row: pd.Series) -> tuple[int, int, int]:
        """ans-pos, sim-ents and subj-pos of one row: the context, the question and each answer parsed once each."""
        context, answers = row["context"], row["answers"]
        doc = nlp(context)
        sents = [s.text for s in doc.sents]
        kth = next((k for k, s in enumerate(sents) if answers["text"][0] in s), len(sents))
        ctx_labels = [e.label_ for e in doc.ents]
        labels = [e.label_ for a in answers["text"] for e in nlp(a).ents]
        sim_ents = max((ctx_labels.count(lab) for lab in labels), default=0)
        subjects = [t.text for t in nlp(row["question"]) if t.dep_ == "nsubj"]
        subj = 0
        for s in subjects:
            if s in context:
                starts = [m.start() for m in re.finditer(re.escape(s), context)]
                subj = max(subj, sum(1 for i in starts if i <= answers["answer_start"][0]))
        return kth, sim_ents, subj

    t1 = time.perf_counter()
    for fn in (distances, similar_words, cos_sim, answer_length, spacy_heuristics):
        sample.apply(fn, axis=1)
    per_row = (time.perf_counter() - t1) / len(sample)
    return fixed, per_row, len(sample)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="SQuAD v1.1 dev JSON (plain or .gz)")
    parser.add_argument("--threads", type=int, default=2, help="worker processes for our implementation")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--n-baseline", type=int, default=200, help="rows to time the baseline on (0: skip it)")
    parser.add_argument("--target", type=float, default=60.0, help="PASS if ours takes under this many seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the baseline subsample")
    args = parser.parse_args(argv)

    if not os.environ.get("NLTK_DATA") and DEFAULT_NLTK_DATA.exists():
        os.environ["NLTK_DATA"] = str(DEFAULT_NLTK_DATA)
    from spurious.core.data.squad import load_squad_json

    df = load_squad_json(args.data)
    n = len(df)
    print(f"data: {args.data} ({n} questions, {df['context'].nunique()} distinct contexts)")
    print(f"machine: {os.cpu_count()} CPUs, 1-min load average before the run {os.getloadavg()[0]:.2f}")

    wall, t_load, cpu, result = run_ours(df, threads=args.threads, batch_size=args.batch_size)
    assert len(result) == n and not result.drop(columns="id").isna().any().any()
    print(
        f"ours      (all 7 heuristics, {n} rows, threads={args.threads}): {wall:7.1f} s wall "
        f"(spaCy load {t_load:.1f} s); CPU: {cpu[0]:.1f} s parent + {cpu[1]:.1f} s workers"
    )

    if args.n_baseline > 0:
        sample = df.sample(n=min(args.n_baseline, n), random_state=args.seed).reset_index(drop=True)
        fixed, per_row, rows = run_baseline(df, sample)
        extrapolated = fixed + per_row * n
        print(
            f"baseline  (authors' style: row-wise apply, one spaCy call per text, full default spaCy pipeline, "
            f"1 process): measured on {rows} rows "
            f"= {per_row * 1000:.1f} ms/row + {fixed:.1f} s fixed -> EXTRAPOLATED to {n} rows: {extrapolated:7.1f} s"
        )
        print(f"speed-up  (extrapolated baseline / ours): {extrapolated / wall:.1f}x")
    status = "PASS" if wall < args.target else "FAIL"
    print(
        f"{status}: ours {wall:.1f} s {'<' if status == 'PASS' else '>='} target {args.target:.0f} s "
        f"(load average now {os.getloadavg()[0]:.2f})"
    )
    print("per-heuristic means:", {h: round(float(np.mean(result[h])), 3) for h in result.columns if h != "id"})
    return 0 if status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
