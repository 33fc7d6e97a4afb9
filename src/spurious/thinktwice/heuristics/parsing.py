"""spaCy work of the heuristics, batched over distinct texts in forked worker processes (the run time is parsing)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from spurious.core.progress import Progress
from spurious.thinktwice.heuristics.text import _alnum_word_set

if TYPE_CHECKING:  # heavy imports stay lazy: the workflow imports this module in processes that may not use them
    from spacy.language import Language


log = logging.getLogger(__name__)

# A job is one kind of per-text work over a list of distinct texts; the kinds and what they extract:
#   "context":  spaCy (parser [+ ner]) -> (sentence start chars, sentence texts, entity labels)
#   "question": spaCy (parser)         -> texts of the tokens with dependency nsubj, in order
#   "answer":   spaCy (ner)            -> entity labels
#   "words":    NLTK tokenizers        -> frozenset of alphanumeric tokens (sim-word)
_Job = tuple[str, tuple[str, ...], list[str]]  # (kind, spaCy components to run, texts)

_WORKER_NLP: Language | None = None  # the pipeline the (forked) workers use; set only while a job batch runs


def _extract_context(doc: Any) -> tuple[list[int], list[str], list[str]]:
    sents = list(doc.sents)  # the parser's sentence boundaries (it is always on for contexts)
    return [s.start_char for s in sents], [s.text for s in sents], [e.label_ for e in doc.ents]


def _extract_question(doc: Any) -> list[str]:
    return [t.text for t in doc if t.dep_ == "nsubj"]


def _extract_answer(doc: Any) -> list[str]:
    return [e.label_ for e in doc.ents]


_EXTRACTORS = {"context": _extract_context, "question": _extract_question, "answer": _extract_answer}


def _run_task(task: tuple[str, tuple[str, ...], list[str], int]) -> list[Any]:
    """Run one chunk of a job (in a worker process or in-process) and return compact per-text features."""
    kind, components, texts, batch_size = task
    if kind == "words":
        return [_alnum_word_set(t) for t in texts]
    nlp = _WORKER_NLP
    assert nlp is not None
    disable = [name for name in nlp.pipe_names if name not in components]
    extract = _EXTRACTORS[kind]
    return [extract(doc) for doc in nlp.pipe(texts, batch_size=batch_size, disable=disable)]


def _components(nlp: Language, need: Iterable[str]) -> tuple[str, ...]:
    """The pipeline components to run for ``need`` (plus the shared embedding layers they listen to)."""
    need = set(need)
    missing = sorted(need - set(nlp.pipe_names))
    if missing:
        raise ValueError(
            f"the spaCy pipeline lacks component(s) {missing} (has {nlp.pipe_names}); sentence boundaries and "
            "subjects need the dependency 'parser', entities need 'ner'"
        )
    shared = {"tok2vec", "transformer"} if "parser" in need or "ner" in need else set()
    return tuple(name for name in nlp.pipe_names if name in need or name in shared)


def _can_fork() -> bool:
    import multiprocessing as mp

    return "fork" in mp.get_all_start_methods() and not mp.current_process().daemon


class _JobRunner:
    """Run text jobs over ``threads`` forked worker processes (or in-process), chunked and batched.

    Why not ``nlp.pipe(n_process=...)``: spaCy's multiprocessing sends every parsed ``Doc`` back to the parent as
    bytes, and ``Doc.from_bytes`` (msgpack plus a catalogue entry-point lookup per call) cost more CPU in the parent
    than the parsing itself (profiled: ~70 s for the 27k distinct SQuAD-dev texts).  Our workers are forked from
    the parent, so they share the loaded pipeline without pickling it, run ``nlp.pipe`` (batched, ``batch_size``)
    on their chunk, and return only the few features the heuristics read.  Chunks of the costliest jobs are
    dispatched first; the parent computes the spaCy-free heuristics meanwhile (:meth:`start` is asynchronous).
    """

    def __init__(self, nlp: Language | None, jobs: dict[str, _Job], *, threads: int, batch_size: int) -> None:
        self.jobs = {name: job for name, job in jobs.items() if job[2]}
        self.nlp = nlp
        self.batch_size = max(1, int(batch_size))
        self.threads = max(1, int(threads))
        self._pool: Any = None
        self._async: Any = None
        self._tasks: list[tuple[str, int, tuple[str, tuple[str, ...], list[str], int]]] = []
        self._blas: Any = None

    def start(self) -> None:
        global _WORKER_NLP
        order = {"context": 0, "question": 1, "answer": 2, "words": 3}  # costliest per text first
        # several chunks per process balance the workers; in-process, chunks only pace the progress report
        n_chunks = self.threads * 4 if self.threads > 1 else 8
        for name, (kind, components, texts) in sorted(self.jobs.items(), key=lambda kv: order[kv[1][0]]):
            size = max(1, -(-len(texts) // n_chunks))
            for k, i in enumerate(range(0, len(texts), size)):
                self._tasks.append((name, k, (kind, components, texts[i : i + size], self.batch_size)))
        from threadpoolctl import threadpool_limits

        # One BLAS thread per process while the jobs run (parallelism comes from the processes; a forked worker
        # inherits the limit); restored in results().
        self._blas = threadpool_limits(limits=1, user_api="blas")
        _WORKER_NLP = self.nlp
        if self.threads > 1 and len(self._tasks) > 1 and _can_fork():
            import multiprocessing as mp

            self._pool = mp.get_context("fork").Pool(min(self.threads, len(self._tasks)))
            # imap submits every task now and yields the results in order as they come (for the progress report)
            self._async = self._pool.imap(_run_task, [t[2] for t in self._tasks], chunksize=1)

    def abort(self) -> None:
        """Stop the workers and restore the BLAS limits (the caller failed before collecting the results)."""
        global _WORKER_NLP
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
        _WORKER_NLP = None
        if self._blas is not None:
            self._blas.restore_original_limits()

    def results(self) -> dict[str, list[Any]]:
        """Per job, the features of its texts in input order (blocks until the workers are done)."""
        global _WORKER_NLP
        try:
            chunks: list[Any] = []
            with Progress(len(self._tasks), "heuristics: text chunks parsed", log, unit="chunks") as bar:
                if self._pool is not None:
                    for values in self._async:
                        chunks.append(values)
                        bar.update()
                    self._pool.close()
                    self._pool.join()
                else:
                    for task in self._tasks:
                        chunks.append(_run_task(task[2]))
                        bar.update()
        finally:
            if self._pool is not None:
                self._pool.terminate()
            _WORKER_NLP = None
            self._blas.restore_original_limits()
        out: dict[str, list[Any]] = {name: [] for name in self.jobs}  # jobs without texts stay absent
        for (name, _k, _task), values in zip(self._tasks, chunks, strict=True):  # tasks are in chunk order per job
            out[name].extend(values)
        return out

