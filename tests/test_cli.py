"""CLI conventions: one hyphenated spelling per flag (old underscore spellings accepted, never
shown), --debug on either side of the subcommand, the multi-host flags on every training
command, and library parameter names translated to flags in one place."""

import argparse
import re

import pytest

from bert_jax import cli
from bert_jax.cli import flags
from bert_jax.cli.main import build_parser
from bert_jax.errors import BertJaxError

MULTIHOST = ("--coordinator-address", "--num-processes", "--process-id",
             "--initialization-timeout")


def subparsers() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    return err[0]


def test_normalize_turns_underscore_spellings_into_the_hyphenated_flags():
    argv = ["finetune", "--batch_size=8", "--coordinator_address", "host:1234",
            "--num_processes", "2", "--process_id", "0", "--initialization_timeout", "5",
            "--text_column", "my_text", "--config.batch_size=4", "--max-seq-length", "16",
            "--", "--keep_me"]
    assert flags.normalize(argv) == [
        "finetune", "--batch-size=8", "--coordinator-address", "host:1234",
        "--num-processes", "2", "--process-id", "0", "--initialization-timeout", "5",
        "--text-column", "my_text", "--config.batch_size=4", "--max-seq-length", "16",
        "--", "--keep_me"]


def test_every_flag_has_one_hyphenated_spelling_and_help_shows_no_alias():
    for name, parser in subparsers().items():
        options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
        assert options and all("_" not in o for o in options), (name, options)
        assert re.findall(r"--\w*_", parser.format_help()) == [], name


def test_underscore_aliases_are_accepted():
    args = build_parser().parse_args(flags.normalize([
        "finetune", "--coordinator_address", "host:1234", "--num_processes", "2",
        "--process_id", "1", "--initialization_timeout", "7", "--batch_size", "8",
        "--max_seq_length", "16", "--label_column", "stars"]))
    assert (args.coordinator_address, args.num_processes, args.process_id,
            args.initialization_timeout) == ("host:1234", 2, 1, 7)
    assert (args.batch_size, args.max_seq_length, args.label_column) == (8, 16, "stars")
    args = build_parser().parse_args(flags.normalize(["fill-mask", "m", "a [MASK]",
                                                      "--top_k", "3"]))
    assert args.top_k == 3


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_every_training_command_takes_the_multihost_flags(command):
    parser = subparsers()[command]
    options = {o for a in parser._actions for o in a.option_strings}
    assert set(MULTIHOST) <= options
    args = parser.parse_args([])
    assert (args.coordinator_address, args.num_processes, args.process_id,
            args.initialization_timeout) == (None, None, None, 300)


@pytest.mark.parametrize("command,given", [
    ("finetune", ["--coordinator-address", "localhost:1", "--num-processes", "2"]),
    ("finetune", ["--process_id", "1"]),
    ("pretrain", ["--num_processes", "2", "--process-id", "0"]),
])
def test_some_multihost_flags_without_the_others_is_one_error(command, given, tmp_path,
                                                              capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [command, "--workdir", str(tmp_path / "w"), *given]
    assert cli.main(argv) == 2
    assert one_error_line(capsys) == (
        f"bert-jax {command}: error: --coordinator-address, --num-processes and --process-id "
        f"go together")
    assert list(tmp_path.iterdir()) == []


def test_the_library_refuses_a_partial_multihost_setup_naming_parameters():
    from bert_jax.runtime import sharding
    for given in ((None, None, 1), ("host:1", None, None), ("host:1", 2, None)):
        with pytest.raises(BertJaxError, match="^coordinator_address, num_processes and "
                                               "process_id go together$"):
            sharding.initialize_distributed(*given)
    sharding.initialize_distributed()  # a plain single-process run: nothing to do


@pytest.mark.parametrize("position", ["before", "after"])
def test_debug_before_or_after_the_subcommand_raises(position, tmp_path, capsys):
    argv = ["tokenizer", "--files", str(tmp_path / "*.txt"), "--out", str(tmp_path / "v")]
    assert cli.main(argv) == 2
    assert "no file matches this pattern" in one_error_line(capsys)
    argv = ["--debug", *argv] if position == "before" else [*argv, "--debug"]
    with pytest.raises(BertJaxError, match="no file matches this pattern"):
        cli.main(argv)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command,message,overrides,expected", [
    ("predict", "batch_size: expected an integer ≥ 1, got 0", (),
     "--batch-size: expected an integer ≥ 1, got 0"),
    ("embed", "max_seq_length 100 is more than the model's 40 positions; using 40", (),
     "--max-seq-length 100 is more than the model's 40 positions; using 40"),
    ("embed", "pooling: expected cls or mean, got 'max'", (),
     "--pooling: expected cls or mean, got 'max'"),
    # a plain-word parameter is translated only as the subject, where it cannot be prose
    ("embed", "/x/pooling.npy: unknown output type .csv", (),
     "/x/pooling.npy: unknown output type .csv"),
    ("predict", "/x/a.csv: output_file would overwrite input_file", (),
     "/x/a.csv: --output would overwrite --input"),
    ("convert", "/x: directory exists and is not empty (pass overwrite=True to replace it)", (),
     "/x: directory exists and is not empty (pass --overwrite to replace it)"),
    ("fill-mask", "top_k: expected an integer ≥ 1, got 0", (),
     "--top-k: expected an integer ≥ 1, got 0"),
    # a config field leading the message stays its subject; mentions become the flags
    ("finetune", "config.train_file: give config.train_file (and config.validation_file) or "
                 "config.dataset", (),
     "config.train_file: give --train FILE (and --validation FILE) or --dataset NAME"),
    ("finetune", "config.init_from: required (give config.init_from)", ("init_from=x",),
     "--config.init_from: required (give --config.init_from)"),
    ("pretrain", "config.stpes: unknown config field; did you mean steps?", ("stpes=3",),
     "--config.stpes: unknown config field; did you mean steps?"),
    ("pretrain", "config.steps: expected config.steps=VALUE", ("steps",),
     "--config.steps: expected --config.steps=VALUE"),
    ("pretrain", "config.steps: expected int, got '10'", (),  # set in the config file
     "config.steps: expected int, got '10'"),
    ("pretrain", "step 3: loss is nan; or set config.on_nonfinite=skip", (),
     "step 3: loss is nan; or set --config.on_nonfinite=skip"),
    ("pretrain", "coordinator_address, num_processes and process_id go together", (),
     "--coordinator-address, --num-processes and --process-id go together"),
    ("pretrain", "/runs/batch_size/x: no such file", (), "/runs/batch_size/x: no such file"),
])
def test_as_flags_names_the_flags_that_set_each_parameter(command, message, overrides,
                                                         expected):
    assert flags.as_flags(command, message, overrides) == expected


def test_split_overrides():
    assert flags.split_overrides(["pretrain", "--config.steps=3", "--workdir", "w",
                                  "--config.dtype=bfloat16"]) == (
        ["pretrain", "--workdir", "w"], ["steps=3", "dtype=bfloat16"])
