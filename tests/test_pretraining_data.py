"""NSP pairs from the bundled corpus and a synthetic one; cache; batches; bad input."""

import json
import logging
import os
import random

import numpy as np
import pytest
from tokenizers import Tokenizer, models

from bert_jax.data import batches
from bert_jax.data import pretraining_examples as pretraining_data
from bert_jax.data import tokenizer as tok_lib
from bert_jax.errors import BertJaxError
from bert_jax.data.pretraining_examples import build_pretraining_dataset, create_instances
from bert_jax.data.heldout import HeldOut, split_heldout
from bert_jax.data.sentences import split_sentences

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN = os.path.join(ROOT, "data", "austen", "*.txt")
L = 128
PAD, CLS, SEP = 0, 101, 102

# Tokenizing forks worker processes; when other tests have started JAX's threads first, JAX warns.
# The workers run only Python and the Rust tokenizer, never JAX, so the warning does not apply.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")


@pytest.fixture(scope="module")
def austen(minilm_dir, tmp_path_factory):
    tokenizer = tok_lib.load(os.path.join(minilm_dir, "vocab.txt"))
    cache_dir = str(tmp_path_factory.mktemp("cache"))
    dataset = build_pretraining_dataset(AUSTEN, tokenizer, max_seq_length=L, seed=1,
                                        dupe_factor=2, cache_dir=cache_dir)["train"]
    return dataset, batches.as_arrays(dataset)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """40 documents of numbered one-word sentences "d{doc}s{i}", a sentence a line; its vocab."""
    root = tmp_path_factory.mktemp("synthetic")
    rng = random.Random(0)
    docs = [[" ".join([f"d{d}s{i}"] * rng.randint(1, 6)) for i in range(rng.randint(2, 30))]
            for d in range(40)]
    (root / "corpus.txt").write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n",
                                     encoding="utf-8")
    words = [f"d{d}s{i}" for d in range(40) for i in range(30)]
    (root / "vocab.txt").write_text("\n".join(list(tok_lib.SPECIAL_TOKENS) + words) + "\n",
                                    encoding="utf-8")
    tokenizer = tok_lib.load(str(root / "vocab.txt"))
    return str(root / "corpus.txt"), tokenizer, root


def _build_synthetic(synthetic, cache, split="train", **overrides):
    """The split's columns; split=None: the whole DatasetDict."""
    corpus, tokenizer, root = synthetic
    args = dict(max_seq_length=32, seed=3, documents="blank_line", sentence_per_line=True,
                dupe_factor=5, cache_dir=str(root / cache))
    args.update(overrides)
    dataset = build_pretraining_dataset(corpus, tokenizer, **args)
    return dataset if split is None else batches.as_arrays(dataset[split])


def test_austen_examples_are_well_formed(austen):
    dataset, arrays = austen
    ids, types, attention = arrays["input_ids"], arrays["token_type_ids"], arrays["attention_mask"]
    assert ids.shape == types.shape == attention.shape == (len(dataset), L)
    length = attention.sum(1)
    assert attention.sum() > 1_000_000 and length.max() <= L
    np.testing.assert_array_equal(attention, np.arange(L) < length[:, None])  # 1s, then padding
    assert (ids[attention == 0] == PAD).all() and (types[attention == 0] == 0).all()
    assert (ids[:, 0] == CLS).all() and (ids[np.arange(len(ids)), length - 1] == SEP).all()
    assert ((ids == SEP).sum(1) == 2).all() and not (ids[:, 1:] == CLS).any()
    first_sep = np.argmax(ids == SEP, axis=1)
    expected_types = (np.arange(L) > first_sep[:, None]) & (attention == 1)
    np.testing.assert_array_equal(types, expected_types)  # 0 up to the first [SEP], 1 after
    assert (first_sep >= 2).all() and (length - first_sep >= 3).all()  # A and B non-empty
    assert ((length < L // 2).mean() > 0.01)  # short_seq_prob makes some short pairs


def test_nsp_balance_and_stats(austen):
    dataset, arrays = austen
    random_next = arrays["next_sentence_labels"].mean()
    print(f"{len(dataset)} examples, {arrays['attention_mask'].sum()} tokens, "
          f"{random_next:.4f} random next")
    assert abs(random_next - 0.5) < 0.02
    assert set(np.unique(arrays["next_sentence_labels"])) == {0, 1}
    stats = json.loads(dataset.info.description)
    assert stats["documents"] == 6 and stats["examples"] == len(dataset)


def test_real_next_is_the_continuation_random_next_another_document(synthetic):
    arrays = _build_synthetic(synthetic, "cache-a")
    id_to_token = {i: t for t, i in synthetic[1].get_vocab().items()}
    real = random_ok = n_random = 0
    for row, label in zip(arrays["input_ids"], arrays["next_sentence_labels"]):
        tokens = [id_to_token[i] for i in row if i != PAD]
        sep = tokens.index("[SEP]")
        a = [tuple(map(int, t[1:].split("s"))) for t in tokens[1:sep]]
        b = [tuple(map(int, t[1:].split("s"))) for t in tokens[sep + 1:-1]]
        assert len({d for d, _ in a}) == 1 and len({d for d, _ in b}) == 1
        if label == 0:  # B continues A in the same document
            assert a[0][0] == b[0][0] and max(s for _, s in a) < min(s for _, s in b)
            real += 1
        else:
            n_random += 1
            random_ok += a[0][0] != b[0][0]
    assert real > 100 and random_ok >= 0.99 * n_random
    assert len(arrays["input_ids"]) == real + n_random and arrays["input_ids"].shape[1] == 32


def test_same_seed_same_examples_and_cache(synthetic, monkeypatch):
    first = _build_synthetic(synthetic, "cache-b", num_proc=1)
    rebuilt = _build_synthetic(synthetic, "cache-c", num_proc=2)  # no cache; 2 processes
    for key in first:
        np.testing.assert_array_equal(first[key], rebuilt[key])
    other_seed = _build_synthetic(synthetic, "cache-b", seed=4)
    assert not np.array_equal(other_seed["input_ids"], first["input_ids"])

    def fail(*args, **kwargs):
        raise AssertionError("a cached build must not create examples again")

    monkeypatch.setattr(pretraining_data, "create_instances", fail)
    cached = _build_synthetic(synthetic, "cache-b")
    for key in first:
        np.testing.assert_array_equal(first[key], cached[key])
    with pytest.raises(AssertionError, match="must not create"):  # a new parameter: new build
        _build_synthetic(synthetic, "cache-b", short_seq_prob=0.5)


def test_create_instances_short_seq_prob_and_truncation():
    rng = random.Random(0)
    docs = [[[rng.randrange(5, 99)] * rng.randint(1, 8) for _ in range(50)] for _ in range(20)]
    full = create_instances(docs, 64, short_seq_prob=0.0, dupe_factor=1, seed=0)
    short = create_instances(docs, 64, short_seq_prob=1.0, dupe_factor=1, seed=0)
    assert all(len(a) + len(b) <= 61 and a and b for a, b, _ in full + short)
    mean = lambda xs: sum(len(a) + len(b) for a, b, _ in xs) / len(xs)  # noqa: E731
    assert mean(short) < 0.75 * mean(full) and len(short) > len(full)
    assert create_instances(docs, 64, 0.1, 2, seed=5) == create_instances(docs, 64, 0.1, 2, 5)


def test_split_sentences():
    text = 'It was Mr. Knightley.  "Stop!" she said--Mrs.\nElton came. J. Smith wrote. OK?'
    assert split_sentences(text) == ['It was Mr. Knightley.', '"Stop!" she said--Mrs. Elton came.',
                                     'J. Smith wrote.', 'OK?']
    assert split_sentences("one two\n three  four\n", sentence_per_line=True) == [
        "one two", "three four"]


def test_batches_are_a_pure_function_of_seed_and_step(austen):
    dataset, arrays = austen
    n, size = len(dataset), 512
    per_epoch = batches.steps_per_epoch(arrays, size)
    assert per_epoch == n // size
    iterator = batches.iterate_batches(arrays, size, seed=7)
    seen = []
    for step in range(2 * per_epoch + 3):
        batch = next(iterator)
        fresh = batches.batch_for_step(arrays, step, size, seed=7)
        assert set(batch) == {"input_ids", "token_type_ids", "attention_mask",
                              "next_sentence_labels"}
        assert batch["input_ids"].shape == (size, L) and batch["input_ids"].dtype == np.int32
        assert batch["next_sentence_labels"].shape == (size,)
        for key in batch:
            np.testing.assert_array_equal(batch[key], fresh[key])
        seen.append(batches.batch_indices(n, step, size, seed=7))
    epoch0 = np.concatenate(seen[:per_epoch])
    epoch1 = np.concatenate(seen[per_epoch:2 * per_epoch])
    assert len(np.unique(epoch0)) == len(epoch0) == per_epoch * size  # no repeats in an epoch
    assert not np.array_equal(epoch0, epoch1)  # each epoch is a new permutation
    # the Dataset itself serves the same batches as its arrays
    from_dataset = batches.batch_for_step(dataset, per_epoch + 1, size, seed=7)
    for key, value in batches.batch_for_step(arrays, per_epoch + 1, size, seed=7).items():
        np.testing.assert_array_equal(from_dataset[key], value)
    assert not np.array_equal(batches.batch_indices(n, 0, size, seed=8), seen[0])
    # processes' slices make up the global batch
    slices = [batches.batch_for_step(arrays, 5, size, 7, process_index=p, process_count=4)
              for p in range(4)]
    np.testing.assert_array_equal(np.concatenate([s["input_ids"] for s in slices]),
                                  batches.batch_for_step(arrays, 5, size, 7)["input_ids"])
    with pytest.raises(BertJaxError, match="batch_size"):
        batches.batch_for_step(arrays, 0, size, 7, process_index=0, process_count=3)
    with pytest.raises(BertJaxError, match="larger than"):
        batches.batch_for_step(arrays, 0, n + 1, 7)


def test_bad_input_names_the_file(tmp_path, synthetic):
    tokenizer = synthetic[1]
    empty, latin1 = tmp_path / "empty.txt", tmp_path / "latin1.txt"
    empty.write_bytes(b"")
    latin1.write_bytes(b"d1s1 caf\xe9\n\nd2s2\n")
    for files, message in ((str(tmp_path / "missing.txt"), "missing.txt: file not found"),
                           (str(tmp_path / "none-*.txt"), r"none-\*.txt: no file matches"),
                           (str(empty), "empty.txt: file is empty"),
                           ([synthetic[0], str(latin1)], "latin1.txt: not UTF-8")):
        with pytest.raises(BertJaxError, match=message) as error:
            build_pretraining_dataset(files, tokenizer, cache_dir=str(tmp_path / "c"))
        assert "\n" not in str(error.value)
    no_mask = Tokenizer(models.WordPiece({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3},
                                         unk_token="[UNK]"))
    with pytest.raises(BertJaxError, match=r"no \[MASK\] token"):
        build_pretraining_dataset(synthetic[0], no_mask, cache_dir=str(tmp_path / "c"))


def test_documents_too_short_to_pair_are_reported(tmp_path, synthetic, caplog):
    tokenizer = synthetic[1]
    corpus = tmp_path / "short.txt"
    corpus.write_text("d1s1\nd1s2\n\nd2s1\n\nd3s1\n\n\x07\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="bert_jax.data.pretraining_examples"):
        arrays = batches.as_arrays(build_pretraining_dataset(
            str(corpus), tokenizer, documents="blank_line", sentence_per_line=True,
            cache_dir=str(tmp_path / "c"))["train"])
    assert "2 of 3 documents are too short to pair" in caplog.text
    assert "1 of 4 documents have no tokens" in caplog.text
    assert arrays["next_sentence_labels"].sum() >= 2  # they still give random-next examples
    one_sentence_each = tmp_path / "singles.txt"
    one_sentence_each.write_text("d1s1\n\nd2s1\n", encoding="utf-8")
    with pytest.raises(BertJaxError, match="every document is a single sentence"):
        build_pretraining_dataset(str(one_sentence_each), tokenizer, documents="blank_line",
                                  sentence_per_line=True, cache_dir=str(tmp_path / "c"))
    no_tokens = tmp_path / "no_tokens.txt"
    no_tokens.write_text("\x07\n", encoding="utf-8")
    with pytest.raises(BertJaxError, match="no_tokens.txt: no text"):
        build_pretraining_dataset(str(no_tokens), tokenizer, cache_dir=str(tmp_path / "c"))


def _sources(arrays, tokenizer):
    """(doc, sentence) of every word in each example: words "d{doc}s{i}" name their sentence."""
    id_to_token = {i: t for t, i in tokenizer.get_vocab().items()}
    return [{tuple(map(int, id_to_token[i][1:].split("s"))) for i in row if i > SEP}
            for row in arrays["input_ids"]]


def test_split_heldout_whole_documents_then_one_tail():
    rng = random.Random(0)
    docs = [[(d, i) for i in range(rng.randint(1, 20))] for d in range(60)]
    total = sum(map(len, docs))
    for fraction in (0.02, 0.1, 0.3):
        train, heldout, held = split_heldout(docs, fraction, seed=1)
        assert held.sentences == sum(map(len, heldout)) == round(fraction * total)
        assert sorted(s for d in train + heldout for s in d) == sorted(s for d in docs for s in d)
        assert [docs[i] for i in held.whole] == heldout[:len(held.whole)]  # whole, unchanged
        assert len(heldout) == len(held.whole) + (held.tail > 0)
        if held.tail:  # the tail document's head trains; only its last sentences are held out
            tail_doc = docs[held.tail_document]
            assert heldout[-1] == tail_doc[-held.tail:] and tail_doc[:-held.tail] in train
            assert 0 < held.tail < len(tail_doc)
        assert {d for d, _ in sum(heldout[:len(held.whole)], [])}.isdisjoint(
            d for d, _ in sum(train, []))
    assert split_heldout(docs, 0.1, seed=1) == split_heldout(docs, 0.1, seed=1)
    assert split_heldout(docs, 0.1, seed=2)[2].whole != split_heldout(docs, 0.1, seed=1)[2].whole
    pairs = [[(d, i) for i in range(2)] for d in range(50)]  # small documents: all held whole
    assert split_heldout(pairs, 0.1, seed=0)[2] == HeldOut(
        split_heldout(pairs, 0.1, seed=0)[2].whole, None, 0, 10, 100)
    train, heldout, held = split_heldout([list(range(100))], 0.1, seed=0)  # one document
    assert (train, heldout, held.whole) == ([list(range(90))], [list(range(90, 100))], ())
    assert held.describe(["x.txt"]) == "held out the last 10 sentences of x.txt: " \
                                       "10 of 100 sentences (10.0%)"
    assert split_heldout(docs, 0.0, seed=0)[:2] == (docs, [])
    with pytest.raises(BertJaxError, match="eval_fraction: 0.99 of 10 sentences leaves none"):
        split_heldout([list(range(10))], 0.99, seed=0)


def test_heldout_examples_share_no_sentence_with_training(synthetic):
    dataset = _build_synthetic(synthetic, "cache-h", split=None, eval_fraction=0.25)
    train = _sources(batches.as_arrays(dataset["train"]), synthetic[1])
    heldout = _sources(batches.as_arrays(dataset["heldout"]), synthetic[1])
    train_sentences, held_sentences = set().union(*train), set().union(*heldout)
    assert train_sentences.isdisjoint(held_sentences)  # not one sentence on both sides
    shared = {d for d, _ in train_sentences} & {d for d, _ in held_sentences}
    assert len(shared) <= 1  # at most one document, its head training and its tail held out
    for doc in shared:
        assert max(s for d, s in train_sentences if d == doc) < min(
            s for d, s in held_sentences if d == doc)
    stats = json.loads(dataset["heldout"].info.description)
    total = stats["sentences"]
    assert stats["heldout"]["sentences"] == round(0.25 * total) == stats["split_sentences"]
    assert 0.9 * round(0.25 * total) <= len(held_sentences) <= round(0.25 * total)
    assert stats["heldout"]["whole_documents"] >= 5  # small documents are held out whole
    assert (stats["heldout"]["tail_sentences"] > 0) == bool(shared)
    assert abs(len(heldout) / (len(train) + len(heldout)) - 0.25) < 0.05
    assert stats["split"] == "heldout" and stats["examples"] == len(heldout)
    assert json.loads(dataset["train"].info.description)["heldout"] == stats["heldout"]


def test_one_file_one_document_builds_both_splits(tmp_path, synthetic, caplog):
    words = [f"d{d}s{i}" for d in range(40) for i in range(30)][:200]  # sentence k: words[k]
    corpus = tmp_path / "one.txt"
    corpus.write_text("\n".join(f"{w} {w} {w}" for w in words) + "\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="bert_jax.data.pretraining_examples"):
        dataset = build_pretraining_dataset(str(corpus), synthetic[1], max_seq_length=16,
                                            sentence_per_line=True, eval_fraction=0.1,
                                            dupe_factor=3, cache_dir=str(tmp_path / "c"))
    index = {(d, i): 30 * d + i for d in range(40) for i in range(30)}
    splits = {name: batches.as_arrays(dataset[name]) for name in ("train", "heldout")}
    train, heldout = (_sources(splits[name], synthetic[1]) for name in ("train", "heldout"))
    assert max(index[s] for s in set().union(*train)) == 179
    assert min(index[s] for s in set().union(*heldout)) >= 180
    for arrays in splits.values():  # both sides have real and random next pairs
        assert set(arrays["next_sentence_labels"]) == {0, 1}
    assert (f"1 document ({corpus} as one document): random-next segments come from elsewhere "
            f"in the same document") in caplog.text
    summary = f"held out the last 20 sentences of {corpus}: 20 of 200 sentences (10.0%)"
    assert summary in caplog.text
    assert json.loads(dataset["heldout"].info.description)["heldout"]["summary"] == summary


def test_no_eval_fraction_no_heldout_and_deterministic_split(synthetic, monkeypatch):
    dataset = _build_synthetic(synthetic, "cache-a", split=None)
    empty = batches.as_arrays(dataset["heldout"])
    assert len(dataset["heldout"]) == 0 and empty["input_ids"].shape == (0, 32)
    assert all(v.dtype == np.int32 for v in empty.values())
    assert json.loads(dataset["train"].info.description)["heldout"]["sentences"] == 0
    first = _build_synthetic(synthetic, "cache-d", split=None, eval_fraction=0.2)
    again = _build_synthetic(synthetic, "cache-e", split=None, eval_fraction=0.2)
    other = _build_synthetic(synthetic, "cache-e", split=None, eval_fraction=0.2, seed=4)
    for name in ("train", "heldout"):
        for key, value in batches.as_arrays(first[name]).items():
            np.testing.assert_array_equal(value, batches.as_arrays(again[name])[key])
    assert set().union(*_sources(batches.as_arrays(other["heldout"]), synthetic[1])) != \
        set().union(*_sources(batches.as_arrays(first["heldout"]), synthetic[1]))
    monkeypatch.setattr(pretraining_data, "create_instances", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):  # eval_fraction is part of the cache key
        _build_synthetic(synthetic, "cache-d", eval_fraction=0.3)
    for bad in (1.0, -0.1, "0.1"):
        with pytest.raises(BertJaxError, match="eval_fraction: expected a fraction"):
            _build_synthetic(synthetic, "cache-d", eval_fraction=bad)
