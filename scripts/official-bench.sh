#!/usr/bin/env bash
# NVIDIA's SOL-ExecBench harness on both exported solution packages, on the GPU machine, beside `gk bench` with its
# kernel-only timer and with `--timer official` (the harness's method reimplemented), all in one run on one card.
#
#   scripts/official-bench.sh [--skip-harness] [--timers "cupti official"] [--suites "047 054"] [--baseline DIR]
#
# --timers: which of gk bench's timers run beside the harness (default both; "cupti" alone saves a device minute).
# --suites: which problems (default "047 054"; one alone for an A/B of a change to that operator).
# --baseline DIR: the same again for another build, into OUT/base (this one's into OUT/new), for a same-machine A/B.
#   DIR holds that build's bin/gk and lib/libgk.so*, and in DIR/source its commit's src/ and include/ (the harness
#   compiles the solution package from sources: `git archive COMMIT src include | tar -x -C DIR/source`).
#
# What it needs (none of it committed):
# - The harness's source at commit 8d2237d: HARNESS_SRC (default .harness/sol-execbench-src, the `src/` folder of
#   a copy of github.com/NVIDIA/SOL-ExecBench at that commit; with internet, `pip install
#   git+https://github.com/NVIDIA/SOL-ExecBench@8d2237d` instead, and HARNESS_SRC unset).
# - The official definitions and workloads: SOLEXEC_DATA (default .harness/data, a copy of shared/solexecbench/).
# - Beyond the GPU image's torch: pydantic 2.x, pydantic-core, annotated-types, typing-inspection,
#   typing-extensions >= 4.16, pyelftools and cupti-python 13.0.1 as wheels in .whl/ (the device README says how
#   to download them for the machine's Python), installed into a scratch site-packages.
# - A build of this checkout (GK_BUILD_DIR, default build) for `gk bench`.
# Writes into OUT (default .out/official): the harness's traces (*.jsonl), gk bench's JSON, and a table.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${GK_BUILD_DIR:-build}
OUT=${OUT:-$ROOT/.out/official}
HARNESS_SRC=${HARNESS_SRC:-$ROOT/.harness/sol-execbench-src}
DATA=${SOLEXEC_DATA:-$ROOT/.harness/data}
SKIP_HARNESS=0 BASELINE="" TIMERS="cupti official" SUITES="047 054"
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-harness) SKIP_HARNESS=1 ;;
    --baseline) BASELINE=$(realpath "$2"); shift ;;
    --timers) TIMERS=$2; shift ;;
    --suites) SUITES=$2; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

SITE=""
if [ $SKIP_HARNESS -eq 0 ]; then
  SITE=$(mktemp -d)
  if ls .whl/*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" .whl/*.whl
  fi
fi

# Everything for one build: GK (its gk binary), LIBDIR (its libgk), SOURCES (the source root its solution packages
# are written from), into DEST.
run_build() {  # run_build GK LIBDIR SOURCES DEST
  local gk=$1 libdir=$2 sources=$3 dest=$4
  mkdir -p "$dest"
  # gk bench, kernel-only CUPTI timer and the official method (with each workload's kernels and gaps as that method
  # attributes them), each suite in a process of its own. 047 also as the harness runs it: the causal mask passed as
  # a tensor (additive mode), the like-for-like comparison.
  bench() {  # bench NAME ARGS...
    local name=$1; shift
    LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$gk" bench "$@" --rounds 1 \
      --json "$dest/gk-bench-$name.json" > "$dest/gk-bench-$name.txt" 2>&1 ||
      echo "gk bench $name failed (see $dest/gk-bench-$name.txt)"
  }
  local t extra
  for t in $TIMERS; do
    [ "$t" = official ] && extra=--breakdown || extra=""
    for s in $SUITES; do bench $s-$t --suite $s --timer $t $extra; done
    case " $SUITES " in *" 047 "*) bench 047-additive-$t --suite 047 --mask additive --timer $t $extra ;; esac
  done

  [ $SKIP_HARNESS -eq 0 ] || return 0
  # The harness compiles each package itself: what it measures is the sources the package is written from.
  PYTHONPATH="$HARNESS_SRC:$SITE:$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" \
    python3 -m gemma_kernels.solexecbench --out "$dest/solutions" --source-root "$sources" > /dev/null
  for def in $(ls -r "$DATA"/*.definition.json); do  # 054 first: the smaller evaluation
    name=$(basename "$def" .definition.json)
    case " $SUITES " in *" ${name%%_*} "*) ;; *) continue ;; esac
    sol=$(ls "$dest"/solutions/"$name"/solution.json 2> /dev/null) || { echo "no package for $name"; continue; }
    echo "=== harness: $name ($dest)"
    PYTHONPATH="$HARNESS_SRC:$SITE:$ROOT/python${PYTHONPATH:+:$PYTHONPATH}" \
      timeout "${HARNESS_TIMEOUT:-400}" python3 -c "from sol_execbench.cli import cli; cli()" \
      --definition "$def" --workload "$DATA/$name.workloads.jsonl" --solution "$sol" \
      --compile-timeout 600 -o "$dest/harness-${name%%_*}.jsonl" > "$dest/harness-${name%%_*}.txt" 2>&1
    echo "    rc=$? (log: harness-${name%%_*}.txt)"
  done
}

table() {  # table DIR
# The table: per workload, the harness's median next to gk bench's two timers.
python3 - "$1" << 'EOF'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = []
def times(name):
    p = out / f"gk-bench-{name}.json"
    if not p.exists():
        return {}
    return {(w["batch"], w["seq_len"]): w["time_us"] for w in json.loads(p.read_text())["suites"][0]["workloads"]}
for s in ("047", "054"):
    # The harness runs 047 in additive mode: its like-for-like gk bench numbers are the additive ones.
    mode = "-additive" if s == "047" else ""
    timers = {t: times(f"{s}{mode}-{t}") for t in ("cupti", "official")}
    causal = times(f"{s}-cupti") if s == "047" else {}
    harness = {}
    h = out / f"harness-{s}.jsonl"
    if h.exists():
        for line in h.read_text().splitlines():
            tr = json.loads(line)
            ev = tr.get("evaluation") or {}
            perf = ev.get("performance") or {}
            axes = (tr.get("workload") or {}).get("axes") or {}
            key = (axes.get("batch_size", axes.get("batch")), axes.get("seq_len"))
            lat = perf.get("latency_ms")
            if lat is not None:
                harness[key] = (1e3 * lat, ev.get("status"))
    keys = sorted(set().union(*[set(v) for v in timers.values()] + [set(harness)]), key=lambda k: (k[0] or 0) * (k[1] or 0))
    f = lambda v: f"{v:9.1f}" if v is not None else "        -"
    for k in keys:
        c, o = timers["cupti"].get(k), timers["official"].get(k)
        hv, st = harness.get(k, (None, None))
        ratio = f"{hv / c:6.2f}" if hv and c else "     -"
        extra = f"  causal kernel-only {f(causal.get(k))}" if s == "047" else ""
        rows.append(f"{s}{mode} B={k[0]} S={k[1]:<6} kernel-only {f(c)}  official-method {f(o)}  harness {f(hv)} "
                    f"{st or ''}  harness/kernel-only {ratio}{extra}")
    mean = lambda d: sum(d.values()) / len(d) if d else None
    rows.append(f"{s}{mode} mean: kernel-only {f(mean(timers['cupti']))}  official-method {f(mean(timers['official']))}  "
                f"harness {f(mean({k: v[0] for k, v in harness.items()}))}")
text = "\n".join(rows)
(out / "table.txt").write_text(text + "\n")
print(text)
EOF
}

if [ -n "$BASELINE" ]; then
  [ -x "$BASELINE/bin/gk" ] && [ -d "$BASELINE/source/src" ] || { echo "--baseline: $BASELINE lacks bin/gk or source/src" >&2; exit 2; }
  run_build "$BUILD/bin/gk" "$(realpath "$BUILD")/lib" "$ROOT" "$OUT/new"
  run_build "$BASELINE/bin/gk" "$BASELINE/lib" "$BASELINE/source" "$OUT/base"
  for d in new base; do echo "----- $d"; table "$OUT/$d"; done
else
  run_build "$BUILD/bin/gk" "$(realpath "$BUILD")/lib" "$ROOT" "$OUT"
  table "$OUT"
fi
