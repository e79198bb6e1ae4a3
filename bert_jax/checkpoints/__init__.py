"""Files of models: what kind of directory a path is, Hugging Face conversion (one name table),
our model directories, atomic writes, and the parity report against transformers."""
