"""`spurious data fetch`: build the data mirror the tests and demos use from its public sources."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

EPILOG = """\
examples:
  spurious data fetch --out mirror
  spurious data fetch --out /scratch/mirror --base-url http://127.0.0.1:8000
"""
DESCRIPTION = """\
Download the data mirror: SQuAD v1.1 dev, the NaturalQuestions dev subset of Think Twice's authors, GLUE SST-2
train and dev, GLUE QNLI dev (OUT/data) and NLTK's stop words (OUT/nltk_data), each from a public GitHub repository
at a pinned commit, checked against its sha256 and size, and stored byte for byte as the reference mirror (the .gz
files as GNU `gzip -9 -n` writes them). An interrupted download resumes on the next run; a file that differs is
refused, naming it. Then point the workflow at it: SPURIOUS_DATA_MIRROR=OUT/data NLTK_DATA=OUT/nltk_data (the
Makefile does so for mirror/, which `make data` builds; docs/running.md#data)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="the data mirror the tests and demos use, from its public sources (data fetch)",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("fetch",), help="fetch: download the data mirror into --out, every file checked")
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="the mirror folder (created): DIR/data and DIR/nltk_data")
    p.add_argument("--base-url", default=os.environ.get("SPURIOUS_DATA_BASE_URL"), metavar="URL",
                   help="fetch <URL>/<owner>/<repo>/<commit>/<path> instead of https://raw.githubusercontent.com/... "
                        "(default: $SPURIOUS_DATA_BASE_URL, else GitHub)")
    p.add_argument("--keep-other-gzip", action="store_true",
                   help="keep a .gz file whose content is verified but which this machine's gzip compressed to other "
                        "bytes than the reference's (default: refuse it)")
    p.add_argument("--source-checksums", type=Path, metavar="JSON",
                   help="with --base-url: the checksums of sources a local copy packed anew ({target: {sha256, size}}, "
                        "as tests/core/data_server.py --from-mirror writes them); what is extracted and stored is "
                        "still checked against the reference")
    p.set_defaults(func=cmd_data_fetch)


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from spurious.core.data import mirror

    base_url = args.base_url or mirror.GITHUB_RAW
    files = None
    if args.source_checksums is not None:
        if base_url == mirror.GITHUB_RAW:
            raise mirror.MirrorError("--source-checksums is for a local copy of the sources (--base-url); the "
                                         "public sources are checked against the reference checksums")
        files = mirror.with_source_checksums(args.source_checksums)
    mirror.build(args.out, base_url=base_url, files=files, log=lambda line: print(line, flush=True),
                     keep_other_gzip=args.keep_other_gzip)
    return 0
