#!/usr/bin/env python3
"""Merges `gk bench --json` results with the peers' timings (bench/peers.py's peers.json) into one markdown table
and one log-scale chart per suite. Needs matplotlib only, so new gemma-kernels numbers can be merged with stored
peer timings on any machine:
    python3 bench/render.py --ours bench/results/gk-bench-047.json --ours bench/results/gk-bench-054.json \
        --peers bench/results/peers.json --out bench/results
"""
import argparse
import json
import math
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

PEER_TITLES = {
    "eager": "PyTorch eager (re-statement)",
    "flex": "cuBLAS + FlexAttention, softcap / window block mask (compiled)",
    "sdpa": "cuBLAS + SDPA (no softcap: with one, not the same function; a window as a boolean mask)",
    "fp32": "PyTorch fp32 (cuBLAS fp32 + torch norms)",
    "tf32": "PyTorch tf32 (cuBLAS tf32 + torch norms)",
}



def workload_label(w):
    """A workload's label as gk bench writes it: its own label (the models suite's "27B local"), then B and S, then
    the cached length of a call with a key/value cache (the decode suite)."""
    cached = int(w.get("config", {}).get("cached", 0))
    return ((w["label"] + " " if w.get("label") else "") + f"B={w['batch']} S={w['seq_len']}" +
            (f" cached={cached}" if cached else ""))


def peers_of(suite):
    return ["eager", "flex", "sdpa"] if suite["operator"] == "gemma3_attention" else ["fp32", "tf32"]


def merged_table(suite, ours, peers_res, peers):
    wl = {w["label"]: w for w in ours["workloads"]} if ours else {}
    head = ["workload", "SOL floor µs", "gemma-kernels µs", "% of SOL"] + [PEER_TITLES[p] + " µs" for p in peers]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    cols = {k: [] for k in ["floor", "ours"] + peers}
    for w in suite["workloads"]:
        label = workload_label(w)
        o = wl.get(label)
        cells = [label]
        if o:
            cells += [f"{o['floor_us']:.1f}", f"{o['time_us']:.1f}" + ("" if o["correctness"]["pass"] else " (FAIL)"),
                      f"{o['sol_pct']:.0f}%"]
            cols["floor"].append(o["floor_us"])
            cols["ours"].append(o["time_us"])
        else:
            cells += ["—", "—", "—"]
        for p in peers:
            r = peers_res.get(label, {}).get(p, {})
            if "median_us" in r:
                cells.append(f"{r['median_us']:.1f}" + ("" if r["check"]["pass"] else " (fails check)"))
                cols[p].append(r["median_us"])
            else:
                cells.append("error")
        rows.append("| " + " | ".join(cells) + " |")
    n = len(suite["workloads"])

    def agg(vals, geo=False):
        if len(vals) != n:
            return "—"
        return f"{math.exp(sum(map(math.log, vals)) / n):.1f}" if geo else f"{sum(vals) / n:.1f}"

    for name, geo in (("**mean**", False), ("geomean", True)):
        cells = [name, agg(cols["floor"], geo), agg(cols["ours"], geo), ""]
        if not geo and len(cols["ours"]) == n:
            cells[3] = f"{100 * sum(cols['floor']) / sum(cols['ours']):.0f}%"
        cells += [agg(cols[p], geo) for p in peers]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n", cols


def peaks_source(ours):
    """Where the SOL floors' peaks come from, as gk bench recorded it (e.g. "datasheet: NVIDIA H100 SXM")."""
    return ours.get("peaks", {}).get("source", "the device's datasheet")


def chart(suite, cols, peers, path, title, floor_label):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [(w["label"] + " " if w.get("label") else "") + f"{w['batch']},{w['seq_len']}" for w in suite["workloads"]]
    fig, ax = plt.subplots(figsize=(12, 5.5))
    x = range(len(labels))
    if len(cols["floor"]) == len(labels):
        ax.plot(x, cols["floor"], "k--", label=f"speed of light ({floor_label})")
    if len(cols["ours"]) == len(labels):
        ax.plot(x, cols["ours"], "o-", lw=2.5, label="gemma-kernels")
    for p in peers:
        if len(cols[p]) == len(labels):
            ax.plot(x, cols[p], "s-" if p != "sdpa" else "^:", label=PEER_TITLES[p])
    ax.set_yscale("log")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, rotation=45, ha="right")
    ax.set_xlabel("workload (batch, seq_len)")
    ax.set_ylabel("latency, µs (log)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_suite(out, suite, ours, peer_results, stored_peers=False):
    """Writes <id>.md and <id>.png for one suite; returns the table. stored_peers: the peer timings come from an
    earlier bench/peers.py run (render.py merging new gemma-kernels numbers), which the note then says."""
    sid = suite["id"]
    o = next((s for s in ours["suites"] if s["id"] == sid and s.get("precision") != "exact"), None)
    peers = peers_of(suite)
    table, cols = merged_table(suite, o, peer_results["suites"].get(sid, {}), peers)
    note = (f"# Suite {sid}: {suite['title']}\n\n{peer_results['device']}, torch {peer_results['torch']}. "
            f"gemma-kernels: `gk bench` ({ours.get('timer', 'n/a')} timer, commit {ours.get('git_commit', '?')}); "
            f"peers{' (a stored bench/peers.py run, peers.json)' if stored_peers else ''}: CUDA-graph replay timed "
            "with events; all: 2xL2 scrub before every iteration, 3 rotating "
            f"input sets, 10 warm-up + 50 timed, median. SOL floor: {peaks_source(ours)}, causal-aware.\n\n")
    (out / f"{sid}.md").write_text(note + table)
    chart(suite, cols, peers, out / f"{sid}.png", f"Suite {sid} on {peer_results['device']}", peaks_source(ours))
    return table


def load_ours(paths):
    """One or more `gk bench --json` files (one per suite: each suite timed in a process of its own, as the official
    harness runs each problem) as one: the first file's metadata, every file's suites."""
    ours = {"suites": []}
    for i, p in enumerate(paths or []):
        d = json.loads(pathlib.Path(p).read_text())
        if i == 0:
            ours = dict(d)
            ours["suites"] = []
        else:
            for key in ("git_commit", "timer"):
                if d.get(key) != ours.get(key):
                    sys.exit(f"render.py: {p} has {key} {d.get(key)!r}, {paths[0]} {ours.get(key)!r}")
        ours["suites"] += d.get("suites", [])
    return ours


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, action="append", help="gk bench --json output (repeatable)")
    ap.add_argument("--peers", required=True, help="peers.json written by bench/peers.py")
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--suites", default="054,047")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ours = load_ours(args.ours)
    peer_results = json.loads(pathlib.Path(args.peers).read_text())
    for sid in args.suites.split(","):
        suite = json.loads(next((ROOT / "suites").glob(f"{sid}_*.json")).read_text())
        print(write_suite(out, suite, ours, peer_results, stored_peers=True), flush=True)


if __name__ == "__main__":
    main()
