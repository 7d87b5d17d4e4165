"""The two operators re-stated in PyTorch from SPEC.md's description, as a bf16 (or fp32) torch program computes
them: each line rounds where a torch tensor of that dtype rounds. Used by scripts/make_fixtures.py and by
bench/peers.py (as the "PyTorch eager" peer and as the judge of the other peers)."""
import torch

BF16 = torch.bfloat16
LOWEST_BF16 = torch.finfo(torch.bfloat16).min


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def gemma3_layer(x, cos, sin, mask, wq, wk, wv, wo, qn, kn, cfg):
    """The Gemma3 attention layer in bf16 torch ops; `mask` is an additive [B,1,S,S] tensor or None."""
    b, s, _ = x.shape
    d, hq, hkv = cfg["head_dim"], cfg["num_q_heads"], cfg["num_kv_heads"]

    def heads(w, n):
        return torch.matmul(x, w.t()).view(b, s, n, d).transpose(1, 2)

    def rms_norm(t, w):
        t32 = t.float()
        normed = t32 * torch.rsqrt(t32.pow(2).mean(dim=-1, keepdim=True) + cfg["eps"])
        return (normed * (cfg["norm_weight_offset"] + w.float())).to(BF16)

    c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
    q = rms_norm(heads(wq, hq), qn)
    k = rms_norm(heads(wk, hkv), kn)
    v = heads(wv, hkv)
    q = q * c + rotate_half(q) * sn
    k = k * c + rotate_half(k) * sn
    group = hq // hkv
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scale = cfg.get("query_scale") or d ** -0.5
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    cap = cfg["softcap"]
    if cap > 0:
        scores = torch.tanh(scores / cap) * cap
    if mask is not None:
        scores = scores + mask
    p = torch.softmax(scores.float(), dim=-1).to(BF16)
    o = torch.matmul(p, v).transpose(1, 2).reshape(b, s, hq * d)
    return torch.matmul(o, wo.t())


def causal_mask(b, s, device):
    m = torch.full((s, s), LOWEST_BF16, dtype=BF16, device=device).triu(1)
    return m.expand(b, 1, s, s).contiguous()


def padded_causal_mask(b, s, device):
    """Causal, with the first 2 + 3*i keys of batch i masked: their early rows see nothing at all."""
    m = causal_mask(b, s, device).clone()
    for i in range(b):
        m[i, :, :, : min(s - 1, 2 + 3 * i)] = LOWEST_BF16
    return m


def audio_qkv(x, wq, wk, wv, qn, kn, eps, heads, head_dim):
    """q, k, v = x W^T; q and k normalized per head by x / sqrt(mean(x^2) + eps) * w. Outputs [B, S, H, D]."""
    b, s, _ = x.shape

    def proj(w):
        return torch.matmul(x, w.t()).view(b, s, heads, head_dim)

    def norm(t, w):
        return t / torch.sqrt(t.pow(2).mean(dim=-1, keepdim=True) + eps) * w

    return norm(proj(wq), qn), norm(proj(wk), kn), proj(wv)
