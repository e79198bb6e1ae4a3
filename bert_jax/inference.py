"""Using a model: loading it with its tokenizer, lengths that fit it, batched jitted forward
passes, fill-mask top-k, sentence and token embeddings. A fine-tuning task's own predictions
(class probabilities, answers, tags) live with the task (bert_jax/tasks/), built on these.

Every entry point takes a model path `load_pretrained` reads (our model dir, a Hugging Face dir,
a pretraining workdir) or a fine-tuning workdir (its best model, WORKDIR/model).
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from bert_jax.model_files import hub, paths
from bert_jax.model_files.model_dir import load_pretrained
from bert_jax.data import batches, buckets, tokenizer
from bert_jax.errors import BertJaxError
from bert_jax.models import BertForMaskedLM, BertModel
from bert_jax.models.task_models import architecture_of
from bert_jax.runtime import xla_options

_HEADS = {"classifier": "has no classifier head{} (fine-tune it first with `bert-jax finetune`)",
          "qa_outputs": "has no question-answering head{} (fine-tune it first with `bert-jax "
                        "finetune --task question-answering`)",
          "predictions": "has no masked-LM head{} (a BertModel such as all-MiniLM-L6-v2 cannot "
                         "fill masks; use a BertForPreTraining / BertForMaskedLM)"}


def require_head(params, head: str, where: str = "") -> None:
    """Refuse a model without the head a command needs, naming where it was read from."""
    if head not in params:
        raise BertJaxError("model: " + _HEADS[head].format(f" in {where}" if where else ""))


def load(path: str, head: str = ""):
    """(config, params, tokenizer) of a model directory; `head` ("classifier", "predictions")
    is required to be there, refused naming the directory before any input is read. A Hub id
    `org/name[@revision]` names its snapshot (a local path wins)."""
    path = hub.local_model(path)
    config, params = load_pretrained(path)
    if head:
        require_head(params, head, paths.model_path(path))
    source = tokenizer.vocab_path(paths.vocab_dir(path))
    tok = tokenizer.load(source)
    tokenizer.check_fits(tok, config.vocab_size, source)
    return config, params, tok


def fit_length(config, tok, texts: Sequence[str], pairs: Optional[Sequence[str]],
               max_seq_length: int, batch_size: int = 1) -> tuple[int, list[str]]:
    """(max_seq_length clamped to the model's positions, warnings): one line for the clamp and
    one counting the texts that will be truncated; long text is not an error."""
    check_sizes(config, min(max_seq_length, config.max_position_embeddings), batch_size,
                pairs is not None)
    max_seq_length, warnings = clamp_length(config, max_seq_length)
    longer = tokenizer.count_longer(tok, texts, pairs, max_seq_length)
    if longer:
        warnings.append(f"{longer} of {len(texts)} texts were longer than {max_seq_length} tokens "
                        f"and were truncated")
    return max_seq_length, warnings


def clamp_length(config, max_seq_length: int) -> tuple[int, list[str]]:
    """(max_seq_length, or the model's positions when it has fewer, with one warning saying so)."""
    limit = config.max_position_embeddings
    if max_seq_length <= limit:
        return max_seq_length, []
    return limit, [f"max_seq_length {max_seq_length} is more than the model's {limit} positions "
                   f"(max_position_embeddings); using {limit}"]


def check_sizes(config, max_seq_length: int, batch_size: int, pairs: bool = False) -> None:
    """Refuse lengths the model has no positions for (JAX would clamp the position ids
    silently) and batch sizes below one, naming the parameter."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise BertJaxError(f"batch_size: expected an integer ≥ 1, got {batch_size!r}")
    least = 4 if pairs else 3  # [CLS] A [SEP] (B [SEP]) with at least one token each
    if not isinstance(max_seq_length, int) or max_seq_length < least:
        raise BertJaxError(f"max_seq_length: expected an integer ≥ {least}, got "
                           f"{max_seq_length!r}")
    if max_seq_length > config.max_position_embeddings:
        raise BertJaxError(f"max_seq_length: {max_seq_length} is more than the model's "
                           f"max_position_embeddings ({config.max_position_embeddings})")


def run_batched(fn, arrays: dict, batch_size: int):
    """fn(batch) over every row in fixed-shape batches of max_seq_length; padded rows dropped.
    fn may return a tuple of arrays (start and end logits): so does this. For question
    answering, whose n-best candidates are drawn over all max_seq_length positions (as Hugging
    Face's)."""
    results = ((fn(b), n) for b, n in batches.eval_batches(arrays, batch_size))
    parts = [jax.tree.map(lambda x, n=n: x[:n], r) for r, n in buckets.overlapped(results)]
    return jax.tree.map(lambda *xs: np.concatenate(xs), *parts)


def require_architecture(config, params, architecture: str, where: str = "") -> None:
    """Refuse a model of another task (a sequence classifier given to tag words), naming it."""
    found = architecture_of(params, config)
    if found != architecture:
        raise BertJaxError(f"model{' ' + where if where else ''}: is a {found}, this needs a "
                           f"{architecture}")


def fill_mask(config, params, tok, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For each [MASK] in `text`, the top_k (token, probability) of the MLM head."""
    return fill_masks(config, params, tok, [text], top_k, where=None)[0]


def fill_masks(config, params, tok, texts: Sequence[str], top_k: int = 5, batch_size: int = 32,
               where: Optional[str] = "texts") -> list[list[list[tuple[str, float]]]]:
    """For each text, for each [MASK] in it, the top_k (token, probability) of the MLM head.

    Texts are batched by length (data/buckets) and the top k is taken on the device: only k
    of the vocabulary's probabilities come back per mask. Errors name the row of `where`, or
    `text` when where is None (one text).
    """
    require_head(params, "predictions")
    if not isinstance(top_k, int) or top_k < 1:
        raise BertJaxError(f"top_k: expected an integer ≥ 1, got {top_k}")
    limit = config.max_position_embeddings
    check_sizes(config, limit, batch_size)
    positions = _mask_positions(tok, texts, limit, where)
    arrays = tokenizer.encode_batch(tok, texts, None, limit, pad=True)
    apply = functools.partial(jitted(_top_k), config, min(top_k, config.vocab_size),
                              jax.device_put({k: params[k] for k in ("bert", "predictions")}))
    lengths = arrays["attention_mask"].sum(1)
    results = ((apply({**{k: v[rows, :length] for k, v in arrays.items()},
                       "masked_lm_positions": _padded(positions, rows)}), rows[:n])
               for rows, n, length in buckets.plan(lengths, batch_size, limit))
    out = [None] * len(texts)
    for (probs, ids), rows in buckets.overlapped(results):
        for row, p, i in zip(rows, probs, ids):
            out[row] = [[(tok.id_to_token(int(t)), float(q)) for t, q in zip(i_m, p_m)]
                        for i_m, p_m in zip(i[:len(positions[row])], p)]
    return out


def _mask_positions(tok, texts: Sequence[str], limit: int, where: Optional[str]) -> list:
    """The [MASK] positions of each text once encoded to `limit` tokens; refuses a text without
    one, or with one that truncation would cut off, naming its row."""
    mask = tok.token_to_id("[MASK]")
    full = tokenizer.encode_batch(tok, texts, None, max_seq_length=None)["input_ids"]
    out = []
    for row, (text, ids) in enumerate(zip(texts, full)):
        name = "text" if where is None else f"{where}: row {row + 1}"
        found = np.flatnonzero(np.asarray(ids) == mask)
        if found.size == 0:
            raise BertJaxError(f"{name}: has no [MASK] token: {text!r}")
        # truncation keeps [CLS] and the first limit - 2 tokens: a [MASK] after them is lost
        if found[-1] >= limit - 1:
            lost = found[found >= limit - 1][0]
            raise BertJaxError(f"{name}: [MASK] at token {lost + 1} of {len(ids)} is past the "
                               f"model's {limit} positions (max_position_embeddings); shorten "
                               f"the text before it")
        out.append(found.astype(np.int32))
    if not out:
        raise BertJaxError(f"{where or 'text'}: expected at least one text, got none")
    return out


def _padded(positions: list, rows: np.ndarray) -> np.ndarray:
    """(B, P) [MASK] positions of `rows`, P the most of any row rounded up to a power of two
    (few compiled shapes), padded with position 0, whose predictions are dropped."""
    most = max(len(positions[r]) for r in rows)
    out = np.zeros((len(rows), 1 << (most - 1).bit_length()), np.int32)
    for i, r in enumerate(rows):
        out[i, :len(positions[r])] = positions[r]
    return out


def embed(config, params, tok, texts: Sequence[str], pooling: str = "cls",
          max_seq_length: int = 128, batch_size: int = 32, normalize: bool = False,
          layers: Optional[Sequence[int]] = None) -> Union[np.ndarray, list[np.ndarray]]:
    """Sentence or token embeddings, float32.

    `layers` picks hidden states (0 the embeddings' output, 1..num_layers each layer's,
    negative from the end; default the last) and concatenates them along the feature axis,
    F = H × len(layers): the paper's feature-based approach takes (-4, -3, -2, -1).
    pooling "cls": (N, F), the [CLS] vectors; "mean": (N, F), the mean over real (non-padding)
    tokens, as sentence-transformers' mean pooling; "none": one (n_i, F) array per text, its
    n_i real tokens ([CLS] and [SEP] included; `tokens_of` names them). `normalize` scales
    each vector to unit length.
    """
    if pooling not in POOLINGS:
        raise BertJaxError(f"pooling: expected cls, mean or none, got {pooling!r}")
    check_sizes(config, max_seq_length, batch_size)
    layers = None if layers is None else check_layers(config, layers)
    arrays = tokenizer.encode_batch(tok, texts, None, max_seq_length, pad=True)
    apply = functools.partial(jitted(_pooled), config, pooling, bool(normalize), layers,
                              jax.device_put(params["bert"]))
    out = buckets.run(apply, arrays, batch_size, per_position=pooling == "none")
    out = out.astype(np.float32)
    if pooling != "none":
        return out
    return [row[:n] for row, n in zip(out, arrays["attention_mask"].sum(1))]


POOLINGS = ("cls", "mean", "none")


def check_layers(config, layers: Sequence[int]) -> tuple[int, ...]:
    """`layers` as indices 0..num_layers into the hidden states (0 the embeddings' output),
    in the order given; refuses non-integers, indices out of range and repeats, naming them."""
    n = config.num_hidden_layers
    expect = f"integers from {-(n + 1)} to {n} (0 the embeddings, negative from the end)"
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise BertJaxError(f"layers: expected a list of {expect}, got {layers!r}")
    layers, out = list(layers), []
    if not layers:
        raise BertJaxError(f"layers: expected at least one of {expect}, got none")
    for layer in layers:
        if isinstance(layer, (bool, np.bool_)) or not isinstance(layer, (int, np.integer)):
            raise BertJaxError(f"layers: expected {expect}, got {layer!r}")
        if not -(n + 1) <= layer <= n:
            raise BertJaxError(f"layers: {layer} is out of range: the model has {n} layers, "
                               f"so expected {expect}")
        index = int(layer) % (n + 1)
        if index in out:
            raise BertJaxError(f"layers: hidden state {index} is given twice ({layers})")
        out.append(index)
    return tuple(out)


def tokens_of(tok, texts: Sequence[str], max_seq_length: int = 128) -> list[list[str]]:
    """The real tokens of each text as `embed(pooling="none")` sees them, one per vector."""
    arrays = tokenizer.encode_batch(tok, texts, None, max_seq_length, pad=True)
    return [[tok.id_to_token(int(i)) for i in row[:n]]
            for row, n in zip(arrays["input_ids"], arrays["attention_mask"].sum(1))]


# -- the jitted forward passes: config (and options) static, parameters an argument ------

def _pooled(config, pooling: str, normalize: bool, layers, params, batch) -> jax.Array:
    """(B, F) [CLS] or mean-of-real-tokens vectors, or (B, L, F) with pooling "none", of a
    BertModel's last layer or of the hidden states `layers` concatenated. For [CLS] vectors
    the last layer is computed at [CLS] only (BertModel output_positions)."""
    inputs = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    cls = pooling == "cls"
    at = jnp.zeros((inputs[0].shape[0], 1), jnp.int32) if cls else None
    if layers is None:
        seq, _ = BertModel(config).apply({"params": params}, *inputs,
                                         output_positions=at)  # (B, L or 1, H)
    else:
        hidden = BertModel(config).apply({"params": params}, *inputs, output_hidden_states=True,
                                         output_positions=at).hidden_states
        seq = jnp.concatenate([hidden[i][:, :1] if cls else hidden[i] for i in layers],
                              axis=-1)  # (B, L or 1, F)
    if cls:
        out = seq[:, 0]
    elif pooling == "none":
        out = seq
    else:
        m = batch["attention_mask"][..., None].astype(jnp.float32)  # (B, L, 1)
        out = (seq * m).sum(1) / jnp.maximum(m.sum(1), 1e-9)
    if normalize:
        out = out / jnp.maximum(jnp.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
    return out


def _top_k(config, k: int, params, batch):
    """(probabilities (B, P, k), token ids (B, P, k)), best first, of the MLM head at the
    batch's masked_lm_positions: equal probabilities keep the lower id first (a stable sort)."""
    logits = BertForMaskedLM(config).apply(
        {"params": params}, batch["input_ids"], batch["token_type_ids"], batch["attention_mask"],
        batch["masked_lm_positions"])  # (B, P, V)
    return jax.lax.top_k(jax.nn.softmax(logits, -1), k)


_STATIC = {_pooled: (0, 1, 2, 3), _top_k: (0, 1)}  # hashable leading arguments


@functools.cache
def jitted(fn):
    """`fn` under jit, the parameters an argument: weights closed over would become constants
    of the program (a compile per call, as slow as the model is big); as an argument one
    compile serves every model of a config and batch shape. Made on first use: the compiler
    options ask for the backend, which must not start at import (jax.distributed first)."""
    return jax.jit(fn, static_argnums=_STATIC.get(fn, (0,)),  # a task's: (config, params, batch)
                   compiler_options=xla_options.forward("float32"))

