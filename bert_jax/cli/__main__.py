"""`python -m bert_jax.cli …` is `bert-jax …`."""

import sys

from bert_jax.cli.main import main

sys.exit(main())
