"""`bert-jax env`: the record of versions and machine a bug report or a figure carries."""

import importlib.metadata
import json
import os

from bert_jax import cli, resources
from bert_jax.runtime import environment


def test_env_json_has_the_versions_devices_and_machine(capsys):
    assert cli.main(["env", "--json"]) == 0
    env = json.loads(capsys.readouterr().out)
    versions = env["versions"]
    for name in ("bert_jax", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "tokenizers",
                 "datasets", "torch", "transformers"):
        assert name in versions, name
    assert versions["bert_jax"] == resources.VERSION
    assert versions["jax"] == importlib.metadata.version("jax")
    assert versions["torch"] == importlib.metadata.version("torch")  # a test dependency
    import jax
    assert env["jax"]["backend"] == jax.default_backend()
    assert [d["platform"] for d in env["jax"]["devices"]] == [d.platform for d in jax.devices()]
    assert env["cpu"]["cores"] == os.cpu_count() and env["memory_bytes"] > 2**28
    assert env["platform"]["machine"] and env["platform"]["system"]
    if os.path.isfile("/proc/cpuinfo"):  # Linux: the model and exactly the speed flags
        text = open("/proc/cpuinfo", encoding="utf-8").read()
        flags = next(line for line in text.splitlines() if line.startswith("flags")).split()
        assert env["cpu"]["flags"] == sorted(
            f for f in flags if f == "avx2" or f.startswith(("avx512", "amx")))
        assert env["cpu"]["model"] and env["cpu"]["model"] in text


def test_env_lines_for_a_bug_report(capsys):
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["versions", "platform", "devices", "cpu",
                                                    "memory"]
    assert out[0].startswith(f"versions: bert_jax {resources.VERSION}, python ")


def test_speed_flags_keep_avx2_avx512_and_amx():
    assert environment.speed_flags(["fpu", "sse4_2", "avx", "avx2", "avx512f", "avx512_bf16",
                                    "amx_tile", "fma"]) == [
        "amx_tile", "avx2", "avx512_bf16", "avx512f"]


def test_the_record_is_written_beside_a_figure(tmp_path):
    path = environment.write_beside(str(tmp_path / "curve.png"))
    assert path == str(tmp_path / "curve.env.json")
    assert json.load(open(path))["versions"]["bert_jax"] == resources.VERSION


def test_the_record_under_a_results_table_is_one_collapsed_block():
    """What bench_pretrain / bench_inference append under their RESULTS.md tables."""
    env = environment.record()
    block = environment.markdown(env)
    assert block.startswith("<details><summary>environment (bert-jax env)</summary>\n\n")
    assert block.endswith("\n</details>\n")
    assert [line[2:] for line in block.splitlines() if line.startswith("- ")] == \
        environment.lines(env)
