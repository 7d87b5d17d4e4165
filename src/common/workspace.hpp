// Carves one caller-provided workspace into 256-byte aligned buffers. With a null base it only counts, so the
// size query and the forward pass share one layout description and cannot drift apart.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gk::detail {

class WorkspaceCarver {
 public:
  static constexpr size_t kAlign = 256;

  explicit WorkspaceCarver(void* base = nullptr) : base_(static_cast<char*>(base)) {}

  template <typename T>
  T* take(size_t count) {
    const size_t offset = used_;
    used_ += round_up(count * sizeof(T));
    return base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + offset);
  }

  void* take_bytes(size_t bytes) { return take<char>(bytes); }
  size_t bytes() const { return used_; }

 private:
  static size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  char* base_;
  size_t used_ = 0;
};

}  // namespace gk::detail
