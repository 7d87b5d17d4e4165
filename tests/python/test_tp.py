"""Tensor parallelism (gemma_kernels.tp): on one GPU, the ranks' slices run one after another and summed equal the
unsharded layer under the official rule (047 workloads, TP = 2, 4, 8 over its 8 kv heads), and the Hugging Face
modules sharded in place sum to the whole module; on several GPUs (skipped with the reason where fewer exist), TP = 2
over NCCL equals TP = 1."""
import json
import os

import pytest

torch = pytest.importorskip("torch")

from conftest import ROOT  # noqa: E402
from torch_reference import gemma3_inputs, judge  # noqa: E402

import gemma_kernels  # noqa: E402
from gemma_kernels import tp  # noqa: E402

pytestmark = pytest.mark.gpu
SUITE_047 = json.loads((ROOT / "suites" / "047_gemma3_attention.json").read_text())


def args_of(t):
    return t["x"], t["cos"], t["sin"], None


@pytest.mark.parametrize("world", [2, 4, 8])
@pytest.mark.parametrize("shape", [(1, 512), (2, 293), (4, 2053)], ids=lambda s: f"B{s[0]}_S{s[1]}")
def test_rank_slices_sum_to_the_whole_layer(world, shape):
    cfg = SUITE_047["constants"]
    w = next(w for w in SUITE_047["workloads"] if (w["batch"], w["seq_len"]) == shape)
    t = gemma3_inputs(cfg, *shape, torch.Generator(device="cuda").manual_seed(7 + world))
    whole = gemma_kernels.gemma3_attention(*args_of(t), t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"],
                                           softcap=cfg["softcap"], rms_norm_eps=cfg["eps"])
    total = torch.zeros_like(whole, dtype=torch.float32)
    for rank in range(world):
        shard = tp.shard_gemma3(t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"], num_q_heads=cfg["num_q_heads"],
                                num_kv_heads=cfg["num_kv_heads"], rank=rank, world=world)
        assert shard.q_proj_weight.shape[0] == cfg["num_q_heads"] // world * cfg["head_dim"]
        part = tp.gemma3_attention_tp(*args_of(t), shard, all_reduce=False, softcap=cfg["softcap"],
                                      rms_norm_eps=cfg["eps"])
        total += part.float()
    j = judge(total.to(whole.dtype), whole, w["atol"], w["rtol"], SUITE_047["required_matched_ratio"])
    assert j["pass"], (world, shape, j)


def test_shards_that_split_a_group_are_refused():
    with pytest.raises(ValueError, match="whole GQA groups"):
        tp.shard_ranges(24, 8, 128, 0, 3)


def test_hf_modules_sharded_in_place_sum_to_the_whole_module(tmp_path):
    """Two copies of a Gemma3 attention module sharded for ranks 0 and 1 of 2 (the hook's all-reduce over a
    one-process group is the identity here): their outputs summed equal the unsharded module's."""
    import copy

    import torch.distributed as dist
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(vocab_size=256, hidden_size=3072, intermediate_size=1024, num_hidden_layers=1,
                           num_attention_heads=24, num_key_value_heads=8, head_dim=128, query_pre_attn_scalar=128,
                           layer_types=["full_attention"], max_position_embeddings=1024)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
    attn = model.model.layers[0].self_attn
    x = torch.randn(2, 64, 3072, device="cuda", dtype=torch.bfloat16)
    pos = torch.arange(64, device="cuda")[None].expand(2, 64)
    emb = model.model.rotary_emb(x, pos, "full_attention")
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("nccl", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        with torch.no_grad():
            whole = attn(x, position_embeddings=emb, attention_mask=None)[0]
            parts = []
            for rank in range(2):
                mod = copy.deepcopy(model)
                assert tp.shard_model(mod, rank, 2) == 1
                a = mod.model.layers[0].self_attn
                assert a.q_proj.weight.shape[0] == 12 * 128 and a.o_proj.weight.shape[1] == 12 * 128
                parts.append(a(x, position_embeddings=emb, attention_mask=None)[0].float())
    finally:
        if created:
            dist.destroy_process_group()
    rel = ((parts[0] + parts[1]) - whole.float()).norm() / whole.float().norm()
    assert rel.item() < 1e-2, rel.item()


def _tp_worker(rank, world, store, result):
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"file://{store}", rank=rank, world_size=world)
    cfg = SUITE_047["constants"]
    t = gemma3_inputs(cfg, 2, 512, torch.Generator(device="cuda").manual_seed(11))  # the same inputs on each rank
    shard = tp.shard_gemma3(t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"], num_q_heads=cfg["num_q_heads"],
                            num_kv_heads=cfg["num_kv_heads"], rank=rank, world=world)
    out = tp.gemma3_attention_tp(*args_of(t), shard, softcap=cfg["softcap"], rms_norm_eps=cfg["eps"])
    if rank == 0:
        whole = gemma_kernels.gemma3_attention(*args_of(t), t["wq"], t["wk"], t["wv"], t["wo"], t["qn"], t["kn"],
                                               softcap=cfg["softcap"], rms_norm_eps=cfg["eps"])
        w = next(w for w in SUITE_047["workloads"] if (w["batch"], w["seq_len"]) == (2, 512))
        torch.save(judge(out, whole, w["atol"], w["rtol"], SUITE_047["required_matched_ratio"]), result)
    dist.destroy_process_group()


def test_tp2_over_nccl_equals_tp1(tmp_path):
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs 2 GPUs ({torch.cuda.device_count()} here)")
    import torch.multiprocessing as mp

    result = str(tmp_path / "judge.pt")
    mp.spawn(_tp_worker, args=(2, str(tmp_path / "store"), result), nprocs=2, join=True)
    j = torch.load(result)
    assert j["pass"], j
    assert os.path.exists(result)
