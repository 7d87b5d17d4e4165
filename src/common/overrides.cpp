#include "common/overrides.hpp"

#include <cstring>
#include <string>

#include "common/status_util.hpp"

namespace gk::detail {

namespace {

struct Key {
  const char* name;
  int8_t Overrides::*field;
  const char* values[5];  // value i sets the field to i; null-terminated
};

// The one table of override keys.
constexpr Key kKeys[] = {
    {"attention.kernel", &Overrides::attention_kernel, {"sm90", "sm80", nullptr}},
    {"attention.tail", &Overrides::attention_tail, {"packed", "separate", nullptr}},
    {"attention.store", &Overrides::attention_store, {"tma", "direct", nullptr}},
    {"attention.softmax", &Overrides::attention_softmax, {"running", "fixed", nullptr}},
    {"qkv", &Overrides::qkv, {"splitk", "cublas", "skinny", nullptr}},
    {"kv_gemm", &Overrides::kv_gemm, {"batched", "separate", nullptr}},
    {"o_prefetch", &Overrides::o_prefetch, {"off", "attention", "projection", nullptr}},
    {"o_proj", &Overrides::o_proj, {"cublas", "skinny", nullptr}},
    {"audio.tf32", &Overrides::audio_tf32, {"splitk", "persistent", "cublas", "f16", nullptr}},
    {"audio.stream_k", &Overrides::audio_stream_k, {"on", "off", nullptr}},
    {"audio.v_round", &Overrides::audio_v_round, {"kernel", "pass", nullptr}},
    {"audio.v_weights", &Overrides::audio_v_weights, {"smem", "registers", nullptr}},
    {"audio.activations", &Overrides::audio_activations, {"prepass", "smem", nullptr}},
    {"audio.exact", &Overrides::audio_exact, {"tf32x3", "cublas", "f16", nullptr}},
    {"audio.f16_tile", &Overrides::audio_f16_tile, {"head", "pair", nullptr}},
    {"audio.f16_multicast", &Overrides::audio_f16_multicast, {"off", "weights", nullptr}},
    {"launch", &Overrides::launch, {"stream", "graph", nullptr}},
};

std::string allowed(const Key& k) {
  std::string s;
  for (int i = 0; k.values[i] != nullptr; ++i) s += std::string(k.values[i]) + "|";
  return s + "auto";
}

std::string key_list() {
  std::string s;
  for (const Key& k : kKeys) s += std::string(s.empty() ? "" : ", ") + k.name;
  return s;
}

bool separator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == ';'; }

}  // namespace

Status parse_overrides(const char* spec, Overrides* out) {
  Overrides o;
  const std::string s = spec == nullptr ? std::string() : std::string(spec);
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && separator(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !separator(s[j])) ++j;
    if (j == i) break;
    const std::string item = s.substr(i, j - i);
    i = j;
    const size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return error(GK_STATUS_INVALID_ARGUMENT, "overrides: '%s' is not key=value (keys: %s)", item.c_str(),
                   key_list().c_str());
    }
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    const Key* key = nullptr;
    for (const Key& k : kKeys) {
      if (name == k.name) key = &k;
    }
    if (key == nullptr) {
      return error(GK_STATUS_INVALID_ARGUMENT, "overrides: unknown key '%s' (keys: %s)", name.c_str(),
                   key_list().c_str());
    }
    int chosen = value == "auto" ? kAuto : -2;
    for (int v = 0; key->values[v] != nullptr; ++v) {
      if (value == key->values[v]) chosen = v;
    }
    if (chosen == -2) {
      return error(GK_STATUS_INVALID_ARGUMENT, "overrides: %s=%s: the value is not one of %s", name.c_str(),
                   value.c_str(), allowed(*key).c_str());
    }
    o.*(key->field) = static_cast<int8_t>(chosen);
  }
  *out = o;
  return Status::Ok();
}

std::string format_overrides(const Overrides& o) {
  std::string s;
  for (const Key& k : kKeys) {
    const int v = o.*(k.field);
    if (v == kAuto) continue;
    s += std::string(s.empty() ? "" : ",") + k.name + "=" + k.values[v];
  }
  return s;
}

}  // namespace gk::detail
