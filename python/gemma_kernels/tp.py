"""Tensor parallelism for the Gemma3 attention layer over torch.distributed (NCCL), as serving engines run it: each
rank holds whole GQA groups (a slice of the key/value heads and their query heads: column-parallel q, k, v, and the
matching columns of W_o, row-parallel), runs the layer on its slice with the library's op, and an all-reduce sums
the ranks' partial O projections. The q/k norm weights are per head dimension and stay whole on every rank.

    shard = shard_gemma3(wq, wk, wv, wo, q_norm, k_norm, num_q_heads=24, num_kv_heads=8, rank=r, world=2)
    out = gemma3_attention_tp(hidden, cos, sin, None, shard, softcap=50.0)   # the full layer's output on every rank

The all-reduce runs on the current stream (NCCL), so the call is CUDA-graph capturable like the op itself. The
Hugging Face drop-in: `shard_model(model, rank, world)` shards every Gemma3Attention of a model loaded on each rank
in place and sums its output across the ranks (a forward hook, so a call the drop-in leaves to the stock forward is
summed too).

The audio operator needs no communication: its q, k and v are column-parallel by head (each rank computes its heads'
outputs from the whole activations), so a rank's slice is an ordinary call on its heads' weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist

from .ops import gemma3_attention_out


@dataclass
class Gemma3Shard:
    """One rank's slice of a layer's weights (views made contiguous, on the weights' device)."""

    rank: int
    world: int
    q_proj_weight: torch.Tensor  # [Hq / world * D, hidden]
    k_proj_weight: torch.Tensor  # [Hkv / world * D, hidden]
    v_proj_weight: torch.Tensor
    o_proj_weight: torch.Tensor  # [hidden, Hq / world * D]
    q_norm_weight: torch.Tensor
    k_norm_weight: torch.Tensor


def shard_ranges(num_q_heads: int, num_kv_heads: int, head_dim: int, rank: int, world: int):
    """The rows of W_q and of W_k / W_v (and so W_o's columns) that rank `rank` of `world` holds: whole GQA groups."""
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"gemma_kernels.tp: rank {rank} of world {world}")
    if num_kv_heads % world != 0 or num_q_heads % num_kv_heads != 0:
        raise ValueError(f"gemma_kernels.tp: {num_kv_heads} kv heads (with {num_q_heads} query heads) do not split "
                         f"into {world} ranks of whole GQA groups")
    kv = num_kv_heads // world
    q = kv * (num_q_heads // num_kv_heads)
    return slice(rank * q * head_dim, (rank + 1) * q * head_dim), slice(rank * kv * head_dim, (rank + 1) * kv * head_dim)


def shard_gemma3(q_proj_weight, k_proj_weight, v_proj_weight, o_proj_weight, q_norm_weight, k_norm_weight, *,
                 num_q_heads: int, num_kv_heads: int, rank: int, world: int) -> Gemma3Shard:
    head_dim = q_norm_weight.shape[0]
    q_rows, kv_rows = shard_ranges(num_q_heads, num_kv_heads, head_dim, rank, world)
    return Gemma3Shard(rank, world, q_proj_weight[q_rows].contiguous(), k_proj_weight[kv_rows].contiguous(),
                       v_proj_weight[kv_rows].contiguous(), o_proj_weight[:, q_rows].contiguous(), q_norm_weight,
                       k_norm_weight)


def gemma3_attention_tp(hidden_states: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                        attention_mask: Optional[torch.Tensor], shard: Gemma3Shard, out: Optional[torch.Tensor] = None,
                        group=None, all_reduce: bool = True, **layer_args) -> torch.Tensor:
    """The layer on this rank's slice into `out` (a new tensor if None), then, with all_reduce and a world above
    one, the sum of every rank's `out` over `group` (NCCL, the current stream): the full layer's output on each
    rank. layer_args: the op's scalars (softcap, rms_norm_eps, is_causal, norm_weight_offset, query_scale,
    sliding_window); the score scale must be given explicitly where it is not head_dim^-0.5."""
    if out is None:
        out = hidden_states.new_empty(hidden_states.shape[:-1] + (shard.o_proj_weight.shape[0],))
    gemma3_attention_out(hidden_states, cos, sin, attention_mask, shard.q_proj_weight, shard.k_proj_weight,
                         shard.v_proj_weight, shard.o_proj_weight, shard.q_norm_weight, shard.k_norm_weight, out,
                         **layer_args)
    if all_reduce and shard.world > 1:
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def shard_model(model: torch.nn.Module, rank: int, world: int, group=None) -> int:
    """Shards every Gemma3Attention of `model` (loaded whole on every rank) for rank `rank` of `world`, in place:
    its q/k/v/o projection weights become this rank's slice, and a forward hook sums its output over `group`.
    Returns how many modules it sharded. Call before use_gemma_kernels (with pack_qkv, after)."""
    from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention

    n = 0
    for module in model.modules():
        if not isinstance(module, Gemma3Attention) or hasattr(module, "_gk_tp_hook"):
            continue
        hq = module.q_proj.weight.shape[0] // module.head_dim
        hkv = module.k_proj.weight.shape[0] // module.head_dim
        q_rows, kv_rows = shard_ranges(hq, hkv, module.head_dim, rank, world)
        with torch.no_grad():
            for proj, rows in ((module.q_proj, q_rows), (module.k_proj, kv_rows), (module.v_proj, kv_rows)):
                proj.weight = torch.nn.Parameter(proj.weight[rows].contiguous(), requires_grad=False)
                proj.out_features = proj.weight.shape[0]
            module.o_proj.weight = torch.nn.Parameter(module.o_proj.weight[:, q_rows].contiguous(),
                                                      requires_grad=False)
            module.o_proj.in_features = module.o_proj.weight.shape[1]
        if world > 1:
            def sum_outputs(mod, args, output, group=group):
                dist.all_reduce(output[0], op=dist.ReduceOp.SUM, group=group)
                return output

            module._gk_tp_hook = module.register_forward_hook(sum_outputs)
        else:
            module._gk_tp_hook = None
        n += 1
    return n
