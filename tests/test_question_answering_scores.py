"""tasks/question_answering/scores.py, SQuAD exact match / F1: hand-computed cases and the
official evaluate-v2.0.py as reference."""

import collections
import re
import string

import numpy as np
import pytest

from bert_jax.tasks.question_answering.data import QAExample
from bert_jax.errors import BertJaxError
from bert_jax.tasks.question_answering.scores import exact_match, f1, normalize_answer, squad_scores


# -- the official evaluate-v2.0.py functions (SQuAD 2.0, CC BY-SA 4.0), as written there -------

def official_normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""
    def remove_articles(text):
        regex = re.compile(r'\b(a|an|the)\b', re.UNICODE)
        return re.sub(regex, ' ', text)

    def white_space_fix(text):
        return ' '.join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return ''.join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()
    return white_space_fix(remove_articles(remove_punc(lower(s))))


def get_tokens(s):
    if not s:
        return []
    return official_normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
    return int(official_normalize_answer(a_gold) == official_normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        # If either is no-answer, then F1 is 1 if they agree, 0 otherwise
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    f1 = (2 * precision * recall) / (precision + recall)
    return f1


def get_raw_scores(dataset, preds):
    exact_scores = {}
    f1_scores = {}
    for article in dataset:
        for p in article['paragraphs']:
            for qa in p['qas']:
                qid = qa['id']
                gold_answers = [a['text'] for a in qa['answers']
                                if official_normalize_answer(a['text'])]
                if not gold_answers:
                    # For unanswerable questions, only correct answer is empty string
                    gold_answers = ['']
                if qid not in preds:
                    print('Missing prediction for %s' % qid)
                    continue
                a_pred = preds[qid]
                # Take max over all gold answers
                exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def make_eval_dict(exact_scores, f1_scores, qid_list=None):
    if not qid_list:
        total = len(exact_scores)
        return collections.OrderedDict([
            ('exact', 100.0 * sum(exact_scores.values()) / total),
            ('f1', 100.0 * sum(f1_scores.values()) / total),
            ('total', total),
        ])
    else:
        total = len(qid_list)
        return collections.OrderedDict([
            ('exact', 100.0 * sum(exact_scores[k] for k in qid_list) / total),
            ('f1', 100.0 * sum(f1_scores[k] for k in qid_list) / total),
            ('total', total),
        ])


def merge_eval(main_eval, new_eval, prefix):
    for k in new_eval:
        main_eval['%s_%s' % (prefix, k)] = new_eval[k]


def official_eval(dataset, preds):
    """evaluate-v2.0.py main() with no na_prob file (every no-answer probability 0)."""
    qid_to_has_ans = {qa['id']: bool(qa['answers']) for article in dataset
                      for p in article['paragraphs'] for qa in p['qas']}
    has_ans_qids = [k for k, v in qid_to_has_ans.items() if v]
    no_ans_qids = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw = get_raw_scores(dataset, preds)
    out_eval = make_eval_dict(exact_raw, f1_raw)
    if has_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_raw, f1_raw, qid_list=has_ans_qids), 'HasAns')
    if no_ans_qids:
        merge_eval(out_eval, make_eval_dict(exact_raw, f1_raw, qid_list=no_ans_qids), 'NoAns')
    return out_eval


# -- hand cases --------------------------------------------------------------------------------

def test_normalisation():
    assert normalize_answer("  The  Eiffel-Tower!  ") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # \b: articles only as whole words
    assert normalize_answer("U.S.") == "us"


def test_exact_match_and_f1_by_hand():
    assert exact_match("the Eiffel Tower", ["Eiffel Tower"]) == 1.0  # articles
    assert exact_match("Paris!", ["paris"]) == 1.0  # punctuation
    assert exact_match("PARIS", ["Paris"]) == 1.0  # case
    assert exact_match("Paris France", ["Paris"]) == 0.0
    assert exact_match("Broncos", ["Denver Broncos", "the Broncos"]) == 1.0  # any gold
    # "the cat sat on the mat" → cat sat on mat (4); "a cat on a hat" → cat on hat (3);
    # common cat, on = 2: precision 2/4, recall 2/3, F1 = 2·(1/2)(2/3) / (1/2 + 2/3) = 4/7
    assert f1("the cat sat on the mat", ["a cat on a hat"]) == pytest.approx(4 / 7)
    # second gold "sat on mat": common 3, precision 3/4, recall 1 → F1 6/7; max over golds
    assert f1("the cat sat on the mat", ["a cat on a hat", "sat on mat"]) == pytest.approx(6 / 7)
    # tokens are a multiset: "x x y" vs "x y y" share one x and one y → P = R = 2/3
    assert f1("x x y", ["x y y"]) == pytest.approx(2 / 3)
    assert f1("dog", ["cat"]) == 0.0
    # v2: no gold answer → the only right prediction is ""
    assert (exact_match("", []), f1("", [])) == (1.0, 1.0)
    assert (exact_match("x", []), f1("x", [])) == (0.0, 0.0)
    assert (exact_match("", ["Paris"]), f1("", ["Paris"])) == (0.0, 0.0)
    assert (exact_match("", ["the"]), f1("", ["The."])) == (1.0, 1.0)  # gold normalises away


def _ex(qid, answers):
    return QAExample(qid, "q?", "context", tuple(answers), tuple(0 for _ in answers))


def test_squad_scores_with_no_answer_splits():
    examples = [_ex("a", ["Paris"]), _ex("b", ["a cat on a hat"]), _ex("c", []), _ex("d", [])]
    predictions = {"a": "paris", "b": "the cat sat on the mat", "c": "", "d": "x"}
    got = squad_scores(predictions, examples)
    # per question (EM, F1): a (1, 1), b (0, 4/7), c (1, 1), d (0, 0)
    expected = {"exact_match": 50.0, "f1": 100 * (2 + 4 / 7) / 4, "total": 4,
                "HasAns_exact": 50.0, "HasAns_f1": 100 * (1 + 4 / 7) / 2, "HasAns_total": 2,
                "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value), key
    v1 = squad_scores({"a": "Paris", "b": "hat"}, examples[:2])
    assert v1 == pytest.approx({"exact_match": 50.0, "f1": 100 * (1 + 1 / 2) / 2, "total": 2})
    with pytest.raises(BertJaxError, match=r"no prediction for question 'b' \(row 2\)"):
        squad_scores({"a": "Paris"}, examples)


def test_equals_official_script_on_random_predictions():
    rng = np.random.default_rng(0)
    words = ["The", "cat", "sat", "on", "a", "mat", "in", "Paris,", "France.", "an", "U.S.",
             "army", "(1914)", "Eiffel", "tower's", "the"]
    examples, predictions = [], {}
    for i in range(300):
        golds = [" ".join(rng.choice(words, int(rng.integers(1, 6))))
                 for _ in range(int(rng.integers(0, 4)))]
        examples.append(_ex(f"q{i}", golds))
        base = golds[0].split() if golds and rng.random() < 0.7 else list(rng.choice(words, 3))
        edit = rng.integers(5)
        if edit == 0:
            base = base[1:]
        elif edit == 1:
            base = ["the"] + [w.upper() for w in base]
        elif edit == 2:
            base = base + ["!"]
        elif edit == 3 and rng.random() < 0.5:
            base = []
        predictions[f"q{i}"] = " ".join(base)
    dataset = [{"paragraphs": [{"context": "context", "qas": [
        {"id": e.id, "answers": [{"text": t, "answer_start": 0} for t in e.answers]}
        for e in examples]}]}]
    official = official_eval(dataset, predictions)
    ours = squad_scores(predictions, examples)
    renamed = {("exact_match" if k == "exact" else k): v for k, v in official.items()}
    assert ours.keys() == renamed.keys()
    assert ours == pytest.approx(renamed)
    assert 0 < ours["NoAns_total"] < ours["total"] and 0 < ours["f1"] < 100
