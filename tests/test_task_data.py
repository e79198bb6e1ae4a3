"""bench/task_data.py's Disfl-QA conversion: BIG-bench keeps only the answer's text, so its
position is recovered where that is unambiguous, and what is dropped is counted."""

import json

from conftest import bench_module


def _task_data():
    return bench_module("task_data")


def test_whole_word_starts():
    td = _task_data()
    assert td.whole_word_starts("and an ant, an", "an") == [4, 12]
    assert td.whole_word_starts("band", "an") == []
    assert td.whole_word_starts("in 1990s, (1990)", "1990") == [11]
    assert td.whole_word_starts("$5 million", "$5") == [0]  # a symbol may touch a letter
    assert td.whole_word_starts("x-ray", "ray") == [2]


def test_disfl_qa_items_keep_only_unambiguous_answers(tmp_path):
    td = _task_data()
    sep = td.SEPARATOR
    examples = [
        {"input": f"Who no what built it?{sep}Anna built the barn.", "target": "Anna"},
        {"input": f"What colour?{sep}The red barn and the red house.", "target": "red"},
        {"input": f"Which year?{sep}It was in the 1990s, not 1990 exactly.", "target": "1990"},
        {"input": f"Who?{sep}Nobody knows.", "target": "unknown"},
        {"input": f"Where?{sep}In the north.", "target": "south"},
        {"input": f"Which?{sep}The bandana.", "target": "and"},
    ]
    path = tmp_path / "task.json"
    path.write_text(json.dumps({"examples": examples}), encoding="utf-8")
    items, stats = td.disfl_qa_items(str(path))
    assert stats == {"items": 6, "unknown": 1, "not_verbatim": 1, "only_inside_words": 1,
                     "ambiguous_several_occurrences": 1, "kept": 2}
    for item in items:
        assert item["context"][item["answer_start"]:][:len(item["text"])] == item["text"]
    assert [(i["text"], i["answer_start"]) for i in items] == [("Anna", 0), ("1990", 25)]


def test_write_if_changed_leaves_another_writers_temporary_file_alone(tmp_path):
    """Two fine-tuning jobs (one per arm) write the same split at the same time: a fixed
    `path.tmp` let one job rename the other's half-written file away, and that job failed."""
    td = _task_data()
    path = tmp_path / "train_250.csv"
    other = tmp_path / "train_250.csv.tmp"
    other.write_text("another job's half-written file")
    assert td.write_if_changed(str(path), "text,label\r\nfine,1\r\n")
    assert path.read_bytes() == b"text,label\r\nfine,1\r\n"  # CSV line ends kept
    assert other.read_text() == "another job's half-written file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train_250.csv", "train_250.csv.tmp"]
    assert not td.write_if_changed(str(path), "text,label\r\nfine,1\r\n")  # unchanged: no write
