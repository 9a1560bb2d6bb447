// Where a GEMM op keeps its plans and loaded kernels: per-shape entries (a plan and its kernels' slots) and the
// kernels themselves, owned for the process's lifetime, since the op's lock-free table and the entries hand out
// pointers to them. Appends only, under one mutex (the miss path); the hit path never touches it.
#pragma once

#include <deque>
#include <memory>
#include <mutex>

namespace kiln::ops {

template <typename Entry, typename Kernel>
class PlanStore {
 public:
  Entry* add_entry() {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.emplace_back(std::make_unique<Entry>()).get();  // Entry holds atomics and a mutex: not movable
  }
  const Kernel* add_kernel(const Kernel& k) {
    std::lock_guard<std::mutex> lock(mutex_);
    return &kernels_.emplace_back(k);
  }

 private:
  std::mutex mutex_;
  std::deque<std::unique_ptr<Entry>> entries_;
  std::deque<Kernel> kernels_;
};

}  // namespace kiln::ops
