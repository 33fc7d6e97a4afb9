"""The ``spurious`` parser's habits: --version, -v / -q on either side of the subcommand, help text for every
argument, examples that parse for every subcommand, the four papers in the top-level help, and one --sample-size
default for `bias` and `audit` with its reason stated. Parser-level: nothing runs."""

from __future__ import annotations

import argparse
import shlex

import pytest

import spurious
from spurious import cli
from spurious.cli.entry import build_parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


# one valid command line per subcommand, without -v / -q
MINIMAL = {
    "annotate": ["annotate", "d.json", "o.parquet"],
    "evaluate": ["evaluate", "d.json", "p.json"],
    "bias": ["bias", "d.json", "p.json"],
    "report": ["report", "r.json", "--out-dir", "out"],
    "lexical-test": ["lexical-test", "train.tsv", "test.tsv", "p.csv"],
    "audit": ["audit", "model", "--task", "qa", "--out", "out"],
    "plan": ["plan", "--configfile", "c.yaml"],
    "data": ["data", "fetch", "--out", "mirror"],
}


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"spurious {spurious.__version__}"


def test_every_subcommand_has_a_minimal_command_line_here() -> None:
    assert set(MINIMAL) == set(subcommands())


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_verbose_and_quiet_go_before_or_after_the_subcommand(name: str) -> None:
    parser = build_parser()
    argv = MINIMAL[name]
    plain = parser.parse_args(argv)
    assert (plain.verbose, plain.quiet) == (False, False)
    for flag, attribute in (("-v", "verbose"), ("--verbose", "verbose"), ("-q", "quiet"), ("--quiet", "quiet")):
        before = parser.parse_args([flag, *argv])
        after = parser.parse_args([*argv, flag])
        assert getattr(before, attribute) is getattr(after, attribute) is True, (name, flag)
        other = "quiet" if attribute == "verbose" else "verbose"
        assert getattr(before, other) is getattr(after, other) is False
        assert {k: v for k, v in vars(before).items() if k not in ("verbose", "quiet")} == {
            k: v for k, v in vars(plain).items() if k not in ("verbose", "quiet")}


def test_verbose_and_quiet_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["-v", "-q", *MINIMAL["bias"]], [*MINIMAL["bias"], "-v", "-q"], ["-v", *MINIMAL["bias"], "-q"]):
        with pytest.raises(SystemExit) as exit_:
            cli.main(argv)
        assert exit_.value.code == 2
        assert "-q/--quiet" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_every_argument_has_help_text(name: str) -> None:
    parser = subcommands()[name]
    for action in parser._actions:
        assert action.help and action.help.strip() and action.help != argparse.SUPPRESS, (name, action.dest)
    top = build_parser()
    assert all(a.help for a in top._actions if not isinstance(a, argparse._SubParsersAction))
    assert all(a.help for a in top._subparsers._group_actions[0]._choices_actions)  # the COMMAND list


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_every_subcommand_has_examples_that_parse(name: str) -> None:
    parser = subcommands()[name]
    epilog = parser.epilog or ""
    assert epilog.startswith("examples:\n"), name
    lines = epilog.splitlines()[1:]
    assert len(lines) >= 2 and all(line.startswith(f"  spurious {name} ") for line in lines), lines
    assert name in parser.format_help().split("examples:")[1]  # the formatter keeps the lines as written
    for line in lines:
        argv = shlex.split(line, comments=True)[1:]
        args = build_parser().parse_args(argv)  # a usage error would exit
        assert args.command == name


def test_top_level_help_names_the_four_papers_and_audit() -> None:
    text = build_parser().format_help()
    for words in ("Think Twice", "AFLite", "SpuriousBench", "Stubborn Lexical Bias", "spurious audit", "--version"):
        assert words in text, words
    # each paper with the command that runs its diagnostic
    assert "lexical-test" in text.split("Stubborn Lexical Bias")[1].split("SpuriousBench")[0]
    assert "audit --task classification --train" in text.split("AFLite")[1]


def test_one_sample_size_default_for_bias_and_audit_with_its_reason() -> None:
    """800, the paper's: `audit --task qa` defaults to SQuAD v1.1 dev, the paper's data, and its effect classes are
    cut from the paper's Figure 2, so both commands default to the paper's bootstrap; the help says why, and what
    smaller data needs."""
    import inspect

    from spurious.audit.qa import audit_qa
    from spurious.thinktwice.bias import search_threshold

    bias = build_parser().parse_args(MINIMAL["bias"])
    audit = build_parser().parse_args(MINIMAL["audit"])
    assert bias.sample_size == audit.sample_size == 800
    assert bias.iterations == audit.iterations == 100
    assert inspect.signature(audit_qa).parameters["sample_size"].default == 800
    assert inspect.signature(search_threshold).parameters["sample_size"].default == 800
    for name in ("bias", "audit"):
        (option,) = (a for a in subcommands()[name]._actions if a.dest == "sample_size")
        assert "Think Twice's on SQuAD v1.1 dev" in option.help and "2 x N" in option.help, name


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [("--sample-size", "0", "must be at least 1, got 0"), ("--iterations", "-3", "must be at least 1, got -3"),
     ("--seed", "-1", "must be at least 0, got -1"), ("--sample-size", "many", "expected a whole number, got 'many'")],
)
def test_counts_are_checked_by_the_parser(option: str, value: str, words: str, capsys) -> None:
    for command in ("bias", "audit"):
        with pytest.raises(SystemExit) as exit_:
            cli.main([*MINIMAL[command], option, value])
        assert exit_.value.code == 2
        assert f"spurious {command}: error: argument {option}: {words}" in capsys.readouterr().err
