"""Data for pretraining: text sources → tokenizer → sentences → a tokenised, prepared set on disk
→ a step's rows (sentence pairs or packed rows) → masking (pure, jittable); batches of in-memory
data (a pure function of (seed, step)); length buckets for inference."""
