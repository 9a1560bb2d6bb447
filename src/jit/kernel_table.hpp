// The launch path's memory tier: a compact fixed-size key (op, device and the few integers the kernel is
// specialised on) to a loaded kernel, with lock-free reads. A hit hashes a few words and probes an
// immutable open-addressing table published through an atomic pointer: no allocation, no string, no
// source generation, no file I/O, no environment read, no lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace kiln::jit {

template <typename Value, int kWords = 8>
class KernelTable {
 public:
  struct Key {
    std::array<int64_t, kWords> words{};
    bool operator==(const Key& o) const { return words == o.words; }
  };

  KernelTable() : table_(new Table(16)) {}
  ~KernelTable() {
    delete table_.load();
    for (Table* t : retired_) delete t;
  }
  KernelTable(const KernelTable&) = delete;
  KernelTable& operator=(const KernelTable&) = delete;

  // nullptr when absent. Wait-free.
  const Value* find(const Key& key) const noexcept {
    const Table* t = table_.load(std::memory_order_acquire);
    const uint64_t mask = t->slots.size() - 1;
    for (uint64_t i = hash(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = t->slots[i];
      if (!s.value) return nullptr;
      if (s.key == key) return s.value;
    }
  }

  // Inserts (first writer wins) and returns the value stored for key. `value` must outlive the table.
  const Value* insert(const Key& key, const Value* value) {
    std::lock_guard<std::mutex> lock(write_mutex_);
    Table* old = table_.load(std::memory_order_relaxed);
    if (const Value* existing = find(key)) return existing;
    size_t capacity = old->slots.size();
    if ((old->count + 1) * 2 > capacity) capacity *= 2;
    auto* next = new Table(capacity);
    for (const Slot& s : old->slots)
      if (s.value) next->put(s.key, s.value);
    next->put(key, value);
    table_.store(next, std::memory_order_release);
    retired_.push_back(old);  // readers may still hold it; tables are tiny and few
    return value;
  }

 private:
  struct Slot {
    Key key;
    const Value* value = nullptr;
  };
  struct Table {
    explicit Table(size_t capacity) : slots(capacity) {}
    std::vector<Slot> slots;
    size_t count = 0;
    void put(const Key& key, const Value* value) {
      const uint64_t mask = slots.size() - 1;
      for (uint64_t i = hash(key) & mask;; i = (i + 1) & mask) {
        if (!slots[i].value) {
          slots[i] = {key, value};
          ++count;
          return;
        }
      }
    }
  };

  static uint64_t hash(const Key& key) noexcept {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int64_t w : key.words) {
      h ^= static_cast<uint64_t>(w) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
      h *= 0xff51afd7ed558ccdull;
    }
    return h ^ (h >> 33);
  }

  std::atomic<Table*> table_;
  std::mutex write_mutex_;
  std::vector<Table*> retired_;
};

}  // namespace kiln::jit
