#!/usr/bin/env python3
"""Times the peers of gemma-kernels on every suite workload with the benchmark's protocol, and merges them with
`gk bench --json` into one markdown table and one chart per suite.

Run on the GPU machine (torch, matplotlib):
    python3 bench/peers.py --ours gk-bench-047.json --ours gk-bench-054.json --out bench/results
The tables and charts come from bench/render.py, which can also re-merge new `gk bench` numbers with a stored
peers.json without timing the peers again.

Peers, each on the suite's inputs (docs/spec.md's recipe), with each workload's own configuration (the gemma3
suite's models and windows; the decode suite's caches, where the peers write the new k and v into the cache and
attend over it, and the eager re-statement takes the cache as its past keys):
  047, gemma3  eager  PyTorch eager, the layer re-stated from the specification (scripts/torch_reference.py);
                      not run past S = 8192 (it materializes B*H*S^2 scores)
               flex   cuBLAS projections, compiled norm+RoPE, FlexAttention with a softcap score_mod where there is
                      a softcap and the window in its block mask (compiled; the compile happens before timing)
               sdpa   as flex, but torch SDPA: causal, or the window as a boolean mask; without a softcap (with
                      one, as in 047, NOT the same function: for scale)
  054  fp32       cuBLAS fp32 GEMMs + torch norms (the re-statement)
       tf32       the same with cuBLAS tf32 (inputs are not rounded to nearest: watch the check column)
Protocol: every peer call is captured in a CUDA graph per input set (3 sets, rotated); before every replay a
buffer of 2x the L2 size is zeroed; CUDA events around the replay (no host launch overhead, like the CUPTI span
gk bench reports); 10 warm-up + 50 timed replays; median. Each peer's output is judged with the official rule
against the eager re-statement (047, gemma3; past S = 8192 on the last 512 query rows only) or a float64
evaluation (054).
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import torch
import torch._dynamo
import torch.nn.functional as F

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from torch_reference import (BF16, audio_inputs, audio_qkv, gemma3_inputs, gemma3_layer, judge,  # noqa: E402
                             rotate_half)

sys.path.insert(0, str(ROOT / "bench"))
from render import load_ours, peers_of, workload_label, write_suite  # noqa: E402

def log(msg):
    print(msg, flush=True)


class Timer:
    def __init__(self, warmup=10, iters=50):
        self.warmup, self.iters = warmup, iters
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.scrub = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    def replays(self, graphs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        us = []
        for i in range(self.warmup + self.iters):
            self.scrub.zero_()
            start.record()
            graphs[i % len(graphs)].replay()
            stop.record()
            stop.synchronize()
            if i >= self.warmup:
                us.append(start.elapsed_time(stop) * 1e3)
        return {"median_us": statistics.median(us), "min_us": min(us), "max_us": max(us)}


def capture(fn, args):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn(*args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*args)
    return graph, out


# ---- 047 -------------------------------------------------------------------------------------------------------
def make_norm_rope(cfg):
    eps, offset = cfg["eps"], cfg["norm_weight_offset"]

    def norm_rope(t, w, cos, sin):
        t32 = t.float()
        t32 = t32 * torch.rsqrt(t32.pow(2).mean(-1, keepdim=True) + eps) * (offset + w.float())
        t = t32.to(BF16)
        return t * cos.unsqueeze(1) + rotate_half(t) * sin.unsqueeze(1)

    return torch.compile(norm_rope, dynamic=True)


# Past this length the eager peer is not run and the other peers are judged on the last kTruthRows query rows.
kEagerMaxSeqLen = 8192
kTruthRows = 512


def gemma3_peers(cfg, names, norm_rope, flex):
    from torch.nn.attention.flex_attention import create_block_mask

    d, hq, hkv, cap = cfg["head_dim"], cfg["num_q_heads"], cfg["num_kv_heads"], cfg["softcap"]
    window = int(cfg.get("window", 0))
    scale = cfg.get("query_scale") or d ** -0.5

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def banded(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    def project(t):
        b, s, _ = t["x"].shape
        q = F.linear(t["x"], t["wq"]).view(b, s, hq, d).transpose(1, 2)
        k = F.linear(t["x"], t["wk"]).view(b, s, hkv, d).transpose(1, 2)
        v = F.linear(t["x"], t["wv"]).view(b, s, hkv, d).transpose(1, 2)
        return norm_rope(q, t["qn"], t["cos"], t["sin"]), norm_rope(k, t["kn"], t["cos"], t["sin"]), v

    def finish(o, t):
        b, _, s, _ = o.shape
        return F.linear(o.transpose(1, 2).reshape(b, s, hq * d), t["wo"])

    def eager(t, rows=None):
        return gemma3_layer(t["x"], t["cos"], t["sin"], t["mask"], t["wq"], t["wk"], t["wv"], t["wo"], t["qn"],
                            t["kn"], cfg, rows=rows)

    def flex_layer(t, block_mask):
        q, k, v = project(t)
        o = flex(q, k, v, score_mod=softcap if cap > 0 else None, block_mask=block_mask, scale=scale,
                 enable_gqa=True)
        return finish(o, t)

    def sdpa_layer(t, band):
        q, k, v = project(t)
        if band is None:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)
        else:
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=band, scale=scale, enable_gqa=True)
        return finish(o, t)

    def build(name, s):
        if name == "eager":
            if s > kEagerMaxSeqLen:
                raise RuntimeError(f"not run past S = {kEagerMaxSeqLen} (B*H*S^2 scores)")
            return eager
        if name == "sdpa":
            band = None
            if window > 0:
                i = torch.arange(s, device="cuda")
                band = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < window)
            return lambda t: sdpa_layer(t, band)
        block_mask = create_block_mask(banded if window > 0 else causal, B=None, H=None, Q_LEN=s, KV_LEN=s,
                                       device="cuda")
        return lambda t: flex_layer(t, block_mask)

    return {n: build for n in names}, eager


def decode_peers(cfg, names, norm_rope, flex, cached):
    """The decode suite's peers: the new tokens' q, k, v as gemma3_peers makes them, k and v written into the cache
    after its `cached` tokens (in place, inside the captured graph), attention over the cache (FlexAttention with
    the softcap; SDPA without one, as for 047), the O projection. The eager re-statement over the cache judges."""
    d, hq, hkv, cap = cfg["head_dim"], cfg["num_q_heads"], cfg["num_kv_heads"], cfg["softcap"]
    scale = cfg.get("query_scale") or d ** -0.5

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)

    def step(t, attend):
        b, s, _ = t["x"].shape
        q = F.linear(t["x"], t["wq"]).view(b, s, hq, d).transpose(1, 2)
        k = F.linear(t["x"], t["wk"]).view(b, s, hkv, d).transpose(1, 2)
        v = F.linear(t["x"], t["wv"]).view(b, s, hkv, d).transpose(1, 2)
        q, k = norm_rope(q, t["qn"], t["cos"], t["sin"]), norm_rope(k, t["kn"], t["cos"], t["sin"])
        t["k_cache"][:, :, cached:cached + s] = k
        t["v_cache"][:, :, cached:cached + s] = v
        o = attend(q, t["k_cache"], t["v_cache"])  # one new token per sequence: it sees every cached key
        return F.linear(o.transpose(1, 2).reshape(b, s, hq * d), t["wo"])

    def flex_attend(q, k, v):
        return flex(q, k, v, score_mod=softcap if cap > 0 else None, scale=scale, enable_gqa=True)

    def sdpa_attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)

    def eager(t, rows=None):
        past = (t["k_cache"][:, :, :cached], t["v_cache"][:, :, :cached])
        return gemma3_layer(t["x"], t["cos"], t["sin"], None, t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"],
                            cfg, past=past)

    def build(name, s):
        if s != 1:
            raise RuntimeError("the decode peers take one new token per sequence")
        return {"eager": eager, "flex": lambda t: step(t, flex_attend), "sdpa": lambda t: step(t, sdpa_attend)}[name]

    return {n: build for n in names}, eager


def decode_inputs(cfg, b, s, cached, gen):
    """gemma3_inputs plus a key/value cache of cached + s tokens (unit-scale randn, as normalized keys are)."""
    t = gemma3_inputs(cfg, b, s, gen)
    shape = (b, cfg["num_kv_heads"], cached + s, cfg["head_dim"])
    t["k_cache"] = torch.randn(*shape, generator=gen, device="cuda").to(BF16)
    t["v_cache"] = torch.randn(*shape, generator=gen, device="cuda").to(BF16)
    return t


# ---- 054 -------------------------------------------------------------------------------------------------------
def set_tf32(enabled):
    # One API only: newer torch refuses to mix fp32_precision with the legacy allow_tf32 flag.
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        matmul.fp32_precision = "tf32" if enabled else "ieee"
    else:
        matmul.allow_tf32 = enabled


def run_audio(t, cfg):
    return audio_qkv(t["x"], t["wq"], t["wk"], t["wv"], t["qn"], t["kn"], cfg["eps"], cfg["num_heads"],
                     cfg["head_dim"])


# ---- driver ----------------------------------------------------------------------------------------------------
def bench_suite(suite, peers, timer, sets, seed, done=None, save=None):
    """Times every workload's peers; `done` holds a previous run's results for this suite (workloads with a result for
    every peer are kept, not run again), and `save(results)` is called after each workload, so a run cut short by a
    time limit keeps what it measured."""
    results = dict(done or {})
    if suite["operator"] == "gemma3_attention":
        # Once per suite: the compiled functions are reused across shapes and configurations.
        norm_rope = make_norm_rope(suite["constants"])
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
    for idx, w in enumerate(suite["workloads"]):
        b, s = w["batch"], w["seq_len"]
        cfg = dict(suite["constants"], **w.get("config", {}))  # the workload's own configuration
        label = workload_label(w)
        if all(name in results.get(label, {}) for name in peers):  # timed, or a reason it cannot run
            log(f"{suite['id']} {label}: kept from the previous run")
            continue
        gen = torch.Generator(device="cuda").manual_seed(seed + idx)
        rows = None  # every output row judged
        cached = int(cfg.get("cached", 0))
        if suite["operator"] == "gemma3_attention" and cached:
            builders, eager = decode_peers(cfg, peers, norm_rope, flex, cached)
            inputs = [decode_inputs(cfg, b, s, cached, gen) for _ in range(sets)]
            try:
                with torch.no_grad():
                    truth = eager(inputs[0])  # GQA by repeat_interleave: B*Hq*(cached + S)*D keys and values
            except torch.OutOfMemoryError as e:
                results[label] = {name: {"error": f"the eager judge ran out of memory: {e}"[:300]} for name in peers}
                log(f"{suite['id']} {label}: the eager judge ran out of memory; peers not run")
                inputs = None
                torch.cuda.empty_cache()
                continue
        elif suite["operator"] == "gemma3_attention":
            builders, eager = gemma3_peers(cfg, peers, norm_rope, flex)
            inputs = [gemma3_inputs(cfg, b, s, gen) for _ in range(sets)]
            rows = slice(s - kTruthRows, s) if s > kEagerMaxSeqLen else None
            with torch.no_grad():
                truth = eager(inputs[0], rows)
        else:
            inputs = [audio_inputs(cfg, b, s, gen) for _ in range(sets)]
            with torch.no_grad():
                t64 = {k: v.double() for k, v in inputs[0].items()}
                truth = run_audio(t64, cfg)
        results[label] = {}
        for name in peers:
            t0 = time.time()
            try:
                with torch.no_grad():
                    if suite["operator"] == "gemma3_attention":
                        fn = builders[name](name, s)
                        caps = [capture(fn, (inp,)) for inp in inputs]
                        caps[0][0].replay()  # a captured graph has not run yet
                        out = caps[0][1] if rows is None else caps[0][1][:, rows]
                        check = judge(out, truth, w["atol"], w["rtol"])
                    else:
                        set_tf32(name == "tf32")
                        caps = [capture(lambda t: run_audio(t, cfg), (inp,)) for inp in inputs]
                        caps[0][0].replay()
                        checks = [judge(o, r, w["atol"], w["rtol"]) for o, r in zip(caps[0][1], truth)]
                        check = {"pass": all(c["pass"] for c in checks),
                                 "matched_ratio": min(c["matched_ratio"] for c in checks),
                                 "max_abs_err": max(c["max_abs_err"] for c in checks)}
                    stats = timer.replays([g for g, _ in caps])
                results[label][name] = dict(stats, check=check)
                log(f"{suite['id']} {label:14s} {name:6s} {stats['median_us']:10.1f} us  check "
                    f"{'pass' if check['pass'] else 'FAIL'} matched {check['matched_ratio']:.6f} "
                    f"({time.time() - t0:.1f} s)")
            except Exception as e:  # a peer that cannot run a shape is reported, not fatal
                results[label][name] = {"error": f"{type(e).__name__}: {e}"[:300]}
                log(f"{suite['id']} {label:14s} {name:6s} ERROR {results[label][name]['error']}")
            finally:
                caps = None
                torch.cuda.empty_cache()
        set_tf32(False)
        if save is not None:
            save(results)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", action="append", help="gk bench --json output to merge (repeatable)")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--suites", default="054,047", help="suite ids, e.g. 054,047,gemma3")
    ap.add_argument("--sets", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--resume", help="a previous peers.json: its workloads with every peer timed are not run again")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    for knob in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 256)
    ours = load_ours(args.ours)
    timer = Timer()
    all_results = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "suites": {}}
    previous = {}
    if args.resume:
        stored = json.loads(pathlib.Path(args.resume).read_text())
        if stored.get("device") != all_results["device"]:
            sys.exit(f"--resume: {args.resume} was measured on {stored.get('device')}, this is {all_results['device']}")
        previous = stored["suites"]
        all_results["suites"].update(previous)  # suites not run now stay in the written file

    def save(sid, res):
        all_results["suites"][sid] = res
        (out / "peers.json").write_text(json.dumps(all_results, indent=1) + "\n")

    for sid in args.suites.split(","):
        suite = json.loads(next((ROOT / "suites").glob(f"{sid}_*.json")).read_text())
        res = bench_suite(suite, peers_of(suite), timer, args.sets, args.seed, previous.get(sid),
                          lambda r, sid=sid: save(sid, r))
        save(sid, res)
        log(write_suite(out, suite, ours, all_results))


if __name__ == "__main__":
    main()
