#!/usr/bin/env python3
"""Writes the small fixtures in tests/fixtures/ that the host tests check the CPU reference against.

Run on the GPU machine (it needs torch; transformers for the Hugging Face fixtures):
    python3 scripts/make_fixtures.py --out tests/fixtures

Two sources:
  * a PyTorch re-statement of the operators, written here from SPEC.md's description (bf16 tensors on the GPU,
    so each step rounds where a bf16 torch program rounds; the audio operator in float64),
  * transformers' own Gemma3Attention module (eager attention; it applies no softcap).
Each fixture is <name>.json (configuration, tolerance, tensor index) and <name>.bin (raw little-endian data).
"""
import argparse
import json
import math
import pathlib

import torch

from torch_reference import BF16, audio_qkv, causal_mask, gemma3_layer, padded_causal_mask

class Fixture:
    def __init__(self, name, operator, source, config, atol, rtol):
        self.name = name
        self.header = {"operator": operator, "source": source, "config": config,
                       "tolerance": {"atol": atol, "rtol": rtol}, "data": name + ".bin", "tensors": []}
        self.blob = bytearray()

    def add(self, name, t):
        t = t.detach().contiguous().cpu()
        if t.dtype == BF16:
            dtype, raw = "bf16", t.view(torch.int16).numpy().tobytes()
        elif t.dtype == torch.float32:
            dtype, raw = "f32", t.numpy().tobytes()
        elif t.dtype == torch.float64:
            dtype, raw = "f64", t.numpy().tobytes()
        else:
            raise ValueError(f"{name}: unsupported dtype {t.dtype}")
        self.header["tensors"].append({"name": name, "dtype": dtype, "shape": list(t.shape), "offset": len(self.blob)})
        self.blob += raw

    def save(self, out):
        (out / (self.name + ".bin")).write_bytes(bytes(self.blob))
        (out / (self.name + ".json")).write_text(json.dumps(self.header, indent=1) + "\n")
        print(f"wrote {self.name}: {len(self.blob)} bytes")


def gemma3_inputs(cfg, gen, device, act_scale=1.0, norm_spread=0.0):
    b, s, h, d = cfg["batch"], cfg["seq_len"], cfg["hidden"], cfg["head_dim"]
    hq, hkv = cfg["num_q_heads"], cfg["num_kv_heads"]

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=gen) * scale).to(device=device, dtype=BF16)

    t1 = torch.randn(b, s, d, generator=gen).clamp(-math.pi, math.pi)
    t2 = torch.randn(b, s, d, generator=gen).clamp(-math.pi, math.pi)
    return {
        "hidden_states": randn(b, s, h, scale=act_scale),
        "cos": torch.cos(t1).to(device=device, dtype=BF16),
        "sin": torch.sin(t2).to(device=device, dtype=BF16),
        "q_proj_weight": randn(hq * d, h, scale=h ** -0.5),
        "k_proj_weight": randn(hkv * d, h, scale=h ** -0.5),
        "v_proj_weight": randn(hkv * d, h, scale=h ** -0.5),
        "o_proj_weight": randn(h, hq * d, scale=(hq * d) ** -0.5),
        "q_norm_weight": randn(d, scale=norm_spread),
        "k_norm_weight": randn(d, scale=norm_spread),
    }


ORDER = ["hidden_states", "cos", "sin", "attention_mask", "q_proj_weight", "k_proj_weight", "v_proj_weight",
         "o_proj_weight", "q_norm_weight", "k_norm_weight"]


def spec_fixture(name, cfg, gen, device, mask_kind, act_scale=1.0, norm_spread=0.0):
    t = gemma3_inputs(cfg, gen, device, act_scale, norm_spread)
    b, s = cfg["batch"], cfg["seq_len"]
    if mask_kind == "padded":
        t["attention_mask"] = padded_causal_mask(b, s, device)
    mask = t.get("attention_mask")
    if cfg["mask"] == "causal":
        mask = causal_mask(b, s, device)
    out = gemma3_layer(t["hidden_states"], t["cos"], t["sin"], mask, t["q_proj_weight"], t["k_proj_weight"],
                       t["v_proj_weight"], t["o_proj_weight"], t["q_norm_weight"], t["k_norm_weight"], cfg)
    f = Fixture(name, "gemma3_attention", "pytorch re-statement (scripts/make_fixtures.py), bf16 on " + str(device),
                cfg, 0.02, 0.02)
    for k in ORDER:
        if k in t:
            f.add(k, t[k])
    f.add("out", out)
    return f


def hf_fixture(name, cfg, gen, device, mask_kind):
    from transformers import Gemma3TextConfig
    from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention

    hf_cfg = Gemma3TextConfig(
        vocab_size=64, hidden_size=cfg["hidden"], intermediate_size=2 * cfg["hidden"], num_hidden_layers=1,
        num_attention_heads=cfg["num_q_heads"], num_key_value_heads=cfg["num_kv_heads"], head_dim=cfg["head_dim"],
        query_pre_attn_scalar=cfg["query_pre_attn_scalar"], rms_norm_eps=cfg["eps"], attn_logit_softcapping=None,
        layer_types=["full_attention"], max_position_embeddings=4 * cfg["seq_len"], sliding_window=cfg["seq_len"])
    hf_cfg._attn_implementation = "eager"
    attn = Gemma3Attention(hf_cfg, layer_idx=0).to(device=device, dtype=BF16).eval()
    t = gemma3_inputs(cfg, gen, device, norm_spread=0.5)
    b, s = cfg["batch"], cfg["seq_len"]
    t["attention_mask"] = padded_causal_mask(b, s, device) if mask_kind == "padded" else causal_mask(b, s, device)
    with torch.no_grad():
        attn.q_proj.weight.copy_(t["q_proj_weight"])
        attn.k_proj.weight.copy_(t["k_proj_weight"])
        attn.v_proj.weight.copy_(t["v_proj_weight"])
        attn.o_proj.weight.copy_(t["o_proj_weight"])
        attn.q_norm.weight.copy_(t["q_norm_weight"])
        attn.k_norm.weight.copy_(t["k_norm_weight"])
        out, _ = attn(t["hidden_states"], position_embeddings=(t["cos"], t["sin"]), attention_mask=t["attention_mask"])
    import transformers
    ours = dict(cfg)
    del ours["query_pre_attn_scalar"]
    ours.update(softcap=0.0, norm_weight_offset=1.0, query_scale=cfg["query_pre_attn_scalar"] ** -0.5, mask="additive")
    f = Fixture(name, "gemma3_attention", f"transformers {transformers.__version__} Gemma3Attention (eager), bf16 on "
                + str(device), ours, 0.02, 0.02)
    for k in ORDER:
        f.add(k, t[k])
    f.add("out", out)
    return f


def audio_fixture(name, cfg, gen):
    b, s, h, n, d = cfg["batch"], cfg["seq_len"], cfg["hidden"], cfg["num_heads"], cfg["head_dim"]
    x = torch.randn(b, s, h, generator=gen)
    ws = [torch.randn(n * d, h, generator=gen) * h ** -0.5 for _ in range(3)]
    qn, kn = 1 + 0.5 * torch.randn(d, generator=gen), 1 + 0.5 * torch.randn(d, generator=gen)
    q, k, v = audio_qkv(x.double(), *(w.double() for w in ws), qn.double(), kn.double(), cfg["eps"], n, d)

    f = Fixture(name, "audio_qkv", "pytorch re-statement (scripts/make_fixtures.py), float64 on cpu", cfg, 1e-9, 1e-9)
    for key, t in [("hidden_states", x), ("q_proj_weight", ws[0]), ("k_proj_weight", ws[1]), ("v_proj_weight", ws[2]),
                   ("q_norm_weight", qn), ("k_norm_weight", kn), ("query_states", q),
                   ("key_states", k), ("value_states", v)]:
        f.add(key, t)
    return f


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="tests/fixtures")
    ap.add_argument("--seed", type=int, default=20261130)
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    # Keep bf16 GEMM reductions in fp32, as the operator's definition accumulates.
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    gen = torch.Generator().manual_seed(args.seed)

    small = dict(batch=2, seq_len=7, hidden=32, num_q_heads=4, num_kv_heads=2, head_dim=8, softcap=2.0, eps=1e-6,
                 norm_weight_offset=1.0, query_scale=0.0, mask="causal")
    fixtures = [
        spec_fixture("gemma3_spec_causal_softcap", small, gen, device, None, act_scale=2.0),
        spec_fixture("gemma3_spec_additive_padded", dict(small, softcap=0.0, mask="additive", seq_len=9), gen, device,
                     "padded", norm_spread=0.5),
        spec_fixture("gemma3_spec_none_group4_offset0",
                     dict(small, num_kv_heads=1, mask="none", norm_weight_offset=0.0, query_scale=0.3, softcap=5.0),
                     gen, device, None, norm_spread=0.5),
        hf_fixture("gemma3_hf_causal", dict(small, softcap=0.0, query_pre_attn_scalar=16), gen, device, "causal"),
        hf_fixture("gemma3_hf_padded", dict(small, softcap=0.0, query_pre_attn_scalar=32, batch=3), gen, device,
                   "padded"),
        audio_fixture("audio_spec", dict(batch=2, seq_len=5, hidden=16, num_heads=2, head_dim=8, eps=1e-6), gen),
    ]
    for f in fixtures:
        f.save(out)


if __name__ == "__main__":
    main()
