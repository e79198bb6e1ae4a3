"""The machine and software a result came from (`bert-jax env`): versions, devices, the CPU
and its speed-relevant flags, cores, memory. Speed differs by machine far more than by noise,
so a bug report or a benchmark figure without this record cannot be read."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

from bert_jax import resources
from bert_jax.model_files import atomic

# distributions whose versions change results or speed; torch and transformers only if present
PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "tokenizers", "datasets",
            "numpy", "safetensors", "huggingface_hub", "torch", "transformers")
SUFFIX = ".env.json"  # the record beside a figure: FIGURE_STEM.env.json


def record() -> dict:
    """The environment as one JSON-ready dict (None for what is absent or unknown)."""
    import jax
    versions = {"bert_jax": resources.VERSION, "python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    cpu = _cpu()
    return {
        "versions": versions,
        "platform": {"system": platform.system(), "release": platform.release(),
                     "machine": platform.machine(), "platform": platform.platform(),
                     "python_implementation": platform.python_implementation(),
                     "executable": sys.executable},
        "jax": {"backend": jax.default_backend(), "process_count": jax.process_count(),
                "devices": [{"id": d.id, "platform": d.platform, "kind": d.device_kind}
                            for d in jax.devices()]},
        "cpu": {"model": cpu.get("model") or platform.processor() or None,
                "flags": cpu.get("flags", []), "cores": os.cpu_count(),
                "usable_cores": len(os.sched_getaffinity(0)) if hasattr(
                    os, "sched_getaffinity") else os.cpu_count()},
        "memory_bytes": _memory(),
    }


def speed_flags(flags) -> list[str]:
    """The instruction-set flags that set a CPU's matmul speed here: AVX2, AVX-512, AMX."""
    return sorted(f for f in flags if f == "avx2" or f.startswith(("avx512", "amx")))


def _cpu() -> dict:
    """Model name and speed flags from /proc/cpuinfo (Linux); empty elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return {}
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and "model" not in found:
            found["model"] = value.strip()
        elif key == "flags" and "flags" not in found:
            found["flags"] = speed_flags(value.split())
    return found


def _memory():
    """Physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def lines(env: dict) -> list[str]:
    """The record as `name: value` lines for a terminal or a bug report."""
    versions = ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v is not None)
    absent = [k for k, v in env["versions"].items() if v is None]
    devices = env["jax"]["devices"]
    kinds = sorted({d["kind"] if d["kind"].lower().startswith(d["platform"]) else
                    f"{d['platform']} {d['kind']}" for d in devices})
    memory = env["memory_bytes"]
    return [f"versions: {versions}" + (f" (absent: {', '.join(absent)})" if absent else ""),
            f"platform: {env['platform']['platform']}",
            f"devices: {len(devices)} × {', '.join(kinds)} (jax backend "
            f"{env['jax']['backend']}, {env['jax']['process_count']} process(es))",
            f"cpu: {env['cpu']['model'] or 'unknown'}; {env['cpu']['cores']} cores "
            f"({env['cpu']['usable_cores']} usable); flags: "
            f"{' '.join(env['cpu']['flags']) or 'none of avx2, avx512*, amx*'}",
            f"memory: {memory / 2**30:.1f} GiB" if memory else "memory: unknown"]


def markdown(env: dict) -> str:
    """The record as one collapsed block under a table appended to a results file."""
    return ("<details><summary>environment (bert-jax env)</summary>\n\n"
            + "".join(f"- {line}\n" for line in lines(env)) + "\n</details>\n")


def write_beside(path: str) -> str:
    """Write the record beside a saved result (a figure, a table): FIGURE_STEM.env.json, so
    that no figure lacks its machine. Returns the record's path."""
    target = os.path.splitext(path)[0] + SUFFIX
    atomic.write_json(target, record())
    return target
