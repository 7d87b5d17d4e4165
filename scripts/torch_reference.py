"""The two operators re-stated in PyTorch from SPEC.md's description, as a bf16 (or fp32) torch program computes
them: each line rounds where a torch tensor of that dtype rounds. Used by scripts/make_fixtures.py, by
bench/peers.py (as the "PyTorch eager" peer and as the judge of the other peers) and by the Python tests
(tests/python), together with SPEC.md's input recipe and judging rule below."""
import math

import torch

BF16 = torch.bfloat16
LOWEST_BF16 = torch.finfo(torch.bfloat16).min


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def gemma3_layer(x, cos, sin, mask, wq, wk, wv, wo, qn, kn, cfg, rows=None, past=None):
    """The Gemma3 attention layer in bf16 torch ops; `mask` is an additive [B,1,S,S] tensor or None. `rows` (a slice
    of query positions) computes only those output rows, over every key: long sequences without the B*H*S^2 scores.
    `past` = (k, v) [B, Hkv, L, D]: a key/value cache's L earlier tokens (normalized and rotated, as a cache holds
    them); the S new tokens then sit at positions L .. L + S - 1 and `mask` is ignored: each sees the cached keys and
    the new ones up to itself (within cfg's "window" if set)."""
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
    if past is not None:
        past_len = past[0].shape[2]
        k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        i = torch.arange(s, device=x.device)[:, None] + past_len
        j = torch.arange(past_len + s, device=x.device)[None, :]
        visible = j <= i
        if cfg.get("window", 0):
            visible &= i - j < int(cfg["window"])
        zero = torch.zeros((), dtype=BF16, device=x.device)
        mask = torch.where(visible, zero, torch.full((), LOWEST_BF16, dtype=BF16, device=x.device))[None, None]
    if rows is not None:
        q = q[:, :, rows]
        mask = mask[:, :, rows] if mask is not None else None
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
    o = torch.matmul(p, v).transpose(1, 2).reshape(b, q.shape[2], hq * d)
    return torch.matmul(o, wo.t())


def causal_mask(b, s, device, window=0):
    """Causal (within a sliding window of `window` keys when > 0): 0 where query i sees key j, the lowest bf16
    elsewhere."""
    m = torch.full((s, s), LOWEST_BF16, dtype=BF16, device=device).triu(1)
    if window > 0:
        m = m + torch.full((s, s), LOWEST_BF16, dtype=BF16, device=device).tril(-window)
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


# ---- SPEC.md's inputs and judging rule -------------------------------------------------------------------------
def gemma3_inputs(cfg, b, s, gen):
    """One set of 047 inputs by SPEC.md's recipe (on the generator's CUDA device)."""
    h, d, hq, hkv = cfg["hidden"], cfg["head_dim"], cfg["num_q_heads"], cfg["num_kv_heads"]

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen, device="cuda") * scale).to(BF16)

    t1 = torch.randn(b, s, d, generator=gen, device="cuda").clamp(-math.pi, math.pi)
    t2 = torch.randn(b, s, d, generator=gen, device="cuda").clamp(-math.pi, math.pi)
    return dict(x=randn(b, s, h), cos=torch.cos(t1).to(BF16), sin=torch.sin(t2).to(BF16),
                mask=causal_mask(b, s, "cuda", int(cfg.get("window", 0))), wq=randn(hq * d, h, scale=h ** -0.5),
                wk=randn(hkv * d, h, scale=h ** -0.5), wv=randn(hkv * d, h, scale=h ** -0.5),
                wo=randn(h, hq * d, scale=(hq * d) ** -0.5), qn=torch.ones(d, dtype=BF16, device="cuda"),
                kn=torch.ones(d, dtype=BF16, device="cuda"))


def audio_inputs(cfg, b, s, gen):
    """One set of 054 inputs by SPEC.md's recipe."""
    h, n = cfg["hidden"], cfg["num_heads"] * cfg["head_dim"]
    return dict(x=torch.randn(b, s, h, generator=gen, device="cuda"),
                wq=torch.randn(n, h, generator=gen, device="cuda") * h ** -0.5,
                wk=torch.randn(n, h, generator=gen, device="cuda") * h ** -0.5,
                wv=torch.randn(n, h, generator=gen, device="cuda") * h ** -0.5,
                qn=torch.ones(cfg["head_dim"], device="cuda"), kn=torch.ones(cfg["head_dim"], device="cuda"))


def judge(out, ref, atol, rtol, required=0.99):
    """The official rule: |out - ref| <= atol + rtol |ref| on at least `required` of the elements, no NaN/Inf,
    not all zeros."""
    out, ref = out.double(), ref.double()
    finite = torch.isfinite(out)
    ok = (out - ref).abs() <= atol + rtol * ref.abs()
    matched = (ok & finite).double().mean().item()
    passed = bool(finite.all()) and bool((out != 0).any()) and matched >= required
    err = (out - ref).abs()
    return {"pass": passed, "matched_ratio": matched, "max_abs_err": err[torch.isfinite(err)].max().item()}
