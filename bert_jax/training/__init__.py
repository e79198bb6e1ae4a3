"""Training: run configs, optimiser, losses, pure jitted steps, the shared step loop and job
skeleton, orbax checkpoints, sharding over devices and processes, metric writing, and the two
jobs (pretrain, finetune)."""
