"""cuBLAS's own GEMM time on the 054 suite's shapes (issue 38's bound): fp16 operands with fp32 output, and fp32
operands on tf32 tensor cores, [M, hidden] x [hidden, 3 * heads * head_dim] (suites/054_audio_qkv.json), no norm, no
operand pass. What the fp16 route's GEMM would take at cuBLAS's speed; the route's time is then at least this plus
the operand pass.

Protocol as `gk bench`'s where it can be: the L2 scrubbed (a 512 MiB buffer written) before every iteration, 10
warm-up and 50 timed iterations, CUDA events around the GEMM alone, median.

    python scripts/cublas_f16_gemm.py --out bench/results/<card>/cublas-054.json
"""
import argparse
import json
import statistics
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def median_us(fn, scrub, warmup=10, iters=50):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        scrub.fill_(1)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    scrub = torch.empty(512 << 20, dtype=torch.uint8, device=dev)
    suite = json.loads((ROOT / "suites" / "054_audio_qkv.json").read_text())
    cfg = suite["constants"]
    hidden, n = cfg["hidden"], 3 * cfg["num_heads"] * cfg["head_dim"]
    w32 = torch.randn(n, hidden, device=dev)
    w16 = w32.half()
    try:  # fp32 output where this torch's mm takes out_dtype
        torch.mm(w16[:1], w16.t(), out_dtype=torch.float32)
        f16_kw, f16_out = {"out_dtype": torch.float32}, "fp32"
    except (TypeError, RuntimeError):
        f16_kw, f16_out = {}, "fp16"
    rows = []
    for w in suite["workloads"]:
        b, s = w["batch"], w["seq_len"]
        m = b * s
        a32 = torch.randn(m, hidden, device=dev)
        a16 = a32.half()
        out32 = torch.empty(m, n, device=dev)
        f16 = lambda: torch.mm(a16, w16.t(), **f16_kw)  # noqa: E731
        torch.backends.cuda.matmul.allow_tf32 = True
        t_tf32 = median_us(lambda: torch.mm(a32, w32.t(), out=out32), scrub)
        torch.backends.cuda.matmul.allow_tf32 = False
        t_f16 = median_us(f16, scrub)
        rows.append({"batch": b, "seq_len": s, "m": m, "f16_us": t_f16, "f16_output": f16_out, "tf32_us": t_tf32})
        print(f"({b}, {s}) M={m}: fp16 {t_f16:.1f} us ({f16_out} out), tf32 {t_tf32:.1f} us", flush=True)
    mean = lambda k: statistics.mean(r[k] for r in rows)  # noqa: E731
    summary = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "f16_mean_us": mean("f16_us"),
               "tf32_mean_us": mean("tf32_us"), "workloads": rows}
    print(f"means: fp16 {summary['f16_mean_us']:.1f} us, tf32 {summary['tf32_mean_us']:.1f} us")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
