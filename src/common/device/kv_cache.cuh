// The one rule every kernel that reads or writes a key/value cache applies to a sequence's cached length.
#pragma once

namespace gk::device {

// The tokens a kernel takes as cached before the call's `new_tokens`: the device length clamped to
// [0, capacity - new_tokens], so that a length past the host's bound still puts the new tokens inside the cache.
// The cache write, the decode kernel and the prefill kernel's cached form all clamp it so, and must agree.
// Host code too: the host tests walk the attention's tile schedule, cached rows included.
__host__ __device__ __forceinline__ int cached_tokens(int len, int capacity, int new_tokens) {
  const int bound = capacity - new_tokens;
  const int clamped = len < bound ? len : bound;
  return clamped > 0 ? clamped : 0;
}

}  // namespace gk::device
