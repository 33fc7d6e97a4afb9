"""`spurious data fetch`: build the data mirror the tests and demos use from its public sources."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

EPILOG = """\
examples:
  spurious data fetch --out mirror
  spurious data fetch --out /scratch/$USER/spurious-mirror
  spurious data fetch --out mirror --base-url http://127.0.0.1:8000     # the same paths from another host
then:
  export SPURIOUS_DATA_MIRROR=$PWD/mirror/data NLTK_DATA=$PWD/mirror/nltk_data
"""
DESCRIPTION = """\
Download the data mirror: SQuAD v1.1 dev, the NaturalQuestions dev subset of Think Twice's authors, GLUE SST-2
train and dev, GLUE QNLI dev (OUT/data) and NLTK's stop words (OUT/nltk_data), each from a public GitHub repository
at a pinned commit, checked against its sha256 and size, and stored byte for byte as the reference mirror (the .gz
files as GNU `gzip -9 -n` writes them). An interrupted download resumes on the next run; a file that differs is
refused, naming it. `make data` runs this into mirror/, which the Makefile then uses (docs/running.md#data)."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="the data mirror the tests and demos use: spurious data fetch --out DIR",
                          description="The data mirror the tests and demos use.")
    actions = data.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = actions.add_parser("fetch", help="download the data mirror into a folder, every file checked",
                           description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="the mirror folder (created): DIR/data and DIR/nltk_data")
    p.add_argument("--base-url", default=os.environ.get("SPURIOUS_DATA_BASE_URL"), metavar="URL",
                   help="fetch <URL>/<owner>/<repo>/<commit>/<path> instead of https://raw.githubusercontent.com/... "
                        "(default: $SPURIOUS_DATA_BASE_URL, else GitHub)")
    p.add_argument("--keep-other-gzip", action="store_true",
                   help="keep a .gz file whose content is verified but which this machine's gzip compressed to other "
                        "bytes than the reference's (default: refuse it)")
    p.set_defaults(func=cmd_data_fetch)


def cmd_data_fetch(args: argparse.Namespace) -> int:
    from spurious.core import datamirror

    base_url = args.base_url or datamirror.GITHUB_RAW
    datamirror.build(args.out, base_url=base_url, log=lambda line: print(line, flush=True),
                     keep_other_gzip=args.keep_other_gzip)
    return 0
