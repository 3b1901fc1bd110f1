"""The API takes what users hold (issue 26): a HF ``PreTrainedModel``, a path, a hub id or a
TransformerLens bridge, through one conversion (``ihprobe.io.any_model.as_model``); results print
in one line; and a matrix of HF causal-LM architectures, each a tiny random config saved with
``save_pretrained``, loads with log-probs equal to HF's and prefix matching equal to HF's own
eager attentions."""

from __future__ import annotations

import warnings

import pytest
import torch
import transformers

import ihprobe
from ihprobe.core.errors import IhprobeError
from ihprobe.core.standin import id_tokenizer
from ihprobe.io.any_model import as_model
from tests.helpers import hf_prefix_matching, save_checkpoint, tiny_hf_model

V, D, L, H, CTX, N = 64, 32, 2, 4, 64, 8
COMMON = {"vocab_size": V, "bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}
LLAMA_LIKE = {
    "hidden_size": D,
    "num_hidden_layers": L,
    "num_attention_heads": H,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": CTX,
    **COMMON,
}
GPT2_LIKE = {"n_embd": D, "n_layer": L, "n_head": H, "n_positions": CTX, **COMMON}
# model_type -> (config class, model class, tiny config)
ARCHITECTURES = {
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", GPT2_LIKE),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM",
                 {"hidden_size": D, "num_hidden_layers": L, "num_attention_heads": H,
                  "intermediate_size": 64, "max_position_embeddings": CTX, **COMMON}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", LLAMA_LIKE),
    "mistral": ("MistralConfig", "MistralForCausalLM", LLAMA_LIKE),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", LLAMA_LIKE),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", {**LLAMA_LIKE, "head_dim": 8}),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", {**LLAMA_LIKE, "head_dim": 8}),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", {**LLAMA_LIKE, "head_dim": 8}),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM", {**LLAMA_LIKE, "head_dim": 8}),
    "phi": ("PhiConfig", "PhiForCausalLM", LLAMA_LIKE),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", LLAMA_LIKE),
    "opt": ("OPTConfig", "OPTForCausalLM",
            {"hidden_size": D, "num_hidden_layers": L, "num_attention_heads": H, "ffn_dim": 64,
             "word_embed_proj_dim": D, "max_position_embeddings": CTX, **COMMON}),
    "bloom": ("BloomConfig", "BloomForCausalLM",
              {"hidden_size": D, "n_layer": L, "n_head": H, **COMMON}),
    "gptj": ("GPTJConfig", "GPTJForCausalLM", {**GPT2_LIKE, "rotary_dim": 4}),
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM",
                {"hidden_size": D, "num_layers": L, "num_heads": H, "window_size": 16,
                 "attention_types": [[["global", "local"], 1]],
                 "max_position_embeddings": CTX, **COMMON}),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", LLAMA_LIKE),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", LLAMA_LIKE),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", LLAMA_LIKE),
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", LLAMA_LIKE),
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", GPT2_LIKE),
    "granite": ("GraniteConfig", "GraniteForCausalLM", LLAMA_LIKE),
    "cohere": ("CohereConfig", "CohereForCausalLM", LLAMA_LIKE),
    "glm": ("GlmConfig", "GlmForCausalLM", {**LLAMA_LIKE, "head_dim": 8}),
    "nemotron": ("NemotronConfig", "NemotronForCausalLM", {**LLAMA_LIKE, "head_dim": 8}),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", LLAMA_LIKE),
    "falcon": ("FalconConfig", "FalconForCausalLM",
               {"hidden_size": D, "num_hidden_layers": L, "num_attention_heads": H,
                "new_decoder_architecture": False, "multi_query": True, **COMMON}),
    "xglm": ("XGLMConfig", "XGLMForCausalLM",
             {"d_model": D, "num_layers": L, "attention_heads": H, "ffn_dim": 64,
              "max_position_embeddings": CTX, **COMMON}),
    "openai-gpt": ("OpenAIGPTConfig", "OpenAIGPTLMHeadModel",
                   {"n_embd": D, "n_layer": L, "n_head": H, "n_positions": CTX, "vocab_size": V}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                {**LLAMA_LIKE, "num_local_experts": 2, "num_experts_per_tok": 1}),
}  # fmt: skip  # a data table: one architecture a line
UNBRIDGEABLE = ("CodeGenConfig", "CodeGenForCausalLM", {**GPT2_LIKE, "n_ctx": CTX, "rotary_dim": 4})
LOG_PROB_TOLERANCE = 1e-4  # float32 on CPU; measured differences are below 1e-6
PS_TOLERANCE = 1e-5  # attention weights are probabilities


def build(entry, seed: int = 0):
    config_class, model_class, kwargs = entry
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = getattr(transformers, config_class)(**kwargs)
        return getattr(transformers, model_class)(config).eval()


def repeated_rows(rows: int = 3) -> torch.Tensor:
    half = torch.randint(1, V, (rows, N), generator=torch.Generator().manual_seed(0))
    return torch.cat([half, half], dim=1)


def test_the_matrix_has_at_least_20_architectures():
    assert len(ARCHITECTURES) >= 20


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(ARCHITECTURES))
def test_each_architecture_loads_with_hf_log_probs_and_attention(kind, tmp_path):
    directory = save_checkpoint(build(ARCHITECTURES[kind]), tmp_path / kind, id_tokenizer(V))
    model = ihprobe.load(directory)
    hf = transformers.AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager")
    tokens = repeated_rows()
    with torch.no_grad():
        ours, theirs = model(tokens).log_softmax(-1), hf.eval()(tokens).logits.log_softmax(-1)
    assert (ours - theirs).abs().max() < LOG_PROB_TOLERANCE
    scores = ihprobe.scan(model, ["prefix_matching"], tokens=tokens)
    reference = hf_prefix_matching(hf, tokens)
    assert scores.head["prefix_matching"].shape == reference.shape
    assert (scores.head["prefix_matching"] - reference).abs().max() < PS_TOLERANCE


def test_scan_takes_a_plain_hf_model_a_path_and_a_bridge_alike(tmp_path):
    hf = tiny_hf_model("gpt2", vocab_size=V, context=CTX, d_model=D)
    directory = save_checkpoint(hf, tmp_path / "gpt2", id_tokenizer(V))
    tokens = repeated_rows()
    by_path = ihprobe.scan(str(directory), ["prefix_matching"], tokens=tokens)
    by_object = ihprobe.scan(hf, ["prefix_matching"], tokens=tokens)
    loaded = ihprobe.load(directory)
    by_bridge = ihprobe.scan(loaded, ["prefix_matching"], tokens=tokens)
    for scores in (by_object, by_bridge):
        assert torch.allclose(
            scores.head["prefix_matching"], by_path.head["prefix_matching"], atol=1e-6
        )
    assert torch.allclose(
        by_object.head["prefix_matching"], hf_prefix_matching(hf, tokens), atol=PS_TOLERANCE
    )
    assert as_model(hf) is as_model(hf)  # bridged once per object
    assert as_model(loaded) is loaded
    with torch.no_grad():  # the user trains on: the next call sees the new weights
        for parameter in hf.transformer.h[1].attn.parameters():
            parameter.mul_(3.0)
    changed = ihprobe.scan(hf, ["prefix_matching"], tokens=tokens).head["prefix_matching"]
    assert torch.allclose(changed, hf_prefix_matching(hf, tokens), atol=PS_TOLERANCE)
    assert not torch.allclose(changed, by_path.head["prefix_matching"], atol=1e-3)


def test_a_wrong_model_type_is_one_line():
    for wrong in (None, 3, torch.zeros(2), {"model": 1}):
        with pytest.raises(IhprobeError, match="must be a model from ihprobe.load") as err:
            ihprobe.scan(wrong)
        assert "\n" not in str(err.value)


def test_an_architecture_transformerlens_cannot_bridge_is_one_line(tmp_path):
    hf = build(UNBRIDGEABLE)
    directory = save_checkpoint(hf, tmp_path / "codegen", id_tokenizer(V))
    for attempt in (lambda: ihprobe.load(directory), lambda: ihprobe.scan(hf)):
        with pytest.raises(IhprobeError, match="TransformerLens cannot bridge CodeGen") as err:
            attempt()
        assert "\n" not in str(err.value)


def test_results_print_in_one_short_line(tmp_path):
    hf = tiny_hf_model("gpt-neox", vocab_size=V, context=CTX, d_model=D)
    model = as_model(hf)
    scores = ihprobe.scan(model, ["prefix_matching", "ar_accuracy"], n=N, batch=4)
    result = ihprobe.ablate(
        model, top=1, scope="global", random=2, n=N, batch=4, metrics=["ar_accuracy"]
    )
    composition = ihprobe.composition(model, "k", draws=2)
    for shown in (repr(scores), repr(result), repr(composition)):
        assert "\n" not in shown and "tensor(" not in shown and len(shown) < 300, shown
    assert repr(scores).startswith("HeadScores(") and "2 layers x 4 heads" in repr(scores)
    assert "ar_accuracy=" in repr(scores)
    top = result.top_heads[0]
    assert f"L{top[0]}H{top[1]}" in repr(result) and "2 random draws" in repr(result)
    layer, head, value = composition.strongest_into(1, 0)
    assert repr(composition).startswith("Composition(k, ")
    assert f"{float(composition.values.nan_to_num(-torch.inf).max()):+.3g}" in repr(composition)
