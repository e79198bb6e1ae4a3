"""Files of models: what kind of directory a path is and the name of every file a workdir holds,
Hugging Face conversion (one name table), our model directories, weight files, Hub ids, atomic
writes, and the parity report against transformers. (A run's orbax train-state checkpoints, for
resuming, are runtime/train_state_checkpoints.py's; this package was bert_jax.checkpoints.)"""
