// Developer overrides of the planners' choices: one syntax, one parser, one environment variable.
//
// A spec is a list of `key=value` pairs separated by commas or spaces, e.g. "attention.kernel=sm80,qkv=cublas";
// `auto` (or leaving a key out) keeps the planner's choice. Unknown keys and values are errors with a message, never
// a silent fall-back. The handle holds one Overrides value (gk_handle_set_overrides); planners read it, launchers
// never do. The library reads no environment: the CLI and the tests pass GK_OVERRIDES through the same call.
// A pinned choice applies wherever its kernel can take the shape; elsewhere the planner's own choice stands.
#pragma once

#include <cstdint>
#include <string>

#include "common/internal_api.hpp"
#include "gk/gk.hpp"

namespace gk::detail {

inline constexpr int8_t kAuto = -1;

struct Overrides {
  // The Gemma3 layer.
  int8_t attention_kernel = kAuto;   // 0 sm90, 1 sm80
  int8_t attention_tail = kAuto;     // 0 packed, 1 separate: the sm90 kernel's last query block of a GQA group
  int8_t attention_store = kAuto;    // 0 tma, 1 direct: how the sm90 kernel's output tiles leave shared memory
  int8_t attention_softmax = kAuto;  // 0 running, 1 fixed: the sm90 kernel's softmax reference where a softcap allows
  int8_t qkv = kAuto;                // 0 splitk, 1 cublas, 2 skinny: the q|k|v projection (split-K kernel, cuBLASLt
                                     // + pass, or the few-row kernel)
  int8_t kv_gemm = kAuto;            // 0 batched, 1 separate: the k and v cuBLASLt GEMMs
  int8_t o_prefetch = kAuto;         // 0 off, 1 attention, 2 projection: who fetches W_o into L2
  int8_t o_proj = kAuto;             // 0 cublas, 1 skinny: the O projection (cuBLASLt, or the few-row kernel)
  // The audio QKV operator.
  int8_t audio_tf32 = kAuto;         // 0 splitk, 1 persistent, 2 cublas, 3 f16 (fp16 tensor cores)
  int8_t audio_stream_k = kAuto;     // 0 on, 1 off: stream-K on the persistent kernel's last rounds
  int8_t audio_v_round = kAuto;      // 0 kernel, 1 pass: who rounds v's weights for the persistent kernel
  int8_t audio_v_weights = kAuto;    // 0 smem, 1 registers: where the split-K tf32 kernel rounds v's weights
  int8_t audio_activations = kAuto;  // 0 prepass, 1 smem: where the split-K kernels prepare the activations
  int8_t audio_exact = kAuto;        // 0 tf32x3, 1 cublas, 2 f16 (two fp16 terms): the exact mode's kernel
  int8_t audio_f16_tile = kAuto;     // 0 head, 1 pair: one or two heads a tile of the ping-pong fp16 kernel
  int8_t audio_f16_multicast = kAuto;  // 0 off, 1 weights: the ping-pong kernel's CTAs in clusters of two sharing
                                       // each tile's weight rows (TMA multicast)
  // Every operator.
  int8_t launch = kAuto;             // 0 stream, 1 graph: how a call of several kernels goes out (launch_graph.hpp)
};

// Parses `spec` (null or empty: no overrides) into *out, starting from a default Overrides. On error *out is
// unchanged and the status names the offending key or value and what is allowed.
GK_INTERNAL_API Status parse_overrides(const char* spec, Overrides* out);
// The overrides that are set, in the syntax parse_overrides reads ("" when none).
GK_INTERNAL_API std::string format_overrides(const Overrides& o);

}  // namespace gk::detail
