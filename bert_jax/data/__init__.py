"""Data: text files → tokenizer → sentences → pretraining examples; masking (pure, jittable);
batches (a pure function of (seed, step)); length buckets for inference; labelled
classification data."""
