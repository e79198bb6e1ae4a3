"""Bad-input sweep: every `bert-jax` command, given a wrong path, an empty or non-UTF-8 file,
malformed JSON / CSV, a broken checkpoint, mismatched sizes or an impossible value, exits 2 with
ONE stderr line naming the file / field / tensor (no traceback, never the catch-all), and leaves
its inputs, workdir and destination byte for byte as they were. Texts longer than the model are
truncated with one counted warning instead.

Cases run in-process (cli.main) against tiny random models built once per module; three run the
real entry point in a subprocess to show the traceback appears only with --debug.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys

import datasets  # noqa: F401  (imported here: its stderr log handler must outlive each test)
import numpy as np
import pytest
from conftest import make_hf_model
from task_fixtures import squad_json, write_conll

from bert_jax import cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = ("the a an and of to in is was it he she they we you i that this for on with as at by "
         "from but not be have had his her their my your one all so if or no yes good bad great "
         "film movie food cat dog sat mat day night small very really nice love hate like best "
         "worst time story book read tea cake sweet taste price buy ok fine never always new "
         "house home").split()
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "!", "?", *WORDS]
VOCAB += [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz"][:97 - len(VOCAB)]
assert len(VOCAB) == 97 and len(set(VOCAB)) == 97
TAGS = {0: "O", 1: "B-X", 2: "I-X"}
LONG = " ".join(["the cat sat on the mat and the dog read a book ."] * 5)  # 65 tokens > 40


# -- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def b(tmp_path_factory):
    """Tiny random models (vocab 97, H32, L2, 40 positions) in both formats, data files, a
    pretraining corpus and config: the shared, read-only inputs of every case."""
    from bert_jax.model_files import huggingface as convert
    from bert_jax.model_files import model_dir as pretrained
    from bert_jax.model_files import paths
    from bert_jax.models.config import BertConfig
    root = tmp_path_factory.mktemp("bad_input")
    p = lambda *parts: str(root.joinpath(*parts))  # noqa: E731
    vocab = "".join(t + "\n" for t in VOCAB)
    (root / "vocab.txt").write_text(vocab, encoding="utf-8")
    for name, architecture in (("hf", "BertForPreTraining"), ("hf_cls",
                                                               "BertForSequenceClassification"),
                               ("hf_base", "BertModel")):
        make_hf_model(root / name, architecture)
        (root / name / "vocab.txt").write_text(vocab, encoding="utf-8")
    # fine-tuned models of the span and tagging tasks (an HF directory is a valid MODEL)
    make_hf_model(root / "hf_qa", "BertForQuestionAnswering")
    make_hf_model(root / "hf_tag", "BertForTokenClassification", id2label=TAGS)
    make_hf_model(root / "hf_mc", "BertForMultipleChoice")
    for name in ("hf_qa", "hf_tag", "hf_mc"):
        (root / name / "vocab.txt").write_text(vocab, encoding="utf-8")
    for src, dst in (("hf", "ours"), ("hf_cls", "ours_cls")):
        config, params = convert.load_hf(p(src))
        pretrained.save_model_dir(p(dst), config, params, paths.vocab_files(p(src)))
    (root / "texts.txt").write_text("the cat sat on the mat .\na good film\nok\n", encoding="utf-8")
    rows = ["a good film", "the worst movie", "i love this cake", "bad food", "great tea",
            "never buy this", "nice house", "the price is bad"]
    (root / "data.csv").write_text("text,label\n" + "".join(
        f"{t},{'pos' if i % 2 == 0 else 'neg'}\n" for i, t in enumerate(rows)), encoding="utf-8")
    (root / "corpus").mkdir()
    for i in range(2):
        (root / "corpus" / f"doc{i}.txt").write_text(
            "The cat sat on the mat. The dog read a book. She had tea and cake.\n" * 3,
            encoding="utf-8")
    BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=37, max_position_embeddings=40).to_json_file(p("model.json"))
    (root / "pretrain.py").write_text(
        "from bert_jax.training.pretrain_config import PretrainConfig\n\n\n"
        "def get_config():\n"
        f"    return PretrainConfig(model={p('model.json')!r}, vocab={p('vocab.txt')!r},\n"
        f"                          train_files={p('corpus', '*.txt')!r}, max_seq_length=32,\n"
        "                          max_predictions_per_seq=5, batch_size=4, steps=2,\n"
        "                          warmup_steps=0, eval_every=0, checkpoint_every=2)\n",
        encoding="utf-8")
    return root


def path(root, *parts) -> str:
    return str(root.joinpath(*parts))


def copy(src, dst) -> str:
    shutil.copytree(src, dst)
    return str(dst)


def write(file, data: bytes) -> None:
    with open(file, "wb") as f:
        f.write(data)


def edit_json(file, **changes) -> None:
    with open(file, encoding="utf-8") as f:
        d = json.load(f)
    d.update(changes)
    with open(file, "w", encoding="utf-8") as f:
        json.dump(d, f)


def orbax_files(model_dir) -> list[str]:
    """Every file orbax wrote under a model dir's params/."""
    return [os.path.join(d, n) for d, _, names in os.walk(os.path.join(model_dir, "params"))
            for n in names]


def snapshot(*roots) -> dict:
    """{(root, relative path): (size, sha1) of a file, or "dir"}; a missing root maps to None."""
    out = {}
    for root in map(str, roots):
        if not os.path.exists(root):
            out[(root, "")] = None
            continue
        for directory, _, names in os.walk(root):
            out[(root, os.path.relpath(directory, root))] = "dir"
            for name in names:
                file = os.path.join(directory, name)
                with open(file, "rb") as f:
                    data = f.read()
                out[(root, os.path.relpath(file, root))] = (len(data),
                                                            hashlib.sha1(data).hexdigest())
    return out


# -- the sweep ---------------------------------------------------------------------------------

@dataclasses.dataclass
class Case:
    argv: list
    needle: str  # must appear in the one stderr line
    absent: tuple = ()  # a brand-new workdir / destination that must not be left behind
    also: tuple = ()  # further parts the line must contain, wherever they are in it
    patch: tuple = ()  # (module, name, value): a limit made small for the case


CASES = {}


def case(fn):
    """Register `fn(b, t) -> Case` (b: shared inputs, t: this case's own directory)."""
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


# convert

@case
def convert_src_missing(b, t):
    return Case(["convert", str(t / "nope"), str(t / "out")], f"{t / 'nope'}: no such directory",
                absent=(t / "out",))


@case
def convert_src_is_a_file(b, t):
    return Case(["convert", path(b, "texts.txt"), str(t / "out")],
                f"{path(b, 'texts.txt')}: not a directory", absent=(t / "out",))


@case
def convert_no_config_json(b, t):
    src = copy(b / "hf", t / "src")
    os.remove(os.path.join(src, "config.json"))
    return Case(["convert", src, str(t / "out")], f"{src}/config.json: config file not found",
                absent=(t / "out",))


@case
def convert_config_malformed_json(b, t):
    src = copy(b / "hf", t / "src")
    write(os.path.join(src, "config.json"), b'{"hidden_size": 32,')
    return Case(["convert", src, str(t / "out")], f"{src}/config.json: not valid JSON",
                absent=(t / "out",))


@case
def convert_config_non_utf8(b, t):
    src = copy(b / "hf", t / "src")
    write(os.path.join(src, "config.json"), b'{"hidden_size": "\xff\xfe"}')
    return Case(["convert", src, str(t / "out")], f"{src}/config.json: not valid JSON",
                absent=(t / "out",))


@case
def convert_config_heads_do_not_divide_hidden(b, t):
    src = copy(b / "hf", t / "src")
    edit_json(os.path.join(src, "config.json"), num_attention_heads=5)
    return Case(["convert", src, str(t / "out")],
                "config.json: hidden_size: 32 is not divisible by num_attention_heads (5)",
                absent=(t / "out",))


@case
def convert_config_negative_layers(b, t):
    src = copy(b / "hf", t / "src")
    edit_json(os.path.join(src, "config.json"), num_hidden_layers=-1)
    return Case(["convert", src, str(t / "out")],
                "config.json: num_hidden_layers: expected an integer ≥ 1, got -1",
                absent=(t / "out",))


@case
def convert_safetensors_truncated(b, t):
    src = copy(b / "hf", t / "src")
    weights = os.path.join(src, "model.safetensors")
    os.truncate(weights, os.path.getsize(weights) // 3)
    return Case(["convert", src, str(t / "out")],
                f"{weights}: not a valid safetensors file", absent=(t / "out",))


@case
def convert_safetensors_header_garbage(b, t):
    src = copy(b / "hf", t / "src")
    weights = os.path.join(src, "model.safetensors")
    with open(weights, "r+b") as f:
        f.seek(8)
        f.write(b"}{ not json at all, really }}}}}")
    return Case(["convert", src, str(t / "out")],
                f"{weights}: not a valid safetensors file", absent=(t / "out",))


def _edit_tensors(src, edit) -> None:
    from safetensors.numpy import load_file, save_file
    weights = os.path.join(src, "model.safetensors")
    state = load_file(weights)
    edit(state)
    save_file(state, weights, metadata={"format": "pt"})


@case
def convert_tensor_missing(b, t):
    src = copy(b / "hf", t / "src")
    _edit_tensors(src, lambda s: s.pop("bert.encoder.layer.0.attention.self.value.bias"))
    return Case(["convert", src, str(t / "out")],
                "missing tensor(s) bert.encoder.layer.0.attention.self.value.bias",
                absent=(t / "out",))


@case
def convert_vocab_size_mismatch(b, t):
    src = copy(b / "hf", t / "src")
    edit_json(os.path.join(src, "config.json"), vocab_size=120)
    return Case(["convert", src, str(t / "out")],
                "tensor bert.embeddings.word_embeddings.weight has shape (97, 32), expected "
                "(120, 32) from config.json", absent=(t / "out",))


@case
def convert_destination_not_empty(b, t):
    (t / "out").mkdir()
    (t / "out" / "keep.txt").write_text("precious")
    return Case(["convert", path(b, "hf"), str(t / "out")],
                f"{t / 'out'}: directory exists and is not empty (pass --overwrite")


@case
def convert_destination_is_the_source(b, t):
    src = copy(b / "ours", t / "ours")
    return Case(["convert", src, src, "--to", "hf", "--overwrite"],
                f"{src}: the destination is the source directory")  # --overwrite would delete it


@case
def convert_to_hf_from_a_non_model_dir(b, t):
    (t / "notes").mkdir()
    (t / "notes" / "readme.txt").write_text("hello")
    return Case(["convert", str(t / "notes"), str(t / "out"), "--to", "hf"],
                f"{t / 'notes'}: neither a bert_jax model directory", absent=(t / "out",))


@case
def convert_to_hf_orbax_params_truncated(b, t):
    src = copy(b / "ours", t / "ours")
    for f in orbax_files(src):
        os.truncate(f, os.path.getsize(f) // 2)
    return Case(["convert", src, str(t / "out"), "--to", "hf"],
                f"{src}/params: not a readable orbax checkpoint", absent=(t / "out",))


@case
def convert_to_hf_orbax_params_empty(b, t):
    src = copy(b / "ours", t / "ours")
    shutil.rmtree(os.path.join(src, "params"))
    os.mkdir(os.path.join(src, "params"))
    return Case(["convert", src, str(t / "out"), "--to", "hf"],
                f"{src}/params: not a readable orbax checkpoint", absent=(t / "out",))


@case
def convert_to_hf_params_do_not_fit_config(b, t):
    src = copy(b / "ours", t / "ours")
    edit_json(os.path.join(src, "config.json"), intermediate_size=40)
    return Case(["convert", src, str(t / "out"), "--to", "hf"],
                f"{src}/params: does not fit config.json: bert/encoder/layer_0/feed_forward/"
                f"intermediate/bias has shape (37,), expected (40,)", absent=(t / "out",))


# parity

@case
def parity_missing_dir(b, t):
    return Case(["parity", str(t / "nope")], f"{t / 'nope'}: no such directory")


@case
def parity_corrupt_safetensors(b, t):
    src = copy(b / "hf", t / "src")
    write(os.path.join(src, "model.safetensors"), b"\x00" * 64)
    return Case(["parity", src], f"{src}/model.safetensors: not a valid safetensors file")


@case
def parity_batch_size_zero(b, t):
    return Case(["parity", path(b, "hf"), "--batch-size", "0"],
                "--batch-size: expected an integer ≥ 1, got 0")


@case
def parity_seq_len_beyond_positions(b, t):
    return Case(["parity", path(b, "hf"), "--seq-len", "41"],
                "--seq-len: 41 is more than the model's max_position_embeddings (40)")


@case
def parity_batch_size_not_an_integer(b, t):
    return Case(["parity", path(b, "hf"), "--batch-size", "two"],
                "argument --batch-size: invalid int value: 'two'")


# tokenizer

@case
def tokenizer_glob_matches_nothing(b, t):
    return Case(["tokenizer", "--files", str(t / "*.txt"), "--out", str(t / "vocab")],
                f"{t / '*.txt'}: no file matches this pattern", absent=(t / "vocab",))


@case
def tokenizer_empty_file(b, t):
    (t / "empty.txt").write_text("")
    return Case(["tokenizer", "--files", str(t / "empty.txt"), "--out", str(t / "vocab")],
                f"{t / 'empty.txt'}: file is empty", absent=(t / "vocab",))


@case
def tokenizer_non_utf8_file(b, t):
    (t / "latin1.txt").write_bytes("café au lait\n".encode("latin-1"))
    return Case(["tokenizer", "--files", str(t / "*.txt"), "--out", str(t / "vocab")],
                f"{t / 'latin1.txt'}: not UTF-8 text (byte 0xe9 at offset 3)",
                absent=(t / "vocab",))


@case
def tokenizer_vocab_size_below_special_tokens(b, t):
    return Case(["tokenizer", "--files", path(b, "texts.txt"), "--vocab-size", "3", "--out",
                 str(t / "vocab")], "vocab_size: expected an integer > 5, got 3",
                absent=(t / "vocab",))


@case
def tokenizer_out_is_a_file(b, t):
    (t / "vocab").write_text("not a directory")
    return Case(["tokenizer", "--files", path(b, "texts.txt"), "--vocab-size", "50", "--out",
                 str(t / "vocab")], f"{t / 'vocab'}: exists and is not a directory")


# pretrain

def pretrain(b, t, *overrides, workdir=None):
    return ["pretrain", "--config", path(b, "pretrain.py"), "--workdir",
            str(workdir or t / "work"), *overrides]


@case
def pretrain_config_file_missing(b, t):
    return Case(["pretrain", "--config", str(t / "nope.py"), "--workdir", str(t / "work")],
                f"{t / 'nope.py'}: config file not found", absent=(t / "work",))


@case
def pretrain_config_syntax_error(b, t):
    (t / "broken.py").write_text("def get_config(:\n    pass\n")
    return Case(["pretrain", "--config", str(t / "broken.py"), "--workdir", str(t / "work")],
                f"{t / 'broken.py'}:1: invalid Python", absent=(t / "work",))


@case
def pretrain_config_raises(b, t):
    (t / "raises.py").write_text("def get_config():\n    return undefined_name\n")
    return Case(["pretrain", "--config", str(t / "raises.py"), "--workdir", str(t / "work")],
                f"{t / 'raises.py'}:2: NameError: name 'undefined_name' is not defined",
                absent=(t / "work",))


@case
def pretrain_config_field_of_wrong_type(b, t):
    (t / "typed.py").write_text("from bert_jax.training.pretrain_config import PretrainConfig\n"
                                "def get_config():\n    return PretrainConfig(steps='10')\n")
    return Case(["pretrain", "--config", str(t / "typed.py"), "--workdir", str(t / "work")],
                "config.steps: expected int, got '10'", absent=(t / "work",))


@case
def pretrain_unknown_override(b, t):
    return Case(pretrain(b, t, "--config.stpes=3"),
                "--config.stpes: unknown config field; did you mean steps",
                absent=(t / "work",))


@case
def pretrain_override_not_a_number(b, t):
    return Case(pretrain(b, t, "--config.steps=abc"), "--config.steps: expected int, got 'abc'",
                absent=(t / "work",))


@case
def pretrain_batch_size_zero(b, t):
    return Case(pretrain(b, t, "--config.batch_size=0"),
                "config.batch_size: expected an integer ≥ 1, got 0", absent=(t / "work",))


@case
def pretrain_learning_rate_negative(b, t):
    return Case(pretrain(b, t, "--config.learning_rate=-0.001"),
                "config.learning_rate: expected a positive number, got -0.001",
                absent=(t / "work",))


@case
def pretrain_learning_rate_nan(b, t):
    return Case(pretrain(b, t, "--config.learning_rate=nan"),
                "config.learning_rate: expected a positive number, got nan",
                absent=(t / "work",))


@case
def pretrain_masked_lm_prob_above_one(b, t):
    return Case(pretrain(b, t, "--config.masked_lm_prob=1.5"),
                "config.masked_lm_prob: expected a value in [0, 1), got 1.5",
                absent=(t / "work",))


@case
def pretrain_max_seq_length_beyond_positions(b, t):
    return Case(pretrain(b, t, "--config.max_seq_length=64"),
                "config.max_seq_length: 64 exceeds the model's max_position_embeddings (40)",
                absent=(t / "work",))


@case
def pretrain_train_files_match_nothing(b, t):
    return Case(pretrain(b, t, f"--config.train_files={t / 'none' / '*.txt'}"),
                f"{t / 'none' / '*.txt'}: no file matches this pattern", absent=(t / "work",))


@case
def pretrain_train_file_empty(b, t):
    (t / "empty.txt").write_text("")
    return Case(pretrain(b, t, f"--config.train_files={t / 'empty.txt'}"),
                f"{t / 'empty.txt'}: file is empty", absent=(t / "work",))


@case
def pretrain_train_file_non_utf8(b, t):
    (t / "corpus").mkdir()
    (t / "corpus" / "a.txt").write_text("The cat sat. The dog read.\n")
    (t / "corpus" / "b.txt").write_bytes(b"The caf\xe9 was shut. It rained.\n")
    return Case(pretrain(b, t, f"--config.train_files={t / 'corpus' / '*.txt'}"),
                f"{t / 'corpus' / 'b.txt'}: not UTF-8 text", absent=(t / "work",))


@case
def pretrain_vocab_missing(b, t):
    return Case(pretrain(b, t, f"--config.vocab={t / 'vocab.txt'}"),
                f"{t / 'vocab.txt'}: tokenizer file not found", absent=(t / "work",))


@case
def pretrain_model_json_malformed(b, t):
    (t / "model.json").write_text("{'vocab_size': 97}")
    return Case(pretrain(b, t, f"--config.model={t / 'model.json'}"),
                f"{t / 'model.json'}: not valid JSON", absent=(t / "work",))


@case
def pretrain_model_vocab_size_mismatch(b, t):
    shutil.copy(path(b, "model.json"), t / "model.json")
    edit_json(t / "model.json", vocab_size=120)
    return Case(pretrain(b, t, f"--config.model={t / 'model.json'}"),
                f"{t / 'model.json'}: vocab_size 120 does not match the vocabulary (97 tokens)",
                absent=(t / "work",))


@case
def pretrain_workdir_holds_another_model(b, t):
    """An existing run (its config.json, checkpoints/ and its own vocab/) must stay untouched."""
    from bert_jax.models.config import BertConfig
    work = t / "run"
    (work / "checkpoints" / "2").mkdir(parents=True)
    (work / "checkpoints" / "2" / "marker").write_text("a checkpoint")
    (work / "vocab").mkdir()
    (work / "vocab" / "vocab.txt").write_text("".join(tk + "\n" for tk in VOCAB[:60]))
    BertConfig(vocab_size=97, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
               intermediate_size=37, max_position_embeddings=40).to_json_file(
        str(work / "config.json"))
    return Case(pretrain(b, t, workdir=work),
                f"{work}: holds a checkpoint of a different model (hidden_size 48 there, "
                f"32 here")


@case
def pretrain_resumed_with_another_rate(b, t):
    """A run's workdir (its checkpoints/, config.json and saved config) resumed with another
    learning rate: refused, the saved config untouched."""
    from bert_jax.models.config import BertConfig
    from bert_jax.training import pretrain_config
    work = t / "run"
    (work / "checkpoints" / "2").mkdir(parents=True)
    BertConfig.from_json_file(path(b, "model.json")).to_json_file(str(work / "config.json"))
    saved = dataclasses.asdict(pretrain_config.load_config(path(b, "pretrain.py")))
    (work / "train_config.json").write_text(json.dumps(saved), encoding="utf-8")
    return Case(pretrain(b, t, "--config.learning_rate=0.01", "--config.seed=3", workdir=work),
                f"{work}: holds a run with other settings (--config.learning_rate: 0.0001 there, "
                f"0.01 here; --config.seed: 0 there, 3 here); a resumed run must compute what it "
                f"started: use a new workdir, or the saved settings (train_config.json)")


@case
def pretrain_init_from_corrupt(b, t):
    src = copy(b / "ours", t / "init")
    for f in orbax_files(src):
        os.truncate(f, os.path.getsize(f) // 2)
    return Case(pretrain(b, t, f"--config.init_from={src}"),
                f"{src}/params: not a readable orbax checkpoint", absent=(t / "work",))


# prepare

@case
def prepare_bad_text_leaves_no_out_and_no_vocab(b, t):
    (t / "corpus").mkdir()
    (t / "corpus" / "a.txt").write_bytes(b"The caf\xe9 was shut. It rained.\n")
    return Case(["prepare", "--config", path(b, "pretrain.py"), "--out", str(t / "set"),
                 "--workers", "0", f"--config.train_files={t / 'corpus' / '*.txt'}"],
                f"{t / 'corpus' / 'a.txt'}: not UTF-8 text", absent=(t / "set",))


@case
def prepare_bad_text_into_an_existing_out_leaves_it_as_it_was(b, t):
    (t / "set").mkdir()
    (t / "set" / "notes.txt").write_text("mine")
    (t / "corpus").mkdir()
    (t / "corpus" / "a.txt").write_bytes(b"The caf\xe9 was shut. It rained.\n")
    return Case(["prepare", "--config", path(b, "pretrain.py"), "--out", str(t / "set"),
                 "--workers", "0", f"--config.train_files={t / 'corpus' / '*.txt'}"],
                f"{t / 'corpus' / 'a.txt'}: not UTF-8 text", absent=(t / "set" / "vocab",))


# finetune

def finetune(b, t, *extra, init=None, train=None, validation=None):
    return ["finetune", "--init", str(init or path(b, "hf")), "--train",
            str(train or path(b, "data.csv")), "--validation",
            str(validation or path(b, "data.csv")), "--workdir", str(t / "work"),
            "--max-seq-length", "16", "--batch-size", "4", "--epochs", "1", *extra]


@case
def finetune_init_missing(b, t):
    return Case(finetune(b, t, init=t / "nope"), f"{t / 'nope'}: no such model directory",
                absent=(t / "work",))


@case
def finetune_train_file_missing(b, t):
    return Case(finetune(b, t, train=t / "train.csv"), f"{t / 'train.csv'}: file not found",
                absent=(t / "work",))


@case
def finetune_csv_malformed(b, t):
    (t / "train.csv").write_text('text,label\n"a good film,pos\nbad,neg,extra,fields\n')
    return Case(finetune(b, t, train=t / "train.csv"),
                f"{t / 'train.csv'}: could not read as csv", absent=(t / "work",))


@case
def finetune_csv_non_utf8(b, t):
    (t / "train.csv").write_bytes(b"text,label\ncaf\xe9,pos\nbad,neg\n")
    return Case(finetune(b, t, train=t / "train.csv"),
                f"{t / 'train.csv'}: not UTF-8 text (byte 0xe9", absent=(t / "work",))


@case
def finetune_jsonl_malformed(b, t):
    (t / "train.jsonl").write_text('{"text": "a good film", "label": "pos"}\n{"text": "bad",\n')
    return Case(finetune(b, t, train=t / "train.jsonl"),
                f"{t / 'train.jsonl'}: could not read as jsonl", absent=(t / "work",))


@case
def finetune_train_file_empty(b, t):
    (t / "train.csv").write_text("")
    return Case(finetune(b, t, train=t / "train.csv"), f"{t / 'train.csv'}: empty file",
                absent=(t / "work",))


@case
def finetune_label_column_missing(b, t):
    return Case(finetune(b, t, "--label-column", "stars"),
                f"{path(b, 'data.csv')}: no column 'stars'; columns present: text, label",
                absent=(t / "work",))


@case
def finetune_regression_target_not_a_number(b, t):
    (t / "train.csv").write_text("text,score\na good film,4.5\nbad food,1\ngreat tea,five\n")
    return Case(finetune(b, t, "--task", "regression", "--label-column", "score",
                         train=t / "train.csv"),
                f"{t / 'train.csv'}: row 3: column 'score' is 'five'; expected a number "
                f"(regression target)", absent=(t / "work",))


@case
def finetune_regression_target_missing(b, t):
    (t / "dev.csv").write_text("text,score\na good film,4.5\nbad food,\n")
    (t / "train.csv").write_text("text,score\na good film,4.5\nbad food,1\n")
    return Case(finetune(b, t, "--task", "regression", "--label-column", "score",
                         train=t / "train.csv", validation=t / "dev.csv"),
                f"{t / 'dev.csv'}: row 2: column 'score' is empty; expected a number "
                f"(regression target)", absent=(t / "work",))


@case
def finetune_epochs_zero(b, t):
    return Case(finetune(b, t, "--epochs", "0"), "config.epochs: expected an integer ≥ 1, got 0",
                absent=(t / "work",))


@case
def finetune_batch_size_negative(b, t):
    return Case(finetune(b, t, "--batch-size", "-4"),
                "config.batch_size: expected an integer ≥ 1, got -4", absent=(t / "work",))


@case
def finetune_max_seq_length_beyond_positions(b, t):
    return Case(finetune(b, t, "--max-seq-length", "64"),
                "config.max_seq_length: 64 exceeds the model's max_position_embeddings (40)",
                absent=(t / "work",))


@case
def finetune_vocab_larger_than_model(b, t):
    init = copy(b / "hf", t / "init")
    with open(os.path.join(init, "vocab.txt"), "a", encoding="utf-8") as f:
        f.writelines(f"extra{i}\n" for i in range(23))
    return Case(finetune(b, t, init=init),
                f"{init}/vocab.txt: 120 tokens, more than the model's vocab_size (97)",
                absent=(t / "work",))


@case
def finetune_workdir_of_another_task(b, t):
    (t / "work" / "checkpoints").mkdir(parents=True)
    (t / "work" / "labels.json").write_text('["spam", "ham"]\n')
    return Case(finetune(b, t), f"{t / 'work'}: holds a run with labels spam, ham, this data "
                                f"has neg, pos")


@case
def finetune_resumed_with_another_seed(b, t):
    from bert_jax.training import finetune_config
    (t / "work" / "checkpoints").mkdir(parents=True)
    (t / "work" / "labels.json").write_text('["neg", "pos"]\n')
    cfg = finetune_config.load_config("", init_from=path(b, "hf"), train_file=path(b, "data.csv"),
                                      validation_file=path(b, "data.csv"), max_seq_length=16,
                                      batch_size=4, epochs=1)
    (t / "work" / "finetune_config.json").write_text(json.dumps(dataclasses.asdict(cfg)))
    return Case(finetune(b, t, "--seed", "3"),
                f"{t / 'work'}: holds a run with other settings (config.seed: 0 there, 3 here); "
                f"a resumed run must compute what it started")


# finetune: question answering, token classification, multiple choice (data from VOCAB words)

QA_CONTEXT = "the cat sat on the mat . the dog read a book ."
QA = (("the cat sat on the ?", "mat"), ("the dog read a ?", "book"),
      ("? sat on the mat", "cat"), ("the ? read a book", "dog"))


def qa_records(n=4):
    """Records in the Hugging Face `squad` layout: id, question, context, answers."""
    out = []
    for i in range(n):
        question, answer = QA[i % len(QA)]
        start = QA_CONTEXT.index(f" {answer} ") + 1
        out.append({"id": f"q{i}", "question": question, "context": QA_CONTEXT,
                    "answers": {"text": [answer], "answer_start": [start]}})
    return out


def write_jsonl(file, rows) -> str:
    with open(file, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return str(file)


def qa_finetune(b, t, *extra, train=None, validation=None):
    """finetune --task question-answering on good SQuAD JSON unless train / validation given;
    32 tokens fit question and context in one window."""
    if train is None:
        squad_json(t / "train.json", qa_records())
        train = t / "train.json"
    if validation is None:
        squad_json(t / "dev.json", qa_records())
        validation = t / "dev.json"
    return finetune(b, t, "--task", "question-answering", "--max-seq-length", "32", *extra,
                    train=train, validation=validation)


TAGGED = ((("the", "cat", "sat", "on", "the", "mat"), ("O", "B-X", "O", "O", "O", "B-X")),
          (("a", "good", "film", "and", "a", "bad", "book"),
           ("O", "B-X", "I-X", "O", "O", "B-X", "I-X")),
          (("she", "read", "a", "great", "story"), ("O", "O", "O", "B-X", "I-X")))


def tag_finetune(b, t, *extra, train=None, validation=None):
    """finetune --task token-classification on good CoNLL files unless train / validation
    given."""
    words, tags = [w for w, _ in TAGGED], [g for _, g in TAGGED]
    if train is None:
        write_conll(t / "train.conll", words, tags)
        train = t / "train.conll"
    if validation is None:
        write_conll(t / "dev.conll", words, tags)
        validation = t / "dev.conll"
    return finetune(b, t, "--task", "token-classification", *extra, train=train,
                    validation=validation)


SWAG_COLUMNS = ("sent1", "sent2", "ending0", "ending1", "ending2", "ending3", "label")
SWAG = (("the cat is", "very", "good", "bad", "nice", "small", "0"),
        ("the tea is", "really", "sweet", "new", "fine", "great", "0"),
        ("the film was", "the", "best", "worst", "ok", "new", "1"),
        ("the cake is", "so", "bad", "sweet", "nice", "small", "1"))


def write_swag(file, rows=SWAG, columns=SWAG_COLUMNS) -> str:
    with open(file, "w", encoding="utf-8") as f:
        f.write(",".join(columns) + "\n" + "".join(",".join(r) + "\n" for r in rows))
    return str(file)


def choice_finetune(b, t, *extra, train=None, validation=None):
    train = train or write_swag(t / "train.csv")
    validation = validation or write_swag(t / "dev.csv")
    return finetune(b, t, "--task", "multiple-choice", *extra, train=train,
                    validation=validation)


@case
def finetune_qa_answer_not_at_answer_start(b, t):
    rows = qa_records()
    rows[1]["answers"]["answer_start"] = [3]  # "book" is at 40
    squad_json(t / "train.json", rows)
    return Case(qa_finetune(b, t, train=t / "train.json"),
                f"{t / 'train.json'}: question 'q1' (row 2): answer 'book' is not at "
                f"answer_start 3", absent=(t / "work",))


@case
def finetune_qa_question_leaves_no_room_for_the_context(b, t):
    rows = qa_records()
    rows[2]["question"] = " ".join(["the cat sat on the mat"] * 3) + " ?"  # 19 tokens
    squad_json(t / "train.json", rows)
    return Case(qa_finetune(b, t, "--max-seq-length", "16", "--doc-stride", "2",
                            train=t / "train.json"),
                f"{t / 'train.json'}: question 'q2'", absent=(t / "work",),
                also=("has 19 tokens", "--max-seq-length 16 leaves no room for the context"))


@case
def finetune_qa_jsonl_record_without_context(b, t):
    rows = qa_records()
    for r in rows:
        del r["context"]
    train = write_jsonl(t / "train.jsonl", rows)
    return Case(qa_finetune(b, t, train=train),
                f"{train}: no column 'context'; columns present: id, question, answers",
                absent=(t / "work",))


@case
def finetune_qa_doc_stride_too_large(b, t):
    # 16 tokens − 6 question tokens − 3 specials leave 7 context tokens per window; the context
    # has 13, so windows must advance, and a stride of 7 would not move them
    return Case(qa_finetune(b, t, "--max-seq-length", "16", "--doc-stride", "7"),
                "--doc-stride: 7 must be less than the 7 context tokens",
                absent=(t / "work",), also=("--max-seq-length 16", f"question 'q0' of "
                                                                    f"{t / 'train.json'}"))


@case
def finetune_qa_squad_json_invalid(b, t):
    (t / "train.json").write_text('{"version": "1.1", "data": [{"title": "t",',
                                  encoding="utf-8")
    return Case(qa_finetune(b, t, train=t / "train.json"),
                f"{t / 'train.json'}: not valid JSON", absent=(t / "work",))


@case
def finetune_qa_squad_json_without_data(b, t):
    (t / "train.json").write_text('{"version": "1.1", "articles": []}', encoding="utf-8")
    return Case(qa_finetune(b, t, train=t / "train.json"),
                f"{t / 'train.json'}: expected SQuAD JSON (a top-level 'data' list) or a list "
                f"of records with fields id, question, context, answers", absent=(t / "work",))


@case
def finetune_tags_tokens_and_tags_of_different_lengths(b, t):
    rows = [{"tokens": list(w), "tags": list(g)} for w, g in TAGGED]
    rows[1]["tags"].pop()
    train = write_jsonl(t / "train.jsonl", rows)
    return Case(tag_finetune(b, t, train=train),
                f"{train}: row 2: 7 tokens but 6 tags; expected one tag per token",
                absent=(t / "work",))


@case
def finetune_tags_column_missing(b, t):
    train = write_jsonl(t / "train.jsonl", [{"tokens": list(w), "ner": list(g)}
                                            for w, g in TAGGED])
    return Case(tag_finetune(b, t, train=train),
                f"{train}: no column 'tags'; columns present: tokens, ner",
                absent=(t / "work",))


@case
def finetune_tags_conll_line_with_one_column(b, t):
    (t / "train.conll").write_text("the O\ncat B-X\nsat\non O\n\n", encoding="utf-8")
    return Case(tag_finetune(b, t, train=t / "train.conll"),
                f"{t / 'train.conll'}: line 3: expected a token and a tag separated by "
                f"whitespace, got one column 'sat'", absent=(t / "work",))


@case
def finetune_tags_validation_tag_not_in_training(b, t):
    words, tags = [w for w, _ in TAGGED], [list(g) for _, g in TAGGED]
    tags[2][3:] = ["B-Y", "O"]  # not followed by I-X: no IOB1 repair (and its warning)
    write_conll(t / "dev.conll", words, tags)
    return Case(tag_finetune(b, t, validation=t / "dev.conll"),
                f"{t / 'dev.conll'}: row 3: tag 'B-Y' is not one of the training tags "
                f"(O, B-X, I-X)", absent=(t / "work",))


@case
def finetune_choice_ending_column_missing(b, t):
    columns = [c for c in SWAG_COLUMNS if c != "ending3"]
    train = write_swag(t / "train.csv", [r[:5] + r[6:] for r in SWAG], columns)
    return Case(choice_finetune(b, t, train=train),
                f"{train}: no column 'ending3'; columns present: sent1, sent2, ending0, "
                f"ending1, ending2, label", absent=(t / "work",))


@case
def finetune_choice_label_out_of_range(b, t):
    rows = [list(r) for r in SWAG]
    rows[2][6] = "4"
    train = write_swag(t / "train.csv", rows)
    return Case(choice_finetune(b, t, train=train),
                f"{train}: row 3: column 'label' is 4; expected the right ending's index 0..3",
                absent=(t / "work",))


@case
def finetune_config_task_unknown(b, t):
    return Case(finetune(b, t, "--config.task=summarization"),
                "--config.task: expected one of sequence-classification, regression, "
                "question-answering, token-classification, multiple-choice, got "
                "'summarization'",
                absent=(t / "work",))


# glue

GLUE_FIXTURES = os.path.join(ROOT, "tests", "fixtures", "glue")


def glue(b, t, *extra, tasks="rte"):
    return ["glue", "--init", path(b, "hf"), "--workdir", str(t / "work"), "--data-dir",
            str(t / "data"), "--tasks", tasks, "--epochs", "1", "--batch-size", "4", *extra]


def glue_data(t, task):
    """A data dir holding a copy of one task's fixture folder; returns that folder."""
    shutil.copytree(os.path.join(GLUE_FIXTURES, task), t / "data" / task)
    return t / "data" / task


@case
def glue_task_folder_missing_a_split(b, t):
    os.remove(glue_data(t, "RTE") / "dev.tsv")
    return Case(glue(b, t), f"{t / 'data' / 'RTE'}: no dev.tsv (the RTE folder of the GLUE "
                            f"layout has train.tsv, dev.tsv, test.tsv)", absent=(t / "work",))


@case
def glue_malformed_row(b, t):
    train = glue_data(t, "RTE") / "train.tsv"
    lines = train.read_text().splitlines()
    train.write_text("\n".join(lines[:5] + ["5\tan orphaned sentence ."] + lines[5:]) + "\n")
    return Case(glue(b, t), f"{train}: line 6: 2 tab-separated fields, expected 4",
                absent=(t / "work",))


@case
def glue_regression_target_not_a_number(b, t):
    dev = glue_data(t, "STS-B") / "dev.tsv"
    lines = dev.read_text().splitlines()
    lines[3] = lines[3].rsplit("\t", 1)[0] + "\t4,5"
    dev.write_text("\n".join(lines) + "\n")
    return Case(glue(b, t, tasks="sts-b"), f"{dev}: line 4: column 'score' is '4,5'; expected "
                                           f"a number (a similarity score 0-5)",
                absent=(t / "work",))


@case
def glue_unknown_task(b, t):
    glue_data(t, "RTE")
    return Case(glue(b, t, tasks="rte,squad"), "--tasks: unknown GLUE task 'squad'; expected "
                "some of CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI",
                absent=(t / "work",))


# predict

def predict(b, t, *extra, model=None, input=None, output=None):
    return ["predict", str(model or path(b, "ours_cls")), "--input",
            str(input or path(b, "data.csv")), "--output", str(output or t / "pred.csv"),
            "--max-seq-length", "32", *extra]


@case
def predict_model_missing(b, t):
    return Case(predict(b, t, model=t / "nope"), f"{t / 'nope'}: no such model directory",
                absent=(t / "pred.csv",))


@case
def predict_model_without_classifier(b, t):
    return Case(predict(b, t, model=path(b, "ours")),
                f"model: has no classifier head in {path(b, 'ours')}",
                absent=(t / "pred.csv",))


@case
def predict_input_missing(b, t):
    return Case(predict(b, t, input=t / "in.csv"), f"{t / 'in.csv'}: file not found",
                absent=(t / "pred.csv",))


@case
def predict_unknown_output_type(b, t):
    return Case(predict(b, t, output=t / "pred.xlsx"),
                f"{t / 'pred.xlsx'}: unknown output type .xlsx", absent=(t / "pred.xlsx",))


@case
def predict_output_directory_missing(b, t):
    return Case(predict(b, t, output=t / "no" / "pred.csv"),
                f"{t / 'no' / 'pred.csv'}: directory {t / 'no'} does not exist")


@case
def predict_text_column_missing(b, t):
    return Case(predict(b, t, "--text-column", "review"),
                f"{path(b, 'data.csv')}: no column 'review'", absent=(t / "pred.csv",))


@case
def predict_txt_input_non_utf8(b, t):
    (t / "in.txt").write_bytes(b"a good film\ncaf\xe9\n")
    return Case(predict(b, t, input=t / "in.txt"),
                f"{t / 'in.txt'}: not UTF-8 text (byte 0xe9 at offset 15)",
                absent=(t / "pred.csv",))


@case
def predict_corrupt_params(b, t):
    model = copy(b / "ours_cls", t / "model")
    for f in orbax_files(model):
        os.truncate(f, os.path.getsize(f) // 2)
    return Case(predict(b, t, model=model), f"{model}/params: not a readable orbax checkpoint",
                absent=(t / "pred.csv",))


@case
def predict_batch_size_zero(b, t):
    return Case(predict(b, t, "--batch-size", "0"),
                "--batch-size: expected an integer ≥ 1, got 0", absent=(t / "pred.csv",))


@case
def predict_output_is_the_input(b, t):
    shutil.copy(path(b, "data.csv"), t / "data.csv")
    return Case(predict(b, t, input=t / "data.csv", output=t / "data.csv"),
                f"{t / 'data.csv'}: --output would overwrite --input")


@case
def predict_qa_input_without_context(b, t):
    rows = qa_records()
    for r in rows:
        del r["context"], r["answers"]
    source = write_jsonl(t / "questions.jsonl", rows)
    return Case(predict(b, t, model=path(b, "hf_qa"), input=source, output=t / "answers.jsonl"),
                f"{source}: no column 'context'; columns present: id, question",
                absent=(t / "answers.jsonl",))


@case
def predict_qa_output_not_jsonl(b, t):
    source = write_jsonl(t / "questions.jsonl", qa_records())
    return Case(predict(b, t, "--task", "question-answering", model=path(b, "hf_qa"),
                        input=source, output=t / "answers.csv"),
                f"{t / 'answers.csv'}: unknown output type .csv; expected .jsonl",
                absent=(t / "answers.csv",))


@case
def predict_qa_with_a_sequence_classifier(b, t):
    source = write_jsonl(t / "questions.jsonl", qa_records())
    return Case(predict(b, t, "--task", "question-answering", model=path(b, "hf_cls"),
                        input=source, output=t / "answers.jsonl"),
                f"model: has no question-answering head in {path(b, 'hf_cls')}",
                absent=(t / "answers.jsonl",))


@case
def predict_with_a_multiple_choice_model(b, t):
    return Case(predict(b, t, model=path(b, "hf_mc")),
                f"model {path(b, 'hf_mc')}: is a BertForMultipleChoice, this needs a "
                f"BertForSequenceClassification", absent=(t / "pred.csv",))


@case
def predict_tags_with_a_qa_model(b, t):
    write_conll(t / "words.conll", [w for w, _ in TAGGED], [g for _, g in TAGGED])
    return Case(predict(b, t, "--task", "token-classification", model=path(b, "hf_qa"),
                        input=t / "words.conll", output=t / "tags.conll"),
                f"model {path(b, 'hf_qa')}: is a BertForQuestionAnswering, this needs a "
                f"BertForTokenClassification", absent=(t / "tags.conll",))


@case
def predict_tags_jsonl_without_tokens_column(b, t):
    source = write_jsonl(t / "words.jsonl", [{"words": list(w)} for w, _ in TAGGED])
    return Case(predict(b, t, model=path(b, "hf_tag"), input=source, output=t / "tags.jsonl"),
                f"{source}: no column 'tokens'; columns present: words",
                absent=(t / "tags.jsonl",))


# fill-mask

@case
def fill_mask_model_missing(b, t):
    return Case(["fill-mask", str(t / "nope"), "a [MASK] day"],
                f"{t / 'nope'}: no such model directory")


@case
def fill_mask_no_mask_token(b, t):
    return Case(["fill-mask", path(b, "ours"), "a good day"], "text: has no [MASK] token")


@case
def fill_mask_model_without_mlm_head(b, t):
    return Case(["fill-mask", path(b, "hf_base"), "a [MASK] day"],
                f"model: has no masked-LM head in {path(b, 'hf_base')}")


@case
def fill_mask_top_k_zero(b, t):
    return Case(["fill-mask", path(b, "ours"), "a [MASK] day", "--top-k", "0"],
                "--top-k: expected an integer ≥ 1, got 0")


@case
def fill_mask_mask_past_the_positions(b, t):
    return Case(["fill-mask", path(b, "ours"), LONG + " the [MASK] ."],
                "text: [MASK] at token 68 of 70 is past the model's 40 positions")


@case
def fill_mask_vocab_larger_than_model(b, t):
    model = copy(b / "ours", t / "model")
    with open(os.path.join(model, "vocab.txt"), "a", encoding="utf-8") as f:
        f.writelines(f"extra{i}\n" for i in range(3))
    return Case(["fill-mask", model, "a [MASK] day"],
                f"{model}/vocab.txt: 100 tokens, more than the model's vocab_size (97)")


def masked_file(t, *lines) -> str:
    (t / "masked.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(t / "masked.txt")


@case
def fill_mask_file_row_without_mask(b, t):
    source = masked_file(t, "a [MASK] day", "a good day")
    return Case(["fill-mask", path(b, "ours"), "--input", source, "--output",
                 str(t / "top.jsonl")], f"{source}: row 2: has no [MASK] token: 'a good day'",
                absent=(t / "top.jsonl",))


@case
def fill_mask_file_mask_past_the_positions(b, t):
    source = masked_file(t, "a [MASK] day", LONG + " the [MASK] .")
    return Case(["fill-mask", path(b, "ours"), "--input", source, "--output",
                 str(t / "top.jsonl")],
                f"{source}: row 2: [MASK] at token 68 of 70 is past the model's 40 positions",
                absent=(t / "top.jsonl",))


@case
def fill_mask_text_and_input(b, t):
    return Case(["fill-mask", path(b, "ours"), "a [MASK] day", "--input",
                 masked_file(t, "a [MASK] day"), "--output", str(t / "top.jsonl")],
                "give a TEXT or --input FILE, not both", absent=(t / "top.jsonl",))


@case
def fill_mask_neither_text_nor_input(b, t):
    return Case(["fill-mask", path(b, "ours")],
                "give a TEXT, or --input FILE with --output FILE.jsonl")


@case
def fill_mask_input_without_output(b, t):
    return Case(["fill-mask", path(b, "ours"), "--input", masked_file(t, "a [MASK] day")],
                "--output: required with --input")


@case
def fill_mask_file_output_not_jsonl(b, t):
    return Case(["fill-mask", path(b, "ours"), "--input", masked_file(t, "a [MASK] day"),
                 "--output", str(t / "top.csv")],
                f"{t / 'top.csv'}: unknown output type .csv; expected .jsonl",
                absent=(t / "top.csv",))


@case
def fill_mask_file_batch_size_zero(b, t):
    return Case(["fill-mask", path(b, "ours"), "--input", masked_file(t, "a [MASK] day"),
                 "--output", str(t / "top.jsonl"), "--batch-size", "0"],
                "--batch-size: expected an integer ≥ 1, got 0", absent=(t / "top.jsonl",))


# embed

@case
def embed_output_not_npy(b, t):
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "vectors.csv")], f"{t / 'vectors.csv'}: unknown output type .csv; "
                                          f"expected .npy", absent=(t / "vectors.csv",))


@case
def embed_empty_input(b, t):
    (t / "in.txt").write_text("\n\n")
    return Case(["embed", path(b, "hf_base"), "--input", str(t / "in.txt"), "--output",
                 str(t / "v.npy")], f"{t / 'in.txt'}: no rows", absent=(t / "v.npy",))


@case
def embed_batch_size_zero(b, t):
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "v.npy"), "--batch-size", "0"],
                "--batch-size: expected an integer ≥ 1, got 0", absent=(t / "v.npy",))


@case
def embed_max_seq_length_too_small(b, t):
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "v.npy"), "--max-seq-length", "2"],
                "--max-seq-length: expected an integer ≥ 3, got 2", absent=(t / "v.npy",))


@case
def embed_malformed_jsonl_input(b, t):
    (t / "in.jsonl").write_text('{"text": "ok"}\nnot json\n')
    return Case(["embed", path(b, "hf_base"), "--input", str(t / "in.jsonl"), "--output",
                 str(t / "v.npy")], f"{t / 'in.jsonl'}: could not read as jsonl",
                absent=(t / "v.npy",))


@case
def embed_unknown_pooling(b, t):
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "v.npy"), "--pooling", "max"],
                "argument --pooling: invalid choice: 'max'", absent=(t / "v.npy",))


@case
def embed_layers_out_of_range(b, t):  # the paper's last four, on a two-layer model
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "v.npy"), "--layers", "-4,-3,-2,-1"],
                "--layers: -4 is out of range: the model has 2 layers, so expected integers "
                "from -3 to 2", absent=(t / "v.npy",))


@case
def embed_layers_not_integers(b, t):
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "v.npy"), "--layers", "-1,last"],
                "--layers: expected comma-separated integers such as -4,-3,-2,-1, got '-1,last'",
                absent=(t / "v.npy",))


@case
def embed_layers_repeated(b, t):
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "v.jsonl"), "--layers", "2,-1", "--pooling", "none"],
                "--layers: hidden state 2 is given twice ([2, -1])", absent=(t / "v.jsonl",))


@case
def embed_per_token_output_not_jsonl(b, t):
    return Case(["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
                 str(t / "v.npy"), "--pooling", "none"],
                f"{t / 'v.npy'}: --pooling none writes a line of token vectors per text: "
                f"expected .jsonl, got .npy", absent=(t / "v.npy",))


# hostile inputs: crafted to crash a parser or exhaust memory

DEEP = "[" * 10_000 + "]" * 10_000  # 20 KB; pyarrow segfaulted on it, json raised RecursionError


def deep_jsonl(file, **fields) -> str:
    """A good row, then one whose extra field is nested 10,000 deep."""
    file.write_text(json.dumps(fields) + "\n" + json.dumps(fields)[:-1] + f', "x": {DEEP}}}\n',
                    encoding="utf-8")
    return str(file)


@case
def finetune_jsonl_field_nested_10000_deep(b, t):
    train = deep_jsonl(t / "train.jsonl", text="a good film", label="pos")
    return Case(finetune(b, t, train=train), f"{train}:2: JSON nested more than 64 levels deep",
                absent=(t / "work",))


@case
def predict_jsonl_field_nested_10000_deep(b, t):
    source = deep_jsonl(t / "in.jsonl", text="a good film")
    return Case(predict(b, t, input=source, output=t / "pred.jsonl"),
                f"{source}:2: JSON nested more than 64 levels deep", absent=(t / "pred.jsonl",))


@case
def pretrain_jsonl_field_nested_10000_deep(b, t):
    source = deep_jsonl(t / "corpus.jsonl", text="The cat sat. The dog read.")
    return Case(pretrain(b, t, f"--config.train_files={source}"),
                f"{source}:2: JSON nested more than 64 levels deep", absent=(t / "work",))


def long_line_rows(file, size: int, **fields) -> str:
    """jsonl: a good row, then one whose text takes more than `size` bytes."""
    long = dict(fields, text=" ".join(["good"] * (size // 5 + 1)))
    file.write_text(json.dumps(fields) + "\n" + json.dumps(long) + "\n" + json.dumps(fields)
                    + "\n", encoding="utf-8")
    return str(file)


@case
def pretrain_jsonl_line_over_the_limit(b, t):
    from bert_jax.data import text_sources
    source = long_line_rows(t / "corpus.jsonl", 1000, text="The cat sat. The dog read.")
    return Case(pretrain(b, t, f"--config.train_files={source}"),
                f"{source}:2: line longer than 1,000 bytes; a JSON record this long is refused",
                absent=(t / "work",), patch=((text_sources, "MAX_JSONL_LINE", 1000),))


@case
def finetune_jsonl_row_over_the_limit(b, t):
    from bert_jax.tasks import table_files
    train = long_line_rows(t / "train.jsonl", 1000, text="a good film", label="pos")
    return Case(finetune(b, t, train=train),
                f"{train}:2: line longer than 1,000 bytes; a table row this long is refused",
                absent=(t / "work",), patch=((table_files, "MAX_ROW_BYTES", 1000),))


@case
def finetune_csv_row_over_the_limit(b, t):
    from bert_jax.tasks import table_files
    (t / "train.csv").write_text("text,label\na good film,pos\n" + "good " * 300 + ",pos\n")
    return Case(finetune(b, t, train=t / "train.csv"),
                f"{t / 'train.csv'}:3: line longer than 1,000 bytes; a table row this long",
                absent=(t / "work",), patch=((table_files, "MAX_ROW_BYTES", 1000),))


@case
def predict_jsonl_row_over_the_limit(b, t):
    from bert_jax.tasks import table_files
    source = long_line_rows(t / "in.jsonl", 1000, text="a good film")
    return Case(predict(b, t, input=source, output=t / "pred.jsonl"),
                f"{source}:2: line longer than 1,000 bytes; a table row this long is refused",
                absent=(t / "pred.jsonl",), patch=((table_files, "MAX_ROW_BYTES", 1000),))


@case
def predict_qa_jsonl_row_over_the_limit(b, t):
    from bert_jax.tasks import table_files
    source = long_line_rows(t / "q.jsonl", 1000, question="what sat ?", context="the cat sat")
    return Case(predict(b, t, model=path(b, "hf_qa"), input=source, output=t / "a.jsonl"),
                f"{source}:2: line longer than 1,000 bytes; a table row this long is refused",
                absent=(t / "a.jsonl",), patch=((table_files, "MAX_ROW_BYTES", 1000),))


@case
def finetune_qa_squad_json_nested_10000_deep(b, t):
    (t / "train.json").write_text('{"version": "1.1", "data": [], "x": ' + DEEP + "}",
                                  encoding="utf-8")
    return Case(qa_finetune(b, t, train=t / "train.json"),
                f"{t / 'train.json'}:1: JSON nested more than 64 levels deep", absent=(t / "work",))


@case
def convert_config_nested_10000_deep(b, t):
    src = copy(b / "hf", t / "src")
    edit_json(os.path.join(src, "config.json"), x=[])
    config = os.path.join(src, "config.json")
    with open(config, encoding="utf-8") as f:
        text = f.read()
    write(config, text.replace("[]", DEEP).encode())
    return Case(["convert", src, str(t / "out")],
                f"{config}:1: JSON nested more than 64 levels deep", absent=(t / "out",))


# an untrusted model directory: checked before anything is allocated

def _index(src, weight_map) -> str:
    """model.safetensors moved to a shard named by model.safetensors.index.json."""
    os.rename(os.path.join(src, "model.safetensors"), os.path.join(src, "shard-1.safetensors"))
    index = os.path.join(src, "model.safetensors.index.json")
    write(index, json.dumps(weight_map).encode())
    return index


@case
def convert_index_names_a_shard_outside_the_directory(b, t):
    src = copy(b / "hf", t / "src")
    shutil.copyfile(os.path.join(src, "model.safetensors"), t / "outside.safetensors")
    index = _index(src, {"weight_map": {"bert.pooler.dense.bias": "../outside.safetensors"}})
    return Case(["convert", src, str(t / "out")],
                f"{index}: weight_map['bert.pooler.dense.bias']: '../outside.safetensors' is not "
                f"a file in {src}", absent=(t / "out",))


@case
def convert_index_is_a_json_list(b, t):
    src = copy(b / "hf", t / "src")
    index = _index(src, ["shard-1.safetensors"])
    return Case(["convert", src, str(t / "out")],
                f'{index}: expected an object with a non-empty "weight_map"', absent=(t / "out",))


@case
def convert_index_shard_name_not_a_string(b, t):
    src = copy(b / "hf", t / "src")
    index = _index(src, {"weight_map": {"bert.pooler.dense.bias": 1}})
    return Case(["convert", src, str(t / "out")],
                f"{index}: weight_map['bert.pooler.dense.bias']: expected a shard file name, got "
                f"int", absent=(t / "out",))


@case
def convert_integer_tensor_as_a_weight(b, t):
    src = copy(b / "hf", t / "src")
    name = "bert.encoder.layer.0.output.dense.weight"
    _edit_tensors(src, lambda s: s.update({name: s[name].astype(np.int32)}))
    return Case(["convert", src, str(t / "out")],
                f"{src}/model.safetensors: tensor {name} is I32; weights must be floating point",
                absent=(t / "out",))


@case
def convert_torch_bin_holding_a_non_tensor(b, t):
    import torch
    (t / "src").mkdir()
    shutil.copyfile(path(b, "hf", "config.json"), t / "src" / "config.json")
    torch.save({"bert.embeddings.word_embeddings.weight": 3}, t / "src" / "pytorch_model.bin")
    return Case(["convert", str(t / "src"), str(t / "out")],
                f"{t / 'src' / 'pytorch_model.bin'}: expected tensor names → tensors, got "
                f"'bert.embeddings.word_embeddings.weight': int", absent=(t / "out",))


@case
def convert_torch_bin_holding_a_bool_weight(b, t):
    import torch
    (t / "src").mkdir()
    shutil.copyfile(path(b, "hf", "config.json"), t / "src" / "config.json")
    torch.save({"bert.embeddings.word_embeddings.weight": torch.ones(97, 32, dtype=torch.bool)},
               t / "src" / "pytorch_model.bin")
    return Case(["convert", str(t / "src"), str(t / "out")],
                f"{t / 'src' / 'pytorch_model.bin'}: tensor bert.embeddings.word_embeddings.weight "
                f"is bool; weights must be floating point", absent=(t / "out",))


@case
def convert_config_claims_a_million_layers(b, t):
    src = copy(b / "hf", t / "src")
    edit_json(os.path.join(src, "config.json"), num_hidden_layers=1_000_000)
    return Case(["convert", src, str(t / "out")],
                f"{src}: num_hidden_layers is 1000000 in config.json, but the weights hold 2 "
                f"layer(s)", absent=(t / "out",))


@case
def convert_to_hf_config_claims_a_million_layers(b, t):
    src = copy(b / "ours", t / "ours")
    edit_json(os.path.join(src, "config.json"), num_hidden_layers=1_000_000)
    return Case(["convert", src, str(t / "out"), "--to", "hf"],
                f"{src}/params: does not fit config.json: num_hidden_layers is 1000000 in "
                f"config.json, but the weights hold 2 layer(s)", absent=(t / "out",))


@case
def predict_config_claims_a_billion_labels(b, t):
    model = copy(b / "hf_cls", t / "model")
    config = os.path.join(model, "config.json")
    with open(config, encoding="utf-8") as f:
        d = json.load(f)
    d.pop("id2label", None), d.pop("label2id", None)
    write(config, json.dumps(dict(d, num_labels=10**9)).encode())
    return Case(predict(b, t, model=model),
                f"{config}: num_labels: 1000000000 is more than 100,000; give the label names "
                f"as id2label", absent=(t / "pred.csv",))


def test_a_local_table_read_leaves_no_copy_in_the_datasets_cache(tmp_path, monkeypatch):
    """Each read used to add an arrow copy of the file to ~/.cache/huggingface/datasets."""
    import tempfile

    import datasets

    from bert_jax.tasks import table_files
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "t.csv").write_text("text,label\na good film,pos\nbad,neg\n", encoding="utf-8")
    table = table_files.read_table(str(tmp_path / "t.csv"))
    assert table["text"] == ["a good film", "bad"]
    assert not (tmp_path / "hf_cache").exists() and os.listdir(tmp_path / "tmp") == []


@pytest.mark.parametrize("to", ["hf", "flax"])
def test_a_full_disk_during_convert_is_one_line_and_leaves_nothing(to, b, tmp_path, capfd,
                                                                   monkeypatch):
    """safetensors and orbax report ENOSPC in errors of their own (exit 1 before): a full disk
    is patched into each writer."""
    import orbax.checkpoint as ocp
    import safetensors.numpy

    def full(*args, **kwargs):
        if to == "hf":  # safetensors' Rust error, as it words it
            raise RuntimeError('Error while serializing: IoError(Os { code: 28, kind: '
                               'StorageFull, message: "No space left on device" })')
        raise ValueError("Error writing local file: os_error_code=28")  # tensorstore's
    monkeypatch.setattr(safetensors.numpy, "save_file", full)
    monkeypatch.setattr(ocp.StandardCheckpointer, "save", full)
    out = tmp_path / "out"
    src = path(b, "ours" if to == "hf" else "hf")
    assert cli.main(["convert", src, str(out), "--to", to]) == 2
    assert capfd.readouterr().err.splitlines() == [
        f"bert-jax convert: error: {out}: writing failed (No space left on device); nothing was "
        f"written there"]
    assert os.listdir(tmp_path) == []


def test_orbax_params_are_checked_before_they_are_read(b, tmp_path, monkeypatch):
    """Orbax's compressed chunks let a few KB claim arrays of any size: the metadata decides."""
    import orbax.checkpoint as ocp

    from bert_jax.model_files import model_dir
    from bert_jax.errors import BertJaxError
    src = copy(b / "ours", tmp_path / "ours")
    edit_json(os.path.join(src, "config.json"), intermediate_size=40)

    def allocate(*args, **kwargs):
        raise AssertionError("restored before the check")
    monkeypatch.setattr(ocp.StandardCheckpointer, "restore", allocate)
    with pytest.raises(BertJaxError, match="does not fit config.json: bert/encoder/layer_0/"):
        model_dir.load_model_dir(src)


def test_a_pretraining_workdir_as_init_is_checked_before_it_is_read(b, tmp_path, monkeypatch):
    """A workdir given as --init may come from anywhere too: its latest checkpoint's metadata
    must fit its config.json, and hold no more than the params and Adam's moments."""
    import jax
    import jax.numpy as jnp
    import orbax.checkpoint as ocp

    from bert_jax.model_files import model_dir
    from bert_jax.errors import BertJaxError
    from bert_jax.models.config import BertConfig
    from bert_jax.models.task_models import ARCHITECTURES
    config = BertConfig(vocab_size=97, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=40)
    shapes = jax.eval_shape(lambda: ARCHITECTURES["BertForPreTraining"][0](config).init(
        jax.random.key(0), jnp.zeros((1, 2), jnp.int32)))["params"]
    params = jax.tree.map(lambda x: np.zeros(x.shape, x.dtype), shapes)  # no compile
    work = tmp_path / "run"
    work.mkdir()

    def saved(opt_state):
        with ocp.CheckpointManager(str(work / "checkpoints")) as manager:
            manager.save(1, args=ocp.args.StandardSave(
                {"step": np.int32(1), "params": params, "opt_state": opt_state}), force=True)
    saved({"mu": params, "nu": params, "huge": np.zeros(3 * 10**6, np.float32)})
    config.replace(intermediate_size=40).to_json_file(str(work / "config.json"))

    def allocate(*args, **kwargs):
        raise AssertionError("restored before the check")
    monkeypatch.setattr(ocp.CheckpointManager, "restore", allocate)
    with pytest.raises(BertJaxError, match=r"checkpoints/1: does not fit config.json: bert/"):
        model_dir.load_pretrained(str(work))
    config.to_json_file(str(work / "config.json"))
    with pytest.raises(BertJaxError, match=r"checkpoints/1: holds 3,.* numbers, more than a "
                                           r"model of .* parameters and its Adam moments"):
        model_dir.load_pretrained(str(work))


def test_integer_position_ids_stay_allowed(b, tmp_path):
    """The one integer tensor the Hugging Face format has (a buffer older releases saved)."""
    from bert_jax.model_files.huggingface import load_hf
    src = copy(b / "hf", tmp_path / "src")
    _edit_tensors(src, lambda s: s.update({"bert.embeddings.position_ids":
                                           np.arange(40, dtype=np.int64)[None]}))
    config, params = load_hf(src)
    assert config.num_hidden_layers == 2 and "bert" in params


def test_json_depth_counts_structure_not_brackets_in_text():
    from bert_jax import json_limits
    brackets = "[" * 100 + "{" * 100
    assert json_limits.too_deep_line(json.dumps({"text": brackets, "y": [[1]]})) is None
    assert json_limits.too_deep_line(json.dumps({"t": '\\"' + brackets})) is None  # escapes
    nested = "[" * 65 + "]" * 65
    assert json_limits.too_deep_line("[" * 64 + "]" * 64) is None
    assert json_limits.too_deep_line(f'{{"a": 1}}\n{nested}\n') == 2
    # an unbalanced line is the parser's to report: the lines after it start again from 0
    assert json_limits.too_deep_line("[" * 60 + "\n" + "[" * 60 + "]" * 60) is None


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_line_and_changes_nothing(name, b, tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative defaults (runs/, .cache/) would land where we look
    # the XLA cache is not an output: it is made in the working directory on the process's
    # first compile over a second, whichever case that falls on (`-k` changes which)
    monkeypatch.setenv("BERT_JAX_XLA_CACHE", "")
    c = CASES[name](b, tmp_path)
    for target, attribute, value in c.patch:
        monkeypatch.setattr(target, attribute, value)
    before = snapshot(tmp_path, b)
    code = cli.main([str(a) for a in c.argv])
    out, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert code == 2, err  # the catch-all for unexpected exceptions exits 1
    assert lines[0].startswith(f"bert-jax {c.argv[0]}: error: "), lines[0]
    assert "--debug" not in lines[0], "hit the catch-all: " + lines[0]
    for needle in (c.needle, *c.also):
        assert needle in lines[0]
    assert snapshot(tmp_path, b) == before
    for p in c.absent:
        assert not os.path.exists(p), p


def test_an_unexpected_exception_is_one_line_exit_1(b, tmp_path, capfd, monkeypatch):
    """The catch-all the sweep must never reach: a bug still prints one line, not a traceback."""
    from bert_jax import inference

    def broken(*args, **kwargs):
        raise TypeError("something nobody checked\nsecond line")
    monkeypatch.setattr(inference, "embed", broken)
    argv = ["embed", path(b, "hf_base"), "--input", path(b, "texts.txt"), "--output",
            str(tmp_path / "v.npy"), "--max-seq-length", "16"]
    assert cli.main(argv) == 1
    assert capfd.readouterr().err.splitlines() == [
        "bert-jax embed: error: unexpected TypeError: something nobody checked (run with "
        "--debug for the traceback)"]
    assert os.listdir(tmp_path) == []
    with pytest.raises(TypeError):
        cli.main(["--debug", *argv])


# -- a busy workdir: one run at a time ----------------------------------------------------------

@pytest.mark.parametrize("job", ["pretrain", "finetune", "glue"])
def test_a_second_run_on_a_busy_workdir_is_refused_in_one_line(job, b, tmp_path, capfd):
    """The lock's holder here is this process (the two-process race is in test_faults.py)."""
    import socket

    from bert_jax.runtime import workdir_lock
    workdir = tmp_path / "work"
    argv = {"pretrain": pretrain, "finetune": finetune, "glue": glue}[job](b, tmp_path)
    if job == "glue":
        glue_data(tmp_path, "RTE")
    with workdir_lock.hold(str(workdir)):
        before = snapshot(tmp_path, b)
        assert cli.main(argv) == 2
        assert snapshot(tmp_path, b) == before
    assert capfd.readouterr().err.splitlines() == [
        f"bert-jax {job}: error: {workdir}: another run is using this workdir (pid {os.getpid()} "
        f"on host {socket.gethostname()}); wait for it to end or give another workdir"]
    assert not workdir.exists()  # the holder made it and left nothing in it


def test_a_lock_left_by_a_killed_run_does_not_block_the_next(tmp_path):
    """flock ends with its process: a killed holder's file, still naming it, is taken over."""
    from bert_jax.runtime import workdir_lock
    (tmp_path / ".lock").write_text("pid 1 on host gone\n")
    with workdir_lock.hold(str(tmp_path)):
        assert (tmp_path / ".lock").read_text().startswith(f"pid {os.getpid()} on host ")
    assert os.listdir(tmp_path) == []


# -- a failure after training started is no bad input: the workdir and its logs stay ------------

def _first_save_fails(monkeypatch):
    """A full disk at the first checkpoint (orbax's save raising ENOSPC)."""
    import errno

    import orbax.checkpoint as ocp

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(ocp.CheckpointManager, "save", full)


def test_a_failed_first_save_keeps_the_new_workdir_and_its_logs(b, tmp_path, capfd,
                                                               monkeypatch):
    """Fine-tuning shares the wrapper (cli/jobs.py); one job shows it."""
    monkeypatch.chdir(tmp_path)
    _first_save_fails(monkeypatch)
    workdir = tmp_path / "work"
    assert cli.main(pretrain(b, tmp_path)) == 2
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert err[-1] == (f"bert-jax pretrain: error: {workdir / 'checkpoints'}: saving a "
                       f"checkpoint failed (No space left on device); no complete checkpoint "
                       f"was kept")
    kept = set(os.listdir(workdir))
    assert {"config.json", "train_config.json", "tensorboard"} <= kept, kept  # the run, its logs
    assert ".lock" not in kept


# -- too-long text: truncated with one counted warning, not an error -----------------------------

def warnings_of(capfd, command) -> list[str]:
    err = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
    assert all(line.startswith(f"bert-jax {command}: warning: ") for line in err), err
    return err


def test_predict_clamps_max_seq_length_to_the_model(b, tmp_path, capfd):
    out = tmp_path / "pred.jsonl"
    assert cli.main(["predict", path(b, "ours_cls"), "--input", path(b, "data.csv"),
                     "--output", str(out)]) == 0  # default --max-seq-length 128 > 40 positions
    assert warnings_of(capfd, "predict") == [
        "bert-jax predict: warning: --max-seq-length 128 is more than the model's 40 positions "
        "(max_position_embeddings); using 40"]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 8 and all(r["predicted_label"] in ("LABEL_0", "LABEL_1") for r in rows)


def test_predict_counts_truncated_texts(b, tmp_path, capfd):
    source, out = tmp_path / "in.csv", tmp_path / "pred.csv"
    source.write_text(f"text\n{LONG}\nshort\n{LONG} {LONG}\nok\n", encoding="utf-8")
    assert cli.main(["predict", path(b, "ours_cls"), "--input", str(source), "--output",
                     str(out), "--max-seq-length", "32"]) == 0
    assert warnings_of(capfd, "predict") == [
        "bert-jax predict: warning: 2 of 4 texts were longer than 32 tokens and were truncated"]
    assert len(out.read_text(encoding="utf-8").splitlines()) == 5


def test_embed_clamps_and_counts_truncated_texts(b, tmp_path, capfd):
    source, out = tmp_path / "in.txt", tmp_path / "v.npy"
    source.write_text(f"{LONG}\nshort\nok\n", encoding="utf-8")
    assert cli.main(["embed", path(b, "hf_base"), "--input", str(source), "--output",
                     str(out), "--max-seq-length", "100"]) == 0
    assert warnings_of(capfd, "embed") == [
        "bert-jax embed: warning: --max-seq-length 100 is more than the model's 40 positions "
        "(max_position_embeddings); using 40",
        "bert-jax embed: warning: 1 of 3 texts were longer than 40 tokens and were truncated"]
    assert np.load(out).shape == (3, 32)


def test_fill_mask_truncates_a_long_text_with_the_mask_inside(b, capfd):
    assert cli.main(["fill-mask", path(b, "ours"), "the [MASK] sat . " + LONG]) == 0
    captured = capfd.readouterr()
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert err == ["bert-jax fill-mask: warning: 1 of 1 texts were longer than 40 tokens and "
                   "were truncated"]
    assert captured.out.startswith("[MASK]:") and len(captured.out.splitlines()) == 6


# -- a field of 50 MB: served, truncated as usual, in bounded memory -------------------------------

@pytest.mark.slow  # a process of its own, to measure its peak memory
@pytest.mark.parametrize("line,truncated", [
    ("the cat sat on the mat . " * 2_000_000, True),
    ("a dump: " + "9f3c" * 12_500_000 + " ends", False)])  # one word: [UNK], 3 tokens in all
def test_embed_on_a_50_mb_one_line_input_peaks_under_2_gb(b, tmp_path, line, truncated):
    """Tokenized whole, such a line took 9.9 GB; data/long_texts.py cuts it first, and a word
    of 50 MB without a separator, which no cut reaches enough tokens in, is shortened first."""
    source, out = tmp_path / "in.txt", tmp_path / "v.npy"
    source.write_text(line + "\n", encoding="utf-8")
    script = ("import resource, sys\nfrom bert_jax import cli\ncode = cli.main(sys.argv[1:])\n"
              "print('peak', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "
              "file=sys.stderr)\nsys.exit(code)\n")
    proc = subprocess.run(
        [sys.executable, "-c", script, "embed", path(b, "hf_base"), "--input", str(source),
         "--output", str(out), "--max-seq-length", "32"], cwd=ROOT, capture_output=True,
        text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[:-1] == ["bert-jax embed: warning: 1 of 1 texts were longer than 32 tokens and "
                          "were truncated"] * truncated
    peak = int(lines[-1].split()[1])
    assert peak < 2 * 2**30, f"peak RSS {peak / 2**30:.2f} GiB"
    assert np.load(out).shape == (1, 32)


# -- the real entry point ------------------------------------------------------------------------

def run_entry_point(*argv, script=False):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    cmd = ([os.path.join(os.path.dirname(sys.executable), "bert-jax")] if script
           else [sys.executable, "-m", "bert_jax.cli"])
    return subprocess.run([*cmd, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def test_entry_point_prints_one_line(tmp_path):
    proc = run_entry_point("tokenizer", "--files", str(tmp_path / "*.txt"), "--out",
                           str(tmp_path / "vocab"))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"bert-jax tokenizer: error: {tmp_path / '*.txt'}: no file matches this pattern"]
    assert os.listdir(tmp_path) == []


def test_console_script_prints_one_line_for_a_usage_error(tmp_path):
    proc = run_entry_point("predict", str(tmp_path), "--input", "x.csv", script=True)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "bert-jax predict: error: the following arguments are required: --output "
        "(see bert-jax predict --help)"]


def test_debug_shows_the_traceback(tmp_path):
    proc = run_entry_point("--debug", "tokenizer", "--files", str(tmp_path / "*.txt"), "--out",
                           str(tmp_path / "vocab"))
    assert proc.returncode != 0
    assert "Traceback (most recent call last)" in proc.stderr
    assert "BertJaxError" in proc.stderr and "no file matches this pattern" in proc.stderr
