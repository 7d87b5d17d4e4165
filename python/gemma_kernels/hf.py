"""Hugging Face drop-in: run `transformers`' Gemma3 text models with the gemma-kernels attention layer.

    from gemma_kernels.hf import use_gemma_kernels
    model = Gemma3ForCausalLM.from_pretrained(..., torch_dtype=torch.bfloat16).cuda()
    use_gemma_kernels(model)          # every Gemma3Attention now calls the library's ops
    model.generate(ids, max_new_tokens=128)                                    # DynamicCache
    model.generate(ids, max_new_tokens=128, cache_implementation="static")     # StaticCache

Each attention module keeps its parameters (state dicts, devices and dtypes are untouched); only its forward
changes. Modules the operator can never take (head_dim other than 128 and 256, projection biases) are not switched, and
one warning names them. What a switched module runs:
- no cache (use_cache=False, scoring): the fused layer (gemma3_attention), with HF's mask tensor where there is one;
- a StaticCache's full-attention layer: the fused layer with the cache (gemma3_attention_cached_out), the new k and v
  written into the cache's tensors in place and its length advanced;
- every other cache layer HF ships (DynamicCache's full and sliding-window layers, StaticCache's sliding-window
  layers): gemma3_qkv, then the cache's own update, then gemma3_attend over the keys and values it returns.
With a cache the mask comes from the cache's lengths (causal, and the window on local layers), not from HF's mask
tensor: the model's 2-D attention mask must be all ones or left padding (each row's zeros first; the pad keys are
then hidden per sequence, and a pad token's own query gives zeros). A call that the library cannot take - another
mask with a cache (right padding, a custom 4-D mask), an offloaded cache, weights not in bf16, flash/flex
attention's masks, training mode - runs the module's original forward instead and warns once per module and
reason. Each switched module counts its library calls: `fused_calls(module)` (eager calls in a Python int, calls
inside a torch.compile'd graph in a device counter that the graph increments, CUDA-graph replays included).
`attn_logit_softcapping` from the config is applied (HF's own Gemma3 attention does not apply it).

`use_gemma_kernels(model, pack_qkv=True)` also moves each module's q, k and v weights into one allocation
[Wq; Wk; Wv] (once, when switching; the projections' weights become views of it, with the same values, shapes and
dtypes), so that the layer runs the three projections as one GEMM (faster past 128 tokens). The weights are then new
Parameter objects: meant for inference, after any optimizer or weight tying has been set up.
"""

from __future__ import annotations

import functools
import inspect
import types
import warnings

import torch

from .ops import gemma3_attend, gemma3_attention, gemma3_attention_cached_out, gemma3_qkv

_LOWEST_BF16 = torch.finfo(torch.bfloat16).min


def _additive_mask(mask: torch.Tensor, batch: int, seq_len: int) -> torch.Tensor:
    """HF's mask (bool: True = attend, or additive float; batch 1 when shared) as the operator's additive bf16
    [B, 1, S, S]."""
    mask = mask[:, :, :seq_len, :seq_len]
    if mask.dtype == torch.bool:
        zero = torch.zeros((), dtype=torch.bfloat16, device=mask.device)
        mask = torch.where(mask, zero, torch.full((), _LOWEST_BF16, dtype=torch.bfloat16, device=mask.device))
    else:
        mask = mask.to(torch.bfloat16)
    return mask.expand(batch, 1, seq_len, seq_len).contiguous()


def _static_reasons(module) -> list:
    """Why a module can never take the fused layer, whatever the call (empty: it can)."""
    reasons = []
    if module.head_dim not in (128, 256):
        reasons.append(f"head_dim {module.head_dim} (supported: 128, 256)")
    if any(getattr(m, "bias", None) is not None for m in (module.q_proj, module.k_proj, module.v_proj, module.o_proj)):
        reasons.append("projection biases")
    return reasons


def _call_reason(self, hidden_states, position_embeddings, attention_mask, cache_form, kwargs):
    """Why this call cannot take the fused layer (None: it can). cache_form: _cache_form's answer for the call's
    cache (None without one)."""
    seq_len = hidden_states.shape[1]
    window = getattr(self, "sliding_window", None)
    weights = [m.weight for m in (self.q_proj, self.k_proj, self.v_proj, self.o_proj, self.q_norm, self.k_norm)]
    if kwargs.get("past_key_value") is not None:  # transformers < 4.56
        return "a KV cache of transformers < 4.56"
    if cache_form is not None:
        reason = _cache_reason(self, cache_form)
        if reason is not None:
            return reason
    if position_embeddings is None:
        return "no position embeddings"
    if hidden_states.dtype != torch.bfloat16 or any(w.dtype != torch.bfloat16 for w in weights):
        return "activations or weights not in bf16"
    if attention_mask is not None and not (isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4):
        return "a mask that is not a 4-D tensor (flash or flex attention)"
    # A bidirectional window (|i - j| < window) has no operator form: without a mask tensor, only causal ones.
    if attention_mask is None and window is not None and not getattr(self, "is_causal", True) and seq_len > window:
        return "a bidirectional sliding window without a mask tensor"
    if self.training:
        return "training mode"
    static = _static_reasons(self)  # as at switching time, unless the module changed since
    return static[0] if static else None


class _MaskState:
    """What the switched text model's current forward was given as its attention mask, for calls with a cache (where
    the library applies the causal mask and window from the cache's lengths itself): "causal" (none, or a 2-D mask of
    ones), "padded" (a 2-D mask whose zeros are each row's prefix: left padding; `starts` then holds each row's pad
    count, int32 on the device) or "other" (zeros elsewhere, or a custom 4-D mask)."""

    def __init__(self):
        self.mask, self.starts = "causal", None
        self.pending = None  # generate's 2-D mask as (kind, starts), seen before it became a dict of 4-D masks


def _mask_kind(mask):
    """(kind, starts) of a model call's attention mask (see _MaskState)."""
    if mask is None:
        return "causal", None
    if isinstance(mask, torch.Tensor) and mask.dim() == 2:
        starts = (mask.cumsum(-1) == 0).sum(-1)  # each row's leading zeros
        # One host sync per model call (HF's own mask preparation makes one too): all ones, or zeros only leading.
        ones, left = torch.stack([mask.bool().all(), (mask.sum(-1) + starts == mask.shape[-1]).all()]).tolist()
        if ones:
            return "causal", None
        return ("padded", starts.to(torch.int32)) if left else ("other", None)
    return "other", None


def _model_pre_hook(state, module, args, kwargs):
    mask = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
    if isinstance(mask, dict) and state.pending is not None:  # built by generate from the 2-D mask it was given
        state.mask, state.starts = state.pending
    else:
        state.mask, state.starts = _mask_kind(mask)
    state.pending = None


def _wrap_prepare_inputs(model, state):
    """generate() turns the 2-D mask into 4-D ones here for compileable caches: note what it was first. A prefill
    with images (their tokens attend to each other both ways: only HF's own mask says so) counts as "other"."""
    original = model.prepare_inputs_for_generation
    signature = inspect.signature(original)
    var_kw = next((p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)

    @functools.wraps(original)  # generate() reads the signature (e.g. whether inputs_embeds is taken)
    def prepare_inputs_for_generation(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs).arguments
        extra = bound.get(var_kw, {}) if var_kw else {}  # Gemma3ForConditionalGeneration takes the mask there

        def arg(name):
            return bound[name] if name in bound else extra.get(name)

        token_types = arg("token_type_ids")
        images = arg("pixel_values") is not None or (token_types is not None and bool((token_types != 0).any()))
        state.pending = ("other", None) if images else _mask_kind(arg("attention_mask"))
        return original(*args, **kwargs)

    model._gk_prepare_inputs = model.__dict__.get("prepare_inputs_for_generation")  # an instance's own, if any
    model.prepare_inputs_for_generation = prepare_inputs_for_generation


def _cache_layer(self, past_key_values):
    """This module's layer of the cache (None before a lazily built cache has made it)."""
    layers = getattr(past_key_values, "layers", None)
    return layers[self.layer_idx] if layers is not None and self.layer_idx < len(layers) else None


def _cache_form(self, past_key_values):
    """("fused" | "split", None) for a cache the library drives, else (None, the reason it cannot)."""
    from transformers.cache_utils import (Cache, DynamicLayer, DynamicSlidingWindowLayer, StaticLayer,
                                          StaticSlidingWindowLayer)

    if not isinstance(past_key_values, Cache):
        return None, f"a KV cache of type {type(past_key_values).__name__}"
    if getattr(past_key_values, "offloading", False):
        return None, "an offloaded KV cache"
    layer = _cache_layer(self, past_key_values)
    kind = type(layer) if layer is not None else getattr(past_key_values, "layer_class_to_replicate", None)
    if kind is StaticLayer:
        return "fused", None
    if kind in (DynamicLayer, DynamicSlidingWindowLayer, StaticSlidingWindowLayer):
        return "split", None
    return None, f"a KV cache layer of type {getattr(kind, '__name__', kind)}"


def _cache_reason(self, cache_form):
    state = getattr(self, "_gk_state", None)
    if state is None:
        return "a KV cache in a module called outside the Gemma3 text model that use_gemma_kernels switched"
    if state.mask == "other":
        return "an attention mask other than left padding with a KV cache"
    if not getattr(self, "is_causal", True):
        return "bidirectional attention with a KV cache"
    return cache_form[1]


def _cached_forward(self, hidden_states, cos, sin, past_key_values, form, softcap):
    """The layer for new tokens with a cache (see the module's docstring), `form` as _cache_form gave it; returns the
    output [B, S, hidden]."""
    from transformers.cache_utils import DynamicSlidingWindowLayer, StaticSlidingWindowLayer

    batch, seq_len = hidden_states.shape[:2]
    pads = self._gk_state.starts  # a left-padded batch's pad counts (None: no padding)
    eps, scale = float(self.q_norm.eps), float(self.scaling)
    window = int(self.sliding_window) if getattr(self, "sliding_window", None) else 0
    weights = (self.q_proj.weight, self.k_proj.weight, self.v_proj.weight)
    norms = (self.q_norm.weight, self.k_norm.weight)
    layer = _cache_layer(self, past_key_values)
    if form == "fused":
        if not layer.is_initialized:  # the shapes and dtype its tensors are made with
            shape = (batch, self.k_proj.weight.shape[0] // self.head_dim, seq_len, self.head_dim)
            layer.lazy_initialization(hidden_states.new_empty(shape), hidden_states.new_empty(shape))
        lens = layer.cumulative_length.to(torch.int32).expand(batch).contiguous()  # on the device: no sync
        out = hidden_states.new_empty(hidden_states.shape[:-1] + (self.o_proj.weight.shape[0],))
        # The host bound on the length is the capacity: the library clamps inside the cache whatever the length holds.
        # The cache's slots are the tokens' indices from the first (pad included): the pads lead.
        gemma3_attention_cached_out(hidden_states, cos, sin, *weights, self.o_proj.weight, *norms, layer.keys,
                                    layer.values, lens, out, layer.max_cache_len - seq_len, softcap=softcap,
                                    rms_norm_eps=eps, query_scale=scale, sliding_window=window, cache_starts=pads)
        layer.cumulative_length.add_(seq_len)
        return out
    q, k, v = gemma3_qkv(hidden_states, cos, sin, *weights, *norms, rms_norm_eps=eps)
    before = layer.cumulative_length_int if isinstance(layer, StaticSlidingWindowLayer) else None
    keys, values = past_key_values.update(k, v, self.layer_idx)
    # The tokens before the new ones in what update returned: a StaticSlidingWindowLayer that is not yet full
    # returns its whole buffer (the new tokens after its `before` tokens); every other layer returns exactly the
    # tokens to attend, the new ones last.
    if before is not None and before + seq_len <= layer.max_cache_len:
        cached = before
    else:
        cached = keys.shape[-2] - seq_len
    lens = torch.full((batch,), cached, dtype=torch.int32, device=hidden_states.device)
    if pads is not None:
        # The pads lead the sequence; a sliding-window layer that has dropped its oldest tokens holds fewer of them.
        total = (layer.cumulative_length_int if isinstance(layer, StaticSlidingWindowLayer)
                 else layer.cumulative_length if isinstance(layer, DynamicSlidingWindowLayer) else cached + seq_len)
        dropped = total - (cached + seq_len)
        pads = (pads - dropped).clamp(min=0).to(torch.int32) if dropped > 0 else pads
    return gemma3_attend(q, keys.contiguous(), values.contiguous(), lens, self.o_proj.weight, cached, softcap=softcap,
                         query_scale=scale, sliding_window=window, cache_starts=pads)


def _count_fused(module) -> None:
    """One library call more. While torch.compile traces, the count goes to a device counter the graph increments
    (replays included): a Python int that changes on every call would be a guard that fails on every call, so each
    decode step would compile anew until dynamo's recompile limit sent the rest to eager, and no CUDA graph would
    replay."""
    if torch.compiler.is_compiling():
        module._gk_graph_calls.add_(1)
    else:
        module._gk_fused_calls += 1


def fused_calls(module) -> int:
    """How many calls of a switched Gemma3Attention module took the library (eager and compiled; one host sync)."""
    return module._gk_fused_calls + int(module._gk_graph_calls.item())


def _fused_forward(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None,
                   cache_position=None, **kwargs):
    cache_form = _cache_form(self, past_key_values) if past_key_values is not None else None
    reason = _call_reason(self, hidden_states, position_embeddings, attention_mask, cache_form, kwargs)
    if reason is not None:
        if reason not in self._gk_fallbacks:  # each module says once per reason why it runs the stock forward
            self._gk_fallbacks.add(reason)
            warnings.warn(f"gemma_kernels: {self._gk_name} runs its own forward: {reason}", stacklevel=2)
        return self._gk_original_forward(hidden_states, position_embeddings=position_embeddings,
                                         attention_mask=attention_mask, past_key_values=past_key_values,
                                         cache_position=cache_position, **kwargs)
    seq_len = hidden_states.shape[1]
    window = getattr(self, "sliding_window", None)
    causal = bool(getattr(self, "is_causal", True))
    # HF computes one rotary table for the batch ([1, S, D] when every row has the same positions).
    shape = (hidden_states.shape[0], seq_len, self.head_dim)
    cos, sin = (t.expand(shape).contiguous() for t in position_embeddings)
    softcap = float(self.attn_logit_softcapping or 0.0)
    if past_key_values is not None:
        out = _cached_forward(self, hidden_states.contiguous(), cos, sin, past_key_values, cache_form[0], softcap)
        _count_fused(self)
        return out, None
    mask = _additive_mask(attention_mask, shape[0], seq_len) if attention_mask is not None else None
    # A local layer's window: HF's mask tensor carries it where there is one; without one, the operator applies it
    # (a window covering the sequence is the causal mask).
    sliding = int(window) if window is not None and mask is None and causal and seq_len > window else 0
    out = gemma3_attention(
        hidden_states.contiguous(), cos, sin, mask, self.q_proj.weight, self.k_proj.weight,
        self.v_proj.weight, self.o_proj.weight, self.q_norm.weight, self.k_norm.weight, softcap=softcap,
        rms_norm_eps=float(self.q_norm.eps), is_causal=causal,
        norm_weight_offset=1.0, query_scale=float(self.scaling), sliding_window=sliding)
    _count_fused(self)
    return out, None


def _pack_qkv_weights(module: torch.nn.Module) -> None:
    """Replaces the q, k and v projection weights by views of one contiguous [Wq; Wk; Wv] tensor."""
    projections = (module.q_proj, module.k_proj, module.v_proj)
    with torch.no_grad():
        packed = torch.cat([p.weight.detach() for p in projections]).contiguous()
    start = 0
    for p in projections:
        rows = p.weight.shape[0]
        p.weight = torch.nn.Parameter(packed[start:start + rows], requires_grad=p.weight.requires_grad)
        start += rows


def use_gemma_kernels(model: torch.nn.Module, pack_qkv: bool = False) -> int:
    """Switches every Gemma3Attention in `model` that the fused layer can take to it; returns how many it switched.
    Modules it can never take (e.g. head_dim 96) stay as they are, named in one warning with the reason; a
    switched module whose call it cannot take (a KV cache, training mode, ...) runs its own forward and warns once
    per reason. pack_qkv: also put each module's q, k and v weights into one allocation (see the module's
    docstring)."""
    from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention, Gemma3TextModel

    # Each text model tells its attention modules what mask its forward was given (for calls with a cache).
    for text_model in [m for m in model.modules() if isinstance(m, Gemma3TextModel)]:
        if not hasattr(text_model, "_gk_state"):
            state = _MaskState()
            text_model._gk_state = state
            text_model._gk_hook = text_model.register_forward_pre_hook(
                lambda module, args, kwargs, state=state: _model_pre_hook(state, module, args, kwargs),
                with_kwargs=True)
            for module in text_model.modules():
                if isinstance(module, Gemma3Attention):
                    module._gk_state = state
            if hasattr(model, "prepare_inputs_for_generation") and not hasattr(model, "_gk_prepare_inputs"):
                _wrap_prepare_inputs(model, state)
    n, skipped = 0, []
    for name, module in model.named_modules():
        if isinstance(module, Gemma3Attention) and not hasattr(module, "_gk_original_forward"):
            reasons = _static_reasons(module)
            if reasons:
                skipped.append(f"{name or 'model'} ({', '.join(reasons)})")
                continue
            if pack_qkv:
                _pack_qkv_weights(module)
            module._gk_original_forward = module.forward
            module._gk_own_forward = module.__dict__.get("forward")  # an instance's own forward, if it had one
            module._gk_fused_calls = 0  # how many eager calls took the fused layer (the rest fell back)
            # ... and how many compiled ones (_count_fused): a buffer, so it follows the module's device; static for
            # CUDA graphs (which replay its increment), and left out of the state dict.
            counter = torch.zeros((), dtype=torch.int64, device=module.q_proj.weight.device)
            module.register_buffer("_gk_graph_calls", counter, persistent=False)
            torch._dynamo.mark_static_address(module._gk_graph_calls)
            module._gk_fallbacks = set()  # the reasons it has warned about
            module._gk_name = name or "model"
            module.forward = types.MethodType(_fused_forward, module)
            n += 1
    if skipped:
        warnings.warn(f"gemma_kernels: {len(skipped)} attention module(s) not switched: " + "; ".join(skipped[:4]) +
                      (f"; and {len(skipped) - 4} more" if len(skipped) > 4 else ""), stacklevel=2)
    return n


def restore(model: torch.nn.Module) -> int:
    """Undoes use_gemma_kernels; returns how many modules it restored."""
    n = 0
    if hasattr(model, "_gk_prepare_inputs"):
        del model.prepare_inputs_for_generation
        if model._gk_prepare_inputs is not None:
            model.prepare_inputs_for_generation = model._gk_prepare_inputs
        del model._gk_prepare_inputs
    for module in model.modules():
        if hasattr(module, "_gk_hook"):
            module._gk_hook.remove()
            del module._gk_hook
        if hasattr(module, "_gk_state"):
            del module._gk_state
        if hasattr(module, "_gk_original_forward"):
            del module.forward  # back to the class's forward (later patches of the class apply again) ...
            if module._gk_own_forward is not None:  # ... or to the instance's own, if it had one
                module.forward = module._gk_own_forward
            del module._gk_original_forward, module._gk_own_forward, module._gk_fused_calls, module._gk_fallbacks
            del module._buffers["_gk_graph_calls"]
            del module._gk_name
            n += 1
    return n
