// A bounded map that forgets the least recently used entry: the handle's cuBLASLt plans are keyed by the whole
// GEMM shape (M among it, and the k -> v weight distance of the batched k|v GEMM), so a server whose token count
// changes from call to call, over layers with their own weights, would otherwise keep a plan for every shape it
// has ever seen. Not thread-safe: the owner locks.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <utility>

namespace gk::detail {

template <class Key, class Value>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The entry for `key`, now the most recently used; null if absent.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &it->second->second;
  }

  // Stores `value` for `key` (replacing an entry for the same key) as the most recently used, forgetting the least
  // recently used entry when the cache is full. Returns the stored value.
  Value& insert(const Key& key, Value value) {
    if (Value* existing = find(key)) {
      *existing = std::move(value);
      return *existing;
    }
    if (entries_.size() == capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    entries_.emplace_front(key, std::move(value));
    index_.emplace(key, entries_.begin());
    return entries_.front().second;
  }

  void clear() {
    index_.clear();
    entries_.clear();
  }
  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  using Entries = std::list<std::pair<Key, Value>>;  // most recently used first
  size_t capacity_;
  Entries entries_;
  std::map<Key, typename Entries::iterator> index_;
};

}  // namespace gk::detail
