"""Files of models: what kind of directory a path is and the name of every file a workdir holds,
Hugging Face conversion (one name table), our model directories, atomic writes, and the parity
report against transformers."""
