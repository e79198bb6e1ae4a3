"""What a run needs from the machine: mesh and sharding, jax.distributed with its watchdog and
coordinator, XLA options, the orbax train-state checkpoints a run resumes from, metric writing
and the named PRNG streams."""
