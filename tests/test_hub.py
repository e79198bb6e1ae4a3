"""Hub model ids where a model directory is taken: resolved from a Hub cache laid out here as
huggingface_hub lays it out (never the network), pinned by revision, a local path first, and a
missing id refused in one line naming it and the cache looked in."""

import os

import numpy as np
import pytest
from conftest import make_hf_model

from bert_jax import cli
from bert_jax.checkpoints import hub
from bert_jax.checkpoints.model_dir import load_pretrained
from bert_jax.errors import BertJaxError

COMMITS = {"v1": "a" * 40, "main": "b" * 40}  # tag v1 → seed 1, main → seed 2
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(92)]


def _model(directory, seed):
    make_hf_model(str(directory), "BertForMaskedLM", seed=seed)
    (directory / "vocab.txt").write_text("\n".join(WORDS) + "\n")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """HF_HUB_CACHE/models--org--tiny: refs/main, refs/v1 and a snapshot per commit."""
    root = tmp_path_factory.mktemp("hub")
    repo = root / "models--org--tiny"
    for seed, (ref, commit) in enumerate(COMMITS.items(), 1):
        _model(repo / "snapshots" / commit, seed)
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return root


@pytest.fixture(autouse=True)
def offline(cache, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _kernel(path):
    _, params = load_pretrained(path)
    return np.asarray(params["bert"]["embeddings"]["word_embeddings"]["embedding"])


def test_an_id_is_its_cached_snapshot_offline(cache):
    snapshot = cache / "models--org--tiny" / "snapshots" / COMMITS["main"]
    assert hub.local_model("org/tiny") == str(snapshot)
    np.testing.assert_array_equal(_kernel("org/tiny"), _kernel(str(snapshot)))
    # fine-tuning copies the init's vocabulary beside its export: the snapshot's
    from bert_jax.checkpoints import paths
    assert paths.vocab_files("org/tiny") == [str(snapshot / "vocab.txt")]


def test_a_revision_pins_the_snapshot(cache):
    snapshots = cache / "models--org--tiny" / "snapshots"
    assert hub.local_model("org/tiny@v1") == str(snapshots / COMMITS["v1"])
    assert hub.local_model(f"org/tiny@{COMMITS['v1']}") == str(snapshots / COMMITS["v1"])
    assert hub.local_model("org/tiny@main") == str(snapshots / COMMITS["main"])
    assert not np.array_equal(_kernel("org/tiny@v1"), _kernel("org/tiny"))


def test_an_existing_local_path_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _model(tmp_path / "org" / "tiny", seed=3)
    assert hub.local_model("org/tiny") == "org/tiny"
    np.testing.assert_array_equal(_kernel("org/tiny"), _kernel(str(tmp_path / "org" / "tiny")))
    assert hub.local_model("runs/tiny/export") == "runs/tiny/export"  # no id: never the Hub


def test_a_missing_id_is_one_line_naming_it_and_the_cache(cache):
    with pytest.raises(BertJaxError) as e:
        load_pretrained("org/missing")
    assert str(e.value) == (f"org/missing: no such local path, and the Hub model org/missing is "
                            f"not in the Hub cache {cache}, and offline (HF_HUB_OFFLINE)")
    with pytest.raises(BertJaxError, match=r"org/tiny@nope: no such local path, and the Hub "
                                           r"model org/tiny@nope is not in the Hub cache"):
        load_pretrained("org/tiny@nope")


def test_commands_take_an_id(cache, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BERT_JAX_XLA_CACHE", "")
    assert cli.main(["fill-mask", "org/tiny@v1", "w1 [MASK] w2"]) == 0
    assert len(capfd.readouterr().out.splitlines()) >= 5
    assert cli.main(["convert", "org/tiny", "out", "--to", "flax"]) == 0
    capfd.readouterr()
    np.testing.assert_array_equal(_kernel("out"), _kernel("org/tiny"))
    assert cli.main(["fill-mask", "runs/x", "w1 [MASK]"]) == 2  # a mistyped workdir
    err = capfd.readouterr().err.strip()
    assert err.startswith("bert-jax fill-mask: error: runs/x: no such local path, and the Hub "
                          "model runs/x is not in the Hub cache ") and "\n" not in err
