"""tasks/question_answering (SQuAD): reading (SQuAD JSON, HF layout), windows equal to
transformers', answer positions, and post-processing equal to a reference built on
transformers' BertForQuestionAnswering logits."""

import collections
import json
import os
import re

import numpy as np
import pytest

from bert_jax.tasks.question_answering import answers as qa_answers, data as squad
from bert_jax.tasks.question_answering import windows as qa_windows
from bert_jax.tasks.question_answering.data import QAExample
from bert_jax.data.tokenizer import load
from bert_jax.errors import BertJaxError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def toks(minilm_dir):
    """(ours, transformers') tokenizers on the released MiniLM vocabulary."""
    import transformers
    hf = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
    assert len(hf) == 30522  # transformers 5 can silently build a 5-token vocabulary
    return load(minilm_dir), hf


def _paragraphs(count, min_words=100):
    """Real prose: the first long paragraphs of Emma, one line each."""
    text = open(os.path.join(ROOT, "data", "austen", "emma.txt"), encoding="utf-8").read()
    paras = [" ".join(p.split()) for p in text.split("\n\n")]
    return [p for p in paras if len(p.split()) >= min_words][:count]


def _examples(count=6, seed=0):
    """Long contexts with word-aligned answers anywhere in them, one unanswerable, and one
    with accents, CJK and a dash (offsets must still point into the original text)."""
    rng = np.random.default_rng(seed)
    contexts = _paragraphs(count - 1)
    contexts.append("Café Müller — naïve résumé of 北京 and Zürich; " + contexts[0])
    out = []
    for i, context in enumerate(contexts):
        words = [m.span() for m in re.finditer(r"\S+", context)]
        a = int(rng.integers(len(words) - 4))
        b = a + int(rng.integers(0, 4))
        s, e = words[a][0], words[b][1]
        answers = ((context[s:e],), (s,)) if i != 2 else ((), ())
        out.append(QAExample(f"q{i}", f"What did person {i} do in the story, and why?",
                             context, *answers))
    return out


# -- reading -----------------------------------------------------------------------------------

SQUAD_V2 = {"version": "v2.0", "data": [{"title": "Paris", "paragraphs": [
    {"context": "Paris is the capital of France.",
     "qas": [{"id": "a1", "question": "What is the capital of France?",
              "answers": [{"text": "Paris", "answer_start": 0},
                          {"text": "Paris", "answer_start": 0}]},
             {"id": "a2", "question": "What is the capital of Spain?", "is_impossible": True,
              "answers": [], "plausible_answers": [{"text": "Paris", "answer_start": 0}]}]},
    {"context": "Berlin is in Germany.",
     "qas": [{"id": "a3", "question": "Where is Berlin?", "is_impossible": False,
              "answers": [{"text": "Germany", "answer_start": 13}]}]}]}]}


def test_read_squad_json(tmp_path):
    path = tmp_path / "dev-v2.json"
    path.write_text(json.dumps(SQUAD_V2))
    got = squad.read_examples(str(path))
    assert got == [
        QAExample("a1", "What is the capital of France?", "Paris is the capital of France.",
                  ("Paris", "Paris"), (0, 0)),
        QAExample("a2", "What is the capital of Spain?", "Paris is the capital of France.",
                  (), ()),
        QAExample("a3", "Where is Berlin?", "Berlin is in Germany.", ("Germany",), (13,))]
    squad.check_examples(got, str(path), training=False)
    v1 = {"data": [{"paragraphs": [SQUAD_V2["data"][0]["paragraphs"][1]]}]}
    path.write_text(json.dumps(v1))
    assert [e.id for e in squad.read_examples(str(path))] == ["a3"]


def test_read_hf_layout_jsonl_csv_json(tmp_path):
    rows = [{"id": "x1", "title": "t", "question": "Where is Berlin?",
             "context": "Berlin is in Germany.",
             "answers": {"text": ["Germany", "in Germany"], "answer_start": [13, 10]}},
            {"id": "x2", "title": "t", "question": "Where is Rome?",
             "context": "Berlin is in Germany.", "answers": {"text": [], "answer_start": []}}]
    expected = [QAExample("x1", "Where is Berlin?", "Berlin is in Germany.",
                          ("Germany", "in Germany"), (13, 10)),
                QAExample("x2", "Where is Rome?", "Berlin is in Germany.", (), ())]
    jsonl = tmp_path / "train.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert squad.read_examples(str(jsonl)) == expected
    records = tmp_path / "records.json"
    records.write_text(json.dumps(rows))
    assert squad.read_examples(str(records)) == expected
    import csv
    with open(tmp_path / "train.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, ["id", "question", "context", "answers"])
        writer.writeheader()
        for r in rows:
            writer.writerow({**{k: r[k] for k in ("id", "question", "context")},
                             "answers": json.dumps(r["answers"])})
    assert squad.read_examples(str(tmp_path / "train.csv")) == expected
    import datasets
    table = datasets.Dataset.from_list(rows)  # the hub's layout: answers a struct of lists
    assert squad.examples_from_table(table, "squad/train") == expected
    table.to_parquet(str(tmp_path / "train.parquet"))
    assert squad.read_examples(str(tmp_path / "train.parquet")) == expected
    splits = squad.load_splits("", "", {"train": str(jsonl), "validation": str(records),
                                        "test": ""})
    assert {k: v[0] for k, v in splits.items()} == {"train": str(jsonl),
                                                     "validation": str(records)}
    assert splits["validation"][1] == expected


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(BertJaxError) as info:
        fn(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_bad_input_one_line(tmp_path, toks):
    bad = json.loads(json.dumps(SQUAD_V2))
    del bad["data"][0]["paragraphs"][1]["qas"][0]["question"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    message = _error(squad.read_examples, str(path))
    assert str(path) in message and "question 'a3'" in message and "'question'" in message

    jsonl = tmp_path / "nocontext.jsonl"
    jsonl.write_text(json.dumps({"id": "1", "question": "q?", "answers": {
        "text": [], "answer_start": []}}) + "\n")
    assert "no column 'context'" in _error(squad.read_examples, str(jsonl))

    ex = [QAExample("q1", "Who?", "Paris and London", ("Paris",), (0,)),
          QAExample("q2", "Who?", "Paris and London", ("London",), (10,)),
          QAExample("q3", "Who?", "Paris and London", ("Paris",), (10,))]
    message = _error(squad.check_examples, ex, "train.json", training=True)
    assert message == ("train.json: question 'q3' (row 3): answer 'Paris' is not at "
                       "answer_start 10 (context has 'Londo')")
    assert "duplicate id" in _error(squad.check_examples, [ex[0], ex[0]], "d", training=False)
    assert "empty question" in _error(squad.check_examples,
                                      [QAExample("q", " ", "c", (), ())], "d", training=False)
    # training reads only the first answer; evaluation checks every gold answer
    second_wrong = [QAExample("q1", "Who?", "Paris and London", ("Paris", "London"),
                              (0, 3))]
    squad.check_examples(second_wrong, "d", training=True)
    assert "'London' is not at answer_start 3" in _error(squad.check_examples, second_wrong,
                                                         "d", training=False)

    tok = toks[0]
    long_q = QAExample("q7", " ".join(["why"] * 30), "Paris and London", (), ())
    message = _error(qa_windows.features, tok, [ex[0], long_q], 32, 4, training=False, where="d")
    assert message == ("d: question 'q7' has 30 tokens; max_seq_length 32 leaves no room "
                       "for the context")
    long_c = QAExample("q8", "Who?", " ".join(["word"] * 50), (), ())  # room: 32 - 2 - 3 = 27
    assert _error(qa_windows.features, tok, [long_c], 32, 27, training=False).startswith(
        "doc_stride: 27 must be less than the 27 context tokens")
    assert len(qa_windows.features(tok, [long_c], 32, 26, training=False)["input_ids"]) == 24
    assert tok.truncation is None and tok.padding is None  # settings restored after a refusal


# -- features ----------------------------------------------------------------------------------

def _hf_windows(hf, examples, max_length, stride):
    return hf([e.question for e in examples], [e.context for e in examples],
              truncation="only_second", max_length=max_length, stride=stride,
              return_overflowing_tokens=True, return_offsets_mapping=True,
              padding="max_length")


@pytest.mark.parametrize("max_length,stride", [(48, 12), (64, 0), (40, 20), (33, 5)])
def test_windows_equal_transformers(toks, max_length, stride):
    tok, hf = toks
    examples = _examples()
    feats = qa_windows.features(tok, examples, max_length, stride, training=True)
    enc = _hf_windows(hf, examples, max_length, stride)
    n = len(enc["input_ids"])
    assert np.bincount(feats["example_index"]).min() >= 3  # every context needs 3+ windows
    for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert feats[key].dtype == np.int32 and feats[key].shape == (n, max_length)
        assert feats[key].tolist() == enc[key], key
    assert feats["example_index"].tolist() == enc["overflow_to_sample_mapping"]
    expected = [[list(o) if s == 1 else [-1, -1] for o, s in zip(offs, enc.sequence_ids(w))]
                for w, offs in enumerate(enc["offset_mapping"])]
    assert feats["offsets"].shape == (n, max_length, 2)
    assert feats["offsets"].tolist() == expected

    # positions: a straightforward scan (run_qa's rule) and the decoded answer text
    inside = 0
    for w in range(n):
        ex = examples[feats["example_index"][w]]
        seq, offs = enc.sequence_ids(w), enc["offset_mapping"][w]
        ctx = [t for t in range(max_length) if seq[t] == 1]
        start, end = feats["start_positions"][w], feats["end_positions"][w]
        if not ex.answers:
            assert start == end == 0
            continue
        s_char = ex.answer_starts[0]
        e_char = s_char + len(ex.answers[0])
        if not (offs[ctx[0]][0] <= s_char and offs[ctx[-1]][1] >= e_char):
            assert start == end == 0
            continue
        inside += 1
        assert start == max(t for t in ctx if offs[t][0] <= s_char)
        assert end == min(t for t in ctx if offs[t][1] >= e_char)
        assert ex.context[offs[start][0]:offs[end][1]] == ex.answers[0]
    assert inside >= len(examples) - 1
    assert "start_positions" not in qa_windows.features(tok, examples[:1], 48, 12, training=False)


@pytest.mark.parametrize("max_length,stride", [(48, 12), (33, 5)])
def test_windows_are_encoded_a_few_windows_at_a_time_with_the_same_result(toks, max_length,
                                                                          stride, monkeypatch):
    """Work is chunked by window count (a long context's windows, not a count of questions,
    fill a chunk); the count each example is given is the count it makes."""
    tok, _ = toks
    examples = _examples()
    whole = qa_windows.features(tok, examples, max_length, stride, training=True)
    monkeypatch.setattr(qa_windows, "_ENCODE_WINDOWS", 4)
    chunked = qa_windows.features(tok, examples, max_length, stride, training=True)
    assert whole.keys() == chunked.keys()
    for key in whole:
        assert np.array_equal(whole[key], chunked[key]), key
    counted = qa_windows._check_lengths(tok, examples, max_length, stride,
                                   tok.num_special_tokens_to_add(True), "test")
    assert counted == np.bincount(whole["example_index"]).tolist()
    assert list(qa_windows._chunks([3, 1, 5, 2, 2], 4)) == [(0, 2), (2, 3), (3, 5)]


def _squad_sample(tmp_path):
    """A real SQuAD-format file: Emma's paragraphs (one of five, over 384 tokens) with three
    to four questions each (a short one, a long one that leaves a window little room, one with
    accents), a paragraph with accents, CJK and a literal [SEP], and one shorter than any
    window; read as predict reads it."""
    paragraphs = _paragraphs(8)
    contexts = paragraphs[:3] + [" ".join(paragraphs[3:])] + [
        "Café Müller — naïve résumé of 北京 and Zürich; she said [SEP] and Ëmma smiled. "
        + _paragraphs(1)[0], "Emma Woodhouse, handsome, clever, and rich."]
    long = ("What did Miss Woodhouse think about the résumé of Mr. Knightley's long visit to "
            "Hartfield, and why did she say so to Harriet Smith before dinner? ")
    paragraphs = [{"context": c, "qas": [
        {"id": f"p{p}-short", "question": "Who?"},
        {"id": f"p{p}-long", "question": long},
        {"id": f"p{p}-accents", "question": f"Où est allée Ëmma in part {p}, naïvely?"}]
        + ([{"id": f"p{p}-x", "question": "And then?"}] if p % 2 else [])}
        for p, c in enumerate(contexts)]
    path = tmp_path / "sample.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "Emma", "paragraphs":
                                                            paragraphs}]}), encoding="utf-8")
    examples = squad.read_squad_questions(str(path))
    assert len(examples) == 21 and len({e.context for e in examples}) == 6
    return examples


def _vocabularies(minilm_dir):
    """Uncased, accents stripped (MiniLM's vocab.txt and its tokenizer.json, the bundled Austen
    vocabulary) and the same vocab.txt read cased (case and accents kept: such words are [UNK])."""
    from bert_jax import resources
    return {"minilm vocab.txt": load(os.path.join(minilm_dir, "vocab.txt")),
            "minilm tokenizer.json": load(os.path.join(minilm_dir, "tokenizer.json")),
            "austen": load(resources.bundled("austen/vocab")),
            "minilm vocab.txt, cased": load(os.path.join(minilm_dir, "vocab.txt"),
                                            lowercase=False)}


def _pair_windows(tok, examples, max_length, stride):
    """Every window encoded as a pair by the tokenizer itself, as before windows were put
    together from each context's tokens."""
    windows = qa_windows.Windows(tok, examples, max_length, stride, "test")
    parts = [qa_windows._pairs(tok, examples, lo, hi, max_length, stride)
             for lo, hi in qa_windows._chunks(windows.counts, 1000)]
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


@pytest.mark.parametrize("max_length,stride", [(64, 16), (96, 0), (128, 48), (384, 128)])
def test_windows_put_together_from_each_context_tokenized_once_equal_the_tokenizers(
        minilm_dir, tmp_path, monkeypatch, max_length, stride):
    """Windows built from the question's tokens and a slice of its context's cached tokens are
    the tokenizer's own pair windows (truncation "only_second", stride, overflow): ids, type
    ids, mask, offsets and example index, whole and in chunks that split a question's windows;
    the answers on them are the same; each context is tokenized once for all its questions."""
    import bert_jax.tasks.question_answering as qa_module
    examples = _squad_sample(tmp_path)
    for name, tok in _vocabularies(minilm_dir).items():
        reference = _pair_windows(tok, examples, max_length, stride)
        counts = np.bincount(reference["example_index"], minlength=len(examples))
        assert counts.min() == 1 and counts.max() >= 3, name  # short context; several windows
        for size in (1000, 7):
            monkeypatch.setattr(qa_windows, "_ENCODE_WINDOWS", size)
            windows = qa_windows.Windows(tok, examples, max_length, stride, "test")
            assert windows.template is not None
            chunks = list(windows)
            got = {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]}
            assert got.keys() == reference.keys()
            for key in reference:
                assert got[key].dtype == reference[key].dtype, (name, key)
                assert np.array_equal(got[key], reference[key]), (name, size, key)
            assert len(windows) == len(reference["input_ids"])
            assert max(len(c["input_ids"]) for c in chunks) <= size
            expected = qa_answers.best_answers(*_row_logits(reference), reference, examples,
                                               20, 30)
            assert qa_module.best_spans(_row_logits, windows, 20, 30).answers() == expected
            assert len({a["answer"] for a in expected}) >= 10

    contexts = {e.context for e in examples}

    class Counting:  # the tokenizer, counting the characters of contexts it tokenizes
        def __init__(self, tok):
            self.tok, self.chars = tok, 0

        def encode_batch(self, inputs, **kwargs):
            self.chars += sum(len(x[1]) if isinstance(x, tuple) else len(x) for x in inputs
                              if isinstance(x, tuple) or x in contexts)
            return self.tok.encode_batch(inputs, **kwargs)

        def __getattr__(self, name):
            return getattr(self.tok, name)

    tok = Counting(_vocabularies(minilm_dir)["austen"])
    monkeypatch.setattr(qa_windows, "_ENCODE_WINDOWS", 7)
    windows = qa_windows.Windows(tok, examples, max_length, stride, "test")
    for _ in range(2):
        list(windows)
    assert tok.chars == sum(len(c) for c in contexts)  # once, however many passes


def test_a_tokenizer_with_another_pair_layout_is_encoded_pair_by_pair(minilm_dir, tmp_path):
    """A pair template that is not specials, question, specials, context, specials (here the
    context comes first) is not put together from parts: the tokenizer encodes each pair."""
    from tokenizers import processors
    examples = _squad_sample(tmp_path)[:6]
    tok = load(os.path.join(minilm_dir, "vocab.txt"))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A:0 [SEP]:0", pair="[CLS] $B:1 [SEP]:1 $A:0 [SEP]:0",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    windows = qa_windows.Windows(tok, examples, 64, 16, "test")
    assert windows.template is None
    got = qa_windows.features(tok, examples, 64, 16, training=False)
    reference = _pair_windows(tok, examples, 64, 16)
    for key in reference:
        assert np.array_equal(got[key], reference[key]), key
    assert tok.truncation is None and tok.padding is None


def test_answer_at_window_edges(toks):
    """An answer across a window boundary is labelled only in the window that holds it; one in
    a window's last context token points there (run_qa's scan would run past the [SEP])."""
    tok, _ = toks
    context = "one two three four five six seven eight nine ten"
    across = QAExample("a", "which?", context, ("four five six",), (context.index("four"),))
    last = QAExample("b", "which?", context, ("four",), (context.index("four"),))
    tok.enable_truncation(5)  # a caller's settings: ignored here, then restored
    tok.enable_padding(length=50)
    try:
        feats = qa_windows.features(tok, [across, last], 9, 2, training=True)  # 4 context tokens
        assert tok.truncation["max_length"] == 5 and tok.padding["length"] == 50
    finally:
        tok.no_truncation()
        tok.no_padding()
    words = [[context[s:e] for s, e in offs if s >= 0] for offs in feats["offsets"]]
    assert words[:4] == [["one", "two", "three", "four"], ["three", "four", "five", "six"],
                         ["five", "six", "seven", "eight"], ["seven", "eight", "nine", "ten"]]
    # window layout: [CLS] which ? [SEP] c0 c1 c2 c3 [SEP]
    assert feats["start_positions"].tolist() == [0, 5, 0, 0, 7, 5, 0, 0]
    assert feats["end_positions"].tolist() == [0, 7, 0, 0, 7, 5, 0, 0]


# -- post-processing ---------------------------------------------------------------------------

def _reference(examples, enc, start_logits, end_logits, n_best, max_len):
    """HF utils_qa's loop over windows, written plainly: per example (text, start, end,
    best span score or None, min null score)."""
    windows = collections.defaultdict(list)
    for w, e in enumerate(enc["overflow_to_sample_mapping"]):
        windows[e].append(w)
    out = []
    for e, ex in enumerate(examples):
        null, prelim = None, []
        for w in windows[e]:
            seq, offs = enc.sequence_ids(w), enc["offset_mapping"][w]
            sl, el = start_logits[w], end_logits[w]
            score = float(sl[0]) + float(el[0])
            null = score if null is None or score < null else null
            starts = sorted(range(len(sl)), key=lambda j: -sl[j])[:n_best]
            ends = sorted(range(len(el)), key=lambda j: -el[j])[:n_best]
            for s in starts:
                for t in ends:
                    if seq[s] != 1 or seq[t] != 1 or t < s or t - s + 1 > max_len:
                        continue
                    prelim.append((float(sl[s]) + float(el[t]), offs[s][0], offs[t][1]))
        if prelim:
            best = sorted(prelim, key=lambda p: p[0], reverse=True)[0]  # stable: first kept
            out.append((ex.context[best[1]:best[2]], best[1], best[2], best[0], null))
        else:
            out.append(("", -1, -1, None, null))
    return out


def test_answers_equal_reference_on_transformers_logits(toks):
    """The acceptance test: spans from a random-init transformers BertForQuestionAnswering's
    logits (same weights, same windows) equal an independent reference post-processing."""
    import torch
    import transformers
    tok, hf = toks
    examples = _examples(8, seed=1)
    max_length, stride = 48, 12
    enc = _hf_windows(hf, examples, max_length, stride)
    feats = qa_windows.features(tok, examples, max_length, stride, training=False)
    assert feats["input_ids"].tolist() == enc["input_ids"]
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=37,
                                     max_position_embeddings=64)
    model = transformers.BertForQuestionAnswering(config).eval()
    with torch.no_grad():
        model.qa_outputs.weight.mul_(100.0)  # spread the logits: no near-ties by accident
        out = model(**{k: torch.tensor(enc[k]) for k in
                       ("input_ids", "token_type_ids", "attention_mask")})
    start_logits, end_logits = out.start_logits.numpy(), out.end_logits.numpy()
    assert np.bincount(feats["example_index"]).min() >= 3

    for n_best, max_len in ((20, 30), (3, 4), (1, 2)):
        ref = _reference(examples, enc, start_logits, end_logits, n_best, max_len)
        got = qa_answers.best_answers(start_logits, end_logits, feats, examples, n_best=n_best,
                                      max_answer_length=max_len)
        assert [g["id"] for g in got] == [ex.id for ex in examples]
        for g, (text, s, e, score, null) in zip(got, ref):
            assert (g["answer"], g["start"], g["end"]) == (text, s, e)
            assert g["score"] == pytest.approx(null if score is None else score, abs=1e-5)
        if (n_best, max_len) == (20, 30):
            assert all(g["answer"] for g in got)  # 20 candidates always hold a valid pair
        # v2: "" when null - best > threshold; thresholds chosen to split the examples
        diffs = [null - score for _, _, _, score, null in ref if score is not None]
        for threshold in (float(np.median(diffs)), min(diffs) - 1.0, max(diffs) + 1.0):
            got = qa_answers.best_answers(start_logits, end_logits, feats, examples,
                                          n_best=n_best, max_answer_length=max_len,
                                          version_2=True, null_threshold=threshold)
            for g, (text, s, e, score, null) in zip(got, ref):
                if score is None or null - score > threshold:
                    assert (g["answer"], g["start"], g["end"]) == ("", -1, -1)
                    assert g["score"] == pytest.approx(null, abs=1e-5)
                else:
                    assert (g["answer"], g["start"], g["end"]) == (text, s, e)
                    assert g["score"] == pytest.approx(score, abs=1e-5)


CONTEXT = "alpha beta gamma delta epsilon"
# one window: [CLS] q [SEP] alpha beta gamma delta epsilon [SEP] [PAD]
OFFSETS = [(-1, -1)] * 3 + [(0, 5), (6, 10), (11, 16), (17, 22), (23, 30)] + [(-1, -1)] * 2


def _feats(windows):
    return {"offsets": np.array([OFFSETS] * windows, np.int32),
            "example_index": np.zeros(windows, np.int32)}


def test_n_best_and_max_answer_length():
    ex = [QAExample("h", "q", CONTEXT, (), ())]
    start = np.array([[0, 9, 0, 1, 2, 0.5, 8, 0.2, 0, 0]])  # by rank: 1 (question), 6, 4
    end = np.array([[0, 0, 0, 0.1, 7, 0.3, 0.2, 6, 9, 0]])  # by rank: 8 ([SEP]), 4, 7
    answer = lambda **kw: qa_answers.best_answers(start, end, _feats(1), ex, **kw)[0]  # noqa
    got = answer(n_best=3)
    assert (got["answer"], got["score"], got["start"], got["end"]) == ("delta epsilon", 14.0,
                                                                       17, 30)
    for n_best in (1, 2):  # no valid pair among the top 1 / top 2: no answer, null score
        assert answer(n_best=n_best) == {"id": "h", "answer": "", "score": 0.0, "start": -1,
                                         "end": -1, "null_score": 0.0}
    got = answer(n_best=3, max_answer_length=1)  # (6, 7) is two tokens: (4, 4) is left
    assert (got["answer"], got["score"]) == ("beta", 9.0)


def test_version_2_null_score():
    ex = [QAExample("h", "q", CONTEXT, ("beta",), (6,))]
    start = np.array([[6, 0, 0, 1, 2, 0.5, 8, 0.2, 0, 0],
                      [10, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    end = np.array([[6, 0, 0, 0.1, 7, 0.3, 0.2, 6, 9, 0],
                    [10, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    # null = min(6 + 6, 10 + 10) = 12; best span (6, 7) = 14; diff = -2
    run = lambda t: qa_answers.best_answers(start, end, _feats(2), ex, version_2=True,  # noqa
                                            null_threshold=t)[0]
    assert (run(0.0)["answer"], run(0.0)["score"], run(0.0)["null_score"]) == (
        "delta epsilon", 14.0, 12.0)
    assert run(-2.0)["answer"] == "delta epsilon"  # diff must exceed the threshold
    assert (run(-2.5)["answer"], run(-2.5)["score"]) == ("", 12.0)
    v1 = qa_answers.best_answers(start, end, _feats(2), ex)[0]  # v1 ignores the null score
    assert v1["answer"] == "delta epsilon"


def test_ties_and_window_boundary(toks):
    ex = [QAExample("h", "q", CONTEXT, (), ())]
    start = np.zeros((2, 10))
    end = np.zeros((2, 10))
    start[0, 4], end[0, 4] = 5, 5  # window 0: "beta", 10
    start[1, 6], end[1, 6] = 5, 5  # window 1: "delta", 10: the earlier window wins the tie
    assert qa_answers.best_answers(start, end, _feats(2), ex)[0]["answer"] == "beta"
    start = np.array([[0, 0, 0, 0, 5, 0, 5, 0, 0, 0]], float)  # tied starts 4 and 6
    end = np.array([[0, 0, 0, 0, 0, 0, 0, 5, 0, 0]], float)
    got = qa_answers.best_answers(start, end, _feats(1), ex, n_best=1)[0]
    assert got["answer"] == "beta gamma delta epsilon"  # the earlier position ranks first

    # an answer across a window boundary comes from the window that holds all of it
    tok, _ = toks
    context = "one two three four five six seven eight nine ten"
    example = QAExample("a", "which?", context, ("four five six",), (context.index("four"),))
    feats = qa_windows.features(tok, [example], 9, 2, training=False)
    words = np.array([[context[s:e] if s >= 0 else "" for s, e in offs]
                      for offs in feats["offsets"]])
    start = np.where(words == "four", 5.0, 0.0)
    end = np.where(words == "six", 5.0, 0.0)
    got = qa_answers.best_answers(start, end, feats, [example])[0]
    assert (got["answer"], got["score"]) == ("four five six", 10.0)


def test_post_processing_refuses_mismatched_inputs():
    ex = [QAExample("h", "q", CONTEXT, (), ())]
    assert "do not fit" in _error(qa_answers.best_answers, np.zeros((1, 9)), np.zeros((1, 9)),
                                  _feats(1), ex)
    bad = np.zeros((1, 10))
    bad[0, 3] = np.nan
    assert "start_logits: NaN" in _error(qa_answers.best_answers, bad, np.zeros((1, 10)),
                                         _feats(1), ex)
    assert "no window" in _error(qa_answers.best_answers, np.zeros((1, 10)), np.zeros((1, 10)),
                                 _feats(1), ex * 2)


# -- a chunk of windows at a time ------------------------------------------------------------

def _row_logits(inputs):
    """Span logits that depend on each window's own tokens only (a stand-in model): the same
    window gives the same logits in whatever chunk it comes."""
    ids = inputs["input_ids"].astype(np.float64)
    position = np.arange(ids.shape[1])
    start = 5 * np.sin(ids * 0.731 + position * 0.123 + inputs["token_type_ids"] * 1.7)
    end = 5 * np.cos(ids * 0.379 + position * 0.257)
    return start.astype(np.float32), end.astype(np.float32)


def _shared_context_examples():
    """_examples plus four questions about its first context (one context, many questions)."""
    examples = _examples(8, seed=1)
    first = examples[0]
    return examples + [QAExample(f"s{i}", f"Question {i} about the first story?", first.context,
                                 first.answers, first.answer_starts) for i in range(4)]


def test_windows_a_chunk_at_a_time_give_the_answers_and_scores_of_all_at_once(toks,
                                                                                monkeypatch):
    """Evaluation and predict run the model on a chunk of windows at a time and keep only each
    question's best span (answers.BestSpans): answers, scores and null scores equal the
    all-at-once path (features, then best_answers) exactly, with chunks of ~5 windows."""
    from bert_jax import tasks
    from bert_jax.tasks.question_answering.scores import squad_scores
    qa = tasks.TASKS["question-answering"]
    import bert_jax.tasks.question_answering as qa_module
    assert qa.load is qa_module.load
    tok, _ = toks
    examples = _shared_context_examples()
    max_length, stride = 48, 12
    whole = qa_windows.features(tok, examples, max_length, stride, training=False)
    start, end = _row_logits(whole)
    monkeypatch.setattr(qa_windows, "_ENCODE_WINDOWS", 5)
    windows = qa_windows.Windows(tok, examples, max_length, stride, "test")
    chunks = list(windows)
    assert len(windows) == len(whole["input_ids"]) == sum(len(c["input_ids"]) for c in chunks)
    assert len(chunks) >= 8 and max(len(c["input_ids"]) for c in chunks) < len(windows) / 4
    for n_best, max_len in ((20, 30), (3, 4)):
        v1 = qa_answers.best_answers(start, end, whole, examples, n_best, max_len)
        median = float(np.median([a["null_score"] - a["score"] for a in v1]))
        for version_2, threshold in ((False, 0.0), (True, 0.0), (True, median)):
            expected = qa_answers.best_answers(start, end, whole, examples, n_best, max_len,
                                               version_2, threshold)
            got = qa_module.best_spans(_row_logits, windows, n_best, max_len).answers(
                version_2, threshold)
            assert got == expected
            assert (squad_scores({a["id"]: a["answer"] for a in got}, examples)
                    == squad_scores({a["id"]: a["answer"] for a in expected}, examples))
        assert 3 <= sum(not a["answer"] for a in got) <= 9  # the median cuts about half
        assert len({a["answer"] for a in v1}) >= 6  # and the answers differ


def test_finetuning_evaluation_streams_its_windows(toks, tmp_path, monkeypatch):
    """QA's validation split is an EvalSplit that streams: no inputs held, its windows counted,
    and its scores and predictions those of the all-at-once path."""
    import types

    import task_fixtures as fx
    import bert_jax.tasks.question_answering as qa_module
    from bert_jax.tasks.question_answering.scores import squad_scores
    tok, _ = toks
    files = fx.qa_files(tmp_path, train=4, validation=12, facts=8)
    cfg = types.SimpleNamespace(
        dataset="", dataset_config="", train_file=str(files["train"]),
        validation_file=str(files["validation"]), test_file="", version_2_with_negative=False,
        max_seq_length=24, doc_stride=4, n_best=5, max_answer_length=4,
        null_score_threshold=0.0)
    monkeypatch.setattr(qa_windows, "_ENCODE_WINDOWS", 7)
    split = qa_module.load(cfg, tok).evals["validation"]
    examples = squad.read_examples(str(files["validation"]))
    whole = qa_windows.features(tok, examples, 24, 4, training=False)
    assert split.inputs is None and split.size == len(whole["input_ids"]) >= 4 * len(examples)
    calls = []

    def logits_of(inputs):
        calls.append(len(inputs["input_ids"]))
        return _row_logits(inputs)

    scores, predictions = split.stream(logits_of)
    assert len(calls) >= 4 and max(calls) <= 7 + 10 and sum(calls) == split.size
    found = qa_answers.best_answers(*_row_logits(whole), whole, examples, 5, 4)
    assert predictions == {a["id"]: a["answer"] for a in found}
    assert scores == dict(squad_scores(predictions, examples), windows=split.size)


def test_predict_on_squad_json_a_chunk_at_a_time(toks, minilm_dir, tmp_path, monkeypatch):
    """`bert-jax predict` reads the official SQuAD JSON (a paragraph's questions share its
    context) and runs the model a chunk of windows at a time: the answers equal those of one
    chunk, and of the same questions given as jsonl rows."""
    import shutil

    from conftest import make_hf_model

    from bert_jax import cli
    model = tmp_path / "qa"
    make_hf_model(model, "BertForQuestionAnswering", vocab_size=30522,
                  max_position_embeddings=64)
    for name in ("vocab.txt", "tokenizer.json"):
        shutil.copy(os.path.join(minilm_dir, name), model / name)
    examples = _shared_context_examples()
    paragraphs = {}
    for ex in examples:  # no answers: predict does not need them
        paragraphs.setdefault(ex.context, []).append({"id": ex.id, "question": ex.question})
    examples = [ex for c in paragraphs for ex in examples if ex.context == c]  # file order
    squad_file = tmp_path / "questions.json"
    squad_file.write_text(json.dumps({"data": [{"paragraphs": [
        {"context": c, "qas": qas} for c, qas in paragraphs.items()]}]}), encoding="utf-8")
    rows = tmp_path / "questions.jsonl"
    rows.write_text("".join(json.dumps({"id": ex.id, "question": ex.question,
                                        "context": ex.context}) + "\n" for ex in examples),
                    encoding="utf-8")

    def predict(source, name):
        out = tmp_path / name
        assert cli.main(["predict", str(model), "--input", str(source), "--output", str(out),
                         "--max-seq-length", "48", "--doc-stride", "12",
                         "--batch-size", "4"]) == 0
        return [json.loads(line) for line in open(out, encoding="utf-8")]

    whole = predict(squad_file, "whole.jsonl")
    assert [a["id"] for a in whole] == [ex.id for ex in examples]
    monkeypatch.setattr(qa_windows, "_ENCODE_WINDOWS", 5)
    assert predict(squad_file, "chunked.jsonl") == whole
    assert predict(rows, "rows.jsonl") == whole
    assert len({a["answer"] for a in whole}) >= 6
    for a, ex in zip(whole, examples):
        assert ex.context[a["start"]:a["end"]] == a["answer"]


def _python_peak(fn) -> int:
    """Peak bytes Python and numpy allocate while fn() runs (tracemalloc)."""
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_of_a_long_context_does_not_grow_with_its_questions(toks, monkeypatch):
    """A 20k-character context asked 20 or 200 questions (about 2,500 or 25,000 windows of 64
    tokens): streamed through Windows and BestSpans, the peak of what Python holds stays about
    the same (14.6 MB both); all at once (features), it grows with the windows."""
    import bert_jax.tasks.question_answering as qa_module
    tok, _ = toks
    context = " ".join(_paragraphs(200, min_words=20))[:20_000]
    assert len(context) == 20_000

    def examples(n):
        return [QAExample(f"q{i}", f"What happened in part {i} of the story?", context, (), ())
                for i in range(n)]

    def streamed(n):
        windows = qa_windows.Windows(tok, examples(n), 64, 16, "test")
        found = qa_module.best_spans(_row_logits, windows, 20, 30).answers()
        assert len(found) == n and all(a["answer"] for a in found)
        return len(windows)

    counts = {}
    peaks = {n: _python_peak(lambda n=n: counts.setdefault(n, streamed(n))) for n in (20, 200)}
    assert counts[200] == 10 * counts[20] >= 10 * 20 * 100  # 100+ windows per question
    assert peaks[200] < 1.3 * peaks[20], peaks
    whole = {n: _python_peak(lambda n=n: qa_windows.features(tok, examples(n), 64, 16, False))
             for n in (20, 200)}  # the measure sees growth: 12.7 MB, 67 MB
    assert whole[200] > 4 * whole[20] and whole[200] > 4 * peaks[200], (whole, peaks)
