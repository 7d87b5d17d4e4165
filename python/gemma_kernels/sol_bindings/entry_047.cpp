// SOL-ExecBench entry point of L1/047 (destination-passing): the Gemma3 attention layer into attn_output.
// The attention_mask tensor is applied as given (additive mode), so any mask the harness passes is honoured.
#include "torch_glue.hpp"

void run(torch::Tensor hidden_states, torch::Tensor cos, torch::Tensor sin, torch::Tensor attention_mask,
         torch::Tensor q_proj_weight, torch::Tensor k_proj_weight, torch::Tensor v_proj_weight,
         torch::Tensor o_proj_weight, torch::Tensor q_norm_weight, torch::Tensor k_norm_weight,
         double attn_logit_softcapping, double rms_norm_eps, torch::Tensor attn_output) {
  gk_sol::same_device({hidden_states, cos, sin, attention_mask, q_proj_weight, k_proj_weight, v_proj_weight,
                       o_proj_weight, q_norm_weight, k_norm_weight, attn_output});
  TORCH_CHECK(hidden_states.dim() == 3 && q_norm_weight.dim() == 1 && q_norm_weight.size(0) > 0,
              "gemma_kernels: hidden_states must be [B, S, hidden] and q_norm_weight [head_dim]");
  const c10::cuda::CUDAGuard guard(hidden_states.device());
  gk_gemma3_attention_config c{};
  c.batch = hidden_states.size(0);
  c.seq_len = hidden_states.size(1);
  c.hidden = hidden_states.size(2);
  c.head_dim = q_norm_weight.size(0);
  c.num_q_heads = q_proj_weight.size(0) / c.head_dim;
  c.num_kv_heads = k_proj_weight.size(0) / c.head_dim;
  c.softcap = static_cast<float>(attn_logit_softcapping);
  c.rms_norm_eps = static_cast<float>(rms_norm_eps);
  c.norm_weight_offset = 1.f;
  c.query_scale = 0.f;
  c.mask_mode = GK_MASK_ADDITIVE;
  gk_gemma3_attention_tensors t{};
  t.hidden_states = gk_sol::desc(hidden_states);
  t.cos = gk_sol::desc(cos);
  t.sin = gk_sol::desc(sin);
  t.attention_mask = gk_sol::desc(attention_mask);
  t.q_proj_weight = gk_sol::desc(q_proj_weight);
  t.k_proj_weight = gk_sol::desc(k_proj_weight);
  t.v_proj_weight = gk_sol::desc(v_proj_weight);
  t.o_proj_weight = gk_sol::desc(o_proj_weight);
  t.q_norm_weight = gk_sol::desc(q_norm_weight);
  t.k_norm_weight = gk_sol::desc(k_norm_weight);
  t.out = gk_sol::desc(attn_output);
  gk_sol::run_operator(gk_gemma3_attention_check, gk_gemma3_attention_workspace_size, gk_gemma3_attention_forward,
                       c, t, hidden_states);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run, "gemma-kernels Gemma3 attention layer (L1/047)"); }
