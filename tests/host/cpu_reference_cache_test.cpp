// The CPU reference with a key/value cache (gk_ref::gemma3_attention_cached) against the same reference without one:
// a prompt fed in chunks, or sequences of different cached lengths, must give exactly the rows the whole sequence
// gives (masked keys have probability exactly 0, so fewer keys change no sum), and leave the whole sequence's k and v
// in the cache.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "fill.hpp"
#include "reference.hpp"

namespace {

using gk_ref::Gemma3Cache;
using gk_ref::Gemma3Dims;
using gk_ref::Gemma3Inputs;

constexpr int64_t kHidden = 16, kHq = 4, kHkv = 2, kD = 8;

using Rng = gk_testkit::NormalDraws;

// One sequence's tokens and the layer's weights.
struct Layer {
  std::vector<float> wq, wk, wv, wo, qn, kn;
  explicit Layer(Rng& rng)
      : wq(rng(kHq * kD * kHidden, 0.25f)), wk(rng(kHkv * kD * kHidden, 0.25f)),
        wv(rng(kHkv * kD * kHidden, 0.25f)), wo(rng(kHidden * kHq * kD, 0.2f)),
        qn(rng(kD, 0.3f)), kn(rng(kD, 0.3f)) {}
};
struct Tokens {
  std::vector<float> hs, cos, sin;  // [n, hidden], [n, D], [n, D]
  Tokens() = default;
  Tokens(int64_t n, Rng& rng) : hs(rng(n * kHidden, 1.f)), cos(rng(n * kD, 0.6f)), sin(rng(n * kD, 0.6f)) {}
  // Tokens [from, from + n) of each of the given sequences, batched.
  static Tokens slice(const std::vector<const Tokens*>& seqs, int64_t from, int64_t n, const std::vector<int64_t>& at) {
    Tokens t;
    for (size_t b = 0; b < seqs.size(); ++b) {
      const int64_t f = from + at[b];
      t.hs.insert(t.hs.end(), seqs[b]->hs.begin() + f * kHidden, seqs[b]->hs.begin() + (f + n) * kHidden);
      t.cos.insert(t.cos.end(), seqs[b]->cos.begin() + f * kD, seqs[b]->cos.begin() + (f + n) * kD);
      t.sin.insert(t.sin.end(), seqs[b]->sin.begin() + f * kD, seqs[b]->sin.begin() + (f + n) * kD);
    }
    return t;
  }
};

Gemma3Dims dims(int64_t batch, int64_t seq_len, int64_t window, float softcap) {
  return Gemma3Dims{batch, seq_len, kHidden, kHq, kHkv, kD, softcap, 1e-6f, 1.f, 0.f, gk_ref::Mask::kCausal, window};
}

Gemma3Inputs inputs(const Tokens& t, const Layer& l) {
  return Gemma3Inputs{t.hs.data(), t.cos.data(), t.sin.data(), nullptr, l.wq.data(), l.wk.data(), l.wv.data(),
                      l.wo.data(), l.qn.data(), l.kn.data()};
}

// The whole sequence without a cache: its output rows [n, hidden] and its k, v [Hkv, n, D].
struct Whole {
  std::vector<float> out;
  gk_ref::Gemma3Intermediates steps;
};
Whole whole(const Tokens& t, const Layer& l, int64_t n, int64_t window, float softcap) {
  Whole w;
  w.out.resize(n * kHidden);
  gk_ref::gemma3_attention(dims(1, n, window, softcap), inputs(t, l), w.out.data(), &w.steps);
  return w;
}

TEST(CpuReferenceCache, ChunkedPrefillGivesTheWholeSequencesRows) {
  for (int64_t window : {0, 3}) {
    for (float softcap : {0.f, 5.f}) {
      Rng rng{11};
      const Layer l(rng);
      const int64_t n = 9, max_len = 12, chunks[2] = {5, 4};
      const Tokens seq(n, rng);
      const Whole ref = whole(seq, l, n, window, softcap);
      std::vector<float> k(kHkv * max_len * kD, -7.f), v(kHkv * max_len * kD, -7.f);
      int64_t len = 0;
      for (int64_t c : chunks) {
        const Tokens part = Tokens::slice({&seq}, len, c, {0});
        std::vector<float> out(c * kHidden);
        const int64_t lens[1] = {len};
        ASSERT_TRUE(gk_ref::gemma3_attention_cached(dims(1, c, window, softcap), inputs(part, l),
                                                    Gemma3Cache{k.data(), v.data(), max_len, lens}, out.data()));
        for (int64_t i = 0; i < c * kHidden; ++i) {
          ASSERT_EQ(out[i], ref.out[len * kHidden + i]) << "window " << window << " chunk at " << len << " elem " << i;
        }
        len += c;
      }
      for (int64_t h = 0; h < kHkv; ++h) {
        for (int64_t s = 0; s < max_len; ++s) {
          for (int64_t e = 0; e < kD; ++e) {
            const float want_k = s < n ? ref.steps.k[(h * n + s) * kD + e] : -7.f;  // slots past the tokens untouched
            const float want_v = s < n ? ref.steps.v[(h * n + s) * kD + e] : -7.f;
            ASSERT_EQ(k[(h * max_len + s) * kD + e], want_k) << h << " " << s << " " << e;
            ASSERT_EQ(v[(h * max_len + s) * kD + e], want_v) << h << " " << s << " " << e;
          }
        }
      }
    }
  }
}

TEST(CpuReferenceCache, RaggedCachedLengthsInOneBatch) {
  // Three sequences with 0, 1 and 6 tokens cached, two new tokens each (decode-like), in one call; the cache filled
  // to capacity by the longest.
  Rng rng{5};
  const Layer l(rng);
  const std::vector<int64_t> lens = {0, 1, 6};
  const int64_t fresh = 2, max_len = 8;
  std::vector<Tokens> seqs;
  for (int64_t len : lens) seqs.emplace_back(len + fresh, rng);
  std::vector<float> k(3 * kHkv * max_len * kD, 0.f), v(k.size(), 0.f);
  std::vector<Whole> refs;
  for (size_t b = 0; b < lens.size(); ++b) {
    refs.push_back(whole(seqs[b], l, lens[b] + fresh, 0, 5.f));
    for (int64_t h = 0; h < kHkv; ++h) {  // the cached tokens' k and v, as a prefill left them
      for (int64_t s = 0; s < lens[b]; ++s) {
        for (int64_t e = 0; e < kD; ++e) {
          const int64_t at = ((int64_t(b) * kHkv + h) * max_len + s) * kD + e, from = (h * (lens[b] + fresh) + s) * kD + e;
          k[at] = refs[b].steps.k[from];
          v[at] = refs[b].steps.v[from];
        }
      }
    }
  }
  const Tokens batch = Tokens::slice({&seqs[0], &seqs[1], &seqs[2]}, 0, fresh, lens);
  std::vector<float> out(3 * fresh * kHidden);
  ASSERT_TRUE(gk_ref::gemma3_attention_cached(dims(3, fresh, 0, 5.f), inputs(batch, l),
                                              Gemma3Cache{k.data(), v.data(), max_len, lens.data()}, out.data()));
  for (size_t b = 0; b < lens.size(); ++b) {
    for (int64_t i = 0; i < fresh * kHidden; ++i) {
      ASSERT_EQ(out[(b * fresh) * kHidden + i], refs[b].out[lens[b] * kHidden + i]) << "sequence " << b << " elem " << i;
    }
  }
}

TEST(CpuReferenceCache, RefusesWhatItCannotTakeAndChangesNothing) {
  Rng rng{7};
  const Layer l(rng);
  const Tokens t(3, rng);
  std::vector<float> k(kHkv * 4 * kD, 1.f), v(k.size(), 1.f), out(3 * kHidden, 0.f);
  const int64_t too_long[1] = {2}, negative[1] = {-1};
  EXPECT_FALSE(gk_ref::gemma3_attention_cached(dims(1, 3, 0, 0.f), inputs(t, l), {k.data(), v.data(), 4, too_long},
                                               out.data()));
  EXPECT_FALSE(gk_ref::gemma3_attention_cached(dims(1, 3, 0, 0.f), inputs(t, l), {k.data(), v.data(), 4, negative},
                                               out.data()));
  Gemma3Dims additive = dims(1, 3, 0, 0.f);
  additive.mask = gk_ref::Mask::kAdditive;
  const int64_t zero[1] = {0};
  EXPECT_FALSE(gk_ref::gemma3_attention_cached(additive, inputs(t, l), {k.data(), v.data(), 4, zero}, out.data()));
  for (float x : k) ASSERT_EQ(x, 1.f);
  for (float x : out) ASSERT_EQ(x, 0.f);
}

}  // namespace
