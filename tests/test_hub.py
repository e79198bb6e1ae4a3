"""Hub model ids where a model directory is taken: resolved from a Hub cache laid out here as
huggingface_hub lays it out (never the network), pinned by revision, a local path first, and a
missing id refused in one line naming it and the cache looked in."""

import os

import numpy as np
import pytest
from conftest import make_hf_model

from bert_jax import cli
from bert_jax.model_files import hub
from bert_jax.model_files.model_dir import load_pretrained
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
    from bert_jax.model_files import paths
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


# -- hub datasets pinned by revision: name@revision ------------------------------------------

def test_a_dataset_name_splits_off_its_revision(tmp_path):
    from bert_jax.data.hub_datasets import split_revision
    assert split_revision("nyu-mll/glue@v1.2") == ("nyu-mll/glue", "v1.2")
    assert split_revision(f"glue@{COMMITS['v1']}") == ("glue", COMMITS["v1"])
    assert split_revision("nyu-mll/glue") == ("nyu-mll/glue", None)
    local = tmp_path / "me@home"
    local.mkdir()
    assert split_revision(str(local)) == (str(local), None)  # a local path is never split


@pytest.fixture
def loads(monkeypatch):
    """datasets.load_dataset's calls (a patched call: the Hub is not reachable from tests)."""
    import datasets
    calls = []

    def load_dataset(*args, **kwargs):
        calls.append((args, kwargs))
        rows = datasets.Dataset.from_dict({"text": ["a b. c d."], "label": [0]})
        return rows if "split" in kwargs else {"train": rows}
    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return calls


def test_every_hub_dataset_reader_passes_the_revision(loads):
    from bert_jax.data import text_sources
    from bert_jax.tasks import table_files
    table_files.load_splits("org/reviews@v2", "small", {"train": ""})
    source, = text_sources.list_sources(None, dataset="org/books@v3", dataset_config="en")
    list(text_sources._dataset_records(source, "text", 0, 1))
    assert loads == [(("org/reviews", "small"), {"revision": "v2"}),
                     (("org/books", "en"), {"split": "train", "streaming": True,
                                            "revision": "v3"})]


def test_the_data_caches_are_keyed_on_the_revision():
    """Prepared pretraining data and GLUE's data/<task> are keyed on the pinned revision: a
    pinned run never reuses rows read at another revision."""
    from bert_jax import resources
    from bert_jax.data import text_sources, tokenizer
    from bert_jax.glue import workdir_data
    from bert_jax.training import pretrain_config, pretrain_corpus
    tok = tokenizer.load(resources.bundled("austen/vocab"))
    cfg = pretrain_config.PretrainConfig()
    keys = {pretrain_corpus._cache_key(cfg, text_sources.list_sources(None, dataset=name), tok)
            for name in ("org/books", "org/books@v1", "org/books@v2")}
    assert len(keys) == 3
    assert len({workdir_data.source_of("", hub) for hub in (
        "nyu-mll/glue", "nyu-mll/glue@v1", "nyu-mll/glue@v2")}) == 3


def test_a_pinned_dataset_keeps_the_default_workdir_name():
    from bert_jax.cli.jobs import finetune_workdir
    from bert_jax.training.finetune_config import FinetuneConfig
    names = {finetune_workdir(FinetuneConfig(init_from="m", dataset=name, dataset_config="sst2"))
             for name in ("nyu-mll/glue", "nyu-mll/glue@v1")}
    assert names == {os.path.join("runs", "sequence-classification-glue-sst2")}


def test_a_model_card_names_the_hub_model_and_dataset_it_came_from(tmp_path, monkeypatch):
    """base_model and datasets are Hub ids (revision dropped, as the Hub reads them); a local
    start or local data names none."""
    from huggingface_hub import ModelCard
    from bert_jax.training import model_card
    from bert_jax.training.finetune_config import FinetuneConfig
    monkeypatch.chdir(tmp_path)
    (tmp_path / "local").mkdir()
    result = {"validation": {"accuracy": 0.75}, "best_epoch": 1}
    for init, dataset, base, datasets in (
            ("org/tiny@v1", "nyu-mll/glue@v2", "org/tiny", ["nyu-mll/glue"]),
            ("local", "", None, None)):
        cfg = FinetuneConfig(init_from=init, dataset=dataset, dataset_config="sst2",
                             train_file="train.csv")
        path = model_card.write_finetune_card(str(tmp_path), cfg, str(tmp_path / "w"), result,
                                              "BertForSequenceClassification", ("accuracy",))
        card = ModelCard.load(path)
        assert (card.data.base_model, card.data.datasets) == (base, datasets)
        assert [r.metric_value for r in card.data.eval_results] == [0.75]
