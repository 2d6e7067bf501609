import torch

from padbench.contract.spec import GPT2Fields, ModelSpec
from padbench.worker.engine.lm_head import ALIGNMENT, AlignedLMHead
from padbench.worker.engine.model import build_model


def test_aligned_head_gives_the_logits_of_the_plain_tied_head() -> None:
    model = build_model(ModelSpec(config=GPT2Fields(n_layer=1, n_embd=32, n_head=2, vocab_size=1001)),
                        torch.float32, torch.device("cpu"), seed=0)
    assert isinstance(model.lm_head, AlignedLMHead)
    hidden = torch.randn(2, 5, 32)
    logits = model.lm_head(hidden)
    assert logits.shape == (2, 5, 1001)
    assert logits.stride(-2) % ALIGNMENT == 0  # the GEMM wrote aligned rows
    torch.testing.assert_close(logits, hidden @ model.transformer.wte.weight.T)


def test_aligned_head_stays_tied_and_trainable() -> None:
    model = build_model(ModelSpec(config=GPT2Fields(n_layer=1, n_embd=32, n_head=2, vocab_size=1001)),
                        torch.float32, torch.device("cpu"), seed=0)
    model.lm_head(torch.randn(3, 32)).sum().backward()
    assert model.transformer.wte.weight.grad is not None
    assert len(list(model.parameters())) == len(set(map(id, model.parameters())))


def test_an_aligned_vocabulary_keeps_the_plain_head() -> None:
    model = build_model(ModelSpec(config=GPT2Fields(n_layer=1, n_embd=32, n_head=2, vocab_size=1024)),
                        torch.float32, torch.device("cpu"), seed=0)
    assert not isinstance(model.lm_head, AlignedLMHead)


def test_benchmark_forward_keeps_no_kv_cache() -> None:
    # A KV cache copies every layer's keys and values on each forward (18% of a packed forward on an H200).
    model = build_model(ModelSpec(preset="tiny"), torch.float32, torch.device("cpu"), seed=0)
    output = model(torch.randint(0, 100, (1, 8)))
    assert output.past_key_values is None
