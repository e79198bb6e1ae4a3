"""A pretraining config's data: its sources, their preparation (by `bert-jax prepare` or cached
on first use), and the batches a run reads from the prepared set.

`config.train_files` is either raw text (globs of text / .gz / jsonl / parquet files; or
`config.train_dataset`, a `datasets` dataset streamed) or the directory of a set prepared by
`bert-jax prepare`. Raw text is prepared once into the user cache's prepared-<key>, keyed by the
sources' contents, the vocabulary and the preparation parameters.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from typing import Optional

from tokenizers import Tokenizer

from bert_jax import resources
from bert_jax.data import prepared_set, text_sources, tokenize_corpus, tokenizer
from bert_jax.data.pretraining_batches import PretrainingBatches
from bert_jax.errors import BertJaxError

log = logging.getLogger("bert_jax")

AUTO_WORKERS_MIN_BYTES = 64 << 20  # below this, worker start-up costs more than it saves


def prepared_dir(cfg) -> Optional[str]:
    """config.train_files when it names a prepared set, else None."""
    files = cfg.train_files
    if cfg.train_dataset or not isinstance(files, str):
        return None
    return files if prepared_set.is_prepared_set(files) else None


def sources(cfg) -> list[text_sources.Source]:
    """The raw inputs of a config (checked to exist; their text is read later, streamed)."""
    return text_sources.list_sources(cfg.train_files, dataset=cfg.train_dataset,
                                     dataset_config=cfg.train_dataset_config,
                                     dataset_split=cfg.train_dataset_split)


def check(cfg) -> None:
    """Before any slow work: the prepared set is complete, or the raw sources exist."""
    directory = prepared_dir(cfg)
    if directory:
        prepared_set.verify(directory)
    else:
        sources(cfg)


def vocab_of_set(cfg) -> str:
    """The vocabulary a prepared set was made with ("" for raw text)."""
    directory = prepared_dir(cfg)
    return os.path.join(directory, prepared_set.VOCAB) if directory else ""


def workers(cfg, inputs: list[text_sources.Source]) -> int:
    """config.prepare_workers, or (0) from the CPU count when the input is large enough."""
    if cfg.prepare_workers:
        return cfg.prepare_workers
    size = sum(os.path.getsize(s.name) for s in inputs if s.kind != "dataset")
    if size < AUTO_WORKERS_MIN_BYTES and all(s.kind != "dataset" for s in inputs):
        return 0
    return max(1, min(os.cpu_count() or 1, 8))


def prepare_shard(cfg, tok: Tokenizer, out: str, shard: int = 0,
                  num_shards: int = 1) -> Optional[dict]:
    """`bert-jax prepare`: shard `shard` of `num_shards` of the config's sources into `out`."""
    inputs = sources(cfg)
    return tokenize_corpus.tokenize_shard(inputs, tok, out, documents=cfg.documents,
                           sentence_per_line=cfg.sentence_per_line, text_field=cfg.text_field,
                           shard=shard, num_shards=num_shards, workers=workers(cfg, inputs))


def open_data(cfg, tok: Tokenizer, cache_dir: Optional[str] = None) -> PretrainingBatches:
    """The run's data: the prepared set (prepared now into the cache for raw text), checked
    against the run's vocabulary, with the objective's batches."""
    directory = prepared_dir(cfg)
    if directory is None:
        inputs = sources(cfg)
        directory = os.path.join(cache_dir or resources.cache_dir(),
                                 f"prepared-{_cache_key(cfg, inputs, tok)}")
        if os.path.isfile(os.path.join(directory, prepared_set.MANIFEST)):
            log.info("pretraining data: the cached set %s", directory)
        else:
            _prepare_cache(cfg, inputs, tok, directory)
    data = prepared_set.PreparedSet.open(directory)
    if data.manifest["vocab_hash"] != prepared_set.vocab_hash(tok):
        raise BertJaxError(f"{directory}: prepared with another vocabulary than the run's; use "
                           f"config.vocab={os.path.join(directory, prepared_set.VOCAB)} or prepare "
                           f"again")
    return PretrainingBatches(data, tokenizer.special_token_ids(tok), objective=cfg.objective,
                           max_seq_length=cfg.max_seq_length, short_seq_prob=cfg.short_seq_prob,
                           eval_fraction=cfg.eval_fraction, seed=cfg.data_seed)


def _prepare_cache(cfg, inputs, tok, directory) -> None:
    """Prepare into the cache; a failure (bad text) leaves no trace of this attempt."""
    size = sum(os.path.getsize(s.name) for s in inputs if s.kind != "dataset")
    # small inputs take seconds: say nothing, so that a bad one costs one line, the error
    (log.info if size >= AUTO_WORKERS_MIN_BYTES else log.debug)(
        "preparing %d source(s), %.0f MB, into %s", len(inputs), size / 1e6, directory)
    created = directory  # the topmost directory this attempt creates
    while not os.path.exists(os.path.dirname(created)):
        created = os.path.dirname(created)
    created = None if os.path.exists(created) else created
    try:
        tokenize_corpus.tokenize_shard(inputs, tok, directory, documents=cfg.documents,
                        sentence_per_line=cfg.sentence_per_line, text_field=cfg.text_field,
                        workers=workers(cfg, inputs))
    except BaseException:
        if created:
            shutil.rmtree(created, ignore_errors=True)
        raise


def _cache_key(cfg, inputs, tok) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for source in inputs:  # contents, in order (order decides document order), not mtimes
        digest.update(text_sources.content_hash(source).encode())
    params = dict(documents=cfg.documents, sentence_per_line=cfg.sentence_per_line,
                  text_field=cfg.text_field, format_version=prepared_set.FORMAT_VERSION,
                  vocab=prepared_set.vocab_hash(tok))
    digest.update(json.dumps(params, sort_keys=True).encode())
    return digest.hexdigest()
