"""Fine-tuning question answering, token classification and multiple choice end to end through
`bert-jax finetune` / `predict` on tiny synthetic data: the scores written, the Hugging Face
export loading in its transformers class and predicting what ours does, and a converted
all-MiniLM-L6-v2 learning a tagging task."""

import json
import os
import random
import shutil

import numpy as np
import pytest
import task_fixtures as fx

from bert_jax import cli
from bert_jax.model_files import model_dir
from bert_jax.data import tokenizer
from bert_jax.models import task_models


@pytest.fixture(scope="module")
def init(minilm_dir, tmp_path_factory):
    """A random 2-layer H32 Hugging Face BertModel with MiniLM's real vocabulary."""
    base = tmp_path_factory.mktemp("tasks")
    fx.random_bert_dir(base / "init", minilm_dir)
    return base


def finetune(workdir, init_dir, task, train, validation, *extra):
    code = cli.main(["finetune", "--task", task, "--init", str(init_dir), "--train", str(train),
                     "--validation", str(validation), "--workdir", str(workdir),
                     "--batch-size", "8", "--epochs", "2", "--learning-rate", "1e-3",
                     "--config.eval_batch_size=8", "--config.log_every=2", *extra])
    assert code == 0
    return json.load(open(os.path.join(workdir, "metrics.json")))


def hf_parity(workdir, architecture, inputs):
    """Our best model and its export in transformers give the same logits (≤ 1e-4), and the
    export loads with no missing or unexpected keys."""
    import torch
    import transformers
    config, params = model_dir.load_pretrained(str(workdir / "model"))
    assert task_models.architecture_of(params, config) == architecture
    ours = task_models.model_for_params(config, params).apply({"params": params}, *inputs)
    hf, info = getattr(transformers, architecture).from_pretrained(
        str(workdir / "export"), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        ids, types, mask = (torch.tensor(np.asarray(x), dtype=torch.long) for x in inputs)
        out = hf.eval()(input_ids=ids, token_type_ids=types, attention_mask=mask)
    theirs = (out.start_logits, out.end_logits) if architecture.endswith("Answering") else \
        (out.logits,)
    ours = ours if isinstance(ours, tuple) else (ours,)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), atol=1e-4)


QA_FLAGS = ("--max-seq-length", "40", "--doc-stride", "12")  # contexts of ~50 tokens: 2+ windows


@pytest.fixture(scope="module")
def qa_run(init, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("qa")
    files = fx.qa_files(tmp_path, train=48, validation=16)
    work = tmp_path / "qa"
    result = finetune(work, init / "init", "question-answering", files["train"],
                      files["validation"], *QA_FLAGS)
    return files, work, result


def test_question_answering(init, qa_run, tmp_path):
    files, work, result = qa_run
    assert result["task"] == "question-answering" and result["best_metric"] == "f1"
    assert 0 <= result["exact_match"] <= result["f1"] <= 100
    assert result["validation"]["total"] == 16 and result["validation"]["windows"] > 16
    predictions = json.load(open(work / "predictions.json"))
    records = {r["id"]: r for r in json.load(open(files["validation"]))["data"][0]["paragraphs"]
               for r in [dict(r["qas"][0], context=r["context"])]}
    assert set(predictions) == set(records)
    assert all(p in records[i]["context"] for i, p in predictions.items())
    # the export is a BertForQuestionAnswering that predicts what ours does
    tok = tokenizer.load(str(init / "init"))
    enc = tokenizer.encode_batch(tok, ["what is the colour of the car ?"],
                                 [records["q0"]["context"]], 40, pad=True)
    hf_parity(work, "BertForQuestionAnswering",
              (enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]))
    # predict: one jsonl line per question, the answer at its character offsets
    q = tmp_path / "questions.jsonl"
    q.write_text("".join(json.dumps({"id": i, "question": r["question"],
                                     "context": r["context"]}) + "\n"
                         for i, r in records.items()), encoding="utf-8")
    assert cli.main(["predict", str(work), "--input", str(q), "--output",
                     str(tmp_path / "a.jsonl"), "--max-seq-length", "40",
                     "--doc-stride", "12"]) == 0
    answers = [json.loads(line) for line in open(tmp_path / "a.jsonl")]
    assert [a["id"] for a in answers] == list(records)
    for a in answers:
        assert set(a) == {"id", "answer", "score", "start", "end"}
        assert records[a["id"]]["context"][a["start"]:a["end"]] == a["answer"]
        assert a["answer"] == predictions[a["id"]]  # the same rule as fine-tuning's scores


def test_question_answering_resumes_exactly(init, qa_run, tmp_path):
    """Rerun from the end of epoch 1: the same epochs, answers and best model as straight."""
    files, work, result = qa_run
    resumed = tmp_path / "resumed"
    shutil.copytree(work, resumed)
    step = result["epochs"][0]["step"]
    for p in (resumed / "checkpoints").iterdir():
        if p.name.isdigit() and int(p.name) > step:
            shutil.rmtree(p)
    (resumed / "epochs.json").write_text(json.dumps(result["epochs"][:1]))
    for name in ("export", "metrics.json"):
        shutil.rmtree(resumed / name) if name == "export" else os.remove(resumed / name)
    again = finetune(resumed, init / "init", "question-answering", files["train"],
                     files["validation"], *QA_FLAGS)
    assert again["epochs"] == result["epochs"]
    assert json.load(open(resumed / "predictions.json")) == \
        json.load(open(work / "predictions.json"))


def test_token_classification(init, tmp_path):
    files = fx.tagging_files(tmp_path, train=48, validation=16, length=30)
    work = tmp_path / "ner"
    # 30 words in windows of 16 tokens: every sentence is split, never cut
    result = finetune(work, init / "init", "token-classification", files["train"],
                      files["validation"], "--max-seq-length", "16", "--test",
                      str(files["validation"]))
    assert result["labels"] == ["O", "B-LOC", "B-PER", "I-PER"]
    for key in ("accuracy", "precision", "recall", "f1"):
        assert 0 <= result[key] <= 1
    assert result["validation"]["words"] == 16 * 30
    tok = tokenizer.load(str(init / "init"))
    enc = tokenizer.encode_batch(tok, ["john smith went to paris"], None, 16, pad=True)
    hf_parity(work, "BertForTokenClassification",
              (enc["input_ids"], enc["token_type_ids"], enc["attention_mask"]))
    # predict: a tag per word, CoNLL in, CoNLL or jsonl out
    sentences = [["john", "smith", "went", "to", "paris"], ["lucy"] * 20]
    (tmp_path / "in.conll").write_text("".join(
        "".join(w + "\n" for w in s) + "\n" for s in sentences), encoding="utf-8")
    for out in ("out.conll", "out.jsonl"):
        assert cli.main(["predict", str(work), "--input", str(tmp_path / "in.conll"),
                         "--output", str(tmp_path / out), "--max-seq-length", "16"]) == 0
    rows = [json.loads(line) for line in open(tmp_path / "out.jsonl")]
    assert [r["tokens"] for r in rows] == sentences
    assert all(len(r["tags"]) == len(r["tokens"]) and set(r["tags"]) <= set(result["labels"])
               for r in rows)
    conll = [line.split("\t") for line in open(tmp_path / "out.conll").read().split("\n")
             if line]
    assert [w for w, _ in conll] == sum(sentences, [])
    assert [t for _, t in conll] == sum((r["tags"] for r in rows), [])
    # the reported test scores are seqeval's (default: conlleval's; and strict) of what predict
    # writes for that file
    from seqeval import metrics
    from seqeval.scheme import IOB2

    from bert_jax.tasks.token_classification import data as tagging
    assert cli.main(["predict", str(work), "--input", str(files["validation"]), "--output",
                     str(tmp_path / "test.jsonl"), "--max-seq-length", "16"]) == 0
    gold = tagging.read_conll(str(files["validation"]))[1]
    predicted = [json.loads(line)["tags"] for line in open(tmp_path / "test.jsonl")]
    test = result["test"]
    assert test["f1"] == pytest.approx(metrics.f1_score(gold, predicted), abs=1e-12)
    assert test["strict_f1"] == pytest.approx(
        metrics.f1_score(gold, predicted, mode="strict", scheme=IOB2), abs=1e-12)
    assert test["precision"] == pytest.approx(metrics.precision_score(gold, predicted), abs=1e-12)


def test_multiple_choice(init, tmp_path):
    files = fx.swag_files(tmp_path, train=32, validation=16)
    work = tmp_path / "swag"
    result = finetune(work, init / "init", "multiple-choice", files["train"],
                      files["validation"], "--max-seq-length", "16")
    assert result["best_metric"] == "accuracy" and 0 <= result["accuracy"] <= 1
    assert result["validation"]["rows"] == 16
    tok = tokenizer.load(str(init / "init"))
    enc = tokenizer.encode_batch(tok, ["the car is"] * 4,
                                 [f"painted {c}" for c in fx.COLOURS[:4]], 16, pad=True)
    hf_parity(work, "BertForMultipleChoice",
              tuple(enc[k].reshape(1, 4, 16) for k in ("input_ids", "token_type_ids",
                                                       "attention_mask")))


def test_minilm_learns_a_tagging_task(minilm_dir, tmp_path):
    """Converted all-MiniLM-L6-v2 on tags that the words decide: ≥ 95% word accuracy."""
    files = fx.tagging_files(tmp_path, train=160, validation=40, seed=1)
    result = finetune(tmp_path / "run", minilm_dir, "token-classification", files["train"],
                      files["validation"], "--max-seq-length", "24",
                      "--learning-rate", "5e-4", "--batch-size", "16", "--epochs", "1")
    assert result["accuracy"] >= 0.95, result["validation"]
    assert result["f1"] >= 0.9, result["validation"]


def test_pooler_follows_the_model(init, tmp_path):
    """A pooler-free task model started from a checkpoint with a pooler leaves it out; a
    pooled one started from a pooler-free checkpoint gets a fresh one."""
    rng = random.Random(0)
    rows = [fx.tagged_sentence(rng) for _ in range(8)]
    fresh = {"bert": {"embeddings": {"w": np.zeros(2)}}, "classifier": {"b": np.zeros(3)}}
    loaded = {"bert": {"embeddings": {"w": np.ones(2)}, "pooler": {"w": np.ones(4)}}}
    merged = model_dir.merge_params(loaded, fresh, "ckpt")
    assert set(merged["bert"]) == {"embeddings"} and merged["bert"]["embeddings"]["w"][0] == 1
    fresh_pooled = {"bert": {"embeddings": {"w": np.zeros(2)}, "pooler": {"w": np.zeros(4)}}}
    merged = model_dir.merge_params({"bert": {"embeddings": {"w": np.ones(2)}}}, fresh_pooled,
                                    "ckpt")
    assert merged["bert"]["pooler"]["w"].sum() == 0 and len(rows) == 8


def test_multiple_choice_layouts(init, tmp_path):
    """Three endings and no start column (Social IQa's shape): (N, 3, L) pairs of the context
    and each ending alone."""
    from bert_jax.training.finetune_config import FinetuneConfig
    from bert_jax.tasks import TASKS
    rows = "question,ending0,ending1,ending2,label\n" + "".join(
        f"what colour is the {t},red,blue,green,{i % 3}\n" for i, t in enumerate(fx.THINGS))
    (tmp_path / "t.csv").write_text(rows, encoding="utf-8")
    cfg = FinetuneConfig(task="multiple-choice", train_file=str(tmp_path / "t.csv"),
                         validation_file=str(tmp_path / "t.csv"), max_seq_length=16,
                         choice_context_column="question", choice_start_column="",
                         num_choices=3)
    tok = tokenizer.load(str(init / "init"))
    task_data = TASKS["multiple-choice"].load(cfg, tok)
    assert task_data.train["input_ids"].shape == (8, 3, 16)
    assert list(task_data.train["labels"]) == [i % 3 for i in range(8)]
    ids = task_data.train["input_ids"][0, 2]
    assert tok.decode([int(i) for i in ids if i]) == "what colour is the car green"
