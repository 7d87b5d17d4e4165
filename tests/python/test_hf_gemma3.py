"""The Hugging Face drop-in: a small random-weight Gemma3 text model (hidden 3072, 24/8 heads, head_dim 128, two
layers) with its attention modules switched to the fused layer, against the stock model. With the softcap off
(HF's Gemma3 applies none) the reference is HF's own eager attention; with it on, the stock modules run a PyTorch
re-statement of the layer (scripts/torch_reference.py) that applies it, since HF's module would not."""
import types

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from torch_reference import gemma3_layer  # noqa: E402

from gemma_kernels.hf import fused_calls, restore, use_gemma_kernels  # noqa: E402

pytestmark = pytest.mark.gpu


def tiny_gemma3(softcap, layer_types=("full_attention", "full_attention"), sliding_window=4096):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=2048, hidden_size=3072, intermediate_size=4096, num_hidden_layers=2, num_attention_heads=24,
        num_key_value_heads=8, head_dim=128, query_pre_attn_scalar=128, attn_logit_softcapping=softcap,
        sliding_window=sliding_window, layer_types=list(layer_types), max_position_embeddings=4096)
    cfg._attn_implementation = "eager"
    model = Gemma3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    with torch.no_grad():  # non-trivial q/k norm weights (HF initializes them to zero: 1 + w = 1)
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.normal_(0.0, 0.3)
            layer.self_attn.k_norm.weight.normal_(0.0, 0.3)
    return model


def restated_forward(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None,
                     cache_position=None, **kwargs):
    """The stock module's math as SPEC.md states it, with the config's softcap applied."""
    cos, sin = position_embeddings
    s = hidden_states.shape[1]
    mask = attention_mask[:, :, :s, :s] if attention_mask is not None else None
    cfg = dict(head_dim=self.head_dim, num_q_heads=self.config.num_attention_heads,
               num_kv_heads=self.config.num_key_value_heads, eps=self.q_norm.eps, norm_weight_offset=1.0,
               softcap=self.attn_logit_softcapping or 0.0, query_scale=self.scaling)
    out = gemma3_layer(hidden_states, cos, sin, mask, self.q_proj.weight, self.k_proj.weight, self.v_proj.weight,
                       self.o_proj.weight, self.q_norm.weight, self.k_norm.weight, cfg)
    return out, None


def assert_like_stock(ours, ref, what):
    """The oracle's criterion for a model's logits against the stock model's: finite, relative L2 < 1.5e-2, top-1
    agreement >= 99%."""
    stats = compare(ours, ref)
    print(f"{what}: {stats}")
    assert torch.isfinite(ours).all()
    assert stats["rel_l2"] < 1.5e-2, stats
    assert stats["top1_agree"] >= 0.99, stats


def compare(ours, ref):
    ours, ref = ours.float(), ref.float()
    rel_l2 = ((ours - ref).norm() / ref.norm()).item()
    max_abs = (ours - ref).abs().max().item()
    top1 = (ours.argmax(-1) == ref.argmax(-1)).float().mean().item()
    return dict(rel_l2=rel_l2, max_abs=max_abs, ref_max=ref.abs().max().item(), top1_agree=top1)


@pytest.mark.parametrize("softcap", [None, 50.0], ids=["softcap_off", "softcap_50"])
def test_logits_match_the_stock_model(softcap):
    model = tiny_gemma3(softcap)
    ids = torch.randint(0, model.config.vocab_size, (2, 300), device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    with torch.no_grad():
        if softcap is None:
            ref = model(ids, use_cache=False).logits
        else:
            for layer in model.model.layers:
                layer.self_attn.forward = types.MethodType(restated_forward, layer.self_attn)
            ref = model(ids, use_cache=False).logits
            for layer in model.model.layers:
                del layer.self_attn.forward  # back to the class's forward
        assert use_gemma_kernels(model) == 2
        ours = model(ids, use_cache=False).logits
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [1, 1]  # no silent fallback
        assert restore(model) == 2
    stats = compare(ours, ref)
    print(f"HF Gemma3 logits, softcap {softcap}: {stats}")
    assert torch.isfinite(ours).all()
    # bf16 end to end: two layers of bf16 rounding differences (the fused layer keeps fp32 where eager rounds).
    assert stats["rel_l2"] < 2e-2, stats
    assert stats["top1_agree"] > 0.97, stats


def test_packed_qkv_weights_give_the_same_logits():
    """pack_qkv moves each module's q, k and v weights into one allocation (the layer then runs one GEMM for all
    three): the same values, so the same logits up to the GEMMs' accumulation order."""
    model = tiny_gemma3(50.0)
    ids = torch.randint(0, model.config.vocab_size, (2, 300), device="cuda", generator=torch.Generator("cuda").manual_seed(2))
    with torch.no_grad():
        assert use_gemma_kernels(model) == 2
        separate = model(ids, use_cache=False).logits
        assert restore(model) == 2
        before = [layer.self_attn.k_proj.weight.clone() for layer in model.model.layers]
        assert use_gemma_kernels(model, pack_qkv=True) == 2
        for layer, k in zip(model.model.layers, before):
            a = layer.self_attn
            assert torch.equal(a.k_proj.weight, k)
            # back to back in one allocation
            assert a.k_proj.weight.data_ptr() == a.q_proj.weight.data_ptr() + a.q_proj.weight.numel() * 2
            assert a.v_proj.weight.data_ptr() == a.k_proj.weight.data_ptr() + a.k_proj.weight.numel() * 2
        packed = model(ids, use_cache=False).logits
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [1, 1]
        restore(model)
    stats = compare(packed, separate)
    print(f"HF Gemma3 logits, packed q|k|v weights against separate: {stats}")
    assert torch.isfinite(packed).all()
    assert stats["rel_l2"] < 1e-2, stats
    assert stats["top1_agree"] > 0.98, stats


def test_local_layer_takes_the_window_without_a_mask_tensor():
    """A sliding-window (local) layer and a global one, prompts longer than the window. The stock model (eager: HF's
    sliding mask tensor) is the reference; the switched modules get no mask tensor (as where HF passes none), so the
    local layer runs the operator's sliding_window and the global one causal mode."""
    model = tiny_gemma3(None, layer_types=("sliding_attention", "full_attention"), sliding_window=128)
    ids = torch.randint(0, model.config.vocab_size, (2, 300), device="cuda", generator=torch.Generator("cuda").manual_seed(3))
    with torch.no_grad():
        ref = model(ids, use_cache=False).logits
        assert use_gemma_kernels(model) == 2
        for layer in model.model.layers:
            fused = layer.self_attn.forward
            layer.self_attn.forward = lambda *a, _f=fused, **k: _f(*a, **{**k, "attention_mask": None})
        ours = model(ids, use_cache=False).logits
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [1, 1]  # no silent fallback
        assert restore(model) == 2  # the wrappers and the switch undone together
        assert use_gemma_kernels(model) == 2  # now with HF's mask tensors: the window in the additive mask
        with_tensor = model(ids, use_cache=False).logits
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [1, 1]
        restore(model)
    for name, got in (("sliding_window", ours), ("mask tensor", with_tensor)):
        stats = compare(got, ref)
        print(f"HF Gemma3 logits, local + global layer, window 128, {name}: {stats}")
        assert torch.isfinite(got).all()
        assert stats["rel_l2"] < 2e-2, stats
        assert stats["top1_agree"] > 0.97, stats


def test_what_it_cannot_take_is_named_once():
    """Modules it can never take stay unswitched and one warning names them (head_dim 96 here); a switched module
    whose call it cannot take (a right-padded batch with a KV cache) runs its own forward and warns once per
    reason."""
    import warnings

    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(
        vocab_size=256, hidden_size=512, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=96, query_pre_attn_scalar=96, sliding_window=64,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=512)
    cfg._attn_implementation = "eager"
    wide = Gemma3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    with pytest.warns(UserWarning, match=r"2 attention module\(s\) not switched: .*head_dim 96 \(supported: 128, 256\)"):
        assert use_gemma_kernels(wide) == 0
    model = tiny_gemma3(None)
    ids = torch.randint(0, model.config.vocab_size, (1, 40), device="cuda", generator=torch.Generator("cuda").manual_seed(4))
    with torch.no_grad():
        assert use_gemma_kernels(model) == 2
        padded = torch.ones_like(ids)
        padded[:, -3:] = 0  # right padding (left padding the library takes)
        with pytest.warns(UserWarning, match="runs its own forward: an attention mask other than left padding"):
            model(ids, attention_mask=padded, use_cache=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # said once already: silent now
            model(ids, attention_mask=padded, use_cache=True)
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [0, 0]
        restore(model)


# The released Gemma3 text models' attention configurations: (hidden, q heads, kv heads, head_dim, window,
# query_pre_attn_scalar). Two layers each (one local, one global), random weights, no softcap (their configs have
# none), prompts longer than the window.
MODELS = {
    "1b": (1152, 4, 1, 256, 512, 256),
    "4b": (2560, 8, 4, 256, 1024, 256),
    "12b": (3840, 16, 8, 256, 1024, 256),
    "27b": (5376, 32, 16, 128, 1024, 168),
}


def released_like(name, window=None):
    """A random-weight two-layer model (local, global) with a released model's attention (MODELS[name]); `window`
    replaces its sliding window."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    hidden, hq, hkv, d, model_window, qpas = MODELS[name]
    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=2048, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
        num_attention_heads=hq, num_key_value_heads=hkv, head_dim=d, query_pre_attn_scalar=qpas,
        attn_logit_softcapping=None, sliding_window=window or model_window,
        layer_types=["sliding_attention", "full_attention"], max_position_embeddings=4096)
    cfg._attn_implementation = "eager"
    model = Gemma3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.normal_(0.0, 0.3)
            layer.self_attn.k_norm.weight.normal_(0.0, 0.3)
    return model


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_layer_of_the_released_models_takes_the_fused_path(name):
    model = released_like(name)
    window = MODELS[name][4]
    with torch.no_grad():
        ids = torch.randint(0, 2048, (1, window + 300), device="cuda", generator=torch.Generator("cuda").manual_seed(5))
        ref = model(ids, use_cache=False).logits
        assert use_gemma_kernels(model) == 2
        ours = model(ids, use_cache=False).logits
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [1, 1]  # no fallback
        restore(model)
    assert_like_stock(ours, ref, f"HF Gemma3 {name} logits (local + global layer)")


@pytest.mark.parametrize("cache", ["dynamic", "static", "static-compiled"])
@pytest.mark.parametrize("name", ["27b", "1b"])
def test_generate_runs_every_step_through_the_library(name, cache):
    """generate() of 64 tokens after a 40-token prompt (batch 2) with each cache type, on a released model's
    attention (27B: head_dim 128; 1B: 256) with a local layer of window 48 (so the window cuts during decode) and a
    global one: every step of every layer takes the library (no fallback, no warning), and the per-step logits agree
    with the stock model's, teacher-forced on the same tokens (the stock model once over the whole sequence)."""
    import warnings

    model = released_like(name, window=48)
    prompt, new = 40, 64
    ids = torch.randint(0, 2048, (2, prompt), device="cuda", generator=torch.Generator("cuda").manual_seed(5))
    # A static cache makes generate() compile the decode step unless told not to: both ways.
    extra = {"dynamic": {}, "static": dict(cache_implementation="static", disable_compile=True),
             "static-compiled": dict(cache_implementation="static")}[cache]
    with torch.no_grad():
        assert use_gemma_kernels(model) == 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                 return_dict_in_generate=True, output_logits=True, **extra)
        ours_warned = [str(w.message) for w in caught if "gemma_kernels" in str(w.message)]
        assert not ours_warned, ours_warned  # a fallback would warn
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [new, new]
        assert restore(model) == 2
        ours = torch.stack(out.logits, dim=1)  # [B, new, vocab]
        full = model(out.sequences, use_cache=False).logits
    ref = full[:, prompt - 1:prompt - 1 + new]
    assert_like_stock(ours, ref, f"HF generate, {name}, {cache} cache, 64 steps")


@pytest.mark.parametrize("cache", ["dynamic", "static"])
def test_generate_with_a_left_padded_batch(cache):
    """Two prompts of 40 and 27 tokens, the shorter left-padded (as a tokenizer pads for generation), 32 new tokens
    on the 27B's attention with a local layer of window 24 (so the window passes the pads during decode): every step
    through the library, and the logits of each step agree with the stock model run once over the whole padded
    sequences with the same attention mask."""
    import warnings

    model = released_like("27b", window=24)
    prompt, short, new = 40, 27, 32
    ids = torch.randint(2, 2048, (2, prompt), device="cuda", generator=torch.Generator("cuda").manual_seed(6))
    mask = torch.ones_like(ids)
    mask[1, :prompt - short] = 0
    ids[1, :prompt - short] = 0  # the pad token
    extra = {"dynamic": {}, "static": dict(cache_implementation="static", disable_compile=True)}[cache]
    with torch.no_grad():
        assert use_gemma_kernels(model) == 2
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = model.generate(ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                 pad_token_id=0, return_dict_in_generate=True, output_logits=True, **extra)
        ours_warned = [str(w.message) for w in caught if "gemma_kernels" in str(w.message)]
        assert not ours_warned, ours_warned
        assert [fused_calls(layer.self_attn) for layer in model.model.layers] == [new, new]
        assert restore(model) == 2
        ours = torch.stack(out.logits, dim=1)
        full_mask = torch.cat([mask, torch.ones(2, new, dtype=mask.dtype, device=mask.device)], dim=1)
        # The positions generate() gives a padded batch: counted from each row's first real token.
        positions = (full_mask.long().cumsum(-1) - 1).masked_fill(full_mask == 0, 0)
        full = model(out.sequences, attention_mask=full_mask, position_ids=positions, use_cache=False).logits
    ref = full[:, prompt - 1:prompt - 1 + new]
    assert_like_stock(ours, ref, f"HF generate, left-padded batch, {cache} cache")


def test_generate_hook_reads_the_mask_from_kwargs_and_keeps_the_signature():
    """The generate() hook finds the 2-D mask where a model's prepare method takes it through **kwargs (as
    Gemma3ForConditionalGeneration's does), treats a prefill with image tokens as a mask it cannot replace, and keeps
    the method's signature (generate() reads it)."""
    import inspect

    from gemma_kernels import hf

    class Model:
        def prepare_inputs_for_generation(self, input_ids, inputs_embeds=None, **kwargs):
            return kwargs

    model, state = Model(), hf._MaskState()
    hf._wrap_prepare_inputs(model, state)
    assert "inputs_embeds" in inspect.signature(model.prepare_inputs_for_generation).parameters
    ids = torch.zeros(2, 5, dtype=torch.long)
    mask = torch.ones(2, 5, dtype=torch.long)
    model.prepare_inputs_for_generation(ids, attention_mask=mask)
    assert state.pending[0] == "causal"
    mask[1, :2] = 0
    model.prepare_inputs_for_generation(ids, attention_mask=mask)
    assert state.pending[0] == "padded" and state.pending[1].tolist() == [0, 2]
    mask[0, -1] = 0  # right padding
    model.prepare_inputs_for_generation(ids, attention_mask=mask)
    assert state.pending[0] == "other"
    image = torch.tensor([[0, 1, 1, 0, 0]] * 2)
    model.prepare_inputs_for_generation(ids, attention_mask=torch.ones(2, 5), token_type_ids=image)
    assert state.pending[0] == "other"
