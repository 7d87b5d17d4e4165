// Counter-based random numbers: element i of stream `seed` is a pure function of (seed, i), identical on host
// and device, so GPU-generated inputs can be regenerated on the CPU.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define GK_HD __host__ __device__
#else
#define GK_HD
#endif

namespace gk_testkit {

GK_HD inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Standard normal (Box-Muller on two 24-bit uniforms).
GK_HD inline float normal_at(uint64_t seed, int64_t i) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(i));
  const float u1 = (static_cast<float>(bits >> 40) + 1.f) * (1.f / 16777216.f);  // (0, 1]
  const float u2 = static_cast<float>((bits >> 16) & 0xffffff) * (1.f / 16777216.f);
  return sqrtf(-2.f * logf(u1)) * cosf(6.283185307179586f * u2);
}

// t = clamp(randn, -pi, pi); the rotary inputs are cos(t) and sin(t') of independent draws.
GK_HD inline float rope_angle_at(uint64_t seed, int64_t i) {
  const float t = normal_at(seed, i);
  return fminf(fmaxf(t, -3.14159265358979f), 3.14159265358979f);
}

// Seed of sub-stream k of a problem seed (one per input tensor).
GK_HD inline uint64_t sub_seed(uint64_t seed, uint64_t k) { return splitmix64(seed * 0x100000001b3ull + k); }

}  // namespace gk_testkit
