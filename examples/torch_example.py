"""Both gemma-kernels operators from PyTorch, against plain PyTorch statements of the same math.

    pip install .            # or PYTHONPATH=python with the README's build
    python examples/torch_example.py

Needs an H100/H200 and PyTorch with CUDA.
"""
import torch

import gemma_kernels


def rms_norm(x, w, eps, offset):
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps) * (offset + w.float()))


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def gemma3_layer_reference(hs, cos, sin, wq, wk, wv, wo, qn, kn, window):
    """The Gemma3 layer in plain PyTorch (fp32 math, bf16 output), causal with a sliding window."""
    B, S, _ = hs.shape
    D = qn.shape[0]
    q = (hs.float() @ wq.float().T).view(B, S, -1, D)
    k = (hs.float() @ wk.float().T).view(B, S, -1, D)
    v = (hs.float() @ wv.float().T).view(B, S, -1, D)
    q, k = rms_norm(q, qn, 1e-6, 1.0), rms_norm(k, kn, 1e-6, 1.0)
    c, s = cos.float()[:, :, None], sin.float()[:, :, None]
    q, k = q * c + rotate_half(q) * s, k * c + rotate_half(k) * s
    group = q.shape[2] // k.shape[2]
    k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    i = torch.arange(S, device=hs.device)
    visible = (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * D**-0.5
    p = scores.masked_fill(~visible, float("-inf")).softmax(-1)
    attn = torch.einsum("bhqk,bkhd->bqhd", p, v).reshape(B, S, -1)
    return (attn @ wo.float().T).to(torch.bfloat16)


def main():
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    B, S, H, Hq, Hkv, D, window = 2, 300, 1024, 8, 4, 128, 128
    hs = torch.randn(B, S, H, device=dev, dtype=bf)
    angle = torch.arange(S, device=dev)[:, None] / 10000 ** (torch.arange(D // 2, device=dev) / (D // 2))
    cos = torch.cat([angle.cos()] * 2, -1).expand(B, S, D).to(bf).contiguous()
    sin = torch.cat([angle.sin()] * 2, -1).expand(B, S, D).to(bf).contiguous()
    wq, wk, wv = (torch.randn(n * D, H, device=dev, dtype=bf) * H**-0.5 for n in (Hq, Hkv, Hkv))
    wo = torch.randn(H, Hq * D, device=dev, dtype=bf) * (Hq * D) ** -0.5
    qn, kn = (torch.randn(D, device=dev, dtype=bf) * 0.1 for _ in range(2))
    out = gemma_kernels.gemma3_attention(hs, cos, sin, None, wq, wk, wv, wo, qn, kn, sliding_window=window)
    ref = gemma3_layer_reference(hs, cos, sin, wq, wk, wv, wo, qn, kn, window)
    rel = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    print(f"gemma3_attention, window {window}: relative L2 against PyTorch {rel:.2e}")

    x = torch.randn(B, 96, 1536, device=dev)
    aw = [torch.randn(8 * D, 1536, device=dev) * 1536**-0.5 for _ in range(3)]
    an = [torch.randn(D, device=dev) for _ in range(2)]
    q, k, v = gemma_kernels.audio_qkv(x, *aw, *an, eps=1e-6, precision="tf32")
    q_ref = rms_norm((x @ aw[0].T).view(B, 96, 8, D), an[0], 1e-6, 0.0)
    rel = ((q - q_ref).norm() / q_ref.norm()).item()
    print(f"audio_qkv, tf32: q's relative L2 against PyTorch fp32 {rel:.2e}")


if __name__ == "__main__":
    main()
