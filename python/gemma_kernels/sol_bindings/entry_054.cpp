// SOL-ExecBench entry point of L1/054 (destination-passing): the Gemma3n audio QKV projection with per-head
// RMSNorm into query_states, key_states, value_states, in the tf32 mode (tf32 tensor cores; v's inputs rounded to
// nearest, q's and k's truncated, which their norm absorbs).
#include "torch_glue.hpp"

void run(torch::Tensor hidden_states, torch::Tensor q_proj_weight, torch::Tensor k_proj_weight,
         torch::Tensor v_proj_weight, torch::Tensor q_norm_weight, torch::Tensor k_norm_weight, double eps,
         torch::Tensor query_states, torch::Tensor key_states, torch::Tensor value_states) {
  gk_sol::same_device({hidden_states, q_proj_weight, k_proj_weight, v_proj_weight, q_norm_weight, k_norm_weight,
                       query_states, key_states, value_states});
  TORCH_CHECK(hidden_states.dim() == 3 && q_norm_weight.dim() == 1 && q_norm_weight.size(0) > 0,
              "gemma_kernels: hidden_states must be [B, S, hidden] and q_norm_weight [head_dim]");
  const c10::cuda::CUDAGuard guard(hidden_states.device());
  gk_audio_qkv_config c{};
  c.batch = hidden_states.size(0);
  c.seq_len = hidden_states.size(1);
  c.hidden = hidden_states.size(2);
  c.head_dim = q_norm_weight.size(0);
  c.num_heads = q_proj_weight.size(0) / c.head_dim;
  c.eps = static_cast<float>(eps);
  c.precision = GK_PRECISION_TF32;
  gk_audio_qkv_tensors t{};
  t.hidden_states = gk_sol::desc(hidden_states);
  t.q_proj_weight = gk_sol::desc(q_proj_weight);
  t.k_proj_weight = gk_sol::desc(k_proj_weight);
  t.v_proj_weight = gk_sol::desc(v_proj_weight);
  t.q_norm_weight = gk_sol::desc(q_norm_weight);
  t.k_norm_weight = gk_sol::desc(k_norm_weight);
  t.query_states = gk_sol::desc(query_states);
  t.key_states = gk_sol::desc(key_states);
  t.value_states = gk_sol::desc(value_states);
  gk_sol::run_operator(gk_audio_qkv_check, gk_audio_qkv_workspace_size, gk_audio_qkv_forward, c, t, hidden_states);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run, "gemma-kernels audio QKV projection (L1/054)"); }
