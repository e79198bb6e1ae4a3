"""Training: run configs, optimiser, losses, pure jitted steps, the shared step loop and job
skeleton, the pretraining corpus of a config, and the two jobs (pretrain, finetune), each
returning a JobResult."""
