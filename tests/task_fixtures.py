"""Tiny synthetic data for the fine-tuning tasks (tests only): answers and tags predictable from
the words, so a short run can show that a model learns them."""

import csv
import json
import os
import random
import shutil

FIRST = ("john", "mary", "anne", "peter", "emma", "james", "lucy", "henry")
LAST = ("smith", "brown", "wilson", "taylor", "clark", "walker")
PLACES = ("paris", "london", "rome", "berlin", "madrid", "vienna", "dublin", "oslo")
FILLER = ("the", "a", "went", "to", "saw", "in", "and", "with", "met", "from", "big", "old",
          "house", "city", "river", "day", "visited", "lived", "near", "quiet")
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "brown", "grey")
THINGS = ("car", "door", "boat", "hat", "kite", "chair", "lamp", "coat")


def tagged_sentence(rng: random.Random, length: int = 8):
    """Words with BIO tags: a first name (B-PER, then I-PER for a surname), a place (B-LOC)."""
    words, tags = [], []
    while len(words) < length:
        kind = rng.random()
        if kind < 0.2:
            words.append(rng.choice(FIRST))
            tags.append("B-PER")
            if rng.random() < 0.5:
                words.append(rng.choice(LAST))
                tags.append("I-PER")
        elif kind < 0.35:
            words.append(rng.choice(PLACES))
            tags.append("B-LOC")
        else:
            words.append(rng.choice(FILLER))
            tags.append("O")
    return words, tags


def write_conll(path, sentences, tags, docstart=True):
    with open(path, "w", encoding="utf-8") as f:
        if docstart:
            f.write("-DOCSTART- -X- -X- O\n\n")
        for words, row in zip(sentences, tags):
            f.write("".join(f"{w} NN O {t}\n" for w, t in zip(words, row)) + "\n")


def tagging_files(directory, train=160, validation=40, seed=0, length=8):
    rng = random.Random(seed)
    out = {}
    for split, n in (("train", train), ("validation", validation)):
        rows = [tagged_sentence(rng, length) for _ in range(n)]
        out[split] = directory / f"{split}.conll"
        write_conll(out[split], [w for w, _ in rows], [t for _, t in rows])
    return out


def qa_example(rng: random.Random, i: int, facts: int = 6, answerable: bool = True):
    """A context of `facts` sentences "the colour of the car is red ." and a question about
    one of them; unanswerable questions ask about a thing the context does not mention."""
    things = rng.sample(THINGS, facts)
    colours = [rng.choice(COLOURS) for _ in things]
    context = " ".join(f"the colour of the {t} is {c} ." for t, c in zip(things, colours))
    if not answerable:
        missing = next(t for t in THINGS if t not in things)
        return {"id": f"q{i}", "question": f"what is the colour of the {missing} ?",
                "context": context, "answers": {"text": [], "answer_start": []}}
    k = rng.randrange(facts)
    start = context.index(f"the {things[k]} is ") + len(f"the {things[k]} is ")
    return {"id": f"q{i}", "question": f"what is the colour of the {things[k]} ?",
            "context": context, "answers": {"text": [colours[k]], "answer_start": [start]}}


def squad_json(path, records, version="1.1"):
    """Records in the official SQuAD JSON layout (one paragraph per record)."""
    paragraphs = []
    for r in records:
        qa = {"id": r["id"], "question": r["question"],
              "answers": [{"text": t, "answer_start": s} for t, s in
                          zip(r["answers"]["text"], r["answers"]["answer_start"])]}
        if version == "2.0":
            qa["is_impossible"] = not r["answers"]["text"]
        paragraphs.append({"context": r["context"], "qas": [qa]})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "data": [{"title": "t", "paragraphs": paragraphs}]}, f)


def qa_files(directory, train=48, validation=16, seed=0, facts=6):
    rng = random.Random(seed)
    out = {}
    for split, n in (("train", train), ("validation", validation)):
        out[split] = directory / f"{split}.json"
        squad_json(out[split], [qa_example(rng, i, facts) for i in range(n)])
    return out


def swag_files(directory, train=32, validation=16, seed=0):
    """sent1 "the X is", sent2 "coloured", endings: the X's colour (label) or three others."""
    rng = random.Random(seed)
    out = {}
    for split, n in (("train", train), ("validation", validation)):
        out[split] = directory / f"{split}.csv"
        with open(out[split], "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label"])
            for _ in range(n):
                thing = rng.choice(THINGS)
                endings = rng.sample(COLOURS, 4)
                w.writerow([f"the {thing} is", "painted", *endings, rng.randrange(4)])
    return out


def similarity_pair(rng: random.Random, words: int = 5):
    """Two sentences of `words` words sharing k of them, scored 5k / words (STS-B's 0–5): the
    target is decided by the words, so a short run can learn it."""
    vocabulary = FILLER + COLOURS + THINGS + PLACES
    first = rng.sample(vocabulary, words)
    k = rng.randrange(words + 1)
    rest = [w for w in vocabulary if w not in first]
    second = first[:k] + rng.sample(rest, words - k)
    rng.shuffle(second)
    return " ".join(first), " ".join(second), round(5.0 * k / words, 2)


def similarity_files(directory, train=96, validation=32, seed=0):
    """csv files with sentence1, sentence2 and a float score (similarity_pair)."""
    rng = random.Random(seed)
    out = {}
    for split, n in (("train", train), ("validation", validation)):
        out[split] = directory / f"{split}.csv"
        with open(out[split], "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["sentence1", "sentence2", "score"])
            w.writerows(similarity_pair(rng) for _ in range(n))
    return out


def random_bert_dir(directory, minilm_dir: str, hidden: int = 32) -> str:
    """A random 2-layer Hugging Face BertModel of width `hidden` with MiniLM's real vocabulary
    (seeded: the same weights every time), saved in `directory`."""
    import torch
    import transformers
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(
        vocab_size=30522, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=2 * hidden, max_position_embeddings=64)).save_pretrained(directory)
    for name in ("vocab.txt", "tokenizer.json"):
        shutil.copy(os.path.join(minilm_dir, name), os.path.join(directory, name))
    return str(directory)
