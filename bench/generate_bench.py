"""Tokens per second of Hugging Face `generate()` with and without gemma-kernels (issue 37's end-to-end measure).

A random-weight Gemma3 text model with the suite-047 layer's attention (hidden 3072, 24/8 heads, head_dim 128,
query_pre_attn_scalar 128, no softcap), Gemma3's pattern of five local layers (window 1024) to one global, a
32768-token vocabulary and an MLP of 8192; bf16 on one GPU. For each cache type (DynamicCache; StaticCache, which
generate() compiles), the stock model (SDPA attention) and the same model after `use_gemma_kernels`: a 2048-token
prompt (batch `--batch`), 128 new tokens (greedy, no early stop). Reported: the prefill alone (generate() of one
token), the whole call, and decode tokens per second = new tokens after the first / (whole - prefill); medians of
`--repeats` runs after one warm-up run (which includes any compilation). Writes a JSON next to the table.

    python3 bench/generate_bench.py --out bench/results          # needs the GPU machine
"""
import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from gemma_kernels.hf import fused_calls, restore, use_gemma_kernels  # noqa: E402


def build(layers: int, seed: int = 0):
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    kinds = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(layers)]
    cfg = Gemma3TextConfig(
        vocab_size=32768, hidden_size=3072, intermediate_size=8192, num_hidden_layers=layers, num_attention_heads=24,
        num_key_value_heads=8, head_dim=128, query_pre_attn_scalar=128, attn_logit_softcapping=None,
        sliding_window=1024, layer_types=kinds, max_position_embeddings=8192)
    cfg._attn_implementation = "sdpa"
    return Gemma3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()


def timed(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def measure(model, ids, new: int, extra: dict, repeats: int) -> dict:
    gen = lambda n: model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, **extra)  # noqa: E731
    with torch.no_grad():
        gen(new)  # warm-up: allocations, compilation, handle creation
        prefill = statistics.median(timed(lambda: gen(1)) for _ in range(repeats))
        whole = statistics.median(timed(lambda: gen(new)) for _ in range(repeats))
    return dict(prefill_s=prefill, whole_s=whole, decode_tokens_per_s=(new - 1) / max(whole - prefill, 1e-9))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--caches", default="dynamic,static", help="comma-separated: dynamic, static")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", default="generate.json", help="file name of the JSON written under --out")
    args = ap.parse_args()
    model = build(args.layers)
    ids = torch.randint(0, 32768, (args.batch, args.prompt), device="cuda",
                        generator=torch.Generator("cuda").manual_seed(1))
    rows = []
    kinds = {"dynamic": ("dynamic", {}), "static": ("static (compiled)", dict(cache_implementation="static"))}
    for cache, extra in (kinds[k] for k in args.caches.split(",")):
        for who in ("stock (SDPA)", "gemma-kernels"):
            if who == "gemma-kernels":
                use_gemma_kernels(model)
            r = measure(model, ids, args.new, extra, args.repeats)
            if who == "gemma-kernels":
                fused = [fused_calls(m.self_attn) for m in model.model.layers]
                r["library_calls_per_layer"] = fused
                restore(model)
            rows.append(dict(cache=cache, attention=who, **r))
            print(f"{cache:18s} {who:14s} prefill {1e3 * r['prefill_s']:8.1f} ms  whole {1e3 * r['whole_s']:8.1f} ms  "
                  f"decode {r['decode_tokens_per_s']:7.1f} tokens/s", flush=True)
    result = dict(device=torch.cuda.get_device_name(), layers=args.layers, batch=args.batch, prompt=args.prompt,
                  new=args.new, rows=rows)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
