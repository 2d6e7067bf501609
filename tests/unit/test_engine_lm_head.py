import torch

from padbench.contract.model_spec import ModelSpec
from padbench.worker.engine.model.build import build_model
from padbench.worker.engine.model.lm_head import ALIGNMENT, AlignedLMHead


def small_gpt2(vocab_size: int) -> dict[str, object]:
    return {"model_type": "gpt2", "n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": vocab_size}


def test_aligned_head_gives_the_logits_of_the_plain_tied_head() -> None:
    model = build_model(ModelSpec(config=small_gpt2(1001)),
                        torch.float32, torch.device("cpu"), seed=0)
    assert isinstance(model.lm_head, AlignedLMHead)
    hidden = torch.randn(2, 5, 32)
    logits = model.lm_head(hidden)
    assert logits.shape == (2, 5, 1001)
    assert logits.stride(-2) % ALIGNMENT == 0  # the GEMM wrote aligned rows
    torch.testing.assert_close(logits, hidden @ model.transformer.wte.weight.T)


def test_aligned_head_stays_tied_and_trainable() -> None:
    model = build_model(ModelSpec(config=small_gpt2(1001)),
                        torch.float32, torch.device("cpu"), seed=0)
    model.lm_head(torch.randn(3, 32)).sum().backward()
    assert model.transformer.wte.weight.grad is not None
    assert len(list(model.parameters())) == len(set(map(id, model.parameters())))


def test_an_aligned_vocabulary_keeps_the_plain_head() -> None:
    model = build_model(ModelSpec(config=small_gpt2(1024)),
                        torch.float32, torch.device("cpu"), seed=0)
    assert not isinstance(model.lm_head, AlignedLMHead)


def test_benchmark_forward_keeps_no_kv_cache() -> None:
    # A KV cache copies every layer's keys and values on each forward (18% of a packed forward on an H200).
    model = build_model(ModelSpec(preset="tiny"), torch.float32, torch.device("cpu"), seed=0)
    output = model(torch.randint(0, 100, (1, 8)))
    assert output.past_key_values is None


def test_an_untied_head_is_aligned_with_its_own_weight_and_bias() -> None:
    config = {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1001, "tie_word_embeddings": False}
    model = build_model(ModelSpec(config=config), torch.float32, torch.device("cpu"), seed=0)
    assert isinstance(model.lm_head, AlignedLMHead)
    assert model.lm_head.weight is not model.get_input_embeddings().weight
    hidden = torch.randn(2, 5, 32)
    torch.testing.assert_close(model.lm_head(hidden), hidden @ model.lm_head.weight.T)
    names = {name for name, _ in model.named_parameters()}
    assert "lm_head.head_weight" in names  # still a parameter: trained, moved and counted with the model
