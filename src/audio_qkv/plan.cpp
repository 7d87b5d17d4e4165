#include "audio_qkv/plan.hpp"

#include "common/splitk_choice.hpp"

namespace gk::audio {

namespace {

// The planner's thresholds; docs/dispatch.md gives the measurements behind each.
constexpr int kBM = kSplitkBM, kBK = kSplitkBK;
constexpr int64_t kMaxRowTiles = 65535;  // the split-K kernels' grid.y
// The split-K tf32 kernel while its tiles fit one wave; past it the persistent kernel (perf log v7, v13).
// The persistent kernel's time goes by rounds of clusters and cuBLASLt's by rows: at two or more rounds cuBLASLt's
// smaller tiles win below this fill of the last round (v13).
constexpr double kPersistentMinFill = 0.7;
// fp16 operands (an operand pass, then the ping-pong or split-K GEMM: qkv_f16_launch.cu): the tf32 mode where the
// fp16 GEMM's saving outgrows the pass's cost over the weights, i.e. from 2048 rows on in any form (v50), and past
// two row tiles where the GEMM runs the ping-pong kernel (no K split; v60: faster from 257 rows on, where its
// split-K form lost up to 256). Each bound holds at a fixed head count once reached, so the rule stays monotone in
// rows. The exact mode wherever its three fp16 products beat 3xTF32's six tf32 ones by more than the pass, every
// suite row but (1, 128) (v37, v38, v50).
constexpr int64_t kTf32F16MinRows = 2048;
constexpr int64_t kTf32PingpongMinRows = 257;
constexpr int64_t kExactF16MinRows = 129;
// v's CTAs round their weights in registers only with a K split (v19).
constexpr bool kVRegistersNeedSplit = true;
// The exact mode's prepared activations at most this many floats (256 MiB).
constexpr int64_t kMaxExactScratchFloats = int64_t(64) << 20;
using Tiling = head_gemm::Tf32Tiling;

// The split-K kernels' output tiles: one head of q, k or v per 128 rows.
int64_t splitk_tiles(int64_t rows, int64_t heads) { return (rows + kBM - 1) / kBM * 3 * heads; }

// The split-K kernels' K split and where they prepare the activations.
void plan_splitk(const AudioQkvConfig& c, const int (&resident)[detail::kMaxClusterSplit + 1], int sms,
                 int64_t scratch_floats, int a_parts, const detail::Overrides& ov, AudioPlan* p) {
  const int64_t rows = c.batch * c.seq_len;
  const int64_t tiles = splitk_tiles(rows, c.num_heads);
  const int k_blocks = static_cast<int>(c.hidden / kBK);
  p->split = detail::choose_splitk(sms, resident, tiles, k_blocks, {4, 2}, /*even_k=*/true);
  // tf32: the kernel rounds the activations in shared memory unless pinned - one launch a call: NVIDIA's harness
  // counts the gap between a pass and its dependent (API tracing slows the second launch), which on the smallest
  // rows outweighs the rounding warps' kernel time (docs/perf-log.md v36). Exact: the pass (its split parts cost the
  // kernel far more in shared memory, v10.6).
  const bool prepass = ov.audio_activations == detail::kAuto ? a_parts == 2 : ov.audio_activations == 0;
  p->activations_prepass = prepass && a_parts * rows * c.hidden <= scratch_floats;
}

}  // namespace

head_gemm::Operands persistent_shape(int64_t rows, int64_t hidden, int64_t heads) {
  head_gemm::Operands o;
  o.m = rows;
  o.k = hidden;
  o.segments = 3;
  for (int s = 0; s < 3; ++s) o.heads[s] = heads;
  return o;
}

bool splitk_supported(int64_t rows, int64_t hidden, int64_t heads) {
  return rows <= kMaxRowTiles * kBM && hidden % kBK == 0 && hidden <= INT32_MAX && 3 * heads <= INT32_MAX;
}

int64_t tf32_scratch_floats(int64_t rows, int64_t hidden, int64_t heads) {
  const int64_t w_floats = heads * kAudioHeadDim * hidden, a_floats = rows * hidden;
  return a_floats <= 3 * w_floats && a_floats > w_floats ? a_floats : w_floats;
}

int64_t exact_scratch_floats(int64_t rows, int64_t hidden, int64_t heads) {
  const int64_t floats = 2 * rows * hidden;
  return splitk_supported(rows, hidden, heads) && floats <= kMaxExactScratchFloats ? floats : 0;
}

bool f16_fits(int64_t rows, int64_t hidden, int terms) {
  return rows <= (int64_t(256) << 20) / (2 * terms * hidden);
}

int plan_launches(const AudioPlan& p) {
  switch (p.path) {
    case AudioPath::kSplitkTf32:
    case AudioPath::kSplitkTf32x3:
      return p.activations_prepass ? 2 : 1;
    case AudioPath::kPersistentTf32:
      return p.v_round_in_kernel ? 1 : 2;
    case AudioPath::kSplitkF16:
      return 2;  // the operand pass, then the GEMM
    default:
      return 0;
  }
}

namespace {

void plan_launch(const detail::Overrides& ov, bool capturing, AudioPlan* p) {
  if (plan_launches(*p) < 2) return;
  p->graph = !capturing && ov.launch != 0;
  p->chosen.launch = p->graph ? 1 : 0;
}

// The fp16 GEMM's K split. Its residency is at least the tf32 kernel's (the same shared memory, fewer threads).
int f16_split(int64_t rows, int64_t hidden, int64_t heads, const detail::DeviceInfo& dev) {
  return detail::choose_splitk(dev.sms, dev.audio_tf32_clusters, splitk_tiles(rows, heads),
                               static_cast<int>(hidden / kF16BK), {4, 2}, /*even_k=*/true);
}

}  // namespace

AudioPlan plan_audio_f16(int64_t rows, int64_t hidden, int64_t heads, int terms, const detail::DeviceInfo& dev,
                         const detail::Overrides& ov, bool capturing) {
  AudioPlan p;
  p.path = AudioPath::kSplitkF16;
  p.sms = dev.sms;
  p.split = f16_split(rows, hidden, heads, dev);
  // One term without a K split: the ping-pong kernel, faster than the cooperative one in every form measured
  // (docs/perf-log.md v57); the cooperative kernel keeps the K split and the exact mode. Two heads a tile with
  // multicast weights was the fastest form on every fp16 shape of the suite; without multicast two heads a tile
  // measured slower than one.
  p.f16_pingpong = terms == 1 && p.split == 1;
  const bool pair_ok = p.f16_pingpong && heads % 2 == 0;
  const bool multicast_wanted = ov.audio_f16_multicast != 0;  // unless pinned off
  const bool pair = ov.audio_f16_tile == detail::kAuto ? multicast_wanted && dev.audio_f16_pingpong_clusters[1] > 0
                                                       : ov.audio_f16_tile == 1;
  p.f16_heads = pair_ok && pair ? 2 : 1;
  p.f16_clusters = dev.audio_f16_pingpong_clusters[p.f16_heads - 1];
  const bool multicast_ok = p.f16_pingpong && p.f16_clusters > 0;
  p.f16_cluster = multicast_ok && multicast_wanted ? 2 : 1;
  p.chosen.audio_tf32 = terms == 1 ? 3 : detail::kAuto;
  p.chosen.audio_f16_tile = pair_ok ? static_cast<int8_t>(p.f16_heads - 1) : detail::kAuto;
  p.chosen.audio_f16_multicast = multicast_ok ? static_cast<int8_t>(p.f16_cluster - 1) : detail::kAuto;
  p.chosen.audio_exact = terms == 2 ? 2 : detail::kAuto;
  plan_launch(ov, capturing, &p);
  return p;
}

Status plan_audio(const AudioQkvConfig& c, const detail::DeviceInfo& dev, const detail::Overrides& ov, bool capturing,
                  size_t sk_scratch_bytes, AudioPlan* plan) {
  AudioPlan p;
  p.sms = dev.sms;
  const int64_t rows = c.batch * c.seq_len;
  const bool splitk_ok = splitk_supported(rows, c.hidden, c.num_heads);
  if (c.precision == GK_PRECISION_EXACT) {
    const bool f16 = ov.audio_exact == detail::kAuto ? rows >= kExactF16MinRows : ov.audio_exact == 2;
    if (f16 && splitk_ok && c.hidden % kF16BK == 0 && f16_fits(rows, c.hidden, 2)) {
      *plan = plan_audio_f16(rows, c.hidden, c.num_heads, 2, dev, ov, capturing);
      return Status::Ok();
    }
    if (splitk_ok && ov.audio_exact != 1) {
      p.path = AudioPath::kSplitkTf32x3;
      plan_splitk(c, dev.audio_tf32x3_clusters, dev.sms, exact_scratch_floats(rows, c.hidden, c.num_heads), 2, ov, &p);
    }
    p.chosen.audio_exact = p.path == AudioPath::kSplitkTf32x3 ? 0 : 1;
    p.chosen.audio_activations = p.path == AudioPath::kSplitkTf32x3 ? (p.activations_prepass ? 0 : 1) : detail::kAuto;
    plan_launch(ov, capturing, &p);
    *plan = p;
    return Status::Ok();
  }

  const head_gemm::Operands shape = persistent_shape(rows, c.hidden, c.num_heads);
  const bool persistent_ok = head_gemm::shape_supported<Tiling>(shape) && dev.head_gemm_clusters >= 1;
  const int64_t units = head_gemm::units_of<Tiling>(shape);
  const bool one_wave = splitk_tiles(rows, c.num_heads) <= dev.sms;
  const bool f16_pays = rows >= kTf32F16MinRows ||
                        (rows >= kTf32PingpongMinRows && f16_split(rows, c.hidden, c.num_heads, dev) == 1);
  const bool f16 = ov.audio_tf32 == detail::kAuto ? f16_pays : ov.audio_tf32 == 3;
  if (f16 && splitk_ok && c.hidden % kF16BK == 0 && f16_fits(rows, c.hidden, 1)) {
    *plan = plan_audio_f16(rows, c.hidden, c.num_heads, 1, dev, ov, capturing);
    return Status::Ok();
  }
  if (ov.audio_tf32 == 0) {
    if (splitk_ok) p.path = AudioPath::kSplitkTf32;
  } else if (ov.audio_tf32 == 1) {
    if (persistent_ok) p.path = AudioPath::kPersistentTf32;
  } else if (ov.audio_tf32 == detail::kAuto) {
    if (splitk_ok && one_wave) {
      p.path = AudioPath::kSplitkTf32;
    } else if (persistent_ok) {
      int64_t rounds = 0;
      double fill = 0.0;
      head_gemm::unit_rounds(units, dev.head_gemm_clusters, &rounds, &fill);
      p.path = rounds >= 2 && fill < kPersistentMinFill ? AudioPath::kCublas : AudioPath::kPersistentTf32;
    }
  }

  if (p.path == AudioPath::kSplitkTf32) {
    plan_splitk(c, dev.audio_tf32_clusters, dev.sms, tf32_scratch_floats(rows, c.hidden, c.num_heads), 1, ov, &p);
    // q's and k's CTAs read truncated, so where the activations arrive rounded v's CTAs may round their weights in
    // registers: the kernel then has no rounding warps. Its K-blocks go in pairs.
    const bool wanted =
        ov.audio_v_weights == detail::kAuto ? (!kVRegistersNeedSplit || p.split > 1) : ov.audio_v_weights == 1;
    p.v_registers = wanted && p.activations_prepass && (c.hidden / kBK / p.split) % 2 == 0;
  } else if (p.path == AudioPath::kPersistentTf32) {
    const int resident = dev.head_gemm_clusters;
    const size_t sk_bytes = ov.audio_stream_k == 1 ? 0 : sk_scratch_bytes;
    const int k_blocks = static_cast<int>(c.hidden / Tiling::kBK);
    p.grid = head_gemm::plan_grid(static_cast<int>(units), k_blocks, resident, sk_bytes);
    // By the shape alone, not by who rounds v's weights: the order decides which tiles stream-K cuts, hence the
    // bits, and a call gives the same bits whichever way they are rounded.
    const bool pays = head_gemm::prep_pays<Tiling>(shape, p.grid, resident);
    p.lag_last_segment = pays;
    p.v_round_in_kernel = (ov.audio_v_round == detail::kAuto ? pays : ov.audio_v_round == 0) && !capturing &&
                          head_gemm::has_prep_slots(sk_scratch_bytes);
  }

  const auto path_value = [&]() -> int8_t {
    switch (p.path) {
      case AudioPath::kSplitkTf32:
        return 0;
      case AudioPath::kPersistentTf32:
        return 1;
      case AudioPath::kSplitkF16:
        return 3;
      default:
        return 2;
    }
  };
  p.chosen.audio_tf32 = path_value();
  if (p.path == AudioPath::kSplitkTf32) {
    p.chosen.audio_activations = p.activations_prepass ? 0 : 1;
    p.chosen.audio_v_weights = p.v_registers ? 1 : 0;
  } else if (p.path == AudioPath::kPersistentTf32) {
    p.chosen.audio_stream_k = p.grid.sk.run > 0 ? 0 : 1;
    p.chosen.audio_v_round = p.v_round_in_kernel ? 0 : 1;
  }
  plan_launch(ov, capturing, &p);
  *plan = p;
  return Status::Ok();
}

}  // namespace gk::audio
