"""The SOL-ExecBench packages, built the way the official driver builds a cuda_cpp/torch solution (sources
written to a staging folder, torch.utils.cpp_extension.load on its top-level .cu/.cpp files with the package's
compile options, `run` looked up by the entry point's name), then called destination-passing style on every
workload's inputs (SPEC.md's recipe, the causal mask tensor included) and judged with the official rule.
Where the official problem definitions are at hand (GK_SOLEXECBENCH_DIR, or ../shared/solexecbench beside the
checkout), the argument order is checked against them."""
import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import ROOT  # noqa: E402
from torch_reference import audio_inputs, audio_qkv, gemma3_inputs, gemma3_layer, judge  # noqa: E402

from gemma_kernels import solexecbench  # noqa: E402

pytestmark = pytest.mark.gpu

SUITES = {"047": "047_gemma3_attention.json", "054": "054_audio_qkv.json"}
# run(*inputs, *outputs) in SPEC.md's order.
ARG_ORDER = {
    "047": ["hidden_states", "cos", "sin", "attention_mask", "q_proj_weight", "k_proj_weight", "v_proj_weight",
            "o_proj_weight", "q_norm_weight", "k_norm_weight", "attn_logit_softcapping", "rms_norm_eps",
            "attn_output"],
    "054": ["hidden_states", "q_proj_weight", "k_proj_weight", "v_proj_weight", "q_norm_weight", "k_norm_weight",
            "eps", "query_states", "key_states", "value_states"],
}


def official_definition(problem):
    d = Path(os.environ.get("GK_SOLEXECBENCH_DIR", ROOT.parent / "shared" / "solexecbench"))
    f = d / (solexecbench.PROBLEMS[problem]["definition"] + ".definition.json")
    return json.loads(f.read_text()) if f.exists() else None


_built = {}


def build(problem, tmp_root):
    if problem in _built:
        return _built[problem]
    from torch.utils.cpp_extension import load

    sol = solexecbench.solution(problem, ROOT)
    stage = tmp_root / f"stage_{problem}"
    for s in sol["sources"]:
        p = stage / s["path"]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(s["content"])
    opts = sol["spec"]["compile_options"]
    top = [str(p) for p in sorted(stage.iterdir()) if p.suffix in (".cu", ".cpp", ".cc", ".cxx", ".c")]
    module = load(name=f"gk_solution_{problem}", sources=top, extra_cflags=opts["cflags"],
                  extra_cuda_cflags=opts["cuda_cflags"], extra_ldflags=opts["ld_flags"],
                  extra_include_paths=[str(stage)], build_directory=str(stage), verbose=False)
    entry = getattr(module, sol["spec"]["entry_point"].split("::")[1])
    _built[problem] = entry
    return entry


@pytest.fixture(scope="module")
def stage_root(tmp_path_factory):
    return tmp_path_factory.mktemp("solexecbench")


@pytest.mark.parametrize("problem", ["047", "054"])
def test_argument_order_matches_the_official_definition(problem):
    d = official_definition(problem)
    if d is None:
        pytest.skip("official problem definitions not at hand (set GK_SOLEXECBENCH_DIR)")
    assert list(d["inputs"]) + list(d["outputs"]) == ARG_ORDER[problem]


def suite(problem):
    return json.loads((ROOT / "suites" / SUITES[problem]).read_text())


@pytest.mark.parametrize("w", suite("047")["workloads"], ids=lambda w: f"B{w['batch']}_S{w['seq_len']}")
def test_047_package(w, stage_root):
    run = build("047", stage_root)
    s = suite("047")
    cfg = s["constants"]
    t = gemma3_inputs(cfg, w["batch"], w["seq_len"], torch.Generator("cuda").manual_seed(3000 + w["seq_len"]))
    out = torch.zeros_like(t["x"])
    run(t["x"], t["cos"], t["sin"], t["mask"], t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"],
        float(cfg["softcap"]), float(cfg["eps"]), out)
    ref = gemma3_layer(t["x"], t["cos"], t["sin"], t["mask"], t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"], cfg)
    j = judge(out, ref, w["atol"], w["rtol"], s["required_matched_ratio"])
    assert j["pass"], (w, j)


@pytest.mark.parametrize("w", suite("054")["workloads"], ids=lambda w: f"B{w['batch']}_S{w['seq_len']}")
def test_054_package(w, stage_root):
    run = build("054", stage_root)
    s = suite("054")
    cfg = s["constants"]
    t = audio_inputs(cfg, w["batch"], w["seq_len"], torch.Generator("cuda").manual_seed(4000 + w["seq_len"]))
    outs = [torch.zeros(w["batch"], w["seq_len"], cfg["num_heads"], cfg["head_dim"], device="cuda")
            for _ in range(3)]
    run(t["x"], t["wq"], t["wk"], t["wv"], t["qn"], t["kn"], float(cfg["eps"]), *outs)
    t64 = {k: v.double() for k, v in t.items()}
    refs = audio_qkv(t64["x"], t64["wq"], t64["wk"], t64["wv"], t64["qn"], t64["kn"], cfg["eps"], cfg["num_heads"],
                     cfg["head_dim"])
    for name, out, ref in zip("qkv", outs, refs):
        j = judge(out, ref, w["atol"], w["rtol"], s["required_matched_ratio"])
        assert j["pass"], (w, name, j)


def test_package_reports_bad_input(stage_root):
    run = build("054", stage_root)
    t = audio_inputs(suite("054")["constants"], 1, 4, torch.Generator("cuda").manual_seed(1))
    outs = [torch.zeros(1, 4, 8, 128, device="cuda") for _ in range(3)]
    with pytest.raises(RuntimeError, match="hidden_states"):
        run(t["x"].double(), t["wq"], t["wk"], t["wv"], t["qn"], t["kn"], 1e-6, *outs)
