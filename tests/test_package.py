"""Installed = usable: configs by name from the package, bundled data found wherever the package
is, caches in the user cache directory, and nothing taken from the current directory."""

import glob
import json
import os
import stat
import tomllib

import pytest

from bert_jax import resources
from bert_jax import cli
from bert_jax.cli import jobs
from bert_jax.cli.main import _use_compilation_cache, build_parser
from bert_jax.errors import BertJaxError
from conftest import ROOT


@pytest.mark.parametrize("name, stem", [
    ("tiny", "pretrain_tiny"), ("base", "pretrain_base"), ("base_phase2", "pretrain_base_phase2"),
    ("pretrain_tiny", "pretrain_tiny"), ("finetune_fine_foods", "finetune_fine_foods")])
def test_a_config_is_named_by_its_file_stem_or_alias(name, stem, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a name never looks at the working directory
    assert resources.config_path(name) == os.path.join(resources.CONFIGS, f"{stem}.py")


def test_the_checkouts_configs_are_the_packages():
    """One copy: the checkout's configs/ and data/ are the package's folders, not copies."""
    assert os.path.samefile(os.path.join(ROOT, "configs"), resources.CONFIGS)
    assert os.path.samefile(os.path.join(ROOT, "data"), resources.BUNDLED)
    assert {"pretrain_tiny", "pretrain_base", "pretrain_base_phase2",
            "finetune_fine_foods"} <= set(resources.config_names())


def test_an_existing_path_wins_over_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").write_text("")  # a file named like an alias: given as a path, used
    assert resources.config_path("tiny") == "tiny"
    mine = tmp_path / "pretrain_tiny.py"
    mine.write_text("")
    assert resources.config_path(str(mine)) == str(mine)


def test_an_unknown_config_is_one_line_listing_the_names():
    with pytest.raises(BertJaxError) as e:
        resources.config_path("tinyy")
    message = str(e.value)
    assert message.startswith("tinyy: config file not found") and "\n" not in message
    assert "pretrain_tiny" in message and "finetune_fine_foods" in message and " tiny" in message


def test_bundled_configs_read_the_packages_data_from_anywhere(tmp_path, monkeypatch):
    from bert_jax.training import finetune_config, pretrain_config
    monkeypatch.chdir(tmp_path)
    cfg = pretrain_config.load_config("tiny")
    assert glob.glob(cfg.train_files) and os.path.isdir(cfg.vocab)
    assert cfg.train_files.startswith(resources.BUNDLED + os.sep)
    ft = finetune_config.load_config("finetune_fine_foods", init_from="model")
    assert os.path.isfile(ft.train_file) and os.path.isfile(ft.validation_file)


def test_the_default_workdir_is_named_by_the_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for given in (None, "tiny", "pretrain_tiny"):
        path = jobs.config_file(given, "pretrain_tiny")
        assert os.path.splitext(os.path.basename(path))[0].removeprefix("pretrain_") == "tiny"
    assert jobs.config_file(None, "") == ""  # finetune without --config: flags alone


def test_a_configs_folder_in_the_working_directory_is_not_executed(tmp_path, monkeypatch, capfd):
    """Configs are code: a command run inside a crafted directory holding configs/ of its own
    executes none of it unless the command line names the file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BERT_JAX_XLA_CACHE", "")
    marker = tmp_path / "executed"
    (tmp_path / "configs").mkdir()
    for name in resources.config_names():
        (tmp_path / "configs" / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'w').close()\nraise RuntimeError('crafted config ran')\n")
    # a bad field stops each command right after its config is loaded: cheap, and it proves
    # the bundled config was the one read
    for argv in (["pretrain"], ["pretrain", "--config", "tiny"], ["prepare", "--out", "p"],
                 ["finetune", "--config", "finetune_fine_foods", "--init", "m"]):
        code = cli.main([*argv, "--config.batch_size=0"])
        err = capfd.readouterr().err
        assert code == 2 and "config.batch_size: expected an integer ≥ 1, got 0" in err, err
        assert not marker.exists(), argv
    assert not (tmp_path / "runs").exists()
    code = cli.main(["pretrain", "--config", "configs/pretrain_tiny.py"])  # named: it runs
    assert marker.exists() and code == 2 and "crafted config ran" in capfd.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"bert-jax {resources.VERSION}"
    assert cli.main(["--version"]) == 0


def test_the_cache_is_the_variables_else_xdgs_else_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BERT_JAX_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resources.cache_dir("xla") == str(tmp_path / "mine" / "xla")
    monkeypatch.delenv("BERT_JAX_CACHE")
    assert resources.cache_dir() == str(tmp_path / "xdg" / "bert_jax")
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # the XDG spec: ignored
    monkeypatch.chdir(tmp_path)
    assert resources.cache_dir() == str(tmp_path / "home" / ".cache" / "bert_jax")
    assert not (tmp_path / "relative").exists()
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert resources.cache_dir("prepared") == str(
        tmp_path / "home" / ".cache" / "bert_jax" / "prepared")
    for root in (tmp_path / "mine", tmp_path / "xdg" / "bert_jax",
                 tmp_path / "home" / ".cache" / "bert_jax"):
        assert stat.S_IMODE(os.stat(root).st_mode) == 0o700, root  # others cannot read it


def test_the_xla_cache_is_in_the_user_cache(tmp_path, monkeypatch):
    import jax
    monkeypatch.setenv("BERT_JAX_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("BERT_JAX_XLA_CACHE")
    monkeypatch.chdir(tmp_path)
    before = jax.config.jax_compilation_cache_dir
    try:
        _use_compilation_cache()
        assert jax.config.jax_compilation_cache_dir == str(tmp_path / "cache" / "xla")
    finally:
        jax.config.update("jax_compilation_cache_dir", before)
    assert not (tmp_path / ".cache").exists()


def test_a_saved_run_of_the_checkouts_data_resumes_with_the_packages(tmp_path):
    """Runs saved before the data moved into the package name it data/austen/…: the same
    files, so the resume check sees no change (nor after the package moves to a new venv)."""
    from bert_jax.training import pretrain_config, run_record
    cfg = pretrain_config.load_config("tiny")
    saved = {**json.loads(json.dumps(cfg.__dict__)), "train_files": "data/austen/*.txt",
             "vocab": "data/austen/vocab", run_record.INPUTS: {}, run_record.RESUMES: []}
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "train_config.json").write_text(json.dumps(saved))
    check = lambda c: run_record.check_resume(  # noqa: E731
        str(tmp_path), str(tmp_path / "train_config.json"), c, {}, pretrain_config.RESUMABLE,
        str(tmp_path / "checkpoints"))
    assert check(cfg) is None  # nothing changed
    with pytest.raises(BertJaxError, match="train_files"):
        check(cfg.replace(train_files="data/mine/*.txt"))


def test_the_wheel_ships_every_bundled_file():
    """pyproject's package-data globs cover every file of the bundled data and configs: a file
    added without them would be missing from the wheel alone."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        patterns = tomllib.load(f)["tool"]["setuptools"]["package-data"]["bert_jax"]
    shipped = {os.path.normpath(p) for pattern in patterns
               for p in glob.glob(os.path.join(resources.PACKAGE, pattern))}
    files = {os.path.join(d, n) for top in (resources.BUNDLED, resources.CONFIGS)
             for d, _, names in os.walk(top) if "__pycache__" not in d for n in names}
    assert files and files == shipped
