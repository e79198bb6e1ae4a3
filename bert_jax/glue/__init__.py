"""GLUE (Wang et al., 2018), the benchmark of the BERT paper's Table 1, in one place: its tasks
and where their data lives (`benchmark.py`), reading the original download's folders and the
hub's configurations into one row layout (`reading.py`), a workdir's data read once per task
(`workdir_data.py`), the official scores and GLUE's average (`scores.py`), the test-set files
the GLUE server takes (`submission.py`), the results table in markdown (`markdown_table.py`), and
the glue job, the paper's protocol over all of them (`job.py`).

GLUE is not a Task of its own: the job fine-tunes the classification and regression tasks
(tasks/) with the finetune job (training/), so this layer sits above both; cli/glue.py is its
command line.
"""
