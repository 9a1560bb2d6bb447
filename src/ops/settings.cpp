// Process-wide launch settings. Plain atomics: launches read them on every call.
#include <atomic>
#include <string>

#include "kiln/error.hpp"
#include "kiln/ops.hpp"

namespace kiln {
namespace {

std::atomic<int> g_num_sms{0};
std::atomic<bool> g_pdl{false};

}  // namespace

void set_num_sms(int num_sms) {
  if (num_sms < 0)
    throw Error(ErrorKind::kValueError,
                "set_num_sms: num_sms must be >= 0 (0: all of the device's SMs), got " + std::to_string(num_sms));
  g_num_sms.store(num_sms, std::memory_order_relaxed);
}

int get_num_sms() { return g_num_sms.load(std::memory_order_relaxed); }

void set_pdl(bool enabled) { g_pdl.store(enabled, std::memory_order_relaxed); }

bool get_pdl() { return g_pdl.load(std::memory_order_relaxed); }

}  // namespace kiln
