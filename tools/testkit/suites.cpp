#include "suites.hpp"

#include <nlohmann/json.hpp>

#include <set>
#include <stdexcept>

namespace gk_testkit {

extern const char* const kEmbeddedSuites[];  // suites_embedded.cpp (generated)
extern const int kEmbeddedSuiteCount;

double Suite::value(const Workload& w, const std::string& name) const {
  const auto it = w.config.find(name);
  return it != w.config.end() ? it->second : constant(name);
}

double Suite::value(const Workload& w, const std::string& name, double fallback) const {
  const auto it = w.config.find(name);
  if (it != w.config.end()) return it->second;
  return constants.count(name) ? constants.at(name) : fallback;
}

double Suite::constant(const std::string& name) const {
  auto it = constants.find(name);
  if (it == constants.end()) throw std::runtime_error("suite " + id + ": constant '" + name + "' is missing");
  return it->second;
}

Suite parse_suite(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(std::string("suite: not valid JSON: ") + e.what());
  }
  Suite s;
  const auto need = [&](const nlohmann::json& obj, const char* key, const std::string& where) -> const nlohmann::json& {
    if (!obj.is_object() || !obj.contains(key)) throw std::runtime_error(where + ": missing key '" + key + "'");
    return obj.at(key);
  };
  try {
    s.id = need(j, "id", "suite").get<std::string>();
    const std::string where = "suite " + s.id;
    s.op = need(j, "operator", where).get<std::string>();
    if (s.op != "gemma3_attention" && s.op != "audio_qkv") {
      throw std::runtime_error(where + ": unknown operator '" + s.op + "'");
    }
    s.title = j.value("title", "");
    for (const auto& [k, v] : need(j, "constants", where).items()) s.constants[k] = v.get<double>();
    s.required_matched_ratio = need(j, "required_matched_ratio", where).get<double>();
    const auto& wl = need(j, "workloads", where);
    if (!wl.is_array() || wl.empty()) throw std::runtime_error(where + ": 'workloads' must be a non-empty array");
    for (size_t i = 0; i < wl.size(); ++i) {
      const std::string w_where = where + " workload " + std::to_string(i);
      Workload w;
      w.batch = need(wl[i], "batch", w_where).get<int64_t>();
      w.seq_len = need(wl[i], "seq_len", w_where).get<int64_t>();
      w.atol = need(wl[i], "atol", w_where).get<double>();
      w.rtol = need(wl[i], "rtol", w_where).get<double>();
      w.nvidia_b200_sol_us = wl[i].value("nvidia_b200_sol_us", 0.0);
      w.label = wl[i].value("label", "");
      if (wl[i].contains("config")) {
        if (!wl[i].at("config").is_object()) throw std::runtime_error(w_where + ": 'config' must be an object");
        // Only the operator's own keys: a misspelt one would otherwise run the suite's value silently.
        static const std::set<std::string> gemma3_keys = {"hidden", "num_q_heads", "num_kv_heads", "head_dim",
                                                          "softcap", "eps", "norm_weight_offset", "query_scale",
                                                          "window", "cached"};
        static const std::set<std::string> audio_keys = {"hidden", "num_heads", "head_dim", "eps"};
        const auto& known = s.op == "gemma3_attention" ? gemma3_keys : audio_keys;
        for (const auto& [k, v] : wl[i].at("config").items()) {
          if (!known.count(k)) throw std::runtime_error(w_where + ": unknown config key '" + k + "'");
          w.config[k] = v.get<double>();
        }
      }
      if (w.batch < 1 || w.seq_len < 1 || w.atol < 0 || w.rtol < 0) {
        throw std::runtime_error(w_where + ": batch and seq_len must be >= 1, tolerances >= 0");
      }
      s.workloads.push_back(w);
    }
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error("suite: wrong value type: " + std::string(e.what()));
  }
  return s;
}

const std::vector<Suite>& builtin_suites() {
  static const std::vector<Suite> suites = [] {
    std::vector<Suite> v;
    for (int i = 0; i < kEmbeddedSuiteCount; ++i) v.push_back(parse_suite(kEmbeddedSuites[i]));
    return v;
  }();
  return suites;
}

const Suite& builtin_suite(const std::string& id) {
  std::string known;
  for (const auto& s : builtin_suites()) {
    if (s.id == id) return s;
    known += (known.empty() ? "" : ", ") + s.id;
  }
  throw std::runtime_error("unknown suite '" + id + "' (known: " + known + ")");
}

gk_gemma3_attention_config gemma3_config(const Suite& s, const Workload& w) {
  gk_gemma3_attention_config c{};
  c.batch = w.batch;
  c.seq_len = w.seq_len;
  c.hidden = static_cast<int64_t>(s.value(w, "hidden"));
  c.num_q_heads = static_cast<int64_t>(s.value(w, "num_q_heads"));
  c.num_kv_heads = static_cast<int64_t>(s.value(w, "num_kv_heads"));
  c.head_dim = static_cast<int64_t>(s.value(w, "head_dim"));
  c.softcap = static_cast<float>(s.value(w, "softcap"));
  c.rms_norm_eps = static_cast<float>(s.value(w, "eps"));
  c.norm_weight_offset = static_cast<float>(s.value(w, "norm_weight_offset"));
  c.query_scale = static_cast<float>(s.value(w, "query_scale", 0.0));
  c.mask_mode = GK_MASK_CAUSAL;
  c.sliding_window = static_cast<int64_t>(s.value(w, "window", 0.0));
  return c;
}

int64_t gemma3_cached(const Suite& s, const Workload& w) {
  return static_cast<int64_t>(s.value(w, "cached", 0.0));
}

gk_audio_qkv_config audio_config(const Suite& s, const Workload& w, gk_precision precision) {
  gk_audio_qkv_config c{};
  c.batch = w.batch;
  c.seq_len = w.seq_len;
  c.hidden = static_cast<int64_t>(s.value(w, "hidden"));
  c.num_heads = static_cast<int64_t>(s.value(w, "num_heads"));
  c.head_dim = static_cast<int64_t>(s.value(w, "head_dim"));
  c.eps = static_cast<float>(s.value(w, "eps"));
  c.precision = precision;
  return c;
}

}  // namespace gk_testkit
