"""Tokens per second of Hugging Face `generate()` with and without gemma-kernels (issue 37's end-to-end measure).

A random-weight Gemma3 text model with the suite-047 layer's attention (hidden 3072, 24/8 heads, head_dim 128,
query_pre_attn_scalar 128, no softcap), Gemma3's pattern of five local layers (window 1024) to one global, a
32768-token vocabulary and an MLP of 8192; bf16 on one GPU. For each cache type (DynamicCache; StaticCache, which
generate() compiles), the stock model (SDPA attention) and the same model after `use_gemma_kernels`: a 2048-token
prompt (batch `--batch`), 128 new tokens (greedy, no early stop). Reported: the prefill alone (generate() of one
token), the whole call, and decode tokens per second = new tokens after the first / (whole - prefill); medians of
`--repeats` runs after one warm-up run (which includes any compilation). `--profile-steps N` adds a decode step's
device time, kernel count, CUDA-graph launches and host time by operator (torch.profiler). With few layers a step is
bound by generate()'s host loop, not by the device: take a real model's depth (e.g. 34, Gemma3 4B's) to compare the
attention. Writes a JSON next to the table.

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


def profiled(fn) -> dict:
    """One call under torch.profiler: device time, kernels, CUDA-graph launches, and host self time by operator."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels_us, kernels, graph_launches, cpu = 0.0, 0, 0, {}
    for e in prof.key_averages():
        if e.self_cpu_time_total > 0:
            cpu[e.key] = (e.self_cpu_time_total, e.count)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels_us += e.device_time_total  # kernels, copies and memsets
            kernels += 1
        elif e.name == "cudaGraphLaunch":
            graph_launches += 1
    return dict(kernels_us=kernels_us, kernels=kernels, graph_launches=graph_launches, cpu=cpu)


def measure(model, ids, new: int, extra: dict, repeats: int, profile_steps: int) -> dict:
    gen = lambda n: model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, **extra)  # noqa: E731
    with torch.no_grad():
        gen(new)  # warm-up: allocations, compilation, handle creation
        prefill = statistics.median(timed(lambda: gen(1)) for _ in range(repeats))
        whole = statistics.median(timed(lambda: gen(new)) for _ in range(repeats))
        r = dict(prefill_s=prefill, whole_s=whole, decode_tokens_per_s=(new - 1) / max(whole - prefill, 1e-9))
        if profile_steps > 0:
            # The decode steps' share: a profiled call of 1 + profile_steps tokens less one of 1 token.
            one, more = profiled(lambda: gen(1)), profiled(lambda: gen(1 + profile_steps))
            r["decode_step_kernel_us"] = (more["kernels_us"] - one["kernels_us"]) / profile_steps
            r["decode_step_kernels"] = (more["kernels"] - one["kernels"]) / profile_steps
            r["decode_step_graph_launches"] = (more["graph_launches"] - one["graph_launches"]) / profile_steps
            # Host time per decode step by operator (self time), the largest first: where a host-bound step goes.
            cpu = {k: ((t - one["cpu"].get(k, (0, 0))[0]) / profile_steps, (n - one["cpu"].get(k, (0, 0))[1]) /
                       profile_steps) for k, (t, n) in more["cpu"].items()}
            top = sorted(cpu.items(), key=lambda kv: -kv[1][0])[:15]
            r["decode_step_host_us"] = {k: dict(self_us=round(t, 1), calls=round(n, 2)) for k, (t, n) in top}
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--caches", default="dynamic,static", help="comma-separated: dynamic, static")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="also profile this many decode steps: kernel time, kernels and graph launches per step")
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
            r = measure(model, ids, args.new, extra, args.repeats, args.profile_steps)
            if who == "gemma-kernels":
                fused = [fused_calls(m.self_attn) for m in model.model.layers]
                r["library_calls_per_layer"] = fused
                restore(model)
            rows.append(dict(cache=cache, attention=who, **r))
            print(f"{cache:18s} {who:14s} prefill {1e3 * r['prefill_s']:8.1f} ms  whole {1e3 * r['whole_s']:8.1f} ms  "
                  f"decode {r['decode_tokens_per_s']:7.1f} tokens/s", flush=True)
            if "decode_step_kernel_us" in r:
                print(f"{'':33s} a decode step: kernels {r['decode_step_kernel_us']:8.1f} us on the device, "
                      f"{r['decode_step_kernels']:.0f} kernels, {r['decode_step_graph_launches']:.0f} graph launches",
                      flush=True)
                for k, v in r.get("decode_step_host_us", {}).items():
                    print(f"{'':37s} host {v['self_us']:8.1f} us {v['calls']:6.2f} calls  {k[:70]}", flush=True)
    result = dict(device=torch.cuda.get_device_name(), layers=args.layers, batch=args.batch, prompt=args.prompt,
                  new=args.new, rows=rows)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
