"""What each attention head of a pretraining run looks at: the table behind bench/RESULTS.md's
"Off the plateau on every seed" (runs on the plateau have heads collapsed onto a few frequent
words; runs off it have heads on the neighbours).

    python bench/attention_heads.py WORKDIR [WORKDIR ...] [--text data/austen/emma.txt]

For each workdir's latest checkpoint, on 16 rows of 128 tokens from the end of `--text`
(masked at 15% as in training, one fixed draw), per head of each layer: the attention mass
on the two neighbours and on the token itself, the attention entropy as a share of its
maximum (1: spread evenly, 0: one key per query; time_to_accuracy.py's per-head measures,
whose per-layer extremes its curves print), and the tokens its queries' top keys hold most
often; and per layer the query kernel's root-mean-square.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROWS, LENGTH, TAIL_CHARS = 16, 128, 60_000


def rows_of(tok, text: str, seed: int = 0):
    """(ROWS, LENGTH) input ids: [CLS] text [SEP], 15% of the text's tokens [MASK]ed."""
    from bert_jax.data import tokenizer
    special = tokenizer.special_token_ids(tok)
    ids = tok.encode(text[-TAIL_CHARS:], add_special_tokens=False).ids
    body = LENGTH - 2
    if len(ids) < ROWS * body:
        raise SystemExit(f"--text: {ROWS * body} tokens needed from its last {TAIL_CHARS:,} "
                         f"characters, found {len(ids)}")
    x = np.array([[special["[CLS]"]] + ids[i * body:(i + 1) * body] + [special["[SEP]"]]
                  for i in range(ROWS)], np.int32)
    masked = np.random.default_rng(seed).random(x.shape) < 0.15
    masked[:, [0, -1]] = False
    return np.where(masked, special["[MASK]"], x)


def describe(workdir: str, text: str) -> str:
    import jax.numpy as jnp
    from time_to_accuracy import head_entropy, head_neighbour_mass

    from bert_jax.model_files import paths
    from bert_jax.model_files.model_dir import latest_checkpoint_params
    from bert_jax.data import tokenizer
    from bert_jax.models import BertConfig, BertModel
    step, params = latest_checkpoint_params(workdir)
    config = BertConfig.from_json_file(os.path.join(workdir, "config.json"))
    tok = tokenizer.load(paths.vocab_dir(workdir))
    x = rows_of(tok, text)
    out = BertModel(config).apply({"params": params["bert"]}, jnp.asarray(x),
                                  jnp.zeros_like(x), jnp.ones_like(x), output_attentions=True)
    mask = jnp.ones_like(x)
    lines = [f"== {workdir} (step {step})"]
    for index, probs in enumerate(out.attentions):  # (B, N, L, L)
        kernel = params["bert"]["encoder"][f"layer_{index}"]["attention"]["query"]["kernel"]
        lines.append(f"layer {index + 1}: W_q rms {np.sqrt(np.mean(np.square(kernel))):.3f}")
        neighbours = np.asarray(head_neighbour_mass(probs, mask))
        entropy = np.asarray(head_entropy(probs, mask))
        probs = np.asarray(probs)
        itself = np.einsum("bnii->n", probs) / (ROWS * LENGTH)
        top = x[np.arange(ROWS)[:, None, None], probs.argmax(-1)]  # (B, N, L) token ids
        for head in range(probs.shape[1]):
            counts = np.bincount(top[:, head].ravel())
            most = np.argsort(counts)[::-1][:3]
            words = ", ".join(f"{tok.id_to_token(int(t))!r}" for t in most)
            lines.append(f"  head {head + 1}: neighbours {neighbours[head]:.2f} self "
                         f"{itself[head]:.2f} entropy {entropy[head]:.2f} top keys {words} "
                         f"({counts[most].sum() / counts.sum():.0%})")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdirs", nargs="+")
    parser.add_argument("--text", default="data/austen/emma.txt")
    args = parser.parse_args(argv)
    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    for workdir in args.workdirs:
        print(describe(workdir, text), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
