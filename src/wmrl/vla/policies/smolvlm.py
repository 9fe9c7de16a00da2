"""A tiny SmolVLM backbone generated locally, for SmolVLA on CPU (tests, the CPU quickstart); never a download.

LeRobot's SmolVLA builds its vision-language backbone from ``vlm_model_name`` with ``AutoConfig`` /
``AutoProcessor.from_pretrained`` (and ``AutoModelForImageTextToText`` when it loads weights), so a backbone is a
*directory*. :func:`write_tiny_smolvlm` writes one: a SmolVLM config (a 1-layer SigLIP-style vision tower on
``image_size`` images, a small Llama text model), a word-level tokenizer over the PushT instruction with SmolVLM's
special image tokens, and the SmolVLM image / video processors. With ``weights=True`` it also saves randomly
initialised weights, which stands in for a real checkpoint directory in tests (the same loading path as real
SmolVLM2 weights). Requires the ``lerobot[smolvla]`` extra (transformers).
"""

from __future__ import annotations

import json
from pathlib import Path

from wmrl.vla.episode import PUSHT_TASK

SPECIAL_TOKENS = {
    "fake_image_token": "<fake_token_around_image>",
    "image_token": "<image>",
    "global_image_token": "<global-img>",
    "end_of_utterance_token": "<end_of_utterance>",
}


def vocabulary(text: str = PUSHT_TASK) -> list[str]:
    """The tiny tokenizer's vocabulary: padding, unknown, SmolVLM's image tokens, the words of ``text``.

    >>> vocabulary("Push the block.")[-4:]
    ['.', 'block', 'push', 'the']
    """
    import re

    words = sorted(set(re.findall(r"\w+|[^\w\s]", text.lower())))
    return ["<pad>", "<unk>", *SPECIAL_TOKENS.values(), *words]


def write_tiny_smolvlm(
    path: str | Path,
    hidden_size: int = 64,
    intermediate_size: int = 128,
    num_layers: int = 2,
    num_heads: int = 4,
    image_size: int = 32,
    weights: bool = False,
    seed: int = 0,
) -> Path:
    """Write a tiny SmolVLM directory (config, tokenizer, processor; optionally weights) to ``path``.

    Args:
        path: the directory (created).
        hidden_size: the text model's width (``num_heads`` must divide it).
        intermediate_size: the text model's feed-forward width.
        num_layers: the text model's layers.
        num_heads: the text model's attention heads (2 key-value heads).
        image_size: the vision tower's input side (patches of 8 pixels, 2 x 2 pixel shuffle).
        weights: also save random weights (``seed``) as a checkpoint, loadable like real SmolVLM weights.
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import (
        LlamaConfig,
        PreTrainedTokenizerFast,
        SmolVLMConfig,
        SmolVLMImageProcessor,
        SmolVLMProcessor,
        SmolVLMVideoProcessor,
    )
    from transformers.models.smolvlm.configuration_smolvlm import SmolVLMVisionConfig

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    words = vocabulary()
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>",
                                        extra_special_tokens=SPECIAL_TOKENS, model_max_length=512)
    image_processor = SmolVLMImageProcessor(do_resize=False, do_image_splitting=False,
                                            max_image_size={"longest_edge": image_size})
    processor = SmolVLMProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                 video_processor=SmolVLMVideoProcessor(), image_seq_len=(image_size // 8 // 2) ** 2)
    processor.save_pretrained(path)
    config = SmolVLMConfig(
        vision_config=SmolVLMVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                          num_attention_heads=2, image_size=image_size, patch_size=8),
        text_config=LlamaConfig(vocab_size=len(words), hidden_size=hidden_size, intermediate_size=intermediate_size,
                                num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=2,
                                head_dim=hidden_size // num_heads, max_position_embeddings=512,
                                pad_token_id=0),
        scale_factor=2,
        image_token_id=words.index(SPECIAL_TOKENS["image_token"]),
        pad_token_id=0,
    )
    if weights:
        import torch
        from transformers import SmolVLMForConditionalGeneration

        torch.manual_seed(seed)
        SmolVLMForConditionalGeneration(config).save_pretrained(path)
    else:
        config.save_pretrained(path)
    (path / "wmrl_tiny_smolvlm.json").write_text(json.dumps({"generated_by": "wmrl.vla.policies.smolvlm", "weights": weights}))
    return path
