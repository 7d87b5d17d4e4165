"""Hugging Face drop-in: run `transformers`' Gemma3 text models with the gemma-kernels attention layer.

    from gemma_kernels.hf import use_gemma_kernels
    model = Gemma3ForCausalLM.from_pretrained(..., torch_dtype=torch.bfloat16).cuda()
    use_gemma_kernels(model)          # every Gemma3Attention now calls torch.ops.gemma_kernels.gemma3_attention

Each attention module keeps its parameters (state dicts, devices and dtypes are untouched); only its forward
changes. Modules the operator can never take (head_dim other than 128 and 256, projection biases) are not switched, and
one warning names them. The fused layer covers full-sequence forward passes without a KV cache (scoring,
prefill-only use: call the model with use_cache=False, since recent transformers create a cache by default): a call
that the operator cannot take - a KV cache to update, weights not in bf16, a mask that is not a 4-D tensor
(flash/flex attention), training mode - runs the module's original forward instead and warns once per module and
reason. A sliding-window (local) layer takes its window from HF's mask tensor where there is one, else as the
operator's sliding_window. Each switched module counts its fused calls in `_gk_fused_calls`.
`attn_logit_softcapping` from the config is applied (HF's own Gemma3 attention does not apply it).

`use_gemma_kernels(model, pack_qkv=True)` also moves each module's q, k and v weights into one allocation
[Wq; Wk; Wv] (once, when switching; the projections' weights become views of it, with the same values, shapes and
dtypes), so that the layer runs the three projections as one GEMM (faster past 128 tokens). The weights are then new
Parameter objects: meant for inference, after any optimizer or weight tying has been set up.
"""

from __future__ import annotations

import types
import warnings

import torch

from .ops import gemma3_attention

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


def _call_reason(self, hidden_states, position_embeddings, attention_mask, past_key_values, kwargs):
    """Why this call cannot take the fused layer (None: it can)."""
    seq_len = hidden_states.shape[1]
    window = getattr(self, "sliding_window", None)
    weights = [m.weight for m in (self.q_proj, self.k_proj, self.v_proj, self.o_proj, self.q_norm, self.k_norm)]
    if past_key_values is not None or kwargs.get("past_key_value") is not None:  # the latter: transformers < 4.56
        return "a KV cache (call the model with use_cache=False)"
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


def _fused_forward(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None,
                   cache_position=None, **kwargs):
    reason = _call_reason(self, hidden_states, position_embeddings, attention_mask, past_key_values, kwargs)
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
    mask = _additive_mask(attention_mask, shape[0], seq_len) if attention_mask is not None else None
    softcap = self.attn_logit_softcapping or 0.0
    # A local layer's window: HF's mask tensor carries it where there is one; without one, the operator applies it
    # (a window covering the sequence is the causal mask).
    sliding = int(window) if window is not None and mask is None and causal and seq_len > window else 0
    out = gemma3_attention(
        hidden_states.contiguous(), cos, sin, mask, self.q_proj.weight, self.k_proj.weight,
        self.v_proj.weight, self.o_proj.weight, self.q_norm.weight, self.k_norm.weight, softcap=float(softcap),
        rms_norm_eps=float(self.q_norm.eps), is_causal=causal,
        norm_weight_offset=1.0, query_scale=float(self.scaling), sliding_window=sliding)
    self._gk_fused_calls += 1
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
    from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention

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
            module._gk_fused_calls = 0  # how many calls took the fused layer (the rest fell back)
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
    for module in model.modules():
        if hasattr(module, "_gk_original_forward"):
            module.forward = module._gk_original_forward
            del module._gk_original_forward, module._gk_fused_calls, module._gk_fallbacks, module._gk_name
            n += 1
    return n
