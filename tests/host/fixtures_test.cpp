// The CPU reference against fixtures made on the GPU machine by scripts/make_fixtures.py: from a PyTorch
// re-statement of the operators and from Hugging Face transformers' own Gemma3Attention (softcap off, as HF's
// Gemma3 has it). Fixtures are small: a header (.json) and raw little-endian data (.bin).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "judge.hpp"
#include "reference.hpp"

namespace {

namespace fs = std::filesystem;

struct Fixture {
  std::string name;
  nlohmann::json header;
  std::map<std::string, std::vector<double>> tensors;  // every dtype widened to double

  const std::vector<double>& at(const std::string& k) const {
    auto it = tensors.find(k);
    if (it == tensors.end()) throw std::runtime_error(name + ": no tensor " + k);
    return it->second;
  }
  std::vector<float> floats(const std::string& k) const {
    const auto& d = at(k);
    return std::vector<float>(d.begin(), d.end());
  }
};

Fixture load(const fs::path& json_path) {
  Fixture f;
  f.name = json_path.stem().string();
  std::ifstream hj(json_path);
  f.header = nlohmann::json::parse(hj);
  std::ifstream bin(json_path.parent_path() / f.header.at("data").get<std::string>(), std::ios::binary);
  const std::vector<char> raw((std::istreambuf_iterator<char>(bin)), std::istreambuf_iterator<char>());
  for (const auto& t : f.header.at("tensors")) {
    size_t n = 1;
    for (const auto& d : t.at("shape")) n *= d.get<size_t>();
    const std::string dtype = t.at("dtype");
    const size_t off = t.at("offset");
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) {
      if (dtype == "bf16") {
        uint16_t b;
        std::memcpy(&b, raw.data() + off + 2 * i, 2);
        v[i] = gk_ref::bf16_from_bits(b);
      } else if (dtype == "f32") {
        float x;
        std::memcpy(&x, raw.data() + off + 4 * i, 4);
        v[i] = x;
      } else if (dtype == "f64") {
        std::memcpy(&v[i], raw.data() + off + 8 * i, 8);
      } else {
        throw std::runtime_error(f.name + ": unknown dtype " + dtype);
      }
    }
    f.tensors[t.at("name")] = std::move(v);
  }
  return f;
}

// GK_FIXTURE_DIR in the environment overrides the source-tree path compiled in (for a build run elsewhere).
std::string fixture_dir() {
  const char* env = std::getenv("GK_FIXTURE_DIR");
  return env ? env : GK_FIXTURE_DIR;
}

std::vector<Fixture> load_all(const std::string& op) {
  std::vector<Fixture> out;
  if (!fs::is_directory(fixture_dir())) return out;
  for (const auto& e : fs::directory_iterator(fixture_dir())) {
    if (e.path().extension() != ".json") continue;
    Fixture f = load(e.path());
    if (f.header.at("operator") == op) out.push_back(std::move(f));
  }
  return out;
}

TEST(Fixtures, Gemma3CpuReferenceMatchesPyTorchAndHuggingFace) {
  const auto fixtures = load_all("gemma3_attention");
  ASSERT_GE(fixtures.size(), 4u) << "fixtures missing in " << fixture_dir()
                                 << ": run scripts/make_fixtures.py on the GPU machine";
  int from_hf = 0;
  for (const auto& f : fixtures) {
    SCOPED_TRACE(f.name);
    const auto& c = f.header.at("config");
    gk_ref::Gemma3Dims d{};
    d.batch = c.at("batch");
    d.seq_len = c.at("seq_len");
    d.hidden = c.at("hidden");
    d.num_q_heads = c.at("num_q_heads");
    d.num_kv_heads = c.at("num_kv_heads");
    d.head_dim = c.at("head_dim");
    d.softcap = c.at("softcap");
    d.eps = c.at("eps");
    d.norm_weight_offset = c.at("norm_weight_offset");
    d.query_scale = c.at("query_scale");
    const std::string mask = c.at("mask");
    d.mask = mask == "additive" ? gk_ref::Mask::kAdditive : mask == "none" ? gk_ref::Mask::kNone : gk_ref::Mask::kCausal;
    const auto hs = f.floats("hidden_states"), cs = f.floats("cos"), sn = f.floats("sin"), wq = f.floats("q_proj_weight"),
               wk = f.floats("k_proj_weight"), wv = f.floats("v_proj_weight"), wo = f.floats("o_proj_weight"),
               qn = f.floats("q_norm_weight"), kn = f.floats("k_norm_weight"), expected = f.floats("out");
    const auto mk = d.mask == gk_ref::Mask::kAdditive ? f.floats("attention_mask") : std::vector<float>();
    gk_ref::Gemma3Inputs in{hs.data(), cs.data(), sn.data(), mk.empty() ? nullptr : mk.data(), wq.data(), wk.data(),
                            wv.data(), wo.data(), qn.data(), kn.data()};
    std::vector<float> out(expected.size());
    gk_ref::gemma3_attention(d, in, out.data());
    // Same rounding points as the fixture's source; what remains is accumulation order flipping a bf16 rounding
    // now and then, far below the tolerance.
    const double atol = f.header.at("tolerance").at("atol"), rtol = f.header.at("tolerance").at("rtol");
    const auto j = gk_testkit::judge_host(out.data(), expected.data(), int64_t(out.size()), atol, rtol);
    EXPECT_TRUE(j.passed(1.0)) << j.summary(1.0);
    from_hf += f.header.at("source").get<std::string>().find("transformers") != std::string::npos;
  }
  EXPECT_GE(from_hf, 1) << "no fixture from Hugging Face's Gemma3Attention";
}

TEST(Fixtures, AudioCpuReferenceMatchesFloat64Restatement) {
  const auto fixtures = load_all("audio_qkv");
  ASSERT_GE(fixtures.size(), 1u) << "fixtures missing in " << fixture_dir();
  for (const auto& f : fixtures) {
    SCOPED_TRACE(f.name);
    const auto& c = f.header.at("config");
    gk_ref::AudioDims d{c.at("batch"), c.at("seq_len"), c.at("hidden"), c.at("num_heads"), c.at("head_dim"),
                        c.at("eps").get<float>()};
    const auto hs = f.floats("hidden_states"), wq = f.floats("q_proj_weight"), wk = f.floats("k_proj_weight"),
               wv = f.floats("v_proj_weight"), qn = f.floats("q_norm_weight"), kn = f.floats("k_norm_weight");
    const size_t n = f.at("query_states").size();
    std::vector<double> q(n), k(n), v(n);
    gk_ref::audio_qkv(d, hs.data(), wq.data(), wk.data(), wv.data(), qn.data(), kn.data(), q.data(), k.data(),
                      v.data());
    const char* names[3] = {"query_states", "key_states", "value_states"};
    const std::vector<double>* mine[3] = {&q, &k, &v};
    for (int i = 0; i < 3; ++i) {
      const auto& ref = f.at(names[i]);
      const auto j = gk_testkit::judge_host(mine[i]->data(), ref.data(), int64_t(n), 1e-9, 1e-9);
      EXPECT_TRUE(j.passed(1.0)) << names[i] << ": " << j.summary(1.0);
    }
  }
}

}  // namespace
