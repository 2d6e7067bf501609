"""Model presets: architecture fields of well-known causal LMs, written as data so nothing is downloaded.

Each preset is the `config` a user could write by hand: a transformers `model_type` and the fields its
config class takes. The shapes follow the models' published `config.json` files (the fields that decide
the work per token: width, depth, heads, key/value heads, MLP width, vocabulary, positions, rotary
settings and attention features such as sliding windows and logit soft-capping). Weights are never part
of a preset: throughput does not depend on their values.

The `tiny-*` presets keep each family's features (grouped-query attention, rotary positions, gated MLPs,
untied heads, soft-capping, experts routed top-k) at a size a CPU runs in seconds, for tests and for trying a
spec out.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

PresetName = Literal[
    "tiny", "gpt2", "gpt2-seed",
    "llama-3.2-1b", "llama-3.1-8b", "llama-3.1-70b", "llama-2-7b", "llama-2-13b",
    "qwen2.5-0.5b", "mistral-7b", "gemma-2-2b",
    "qwen3-1.7b", "qwen3-8b", "gemma-2-9b", "gemma-3-4b",
    "tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral", "tiny-gemma2", "tiny-phi3", "tiny-qwen3",
    "tiny-gemma3",
    "olmoe-1b-7b", "qwen3-30b-a3b", "gpt-oss-20b", "mixtral-8x7b",
    "tiny-mixtral", "tiny-qwen3-moe", "tiny-olmoe", "tiny-gpt-oss",
]

# Llama 3's rotary scaling, as its config.json states it.
_LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "high_freq_factor": 4.0,
                "low_freq_factor": 1.0, "original_max_position_embeddings": 8192}
_TINY = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 30522, "max_position_embeddings": 1024}
# Four experts, two per token: enough for routing to choose, and for an uneven load to show.
_TINY_EXPERTS = {"num_experts_per_tok": 2}
# GPT-2's special ids (50256) lie outside a BERT-sized vocabulary; a benchmark forward never uses them.
_NO_GPT2_SPECIAL_IDS = {"bos_token_id": None, "eos_token_id": None}

MODEL_PRESETS: dict[str, dict[str, Any]] = {
    # `gpt2-seed` is the model of the original padding benchmark; `tiny` its CPU-sized sibling.
    "gpt2-seed": {"model_type": "gpt2", "n_layer": 12, "n_embd": 1024, "n_head": 8, "vocab_size": 30522,
                  "n_positions": 640, **_NO_GPT2_SPECIAL_IDS},
    "gpt2": {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257,
             "n_positions": 1024},
    "tiny": {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 30522,
             "n_positions": 640, **_NO_GPT2_SPECIAL_IDS},
    "llama-3.2-1b": {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
                     "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "head_dim": 64, "vocab_size": 128256, "max_position_embeddings": 131072,
                     "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "rope_parameters": _LLAMA3_ROPE},
    "llama-3.1-8b": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
                     "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072,
                     "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                     "rope_parameters": {**_LLAMA3_ROPE, "factor": 8.0}},
    # 70B: grouped-query attention with 8 key/value heads for 64 query heads; too large for one 80 GB GPU
    # in bf16 (141 GB of weights), so it runs sharded over several.
    "llama-3.1-70b": {"model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672,
                      "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
                      "head_dim": 128, "vocab_size": 128256, "max_position_embeddings": 131072,
                      "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                      "rope_parameters": {**_LLAMA3_ROPE, "factor": 8.0}},
    # Llama 2 has full multi-head attention (as many key/value heads as query heads) and plain rotary positions.
    "llama-2-7b": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                   "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
                   "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
                   "tie_word_embeddings": False, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
    "llama-2-13b": {"model_type": "llama", "hidden_size": 5120, "intermediate_size": 13824,
                    "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 40,
                    "vocab_size": 32000, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
                    "tie_word_embeddings": False, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
    "qwen2.5-0.5b": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
                     "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
                     "vocab_size": 151936, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
                     "tie_word_embeddings": True, "use_sliding_window": False,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
    # Mistral 7B v0.1 attends within a 4,096-token sliding window; shorter sequences never reach it.
    "mistral-7b": {"model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
                   "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                   "vocab_size": 32000, "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
                   "sliding_window": 4096, "tie_word_embeddings": False,
                   "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
    # Gemma 2 soft-caps attention logits at 50: only kernels that apply the cap can run it.
    "gemma-2-2b": {"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216,
                   "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                   "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
                   "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
                   "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh"},
    # Qwen 3 normalises queries and keys per head (q_norm, k_norm) before the rotary embedding.
    "qwen3-1.7b": {"model_type": "qwen3", "hidden_size": 2048, "intermediate_size": 6144,
                   "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
                   "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
                   "tie_word_embeddings": True, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
    "qwen3-8b": {"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
                 "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
                 "tie_word_embeddings": False, "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
    "gemma-2-9b": {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336,
                   "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
                   "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192,
                   "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
                   "query_pre_attn_scalar": 256, "hidden_activation": "gelu_pytorch_tanh"},
    # Gemma 3's text model (what gemma-3-4b's image-and-text checkpoint wraps): five local layers with a
    # 1,024-token window to every global one, its config class's defaults, as the published config states them.
    "gemma-3-4b": {"model_type": "gemma3_text", "hidden_size": 2560, "intermediate_size": 10240,
                   "num_hidden_layers": 34, "num_attention_heads": 8, "num_key_value_heads": 4,
                   "head_dim": 256, "vocab_size": 262208, "max_position_embeddings": 131072,
                   "sliding_window": 1024, "query_pre_attn_scalar": 256,
                   "hidden_activation": "gelu_pytorch_tanh"},
    "tiny-gpt2": {"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 30522,
                  "n_positions": 1024, **_NO_GPT2_SPECIAL_IDS},
    "tiny-llama": {"model_type": "llama", **_TINY, "tie_word_embeddings": False,
                   "rope_parameters": {**_LLAMA3_ROPE, "original_max_position_embeddings": 256}},
    "tiny-qwen2": {"model_type": "qwen2", **_TINY, "tie_word_embeddings": True, "use_sliding_window": False},
    "tiny-mistral": {"model_type": "mistral", **_TINY, "sliding_window": 4096},
    "tiny-gemma2": {"model_type": "gemma2", **_TINY, "head_dim": 32, "attn_logit_softcapping": 50.0,
                    "final_logit_softcapping": 30.0, "query_pre_attn_scalar": 32, "sliding_window": 4096},
    "tiny-phi3": {"model_type": "phi3", **_TINY, "tie_word_embeddings": False, "bos_token_id": None,
                  "eos_token_id": None, "pad_token_id": None},
    "tiny-qwen3": {"model_type": "qwen3", **_TINY, "head_dim": 16, "tie_word_embeddings": True},
    "tiny-gemma3": {"model_type": "gemma3_text", **_TINY, "head_dim": 16, "query_pre_attn_scalar": 16,
                    "sliding_window": 512},
    # Mixtures of experts: each token goes to its top-k routed experts (`num_experts_per_tok`).
    # https://huggingface.co/allenai/OLMoE-1B-7B-0924/blob/main/config.json: 64 experts, 8 per token, no shared one.
    "olmoe-1b-7b": {"model_type": "olmoe", "hidden_size": 2048, "intermediate_size": 1024, "num_hidden_layers": 16,
                    "num_attention_heads": 16, "num_key_value_heads": 16, "num_experts": 64, "num_experts_per_tok": 8,
                    "vocab_size": 50304, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
                    "tie_word_embeddings": False, "norm_topk_prob": False, "pad_token_id": 1, "eos_token_id": 50279,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}},
    # https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json: 128 experts of width 768, 8 per token;
    # heads of 128 dimensions (32 of them, wider than the 2,048 model width).
    "qwen3-30b-a3b": {"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
                      "moe_intermediate_size": 768, "num_hidden_layers": 48, "num_attention_heads": 32,
                      "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128, "num_experts_per_tok": 8,
                      "norm_topk_prob": True, "vocab_size": 151936, "max_position_embeddings": 40960,
                      "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
                      "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
    # https://huggingface.co/openai/gpt-oss-20b/blob/main/config.json: 32 experts with biases, 4 per token;
    # attention sinks, and a 128-token sliding window on every other layer.
    "gpt-oss-20b": {"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880, "num_hidden_layers": 24,
                    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64, "num_local_experts": 32,
                    "num_experts_per_tok": 4, "vocab_size": 201088, "max_position_embeddings": 131072,
                    "sliding_window": 128, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                    "attention_bias": True, "swiglu_limit": 7.0,
                    "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 32.0,
                                        "beta_fast": 32.0, "beta_slow": 1.0, "original_max_position_embeddings": 4096}},
    # https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json: 8 experts, 2 per token; 46.7B
    # parameters, 93 GB of bf16 weights: more than one 80 GB GPU holds, so it runs sharded over several.
    "mixtral-8x7b": {"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 8,
                     "num_experts_per_tok": 2, "vocab_size": 32000, "max_position_embeddings": 32768,
                     "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                     "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0}},
    "tiny-mixtral": {"model_type": "mixtral", **_TINY, **_TINY_EXPERTS, "num_local_experts": 4},
    "tiny-qwen3-moe": {"model_type": "qwen3_moe", **_TINY, **_TINY_EXPERTS, "num_experts": 4, "head_dim": 32,
                       "moe_intermediate_size": 32, "norm_topk_prob": True, "tie_word_embeddings": False},
    "tiny-olmoe": {"model_type": "olmoe", **_TINY, **_TINY_EXPERTS, "num_experts": 4, "pad_token_id": None,
                   "bos_token_id": None, "eos_token_id": None},
    "tiny-gpt-oss": {"model_type": "gpt_oss", **_TINY, **_TINY_EXPERTS, "num_local_experts": 4, "head_dim": 16,
                     "sliding_window": 128, "pad_token_id": None, "bos_token_id": None, "eos_token_id": None,
                     "rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                                         "beta_slow": 1.0, "original_max_position_embeddings": 256}},
}

if set(get_args(PresetName)) != set(MODEL_PRESETS):  # the Literal is what the JSON Schema lists
    raise RuntimeError("PresetName and MODEL_PRESETS name different presets")
