"""The bundled fine_foods reviews in GLUE's SST-2 layout, so `bert-jax glue` can run offline
(README "GLUE"): DIR/SST-2/train.tsv and dev.tsv (`sentence<TAB>label`, 1 = great, 0 = other),
test.tsv (`index<TAB>sentence`). fine_foods has no dev split: dev.tsv and test.tsv are both its
1,000 test reviews (test.tsv without labels, to show the submission file). Tabs and line breaks
inside reviews become spaces, as in GLUE's own files.

    python bench/glue_fine_foods.py /tmp/glue_ff
    bert-jax glue --init $M --workdir runs/glue_ff --data-dir /tmp/glue_ff --tasks sst-2 \\
        --max-train-examples 1000 --epochs 1
"""

import csv
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clean(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def main(out: str) -> None:
    folder = os.path.join(out, "SST-2")
    os.makedirs(folder, exist_ok=True)
    for split, source in (("train", "train.csv"), ("dev", "test.csv"), ("test", "test.csv")):
        with open(os.path.join(ROOT, "data", "fine_foods", source), encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        with open(os.path.join(folder, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("index\tsentence\n" if split == "test" else "sentence\tlabel\n")
            for i, row in enumerate(rows):
                text = clean(row["text"])
                f.write(f"{i}\t{text}\n" if split == "test"
                        else f"{text}\t{int(row['label'] == 'great')}\n")
        print(f"{folder}/{split}.tsv: {len(rows)} rows")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/tmp/glue_fine_foods")
