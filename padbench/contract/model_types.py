"""The transformers model types padbench measures, as data: the contract checks `model.config.model_type`
at submission without importing transformers. Written by scripts/model_types.py from transformers 5.24.0
(causal LMs whose attention goes through transformers' attention interface); the worker checks again
with its own transformers before it builds anything.
"""

from __future__ import annotations

TRANSFORMERS_VERSION = "5.24.0"
CAUSAL_LM_MODEL_TYPES: frozenset[str] = frozenset({
    "afmoe", "apertus", "apertus1p5_text", "arcee", "aria_text", "axk1", "axk2", "beam", "bert-generation",
    "bitnet", "codegen", "cohere", "cohere2", "cohere2_moe", "cohere_compass_text", "ctrl", "cwm", "dbrx",
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "diffllama", "doge", "dory", "dots1",
    "dots3_note", "dots3_note_text", "emu3", "ernie4_5", "ernie4_5_moe", "exaone", "exaone4", "exaone_moe",
    "flex_olmo", "flint", "fuyu", "gemma", "gemma2", "gemma3", "gemma3_text", "gemma3n", "gemma3n_text",
    "gemma4", "gemma4_assistant", "gemma4_text", "gemma4_unified", "gemma4_unified_assistant",
    "gemma4_unified_text", "glm", "glm4", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "got_ocr2", "gpt-sw3",
    "gpt2", "gpt_bigcode", "gpt_neox", "gpt_oss", "gptj", "granite", "granite_swa", "granitemoe",
    "granitemoe_swa", "granitemoehybrid", "granitemoeshared", "helium", "hrm_text", "hunyuan_v1_dense",
    "hunyuan_v1_moe", "hy_v3", "hy_v4", "hyperclovax", "internlm3", "iquestcoder", "jais2", "jetmoe",
    "kolibri1", "laguna", "lfm2", "lfm2_moe", "lfm3", "llama", "llama4", "llama4_text", "longcat_flash",
    "mellum", "mimo_v2_flash", "minicpm3", "minimax", "minimax_m2", "minimax_m3_vl_text", "ministral",
    "ministral3", "mistral", "mixtral", "mllama", "modernbert-decoder", "moshi", "moss_transcribe_diarize",
    "nanochat", "nemotron", "olmo", "olmo2", "olmo3", "olmoe", "opt", "persimmon", "phi", "phi3",
    "phi4_multimodal", "phimoe", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "recurrent_gemma", "sarvam_mla",
    "sarvam_moe", "seed_oss", "smollm3", "solar_open", "starcoder2", "vaultgemma", "youtu", "zaya",
})
