"""Tensor-parallel layer latency (issue 40): the suite-047 layer at TP = world size over NCCL, per 047 workload with
S >= 512, and the all-reduce's share. Run with torchrun, once per TP degree (TP = 1 is the baseline):

    torchrun --nproc_per_node 1 scripts/tp_bench.py --out bench/results/tp1.json
    torchrun --nproc_per_node 2 scripts/tp_bench.py --out bench/results/tp2.json

Protocol as `gk bench`'s where it can be: the same inputs on every rank, the L2 scrubbed before every iteration,
10 warm-up and 50 timed iterations, CUDA events on rank 0 around the layer (its slice and the all-reduce), median;
the all-reduce alone timed the same way on a tensor of the output's size. Each TP output is judged against the
unsharded layer with the official rule on rank 0.
"""
import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "python"), str(ROOT / "scripts")]
import gemma_kernels  # noqa: E402
from gemma_kernels import tp  # noqa: E402
from torch_reference import gemma3_inputs, judge  # noqa: E402


def median_us(fn, scrub, warmup=10, iters=50):
    times = []
    for i in range(warmup + iters):
        scrub.zero_()
        dist.barrier()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl")
    suite = json.loads((ROOT / "suites" / "047_gemma3_attention.json").read_text())
    cfg = suite["constants"]
    scrub = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    rows = []
    for w in suite["workloads"]:
        b, s = w["batch"], w["seq_len"]
        if s < 512:
            continue
        t = gemma3_inputs(cfg, b, s, torch.Generator(device="cuda").manual_seed(1000 + s))
        shard = tp.shard_gemma3(t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"], num_q_heads=cfg["num_q_heads"],
                                num_kv_heads=cfg["num_kv_heads"], rank=rank, world=world)
        out = torch.empty_like(t["x"])
        kw = dict(softcap=cfg["softcap"], rms_norm_eps=cfg["eps"])
        layer = lambda: tp.gemma3_attention_tp(t["x"], t["cos"], t["sin"], None, shard, out=out, **kw)  # noqa: E731
        layer()
        check = None
        if rank == 0:
            whole = gemma_kernels.gemma3_attention(t["x"], t["cos"], t["sin"], None, t["wq"], t["wk"], t["wv"],
                                                   t["wo"], t["qn"], t["kn"], **kw)
            check = judge(out, whole, w["atol"], w["rtol"], suite["required_matched_ratio"])["pass"]
        layer_us = median_us(layer, scrub)
        reduce_us = median_us(lambda: dist.all_reduce(out), scrub) if world > 1 else 0.0
        rows.append(dict(batch=b, seq_len=s, tp=world, layer_us=layer_us, all_reduce_us=reduce_us, check=check))
        if rank == 0:
            print(f"TP={world} B={b} S={s}: layer {layer_us:8.1f} us, all-reduce alone {reduce_us:6.1f} us, "
                  f"check {'pass' if check else 'FAIL'}", flush=True)
    if rank == 0 and args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(dict(device=torch.cuda.get_device_name(), tp=world, rows=rows), indent=1) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
