"""Pretraining rows from a prepared set: NSP pairs (the bundled novels and a synthetic corpus whose
words name their sentence), packed rows, the held-out split, per-epoch redraws, and batches as a
pure function of (seed, step)."""

import logging
import os
import random
import types

import numpy as np
import pytest
from tokenizers import Tokenizer, models

from bert_jax.data import batches, masking, pair_plans, prepared_set, text_sources
from bert_jax.data import tokenizer as tok_lib
from bert_jax.data.heldout import HeldOut, split_heldout
from bert_jax.data.pretraining_batches import OBJECTIVES, PretrainingBatches
from bert_jax.data.sentences import split_sentences
from bert_jax.data.tokenize_corpus import tokenize_shard
from bert_jax.errors import BertJaxError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AUSTEN = os.path.join(ROOT, "data", "austen", "*.txt")
L = 128
PAD, CLS, SEP = 0, 101, 102  # the released vocabulary's
CLS_SYN, SEP_SYN = 2, 3  # the synthetic vocabularies' (tok_lib.SPECIAL_TOKENS order)
LOGGER = "bert_jax.data.pretraining_batches"


def _prepared(files, tokenizer, out, **kwargs) -> prepared_set.PreparedSet:
    tokenize_shard(text_sources.list_sources(files), tokenizer, str(out), **kwargs)
    return prepared_set.PreparedSet.open(str(out))


def _synthetic_set(root, sentence_counts, repeat=(1, 6), seed=0):
    """A file of documents separated by blank lines, a sentence a line: sentence i of document
    d is the word "d{d}s{i}" (repeated), so every token names where it came from; and a
    vocabulary of exactly those words. Returns (the prepared set, its tokenizer)."""
    rng = random.Random(seed)
    docs = ["\n".join(" ".join([f"d{d}s{i}"] * rng.randint(*repeat)) for i in range(count))
            for d, count in enumerate(sentence_counts)]
    (root / "corpus.txt").write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    words = [f"d{d}s{i}" for d, count in enumerate(sentence_counts) for i in range(count)]
    (root / "vocab.txt").write_text("\n".join(list(tok_lib.SPECIAL_TOKENS) + words) + "\n",
                                    encoding="utf-8")
    tokenizer = tok_lib.load(str(root / "vocab.txt"))
    data = _prepared(str(root / "corpus.txt"), tokenizer, root / "set", documents="blank_line",
                     sentence_per_line=True)
    return data, tokenizer


def _maker(data, tokenizer, **defaults):
    specials = tok_lib.special_token_ids(tokenizer)

    def make(**kwargs):
        args = dict(defaults, **kwargs)
        return PretrainingBatches(data, specials, objective=args.pop("objective", "mlm+nsp"),
                               **args)
    return make


def _words(ids, tokenizer):
    """Each token of `ids` as (doc, sentence) for a word "d{doc}s{i}", else its text."""
    id_to_token = {i: t for t, i in tokenizer.get_vocab().items()}
    return [id_to_token[i] if id_to_token[i].startswith("[") else
            tuple(map(int, id_to_token[i][1:].split("s"))) for i in ids]


def _sentences(rows, tokenizer):
    """The set of (doc, sentence) in each row."""
    return [{w for w in _words(row, tokenizer) if isinstance(w, tuple)}
            for row in rows["input_ids"]]


def _epoch(data, epoch):
    """Every example of training epoch `epoch`, in plan order."""
    return data.rows(data.plan(epoch), np.arange(data.epoch_rows(epoch)), data.train_docs)


@pytest.fixture(scope="module")
def austen(minilm_dir, tmp_path_factory):
    tokenizer = tok_lib.load(os.path.join(minilm_dir, "vocab.txt"))
    data = _prepared(AUSTEN, tokenizer, tmp_path_factory.mktemp("austen") / "set")
    pairs = PretrainingBatches(data, tok_lib.special_token_ids(tokenizer), objective="mlm+nsp",
                            max_seq_length=L, seed=1)
    return pairs, [_epoch(pairs, 0), _epoch(pairs, 1)]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """40 documents of 2-30 sentences, and PretrainingBatches on them (L = 32, seed 3)."""
    rng = random.Random(0)
    counts = [rng.randint(2, 30) for _ in range(40)]
    data, tokenizer = _synthetic_set(tmp_path_factory.mktemp("synthetic"), counts)
    return types.SimpleNamespace(data=data, tokenizer=tokenizer, counts=counts,
                                 make=_maker(data, tokenizer, max_seq_length=32, seed=3))


@pytest.fixture(scope="module")
def many_short(tmp_path_factory):
    """300 documents of 1-5 sentences of 1-3 words: where packing pays."""
    rng = random.Random(1)
    counts = [rng.randint(1, 5) for _ in range(300)]
    data, tokenizer = _synthetic_set(tmp_path_factory.mktemp("short"), counts, repeat=(1, 3))
    return types.SimpleNamespace(data=data, tokenizer=tokenizer, counts=counts,
                                 make=_maker(data, tokenizer, max_seq_length=32, seed=2))


def test_austen_examples_are_well_formed(austen):
    data, epochs = austen
    arrays = {k: np.concatenate([e[k] for e in epochs]) for k in epochs[0]}
    ids, types_, attention = (arrays[k] for k in ("input_ids", "token_type_ids",
                                                   "attention_mask"))
    assert ids.shape == types_.shape == attention.shape == (len(ids), L)
    assert all(v.dtype == np.int32 for v in arrays.values())
    length = attention.sum(1)
    assert attention.sum() > 2_000_000 and length.max() <= L
    np.testing.assert_array_equal(attention, np.arange(L) < length[:, None])  # 1s, then padding
    assert (ids[attention == 0] == PAD).all() and (types_[attention == 0] == 0).all()
    assert (ids[:, 0] == CLS).all() and (ids[np.arange(len(ids)), length - 1] == SEP).all()
    assert ((ids == SEP).sum(1) == 2).all() and not (ids[:, 1:] == CLS).any()
    first_sep = np.argmax(ids == SEP, axis=1)
    expected_types = (np.arange(L) > first_sep[:, None]) & (attention == 1)
    np.testing.assert_array_equal(types_, expected_types)  # 0 up to the first [SEP], 1 after
    assert (first_sep >= 2).all() and (length - first_sep >= 3).all()  # A and B non-empty
    assert (length < L // 2).mean() > 0.01  # short_seq_prob makes some short pairs


def test_nsp_balance_in_every_epoch(austen):
    data, epochs = austen
    assert data.data.manifest["documents"] == data.data.num_documents == 6  # a file each
    for epoch in epochs:
        random_next = epoch["next_sentence_labels"].mean()
        print(f"{len(epoch['input_ids'])} examples, {epoch['attention_mask'].sum()} tokens, "
              f"{random_next:.4f} random next")
        assert abs(random_next - 0.5) < 0.02
        assert set(np.unique(epoch["next_sentence_labels"])) == {0, 1}
    rows = [data.epoch_rows(0), data.epoch_rows(1)]  # pairs are drawn again: a few more or less
    assert rows[0] != rows[1] and abs(rows[0] - rows[1]) < 0.05 * rows[0]


def test_real_next_is_the_continuation_random_next_another_document(synthetic):
    data = synthetic.make()
    real = random_ok = n_random = 0
    for epoch in range(5):
        rows = _epoch(data, epoch)
        for row, label in zip(rows["input_ids"], rows["next_sentence_labels"]):
            words = [w for w in _words(row, synthetic.tokenizer) if w != "[PAD]"]
            sep = words.index("[SEP]")
            a, b = words[1:sep], words[sep + 1:-1]
            assert len({d for d, _ in a}) == 1 and len({d for d, _ in b}) == 1
            if label == 0:  # B continues A in the same document
                assert a[0][0] == b[0][0] and max(s for _, s in a) < min(s for _, s in b)
                real += 1
            else:
                n_random += 1
                random_ok += a[0][0] != b[0][0]
    assert real > 100 and random_ok >= 0.99 * n_random


def test_pair_plans_short_seq_prob_and_truncation():
    rng = random.Random(0)
    lengths = np.array([rng.randint(1, 8) for _ in range(1000)], np.int32)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    docs = [range(50 * d, 50 * (d + 1)) for d in range(20)]
    full = pair_plans.plan_pairs(docs, lengths, starts, 64, 0.0, seed=0, epoch=0)
    short = pair_plans.plan_pairs(docs, lengths, starts, 64, 1.0, seed=0, epoch=0)
    for plan in (full, short):
        a, b = plan.a_stop - plan.a_start, plan.b_stop - plan.b_start
        assert (a > 0).all() and (b > 0).all() and (a + b <= 61).all()
    size = [(p.a_stop - p.a_start + p.b_stop - p.b_start).mean() for p in (short, full)]
    assert size[0] < 0.75 * size[1] and len(short) > len(full)
    again = pair_plans.plan_pairs(docs, lengths, starts, 64, 0.1, seed=5, epoch=2)
    same = pair_plans.plan_pairs(docs, lengths, starts, 64, 0.1, seed=5, epoch=2)
    for field in ("a_start", "a_stop", "b_start", "b_stop", "label"):
        np.testing.assert_array_equal(getattr(again, field), getattr(same, field))
    a_cut, b_cut = pair_plans.truncation(3, 200, 61, random.Random(0))  # only B: 142 tokens
    assert a_cut == 0 and (b_cut >> 32) + (b_cut & 0xFFFFFFFF) == 142 and b_cut >> 32 > 0


def test_sentence_order_pairs_are_consecutive_segments_of_one_document_half_swapped():
    """mlm+sop (ALBERT): B is always A's real continuation in the same document, and the pair
    is swapped (label 1) half the time; the NSP plan is what it was (same draws)."""
    rng = random.Random(3)
    lengths = np.array([rng.randint(1, 8) for _ in range(20_000)], np.int32)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    docs = [range(50 * d, 50 * (d + 1)) for d in range(400)]
    sop = pair_plans.plan_pairs(docs, lengths, starts, 512, 0.1, seed=0, epoch=0,
                                sentence_order=True)
    doc_of = np.searchsorted(starts[[d.stop for d in docs]], sop.a_start, side="right")
    assert (doc_of == np.searchsorted(starts[[d.stop for d in docs]], sop.b_start,
                                      side="right")).all()  # one document
    in_order, swapped = sop.label == 0, sop.label == 1
    assert (sop.a_stop[in_order] == sop.b_start[in_order]).all()  # no cut at 512 tokens
    assert (sop.b_stop[swapped] == sop.a_start[swapped]).all()
    assert 0.4 < swapped.mean() < 0.6 and len(sop) > 100
    nsp = pair_plans.plan_pairs(docs, lengths, starts, 512, 0.1, seed=0, epoch=0)
    default = pair_plans.plan_pairs(docs, lengths, starts, 512, 0.1, 0, 0, False)
    np.testing.assert_array_equal(nsp.b_start, default.b_start)
    random_b = nsp.label == 1  # NSP's random B: mostly another document
    assert (np.searchsorted(starts[[d.stop for d in docs]], nsp.b_start[random_b], side="right")
            != np.searchsorted(starts[[d.stop for d in docs]], nsp.a_start[random_b],
                               side="right")).mean() > 0.9


def test_split_sentences():
    text = 'It was Mr. Knightley.  "Stop!" she said--Mrs.\nElton came. J. Smith wrote. OK?'
    assert split_sentences(text) == ['It was Mr. Knightley.', '"Stop!" she said--Mrs. Elton came.',
                                     'J. Smith wrote.', 'OK?']
    assert split_sentences("one two\n three  four\n", sentence_per_line=True) == [
        "one two", "three four"]


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


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_heldout_rows_share_no_sentence_with_training(synthetic, objective):
    data = synthetic.make(objective=objective, eval_fraction=0.25)
    train = set().union(*(s for e in range(3) for s in _sentences(_epoch(data, e),
                                                                    synthetic.tokenizer)))
    heldout_rows = _sentences(data.heldout(), synthetic.tokenizer)
    held = set().union(*heldout_rows)
    assert train.isdisjoint(held)  # not one sentence on both sides, in any epoch
    shared = {d for d, _ in train} & {d for d, _ in held}
    assert len(shared) <= 1  # at most one document, its head training and its tail held out
    for doc in shared:
        assert max(s for d, s in train if d == doc) < min(s for d, s in held if d == doc)
    target = round(0.25 * sum(synthetic.counts))
    assert sum(map(len, data.heldout_docs)) == target
    assert sum(map(len, data.train_docs)) == sum(synthetic.counts) - target
    assert len(data.heldout_docs) >= 5  # small documents are held out whole
    if objective == "mlm":  # the held-out stream is every held-out sentence
        assert len(held) == target
    else:
        assert 0.9 * target <= len(held) <= target
        share = len(heldout_rows) / (len(heldout_rows) + data.epoch_rows(0))
        assert abs(share - 0.25) < 0.05
    assert data.heldout_summary.startswith("held out ") and f"{target} of " in \
        data.heldout_summary


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_one_file_one_document_gives_both_splits(tmp_path, synthetic, caplog, objective):
    words = [f"d{d}s{i}" for d, count in enumerate(synthetic.counts) for i in range(count)]
    corpus = tmp_path / "one.txt"  # sentence k is words[k], three times
    corpus.write_text("\n".join(f"{w} {w} {w}" for w in words[:200]) + "\n", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        data = PretrainingBatches(
            _prepared(str(corpus), synthetic.tokenizer, tmp_path / "set", sentence_per_line=True),
            tok_lib.special_token_ids(synthetic.tokenizer), objective=objective,
            max_seq_length=16, eval_fraction=0.1)
    index = {tuple(map(int, w[1:].split("s"))): k for k, w in enumerate(words)}
    train_rows = [_epoch(data, e) for e in range(3)]
    train = set().union(*(s for rows in train_rows for s in _sentences(rows,
                                                                         synthetic.tokenizer)))
    held = set().union(*_sentences(data.heldout(), synthetic.tokenizer))
    assert max(index[s] for s in train) == 179 and min(index[s] for s in held) == 180
    if objective == "mlm+nsp":  # both sides have real and random next pairs
        for rows in (train_rows[0], data.heldout()):
            assert set(rows["next_sentence_labels"]) == {0, 1}
    else:
        assert len(held) == 20
    assert f"1 document, 200 sentences, 600 tokens ({corpus} as one document)" in caplog.text
    summary = f"held out the last 20 sentences of {corpus}: 20 of 200 sentences (10.0%)"
    assert summary in caplog.text and data.heldout_summary == summary


def test_no_eval_fraction_no_heldout_and_deterministic_split(synthetic):
    for objective in OBJECTIVES:
        empty = synthetic.make(objective=objective).heldout()
        assert empty["input_ids"].shape == (0, 32)
        assert all(v.dtype == np.int32 and len(v) == 0 for v in empty.values())
    first = synthetic.make(eval_fraction=0.2).heldout()
    again = synthetic.make(eval_fraction=0.2).heldout()
    other = synthetic.make(eval_fraction=0.2, seed=4).heldout()
    for key, value in first.items():
        assert value.tobytes() == again[key].tobytes()
    assert set().union(*_sentences(other, synthetic.tokenizer)) != \
        set().union(*_sentences(first, synthetic.tokenizer))
    some = synthetic.make(eval_fraction=0.2).heldout(max_rows=5)  # the first of the same order
    for key, value in some.items():
        np.testing.assert_array_equal(value, first[key][:5])
    for name, bad, message in (("eval_fraction", 1.0, "a fraction in"),
                               ("eval_fraction", -0.1, "a fraction in"),
                               ("eval_fraction", "0.1", "a fraction in"),
                               ("short_seq_prob", 1.5, "a probability in"),
                               ("max_seq_length", 4, "an integer ≥ 5"),
                               ("seed", -1, "an integer ≥ 0"),
                               ("objective", "nsp", "mlm\\+nsp or mlm")):
        with pytest.raises(BertJaxError, match=f"^{name}: expected {message}"):
            synthetic.make(**{name: bad})


def test_documents_too_short_to_pair_are_reported(tmp_path, synthetic, caplog):
    specials = tok_lib.special_token_ids(synthetic.tokenizer)

    def pretraining(name, text):
        (tmp_path / name).write_text(text, encoding="utf-8")
        data = _prepared(str(tmp_path / name), synthetic.tokenizer, tmp_path / f"{name}.set",
                         documents="blank_line", sentence_per_line=True)
        return PretrainingBatches(data, specials, objective="mlm+nsp", max_seq_length=32)

    with caplog.at_level(logging.WARNING, logger=LOGGER):  # "\x07": a paragraph of no tokens
        data = pretraining("short.txt", "d1s1\nd1s2\n\nd2s1\n\nd3s1\n\n\x07\n")
    assert "2 of 3 documents are too short to pair" in caplog.text
    assert data.data.num_documents == 3
    assert _epoch(data, 0)["next_sentence_labels"].sum() >= 2  # still random-next examples
    with pytest.raises(BertJaxError, match="every document is a single sentence"):
        pretraining("singles.txt", "d1s1\n\nd2s1\n")
    with pytest.raises(BertJaxError, match=r"no_tokens.txt.set: no text to make examples of"):
        pretraining("no_tokens.txt", "\x07\n")


def test_a_vocabulary_without_mask_is_refused():
    no_mask = Tokenizer(models.WordPiece({"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3},
                                         unk_token="[UNK]"))
    with pytest.raises(BertJaxError, match=r"^tokenizer: vocabulary has no \[MASK\] token"):
        masking.MaskingSpec.from_tokenizer(no_mask)


def test_pairs_are_drawn_again_every_epoch(synthetic):
    data = synthetic.make()
    plans = [data.plan(0), data.plan(1)]
    spans = [set(zip(p.a_start, p.a_stop, p.b_start, p.b_stop)) for p in plans]
    assert len(spans[0] & spans[1]) < 0.1 * len(spans[0])  # new pairs, not a reshuffle
    assert not np.array_equal(plans[0].label, plans[1].label)
    fresh, other_seed = synthetic.make(), synthetic.make(seed=4)
    for epoch, plan in enumerate(plans):
        for name in ("a_start", "a_stop", "b_start", "b_stop", "label"):
            np.testing.assert_array_equal(getattr(fresh.plan(epoch), name), getattr(plan, name))
        assert set(zip(other_seed.plan(epoch).a_start, other_seed.plan(epoch).b_start)) != \
            set(zip(plan.a_start, plan.b_start))
    # global steps run through epochs of different sizes: the sum of their steps
    size = 4
    steps = [data.epoch_rows(e) // size for e in range(3)]
    assert data.locate(steps[0] - 1, size) == (0, steps[0] - 1)
    assert data.locate(steps[0], size) == (1, 0)
    assert data.locate(steps[0] + steps[1] + 2, size) == (2, 2)
    batch = data.train_batch(steps[0] + steps[1] + 2, size)
    order = batches.epoch_permutation(data.epoch_rows(2), 3, 2)
    expected = data.rows(data.plan(2), order[2 * size:3 * size], data.train_docs)
    for key, value in expected.items():
        np.testing.assert_array_equal(batch[key], value)


def test_packed_rows_are_full_and_keep_document_order(many_short):
    data, tokenizer = many_short.make(objective="mlm"), many_short.tokenizer
    rows = _epoch(data, 0)
    assert set(rows) == {"input_ids", "token_type_ids", "attention_mask"}  # no NSP labels
    ids, mask = rows["input_ids"], rows["attention_mask"]
    length = mask.sum(1)
    assert (mask[:-1] == 1).all()  # every row but the last is full
    np.testing.assert_array_equal(mask, np.arange(32) < length[:, None])
    assert (rows["token_type_ids"] == 0).all() and (ids[mask == 0] == 0).all()
    assert (ids[:, 0] == CLS_SYN).all() and (ids[np.arange(len(ids)), length - 1] == SEP_SYN).all()
    assert not (ids[:, 1:] == CLS_SYN).any()
    pairs = _epoch(many_short.make(), 0)["attention_mask"].mean()
    print(f"{mask.mean():.4f} of positions hold tokens packed, {pairs:.4f} as NSP pairs")
    assert mask.mean() >= 0.97 and pairs < 0.8
    # The rows, cut at [CLS] and the row's [SEP], are one stream: the documents in plan order,
    # each followed by one [SEP]
    plan = data.plan(0)
    stream = np.concatenate([row[1:n - 1] for row, n in zip(ids, length)])
    documents = [data.data.tokens(int(data.data.starts[d.start]), int(data.data.starts[d.stop]))
                 for d in (data.train_docs[k] for k in plan.order)]
    np.testing.assert_array_equal(stream, np.concatenate([np.append(d, SEP_SYN)
                                                          for d in documents]))
    words = _words(stream, tokenizer)
    seps = [i for i, w in enumerate(words) if w == "[SEP]"]
    assert len(seps) == len(documents) == 300 and seps[-1] == len(words) - 1
    ends = [words[i - 1] for i in seps]  # each [SEP] follows a document's last sentence
    assert all(s == many_short.counts[d] - 1 for d, s in ends)
    runs = [words[i + 1:j] for i, j in zip([-1] + seps, seps)]  # no [SEP] inside a document
    assert [{d for d, _ in run} for run in runs] == [{int(k)} for k in plan.order]
    # epoch 1 orders (and so cuts) the stream anew
    again = _epoch(data, 1)["input_ids"]
    assert not np.array_equal(data.plan(1).order, plan.order)
    assert len({r.tobytes() for r in again} & {r.tobytes() for r in ids}) < 0.1 * len(ids)


def test_masking_never_chooses_cls_or_sep_on_packed_rows(many_short):
    import jax

    data = many_short.make(objective="mlm")
    rows = _epoch(data, 0)
    inner = ((rows["input_ids"][:, 1:-1] == SEP_SYN).sum(1) >= 2)  # rows with document ends
    batch = {k: v[inner][:16] for k, v in rows.items()}
    assert len(batch["input_ids"]) == 16
    spec = masking.MaskingSpec.from_tokenizer(many_short.tokenizer, max_predictions_per_seq=5)
    chosen = 0
    for key in range(8):
        out = masking.mask_batch(jax.random.PRNGKey(key), jax.tree.map(jax.numpy.asarray, batch),
                                 spec)
        positions = np.asarray(out["masked_lm_positions"])
        weights = np.asarray(out["masked_lm_weights"])
        original = np.take_along_axis(batch["input_ids"], positions, 1)[weights > 0]
        assert not np.isin(original, [CLS_SYN, SEP_SYN, 0]).any()
        np.testing.assert_array_equal(np.asarray(out["masked_lm_ids"])[weights > 0], original)
        chosen += len(original)
    assert chosen == 8 * 16 * 4  # round(0.15 × 27..28 maskable tokens) = 4 a row


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_batches_are_a_pure_function_of_seed_and_step(synthetic, objective):
    data, size = synthetic.make(objective=objective, seed=7, eval_fraction=0.1), 8
    steps = [data.epoch_rows(e) // size for e in range(2)]
    seen = [data.train_batch(step, size) for step in range(steps[0] + steps[1] + 3)]
    fresh = synthetic.make(objective=objective, seed=7, eval_fraction=0.1)
    for step in reversed(range(len(seen))):  # another instance, in another order
        batch = fresh.train_batch(step, size)
        assert batch.keys() == seen[step].keys()
        assert batch["input_ids"].shape == (size, 32) and batch["input_ids"].dtype == np.int32
        for key in batch:
            assert batch[key].tobytes() == seen[step][key].tobytes()
    for start, count in ((0, steps[0]), (steps[0], steps[1])):  # no row twice in an epoch
        epoch = np.concatenate([b["input_ids"] for b in seen[start:start + count]])
        assert len({row.tobytes() for row in epoch}) == count * size
    other = synthetic.make(objective=objective, seed=8, eval_fraction=0.1).train_batch(0, size)
    assert not np.array_equal(other["input_ids"], seen[0]["input_ids"])
    for count in (2, 4):  # processes' slices make up the global batch
        for step in (1, steps[0] + 1):
            slices = [data.train_batch(step, size, p, count) for p in range(count)]
            for key, value in data.train_batch(step, size).items():
                np.testing.assert_array_equal(np.concatenate([s[key] for s in slices]), value)
    for args, message in (((0, size, 0, 3), "batch_size: 8 does not split into 3 processes"),
                          ((0, size, 4, 4), r"\(process_index 4\)"),
                          ((0, size, 0, 0), "batch_size, process_count: expected integers"),
                          ((0, 0), "batch_size, process_count: expected integers"),
                          ((-1, size), "step: expected an integer"),
                          ((0, data.epoch_rows(0) + 1), "larger than the")):
        with pytest.raises(BertJaxError, match=message) as error:
            data.train_batch(*args)
        assert "\n" not in str(error.value)
