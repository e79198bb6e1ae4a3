"""Fine-tuning end to end on a slice of fine_foods with a tiny random BERT (MiniLM's vocabulary):
label maps, scores, the kept best epoch, exact resume, the Hugging Face export, bad input."""

import csv
import json
import os
import shutil

import numpy as np
import pytest

from bert_jax.tasks import classification as classification_data
from bert_jax.tasks import table_files
from bert_jax.tasks.classification import classification_scores
from bert_jax import cli
from bert_jax.training import finetune as finetuner
from bert_jax import inference
from bert_jax.model_files import model_dir as pretrained
from bert_jax.errors import BertJaxError
from bert_jax.training.finetune_config import FinetuneConfig

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOODS = os.path.join(ROOT, "data", "fine_foods")


@pytest.fixture(scope="module")
def tiny(minilm_dir, tmp_path_factory):
    """A random 2-layer H32 BertModel with MiniLM's vocabulary, and 64 / 40 rows of fine_foods."""
    import torch
    import transformers
    base = tmp_path_factory.mktemp("finetune")
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64))
    model.save_pretrained(base / "init")
    for name in ("vocab.txt", "tokenizer.json"):
        shutil.copy(os.path.join(minilm_dir, name), base / "init" / name)
    rows = list(csv.reader(open(os.path.join(FOODS, "train.csv"), encoding="utf-8")))
    for name, part in (("train", rows[1:65]), ("val", rows[65:105])):
        with open(base / f"{name}.csv", "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows([rows[0]] + part)
    return base


def config(tiny, **changes):
    cfg = FinetuneConfig(init_from=str(tiny / "init"), train_file=str(tiny / "train.csv"),
                         validation_file=str(tiny / "val.csv"), max_seq_length=32, epochs=2,
                         batch_size=16, eval_batch_size=16, learning_rate=1e-3, log_every=2,
                         checkpoint_every=3)
    return cfg.replace(**changes)


@pytest.fixture(scope="module")
def run(tiny):
    workdir = tiny / "run"
    result = finetuner.finetune(config(tiny, test_file=str(tiny / "val.csv")), str(workdir))
    return workdir, result


def test_scores_cover_every_row_and_the_best_epoch_is_kept(tiny, run):
    workdir, result = run
    saved = json.load(open(workdir / "metrics.json"))
    assert saved["labels"] == ["great", "other"] and json.load(open(workdir / "labels.json")) == \
        ["great", "other"]
    assert [e["epoch"] for e in saved["epochs"]] == [1, 2]
    best = max(saved["epochs"], key=lambda e: e["mcc"])
    assert saved["validation"] == best and saved["best_epoch"] == best["epoch"]
    assert saved["validation"]["rows"] == 40  # 40 rows, batches of 16: the padded tail counts once
    # the kept model really is that epoch: re-scoring it from disk gives its numbers
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
    config_, params, tok = inference.load(str(workdir))
    rows = list(csv.DictReader(open(tiny / "val.csv", encoding="utf-8")))
    probs = classification_data.predict_proba(config_, params, tok, [r["text"] for r in rows],
                                    max_seq_length=32, batch_size=16)
    labels = np.array([config_.id2label.index(r["label"]) for r in rows])
    preds = probs.argmax(-1)
    ours = classification_scores(labels, preds, 2)
    assert ours["accuracy"] == pytest.approx(best["accuracy"]) == accuracy_score(labels, preds)
    assert ours["macro_f1"] == pytest.approx(f1_score(labels, preds, average="macro"))
    assert ours["mcc"] == pytest.approx(matthews_corrcoef(labels, preds))
    assert result.metrics["test"]["accuracy"] == pytest.approx(best["accuracy"])
    # the job says what it did: no one needs to read the workdir to find out
    assert result.metrics == saved and result.steps == saved["epochs"][-1]["step"] == 8
    assert (result.model, result.export, result.checkpoints) == (
        str(workdir / "model"), str(workdir / "export"), str(workdir / "checkpoints"))


def test_export_predicts_like_transformers(tiny, run):
    import torch
    import transformers
    workdir, _ = run
    hf, info = transformers.BertForSequenceClassification.from_pretrained(
        workdir / "export", output_loading_info=True)
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    assert hf.config.id2label == {0: "great", 1: "other"}
    hf_tok = transformers.AutoTokenizer.from_pretrained(workdir / "export")
    assert hf_tok.vocab_size == 30522
    texts = [r["text"] for r in csv.DictReader(open(tiny / "val.csv", encoding="utf-8"))][:12]
    enc = hf_tok(texts, truncation=True, max_length=32, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = torch.softmax(hf.eval()(**enc).logits, -1).numpy()
    config_, params, tok = inference.load(str(workdir / "export"))
    ours = classification_data.predict_proba(config_, params, tok, texts, max_seq_length=32)
    np.testing.assert_array_equal(ours.argmax(-1), theirs.argmax(-1))
    np.testing.assert_allclose(ours, theirs, atol=1e-5)


def test_predict_cli_writes_labels_and_probabilities(tiny, run, tmp_path, capsys):
    workdir, _ = run
    out = tmp_path / "pred.jsonl"
    assert cli.main(["predict", str(workdir / "model"), "--input", str(tiny / "val.csv"),
                     "--output", str(out), "--max-seq-length", "32"]) == 0
    rows = [json.loads(line) for line in open(out)]
    assert len(rows) == 40 and {r["predicted_label"] for r in rows} <= {"great", "other"}
    for r in rows:
        assert r["probability_great"] + r["probability_other"] == pytest.approx(1, abs=1e-5)
        assert r["probability"] == max(r["probability_great"], r["probability_other"])


def test_the_builders_parts_step_as_the_job_steps(tiny, run):
    """finetune() runs finetune_parts.build's parts: the built train step, from the state the
    job starts from, gives the job's logged loss and accuracy over its first two steps."""
    import types

    import jax

    from bert_jax.runtime import sharding
    from bert_jax.training import finetune_parts, losses
    from bert_jax.training import run as skeleton
    workdir, _ = run
    job = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
    first = next(r for r in job if r["split"] == "train")
    assert first["step"] == 2  # log_every 2: the mean of steps 1 and 2
    cfg = config(tiny, test_file=str(tiny / "val.csv"))
    parts = finetune_parts.build(cfg)
    mesh = sharding.make_mesh()
    state = skeleton.init_state(  # only the mesh of a RunContext is read
        types.SimpleNamespace(mesh=mesh), parts.model, parts.tx,
        max_seq_length=cfg.max_seq_length, seed=cfg.seed, pretrained=parts.take_pretrained(),
        source=cfg.init_from, input_shape=parts.input_shape, start=parts.start)
    key, steps = sharding.replicated_key(cfg.seed, mesh), []
    for step in range(2):
        state, metrics = parts.train_step(
            state, sharding.global_batch(parts.train_batch(step), mesh), key)
        steps.append(jax.device_get(metrics))
    ours = losses.means(losses.add(*steps))
    for name in ("loss", "accuracy", "grad_norm", "learning_rate"):
        assert abs(ours[name] - first[name]) <= 1e-6, (name, ours[name], first[name])


def test_resume_from_an_epoch_end_matches_the_straight_run(tiny, run, tmp_path):
    workdir, result = run
    resumed = tmp_path / "resumed"
    shutil.copytree(workdir, resumed)
    step = result.metrics["epochs"][0]["step"]  # epoch 1 ended here: drop all that came after
    for p in (resumed / "checkpoints").iterdir():
        if p.name.isdigit() and int(p.name) > step:
            shutil.rmtree(p)
    (resumed / "epochs.json").write_text(json.dumps(result.metrics["epochs"][:1]))
    shutil.rmtree(resumed / "export")
    again = finetuner.finetune(config(tiny, test_file=str(tiny / "val.csv")), str(resumed))
    assert again.metrics["epochs"] == result.metrics["epochs"]
    a = pretrained.load_model_dir(str(workdir / "model"))[1]
    b = pretrained.load_model_dir(str(resumed / "model"))[1]
    from flax import traverse_util
    fa, fb = traverse_util.flatten_dict(a), traverse_util.flatten_dict(b)
    assert all(np.array_equal(fa[k], fb[k]) for k in fa)


@pytest.mark.parametrize("change,shown", [
    (("--learning-rate", "3e-3"), "config.learning_rate: 0.001 there, 0.003 here"),
    (("--seed", "5"), "config.seed: 0 there, 5 here"),
    (("--train", "OTHER"), "--train FILE: '{train}' there, '{other}' here"),
    (("--learning-rate", "3e-3", "--seed", "5", "--config.max_grad_norm=0.1"),
     "config.learning_rate: 0.001 there, 0.003 here; --config.max_grad_norm: 1.0 there, 0.1 "
     "here; config.seed: 0 there, 5 here"),
])
def test_a_changed_run_never_resumes(tiny, run, change, shown, tmp_path, capfd):
    """The review's case: the same workdir with another rate, seed or data file is refused in
    one line, and its results and saved config stay as they were."""
    workdir, _ = run
    work = tmp_path / "run"
    shutil.copytree(workdir, work)
    shutil.copy(tiny / "train.csv", tmp_path / "other.csv")
    before = {p: p.read_bytes() for p in work.rglob("*") if p.is_file()}
    flags = {"--init": tiny / "init", "--train": tiny / "train.csv",
             "--validation": tiny / "val.csv", "--test": tiny / "val.csv", "--workdir": work,
             "--max-seq-length": 32, "--epochs": 2, "--batch-size": 16, "--learning-rate": 1e-3}
    extra = list(change)
    for i, (name, value) in enumerate(zip(extra, extra[1:])):
        if name in flags:
            flags[name] = tmp_path / "other.csv" if value == "OTHER" else value
            extra[i:i + 2] = [None, None]
    argv = ["finetune", *[str(x) for kv in flags.items() for x in kv],
            "--config.eval_batch_size=16", "--config.log_every=2",
            "--config.checkpoint_every=3", *[x for x in extra if x is not None]]
    assert cli.main(argv) == 2
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    shown = shown.format(train=tiny / "train.csv", other=tmp_path / "other.csv")
    assert err == [f"bert-jax finetune: error: {work}: holds a run with other settings "
                   f"({shown}); a resumed run must compute what it started: use a new workdir, "
                   f"or the saved settings (finetune_config.json)"]
    assert {p: p.read_bytes() for p in work.rglob("*") if p.is_file()} == before


def test_the_old_name_of_init_from_is_refused_with_its_new_name(tiny, tmp_path, capsys):
    """FinetuneConfig.init is now init_from (pretraining's name): the old spelling is no quiet
    alias on the command line but a one-line refusal naming the new one."""
    from bert_jax.training.config_files import apply_overrides
    with pytest.raises(BertJaxError) as e:
        apply_overrides(FinetuneConfig(), [f"init={tiny / 'init'}"])
    assert str(e.value) == "config.init: renamed; did you mean config.init_from?"
    _fails(capsys, ["finetune", f"--config.init={tiny / 'init'}", "--workdir",
                    str(tmp_path / "w"), "--train", str(tiny / "train.csv"),
                    "--validation", str(tiny / "val.csv")],
           "bert-jax finetune: error: --config.init: renamed; did you mean --init DIR?")
    assert not (tmp_path / "w").exists()


def test_a_run_saved_before_init_was_renamed_resumes_and_still_refuses_another_start(
        tiny, run, tmp_path, capfd):
    """A workdir whose finetune_config.json says "init" (as saved before the rename) resumes
    from its epoch 1 exactly as a straight run; the same workdir with another starting model
    is refused, the old field read as init_from."""
    workdir, result = run
    old = tmp_path / "old"
    shutil.copytree(workdir, old)
    saved = json.load(open(old / "finetune_config.json"))
    saved = {("init" if k == "init_from" else k): v for k, v in saved.items()}
    assert saved["init"] == str(tiny / "init") and "init_from" not in saved
    (old / "finetune_config.json").write_text(json.dumps(saved))
    other = tmp_path / "other_init"  # the same weights elsewhere: only the field differs
    shutil.copytree(tiny / "init", other)
    before = {p: p.read_bytes() for p in old.rglob("*") if p.is_file()}
    with pytest.raises(BertJaxError, match=(
            r"holds a run with other settings \(config.init_from: '.*init' there, "
            r"'.*other_init' here\)")):
        finetuner.finetune(config(tiny, init_from=str(other), test_file=str(tiny / "val.csv")),
                           str(old))
    assert {p: p.read_bytes() for p in old.rglob("*") if p.is_file()} == before
    step = result.metrics["epochs"][0]["step"]  # as a kill after epoch 1 leaves it
    for p in (old / "checkpoints").iterdir():
        if p.name.isdigit() and int(p.name) > step:
            shutil.rmtree(p)
    (old / "epochs.json").write_text(json.dumps(result.metrics["epochs"][:1]))
    again = finetuner.finetune(config(tiny, test_file=str(tiny / "val.csv")), str(old))
    assert again.metrics["epochs"] == result.metrics["epochs"]
    assert json.load(open(old / "metrics.json"))["test"] == result.metrics["test"]


def test_label_maps_and_sentence_pairs(minilm_dir, tmp_path, caplog):
    from bert_jax.data import tokenizer
    tok = tokenizer.load(minilm_dir)
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(json.dumps(r) for r in [
        {"a": "the cat sat", "b": "on the mat", "y": 10}, {"a": "dogs bark", "b": "loudly", "y": 2},
        {"a": "x", "b": None, "y": 2}, {"a": "birds fly", "b": "south", "y": 10}]))
    val = tmp_path / "val.csv"
    val.write_text("a,b,y\nfish swim,in water,2\nhello,there,10\n")
    splits = table_files.load_splits(files={"train": str(train), "validation": str(val)})
    with caplog.at_level("WARNING"):
        names, data = classification_data.encode_splits(splits, tok, "a", "b", "y", 16)
    assert names == ("2", "10")  # integers sort numerically
    assert "skipped 1 of 4 rows with an empty 'a' or 'b' or 'y'" in caplog.text
    assert data["train"]["labels"].tolist() == [1, 0, 1] and data["validation"]["labels"].tolist() \
        == [0, 1]
    assert data["train"]["input_ids"].shape == (3, 16)
    assert data["train"]["token_type_ids"][0].tolist()[:8] == [0, 0, 0, 0, 0, 1, 1, 1]
    splits = {"train": ("t", table_files.read_table(str(val)))}
    # strings sort as text
    names, _ = classification_data.encode_splits(splits, tok, "a", "", "b", 16)
    assert names == ("in water", "there")


def _fails(capsys, argv, needle):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()  # progress logs, then one error line
    errors = [line for line in err if "error" in line.lower() or "Traceback" in line]
    assert errors == [err[-1]] and needle in err[-1], err


def test_bad_input_is_one_line(tiny, tmp_path, capsys):
    base = ["finetune", "--init", str(tiny / "init"), "--workdir", str(tmp_path / "w"),
            "--max-seq-length", "32", "--batch-size", "16"]
    train, val = str(tiny / "train.csv"), str(tiny / "val.csv")
    _fails(capsys, [*base, "--train", train, "--validation", val, "--label-column", "stars"],
           f"{train}: no column 'stars'; columns present: text, label")
    bad = tmp_path / "bad.csv"
    bad.write_text("text,label\nnice,great\nmeh,neutral\nmeh again,neutral\n")
    _fails(capsys, [*base, "--train", train, "--validation", str(bad)],
           f"{bad}: column 'label' has label(s) 'neutral' (2 rows) that the training data never "
           f"has (training labels: great, other)")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    _fails(capsys, [*base, "--train", str(empty), "--validation", val], f"{empty}: empty file")
    header = tmp_path / "header.csv"
    header.write_text("text,label\n")
    _fails(capsys, [*base, "--train", train, "--validation", str(header)], f"{header}: no rows")
    _fails(capsys, [*base, "--train", train], "config.validation_file: give --validation FILE")
    _fails(capsys, ["predict", str(tiny / "init"), "--input", val, "--output",
                    str(tmp_path / "p.csv")], "model: has no classifier head")
    assert not os.path.exists(tmp_path / "w" / "checkpoints")


def test_predict_refuses_null_texts(run, tmp_path, capsys):
    workdir, _ = run
    nulls = tmp_path / "nulls.csv"
    nulls.write_text("text,label\nfine,great\n,other\n")
    _fails(capsys, ["predict", str(workdir), "--input", str(nulls), "--output",
                    str(tmp_path / "p.csv")],
           f"{nulls}: column 'text' is empty in 1 row(s), first at row 2")


def test_finetune_from_python_validates_its_config(tmp_path):
    """finetune() refuses an impossible config as pretrain() does, naming the field, before it
    reads anything or makes the workdir."""
    from bert_jax.errors import BertJaxError
    work = tmp_path / "w"
    with pytest.raises(BertJaxError, match=r"^config.init_from: a pretrained model"):
        finetuner.finetune(FinetuneConfig(train_file="t.csv", validation_file="v.csv"), str(work))
    with pytest.raises(BertJaxError, match=r"^config.epochs: expected an integer ≥ 1, got 0"):
        finetuner.finetune(FinetuneConfig(init_from="m", train_file="t.csv",
                                          validation_file="v.csv", epochs=0), str(work))
    assert not work.exists()


def test_checkpoints_in_another_directory(tiny, tmp_path):
    """config.checkpoint_dir keeps the train states outside the workdir (storage that several
    processes share); a second run resumes from there and finds every epoch done."""
    cfg = config(tiny, epochs=1, checkpoint_dir=str(tmp_path / "states"))
    result = finetuner.finetune(cfg, str(tmp_path / "w"))
    assert result.checkpoints == str(tmp_path / "states") and result.steps == 4
    assert "4" in os.listdir(tmp_path / "states")
    assert not (tmp_path / "w" / "checkpoints").exists()
    again = finetuner.finetune(cfg, str(tmp_path / "w"))
    assert (again.steps, again.metrics["epochs"]) == (4, result.metrics["epochs"])


def test_finetune_config_file_and_overrides(minilm_dir):
    from bert_jax.training import finetune_config
    from bert_jax.training import pretrain_config as train_config
    from bert_jax.errors import BertJaxError
    path = os.path.join(ROOT, "configs", "finetune_fine_foods.py")
    cfg = finetune_config.load_config(path, ["epochs=2", "best_metric=macro_f1"],
                                      init_from=minilm_dir, batch_size=None)
    assert (cfg.epochs, cfg.best_metric, cfg.batch_size, cfg.init_from) == (
        2, "macro_f1", 32, minilm_dir)
    with pytest.raises(BertJaxError, match="config.best_metric: expected one of"):
        finetune_config.load_config(path, ["best_metric=f2"], init_from=minilm_dir)
    with pytest.raises(BertJaxError, match="not a PretrainConfig"):
        train_config.load_config(path)
    settings = finetune_config.optimizer_settings(cfg, 250)
    assert (settings.steps, settings.warmup_steps) == (250, 25)


def test_minilm_learns_fine_foods(minilm_dir, tmp_path):
    """The README recipe in small: the real all-MiniLM-L6-v2, 480 training reviews cut to 32
    tokens, 30 steps, scored on 200 test reviews: it must learn more than the label frequencies."""
    rows = list(csv.reader(open(os.path.join(FOODS, "train.csv"), encoding="utf-8")))
    test = list(csv.reader(open(os.path.join(FOODS, "test.csv"), encoding="utf-8")))
    for name, part in (("train", rows[:481]), ("test", test[:201])):
        with open(tmp_path / f"{name}.csv", "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(part)
    cfg = FinetuneConfig(init_from=minilm_dir, train_file=str(tmp_path / "train.csv"),
                         validation_file=str(tmp_path / "test.csv"), max_seq_length=32,
                         epochs=1, batch_size=16, learning_rate=2e-4, warmup_ratio=0.1)
    result = finetuner.finetune(cfg, str(tmp_path / "run")).metrics
    great = sum(r[1] == "great" for r in test[1:201]) / 200
    prior = -(great * np.log(great) + (1 - great) * np.log(1 - great))  # loss of label frequencies
    # 30 steps at twice the rate lift the loss below what the label frequencies alone give, and
    # further below it than 50 steps at 1e-4 did; the full recipe (125 steps of 128 tokens,
    # README) is what makes predictions leave the majority class reliably
    assert result["validation"]["loss"] < prior - 0.01, (prior, result["validation"])
    assert result["validation"]["accuracy"] >= max(great, 1 - great), result["validation"]


@pytest.mark.parametrize("kind", ["normal", "truncated_normal"])
def test_head_init_draws_the_fresh_head(tiny, tmp_path, kind):
    """config.head_init: "normal" starts the classifier at transformers' plain normal (σ the
    model's initializer_range) from the run's HEAD stream; the default keeps the original's
    2σ-truncated draw. A rate of 1e-12 leaves the kept model at its start (Adam moves a weight
    by about the rate a step)."""
    import jax
    from bert_jax.runtime import rng
    from bert_jax.training.initial_params import with_head_init
    result = finetuner.finetune(config(tiny, epochs=1, learning_rate=1e-12, head_init=kind,
                                       seed=3), str(tmp_path / "w"))
    _, params = pretrained.load_model_dir(str(tmp_path / "w" / "model"))
    kernel = np.asarray(params["classifier"]["kernel"])
    assert kernel.shape == (32, 2) and result.steps == 4
    np.testing.assert_allclose(np.asarray(params["classifier"]["bias"]), 0.0, atol=1e-9)
    if kind == "normal":
        fresh = {"classifier": {"kernel": np.zeros((32, 2), np.float32),
                                "bias": np.zeros(2, np.float32)}}
        drawn = with_head_init(fresh, "classifier", "normal", 0.02, rng.head_key(3))
        np.testing.assert_allclose(kernel, drawn["classifier"]["kernel"], atol=1e-9)
        assert drawn["classifier"]["bias"] is fresh["classifier"]["bias"]
    else:
        assert np.abs(kernel).max() <= 2 * 0.02 + 1e-9
        assert jax.tree.leaves(with_head_init(params, "classifier", kind, 0.02, None))[0] is \
            jax.tree.leaves(params)[0]


def test_reinit_layers_and_reinit_attention_start_those_parameters_at_the_models_init(
        tiny, tmp_path):
    """config.reinit_layers=1 (Zhang et al. 2021) starts the top layer and the pooler at the
    model's own init for the run's seed (rng.init_key); config.reinit_attention=2 starts the
    query and key (kernels and biases) of both layers there; every other encoder parameter is
    as the checkpoint has it. One run checks both: layer 1 whole and the pooler from
    reinit_layers, layer 0's query and key from reinit_attention alone. A rate of 1e-12 keeps
    the kept model at its start. More layers than the model has are refused by name."""
    import jax
    import jax.numpy as jnp
    from flax import traverse_util

    from bert_jax.models import BertForSequenceClassification
    from bert_jax.runtime import rng
    from bert_jax.training.initial_params import reinit_query_key, reinit_top
    finetuner.finetune(config(tiny, epochs=1, learning_rate=1e-12, reinit_layers=1,
                              reinit_attention=2, seed=3), str(tmp_path / "w"))
    got_config, got = pretrained.load_model_dir(str(tmp_path / "w" / "model"))
    _, loaded = pretrained.load_pretrained(str(tiny / "init"))
    fresh = BertForSequenceClassification(got_config).init(
        rng.init_key(3), jnp.zeros((1, 32), jnp.int32))["params"]["bert"]
    flat_got = traverse_util.flatten_dict(got["bert"], sep="/")
    flat_loaded = traverse_util.flatten_dict(loaded["bert"], sep="/")
    flat_fresh = traverse_util.flatten_dict(fresh, sep="/")
    top = [k for k in flat_got if k.startswith(("encoder/layer_1/", "pooler/"))]
    assert len(top) == 18  # a layer's 16 tensors and the pooler's 2
    first = "encoder/layer_0/attention/"
    query_key = [k for k in flat_got if k.startswith((first + "query/", first + "key/"))]
    assert sorted(query_key) == [first + "key/bias", first + "key/kernel", first + "query/bias",
                                 first + "query/kernel"]
    for name, value in flat_got.items():
        want = flat_fresh[name] if name in top + query_key else flat_loaded[name]
        np.testing.assert_allclose(value, want, atol=1e-6, err_msg=name)
    for name in ("encoder/layer_1/attention/query/kernel", first + "query/kernel",
                 first + "key/kernel"):
        assert not np.allclose(flat_loaded[name], flat_fresh[name], atol=1e-3), name
    with pytest.raises(Exception, match="config.reinit_layers: expected 0 to 2"):
        reinit_top(loaded, jax.device_get(fresh), 3, "init")
    with pytest.raises(Exception, match="config.reinit_attention: expected 0 to 2"):
        reinit_query_key(loaded, jax.device_get(fresh), 3, "init")


def test_rescale_embeddings_keeps_the_models_outputs_and_starts_the_tables_at_that_sigma(
        tiny, tmp_path):
    """config.rescale_embeddings=σ multiplies the word, position and segment tables by one
    factor (the word table's σ becomes σ; the three keep their ratios) and leaves every other
    parameter as loaded; LayerNorm after their sum keeps the encoder's outputs (≤ 1e-5). A run
    at a rate of 1e-12 keeps exactly those tables. 0 is off; a negative or NaN σ is refused."""
    from flax import traverse_util

    from bert_jax.models.encoder import BertModel
    from bert_jax.model_files import parity
    from bert_jax.training.initial_params import rescale_embeddings
    bert_config, loaded = pretrained.load_pretrained(str(tiny / "init"))
    scaled = rescale_embeddings(loaded, 0.005)
    tables = ("word_embeddings", "position_embeddings", "token_type_embeddings")
    emb, before = scaled["bert"]["embeddings"], loaded["bert"]["embeddings"]
    assert np.std(emb["word_embeddings"]["embedding"]) == pytest.approx(0.005, rel=1e-5)
    factor = 0.005 / np.std(before["word_embeddings"]["embedding"])
    assert factor == pytest.approx(0.25, rel=0.05)  # transformers' init: σ 0.02
    for name in tables:
        np.testing.assert_allclose(emb[name]["embedding"], before[name]["embedding"] * factor,
                                   rtol=1e-6, err_msg=name)
    flat = traverse_util.flatten_dict(scaled, sep="/")
    for name, value in traverse_util.flatten_dict(loaded, sep="/").items():
        if not any(t in name for t in tables):
            assert flat[name] is value, name
    batch = parity.inputs_np(parity.parity_batch(bert_config, 4, 21, seed=0))
    outputs = [BertModel(bert_config).apply({"params": p["bert"]}, **batch)
               for p in (loaded, scaled)]
    for a, b in zip(*outputs):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), atol=1e-5)
    finetuner.finetune(config(tiny, epochs=1, learning_rate=1e-12, rescale_embeddings=0.005),
                       str(tmp_path / "w"))
    _, kept = pretrained.load_model_dir(str(tmp_path / "w" / "model"))
    for name in tables:
        np.testing.assert_allclose(kept["bert"]["embeddings"][name]["embedding"],
                                   emb[name]["embedding"], atol=1e-9, err_msg=name)
    for bad in (-0.02, float("nan")):
        with pytest.raises(BertJaxError,
                           match="config.rescale_embeddings: expected a positive number"):
            finetuner.finetune(config(tiny, rescale_embeddings=bad), str(tmp_path / "bad"))
    assert not (tmp_path / "bad").exists()
    flat_table = {"bert": {"embeddings": {"word_embeddings": {"embedding": np.zeros((4, 2))}}}}
    with pytest.raises(BertJaxError, match="word embedding table's σ is 0.0"):
        rescale_embeddings(flat_table, 0.02)


def test_head_init_distributions():
    """"normal" is a plain normal (4.6% of draws beyond 2σ, σ as asked); the default, truncated
    at 2σ, has none; other groups and biases are untouched; an unknown kind is refused."""
    import jax
    from bert_jax.models import BertConfig, BertForTokenClassification
    from bert_jax.runtime import rng
    from bert_jax.training.initial_params import with_head_init
    from bert_jax.training.finetune_config import validate
    from bert_jax.errors import BertJaxError
    cfg = BertConfig(vocab_size=50, hidden_size=512, num_hidden_layers=1, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=16,
                     id2label=tuple(f"t{i}" for i in range(200)))
    params = BertForTokenClassification(cfg).init(jax.random.key(0),
                                                  np.ones((1, 4), np.int32))["params"]
    normal = with_head_init(params, "classifier", "normal", 0.05, rng.head_key(0))
    k0, k1 = (np.asarray(p["classifier"]["kernel"]) for p in (params, normal))
    assert np.abs(k0).max() <= 2 * 0.02 + 1e-7  # the model's own: truncated, σ 0.02
    assert abs(k1.std() - 0.05) < 0.002 and abs(k1.mean()) < 0.002
    assert 0.040 < (np.abs(k1) > 2 * 0.05).mean() < 0.051  # 4.55% for a plain normal
    assert normal["bert"] is params["bert"]
    np.testing.assert_array_equal(normal["classifier"]["bias"], params["classifier"]["bias"])
    with pytest.raises(BertJaxError, match=r"^config.head_init: expected one of "
                                           r"truncated_normal, normal"):
        validate(FinetuneConfig(init_from="m", train_file="t", validation_file="v", head_init="he"))


def test_dropout_overrides_the_models(tiny, run, tmp_path):
    """config.dropout replaces the init's hidden and attention dropout for the run (an export of
    the default pretraining run carries 0.0); the kept model and the export say so; None keeps
    the model's (the fixture's 0.1), and 0.0 trains differently from it."""
    from bert_jax.errors import BertJaxError
    from bert_jax.training.finetune_config import validate
    kept = finetuner.finetune(config(tiny, epochs=1, dropout=0.0), str(tmp_path / "w"))
    straight = finetuner.finetune(config(tiny, epochs=1), str(tmp_path / "w01"))
    saved, _ = pretrained.load_model_dir(str(tmp_path / "w" / "model"))
    assert (saved.hidden_dropout_prob, saved.attention_probs_dropout_prob) == (0.0, 0.0)
    exported = json.load(open(tmp_path / "w" / "export" / "config.json", encoding="utf-8"))
    assert exported["hidden_dropout_prob"] == 0.0
    default, _ = pretrained.load_model_dir(str(tmp_path / "w01" / "model"))
    assert default.hidden_dropout_prob == 0.1
    assert kept.metrics["epochs"][0]["loss"] != straight.metrics["epochs"][0]["loss"]
    with pytest.raises(BertJaxError, match=r"^config.dropout: expected a value in \[0, 1\), "
                                           r"got 1.5"):
        validate(config(tiny, dropout=1.5))


def test_trimmed_batches_train_the_same_function(tiny, tmp_path):
    """config.trim_padding cuts each training batch to the bucket of its global batch's longest
    row: with dropout off the run equals one padded to max_seq_length up to float order, while
    the batches it computed hold less padding."""
    rows = list(csv.reader(open(tiny / "train.csv", encoding="utf-8")))
    with open(tmp_path / "short.csv", "w", encoding="utf-8", newline="") as f:
        csv.writer(f).writerows([rows[0]] + [[" ".join(text.split()[:3 + i % 25]), label]
                                             for i, (text, label) in enumerate(rows[1:])])
    short = dict(epochs=1, dropout=0.0, max_seq_length=64, log_every=1,
                 train_file=str(tmp_path / "short.csv"))
    cut = finetuner.finetune(config(tiny, **short), str(tmp_path / "cut"))
    full = finetuner.finetune(config(tiny, **short, trim_padding=False), str(tmp_path / "full"))
    a, b = cut.metrics["epochs"][0], full.metrics["epochs"][0]
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5) and a["accuracy"] == b["accuracy"]
    _, pa = pretrained.load_model_dir(str(tmp_path / "cut" / "model"))
    _, pb = pretrained.load_model_dir(str(tmp_path / "full" / "model"))
    import jax
    gap = max(float(np.abs(x - y).max()) for x, y in zip(jax.tree.leaves(pa), jax.tree.leaves(pb)))
    assert gap < 1e-5

    def padding(workdir):
        rows = [json.loads(line) for line in open(workdir / "metrics.jsonl", encoding="utf-8")]
        return [r["padding_share"] for r in rows if "padding_share" in r]
    cut_share, full_share = padding(tmp_path / "cut"), padding(tmp_path / "full")
    assert len(cut_share) == len(full_share) == 4  # a log a step
    assert all(c < f for c, f in zip(cut_share, full_share)), (cut_share, full_share)


def test_trimmed_length_is_the_global_batchs_bucket():
    """Every process cuts its slice to the bucket of the whole batch's longest row; per-row
    columns are kept, per-position ones (multiple choice's (B, C, L) too) are cut."""
    from bert_jax.data import batches
    rng = np.random.default_rng(0)
    n, L = 64, 128
    lengths = rng.integers(3, 100, n)
    mask = (np.arange(L)[None] < lengths[:, None]).astype(np.int32)
    data = {"input_ids": mask * 7, "attention_mask": mask, "labels": np.arange(n)}
    for step in range(6):
        rows = batches.batch_indices(n, step, 16, 3)
        want = -(-lengths[rows].max() // 16) * 16
        assert batches.trimmed_length(batches.row_lengths(data), step, 16, 3, L) == want
        for p in range(2):
            part = batches.cut_to(batches.batch_for_step(data, step, 16, 3, process_index=p,
                                                         process_count=2), want)
            assert part["input_ids"].shape == (8, want) and part["labels"].shape == (8,)
            assert part["attention_mask"].sum() == mask[rows[8 * p:8 * p + 8]].sum()
    choices = {"input_ids": np.zeros((4, 3, L), np.int32), "labels": np.zeros(4, np.int32),
               "attention_mask": np.zeros((4, 3, L), np.int32)}
    choices["attention_mask"][1, 2, :40] = 1
    assert list(batches.row_lengths(choices)) == [0, 40, 0, 0]
    assert batches.cut_to(choices, 48)["input_ids"].shape == (4, 3, 48)


def test_the_export_has_a_model_card_with_the_runs_scores(run, monkeypatch):
    """README.md in the export: huggingface_hub parses its header offline, and its model-index
    holds metrics.json's validation (best epoch) and test scores."""
    from huggingface_hub import ModelCard
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    workdir, _ = run
    saved = json.load(open(workdir / "metrics.json"))
    card = ModelCard.load(str(workdir / "export" / "README.md"))
    assert card.data.pipeline_tag == "text-classification" and card.data.library_name == \
        "transformers"
    found = {(r.dataset_split, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert found == {(split, name): saved[split][name] for split in ("validation", "test")
                     for name in ("accuracy", "macro_f1", "mcc")}
    assert "BertForSequenceClassification.from_pretrained" in card.text
    assert f"the kept epoch {saved['best_epoch']}" in card.text and "8 steps" in card.text
