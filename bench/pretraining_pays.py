"""Pretraining pays: fine-tune a pretraining run's export on the bundled fine_foods reviews, and
the same architecture from random initialisation with the same recipe, over several seeds.

    python bench/pretraining_pays.py runs/tiny [--seeds 0,1,2] [--out runs/pays]
                                     [--arms pretrained,random] [--redraw REGEX]
                                     [--config.F=V ...]
                                     [--config configs/finetune_fine_foods.py]

Both arms share the fine-tuning config (by default configs/finetune_fine_foods.py at a rate
for a tiny model: 3 epochs, peak 3e-4), the vocabulary and the model config; a seed sets the
fine-tuning seed of both arms (head init, dropout, batch order) and the random encoder's init
(the model's own: normal(0, initializer_range) truncated at 2σ). The arm `random_start` is
random weights started as the pretraining run started them (its train_config.json's position
init and scale, mimetic attention): what the recipe's starting point alone does to fine-tuning.
The arm `redrawn` is the export with the parameters `--redraw` matches redrawn at the model's
init (by default the top layer's query and key kernels, so its attention starts even): what the
rest of pretraining is worth when that part starts afresh.
The score is the last epoch's on the validation file (no epoch is chosen on it: the bundled
data's validation file is its test file). Prints a table of each arm's mean ± sd and writes
OUT/pays.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = ("epochs=3", "learning_rate=3e-4")  # a tiny model's rate (the config's 1e-4 is MiniLM's)
METRICS = ("accuracy", "macro_f1", "mcc")


def random_model(export: str, seed: int, out: str, start_from: str = "") -> str:
    """A Hugging Face directory of the export's architecture and vocabulary, at our init; with
    `start_from` (a pretraining workdir), started as that run started its weights."""
    import jax
    import numpy as np

    from bert_jax.checkpoints import paths
    from bert_jax.checkpoints.huggingface import save_hf
    from bert_jax.models import BertConfig, BertForPreTraining
    config = BertConfig.from_json_file(os.path.join(export, "config.json"))
    ids = np.ones((1, 8), np.int32)
    params = BertForPreTraining(config).init(jax.random.key(seed), ids)["params"]
    if start_from:
        from bert_jax.training import run_record
        from bert_jax.training.initial_params import starting_params
        from bert_jax.training.pretrain_config import PretrainConfig
        saved = run_record.read(os.path.join(start_from, paths.TRAIN_CONFIG))
        fields = {f.name for f in dataclasses.fields(PretrainConfig)}  # not inputs / resumes
        params = starting_params(params, config,
                                 PretrainConfig(**{k: v for k, v in saved.items() if k in fields}))
    save_hf(out, config, params, paths.vocab_files(export), overwrite=True)
    return out


def redrawn_model(export: str, pattern: str, seed: int, out: str) -> str:
    """A copy of the export whose parameters with a path matching `pattern` (a regular
    expression searched in "bert/encoder/layer_1/attention/query/kernel"-style paths) are
    redrawn as the model's own init draws them: what the rest of pretraining is worth when
    that part starts afresh (e.g. 'layer_1/attention/(query|key)': the top layer's attention
    starts spread evenly)."""
    import re

    import jax
    import numpy as np
    from flax import traverse_util

    from bert_jax.checkpoints import paths
    from bert_jax.checkpoints.huggingface import load_hf, save_hf
    from bert_jax.models import BertForPreTraining
    config, params = load_hf(export)
    fresh = BertForPreTraining(config).init(jax.random.key(seed), np.ones((1, 8), np.int32))[
        "params"]
    flat, new = traverse_util.flatten_dict(params, sep="/"), traverse_util.flatten_dict(
        fresh, sep="/")
    hits = sorted(k for k in flat if re.search(pattern, k))
    if not hits:
        raise SystemExit(f"--redraw {pattern!r}: matches no parameter of {export}")
    flat.update({k: new[k] for k in hits})
    save_hf(out, config, traverse_util.unflatten_dict(flat, sep="/"), paths.vocab_files(export),
            overwrite=True)
    return out


def finetune(init: str, config_path: str, overrides: list[str], seed: int, workdir: str) -> dict:
    """The last epoch's validation scores of one fine-tuning run."""
    from bert_jax.training.config_files import apply_overrides, run_config_file
    from bert_jax.training.finetune import finetune as run
    cfg = apply_overrides(run_config_file(config_path),
                          [*RECIPE, *overrides, f"init={init}", f"seed={seed}"])
    result = run(cfg, workdir)
    with open(os.path.join(result.workdir, "epochs.json"), encoding="utf-8") as f:
        return json.load(f)[-1]


def summary(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.mean(values):.1f} ± {100 * sd:.1f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pretrained", help="a pretraining workdir (its export/ is used)")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--out", default="runs/pays")
    parser.add_argument("--arms", default="pretrained,random",
                        help="of pretrained, random, random_start, redrawn")
    parser.add_argument("--redraw", default="layer_1/attention/(query|key)",
                        help="the arm `redrawn`: the export with the parameters whose path "
                             "matches this regular expression redrawn at the model's init")
    parser.add_argument("--config", default=os.path.join(ROOT, "configs",
                                                         "finetune_fine_foods.py"))
    args, rest = parser.parse_known_args(argv)
    overrides = [a[len("--config."):] for a in rest if a.startswith("--config.")]
    if len(overrides) != len(rest):
        parser.error(f"unrecognised arguments: {' '.join(rest)}")
    arms = args.arms.split(",")
    unknown = sorted(set(arms) - {"pretrained", "random", "random_start", "redrawn"})
    if unknown:
        parser.error(f"--arms: unknown {', '.join(unknown)} (pretrained, random, random_start, "
                     f"redrawn)")
    export = os.path.join(args.pretrained, "export")
    if not os.path.isfile(os.path.join(export, "config.json")):
        raise SystemExit(f"{export}: no exported model (run the pretraining to its end)")
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {arm: [] for arm in arms}
    for seed in seeds:
        for arm in arms:
            where = os.path.join(args.out, f"{arm}-init-{seed}")
            if arm == "pretrained":
                init = export
            elif arm == "redrawn":
                init = redrawn_model(export, args.redraw, seed, where)
            else:
                init = random_model(export, seed, where,
                                    start_from=args.pretrained if arm == "random_start" else "")
            scores = finetune(init, args.config, overrides, seed,
                              os.path.join(args.out, f"{arm}-{seed}"))
            runs[arm].append({k: scores[k] for k in METRICS if k in scores})
            print(f"{arm} seed {seed}: " + ", ".join(f"{k} {v:.4f}"
                                                   for k, v in runs[arm][-1].items()),
                  flush=True)
    lines = ["| init | " + " | ".join(METRICS) + " |", "|---|" + "---|" * len(METRICS)]
    for arm, rows in runs.items():
        lines.append(f"| {arm} ({len(rows)} seeds) | "
                     + " | ".join(summary([r[k] for r in rows]) for k in METRICS) + " |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out, "pays.json"), "w", encoding="utf-8") as f:
        json.dump({"pretrained": args.pretrained, "seeds": seeds, "recipe": [*RECIPE, *overrides],
                   **({"redraw": args.redraw} if "redrawn" in arms else {}),
                   "runs": runs, "table": table}, f, indent=1)
    from bert_jax.runtime import environment
    environment.write_beside(os.path.join(args.out, "pays.json"))  # the machine behind it
    return 0


if __name__ == "__main__":
    sys.exit(main())
