#!/usr/bin/env bash
# The pretraining levers of bench/RESULTS.md ("Pretraining levers"), each a run of ours alone
# on one recipe with one change, under the same short time budget, one after the other on a
# quiet machine, evaluated every 30 s of training clock:
#     [RECIPE=old|default] bash bench/pretrain_levers.sh [MINUTES] [NAME ...]
# (default: the old recipe, 5 minutes, every lever). RECIPE=old is configs/pretrain_tiny.py
# before the mimetic init became its default (the 2026-12-02 table); RECIPE=default is today's
# configs/pretrain_tiny.py (off the plateau, so a lever's effect shows beyond it).
# Curves: runs/levers[_default]/NAME.json (.md, .png); compare: python bench/time_to_accuracy.py
# --plot runs/levers/*.json --out runs/levers --label all
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-5}
shift || true
recipe=${RECIPE:-old}
case $recipe in
  old) out=runs/levers; base="--config.position_scale=1 --config.mimetic_qk=0 --config.warmup_steps=300" ;;
  default) out=runs/levers_default; base="" ;;
  *) echo "RECIPE: expected old or default, got $recipe" >&2; exit 2 ;;
esac
mkdir -p "$out"
heads4=$out/heads4.json layers4=$out/layers4.json wide256=$out/wide256.json
python - "$heads4" "$layers4" "$wide256" <<'PY'
import sys
from bert_jax.models import BertConfig
BertConfig.preset("tiny", vocab_size=8192, num_attention_heads=4).to_json_file(sys.argv[1])
BertConfig.preset("tiny", vocab_size=8192, num_hidden_layers=4).to_json_file(sys.argv[2])
BertConfig.preset("tiny", vocab_size=8192, hidden_size=256, num_attention_heads=4,
                  intermediate_size=1024).to_json_file(sys.argv[3])
PY
declare -A lever=(
  [base]=""
  [mask30]="--config.masked_lm_prob=0.3 --config.max_predictions_per_seq=0"
  [mask40]="--config.masked_lm_prob=0.4 --config.max_predictions_per_seq=0"
  [b2_098_clip05]="--config.adam_b2=0.98 --config.max_grad_norm=0.5"
  [wsd30]="--config.decay_share=0.3"
  [init01]="--config.initializer_range=0.01"
  [init05]="--config.initializer_range=0.05"
  [heads4]="--config.model=$heads4"
  [lr3e3_b2_098]="--config.learning_rate=3e-3 --config.adam_b2=0.98"
  [batch64]="--config.batch_size=64"
  [bf16]="--config.dtype=bfloat16"
  [mimetic08]="--config.mimetic_qk=0.08"
  [mimetic12]="--config.mimetic_qk=0.12"
  [pos4]="--config.position_scale=4"
  [mimetic12_pos4]="--config.mimetic_qk=0.12 --config.position_scale=4"
  [mimetic08_pos4]="--config.mimetic_qk=0.08 --config.position_scale=4"
  [layers4]="--config.model=$layers4"  # 4 × 128: twice the encoder's compute a step
  [wide256]="--config.model=$wide256"  # 2 × 256, 4 heads of 64: four times
  [batch64_wu500]="--config.batch_size=64 --config.warmup_steps=500"  # the same warm-up examples
  [phase64]="--config.phase1_seq_length=64 --config.phase1_share=0.5"  # shorter rows first
  [mimetic08_pos4_lr1e3]="--config.mimetic_qk=0.08 --config.position_scale=4 --config.learning_rate=1e-3"
)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(base mask30 mask40 b2_098_clip05 wsd30 init01 init05 heads4 lr3e3_b2_098 batch64 bf16
                               mimetic08 mimetic12 pos4 mimetic12_pos4 mimetic08_pos4)
for name in "${names[@]}"; do
  # shellcheck disable=SC2086
  python bench/time_to_accuracy.py --frameworks ours --minutes "$minutes" --eval-every 30 \
    --out "$out" --label "$name" --config.time_budget_minutes="$minutes" $base ${lever[$name]}
done
