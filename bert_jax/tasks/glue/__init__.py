"""GLUE (Wang et al., 2018), the benchmark of the BERT paper's Table 1: its tasks and where their
data lives (`benchmark.py`), reading the original download's folders and the hub's
configurations into one row layout (`reading.py`), the official scores and GLUE's average
(`scores.py`), and the test-set files the GLUE server takes (`submission.py`).

GLUE is not a Task of its own: the glue job (training/glue.py) fine-tunes the classification and
regression tasks on what these modules read.
"""
