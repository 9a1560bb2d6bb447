// kiln_test_helper: a small program the multi-process JIT tests start many times. It uses the process-wide
// runtime, configured from the environment exactly as a user's process would be.
//
//   kiln_test_helper build <threads> <arch> <scale>...   every thread builds the self-test kernel for every
//                                                         scale; prints "compiled=<n> hits=<n>" and exits 0
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "codegen/kernel_spec.hpp"
#include "jit/jit_runtime.hpp"
#include "kiln/error.hpp"
#include "selftest_spec.hpp"

int main(int argc, char** argv) {
  if (argc < 5 || std::string(argv[1]) != "build") {
    std::fprintf(stderr, "usage: %s build <threads> <arch> <scale>...\n", argv[0]);
    return 2;
  }
  try {
    const int threads = std::atoi(argv[2]);
    kiln::jit::Target target{kiln::compiler::Arch::parse(argv[3]), kiln::config().backend};
    std::vector<int> scales;
    for (int i = 4; i < argc; ++i) scales.push_back(std::atoi(argv[i]));

    std::atomic<int> compiled{0}, hits{0}, failures{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (size_t i = 0; i < scales.size(); ++i) {
          int scale = scales[(i + static_cast<size_t>(t)) % scales.size()];  // threads start on different keys
          try {
            auto r = kiln::jit::runtime().build(kiln::test::selftest_spec(scale), target);
            (r.hit ? hits : compiled).fetch_add(1);
            if (!r.binary || r.binary->cubin.size() < 4 || r.binary->cubin[0] != 0x7f) failures.fetch_add(1);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "build failed: %s\n", e.what());
            failures.fetch_add(1);
          }
        }
      });
    }
    for (auto& th : pool) th.join();
    std::printf("compiled=%d hits=%d failures=%d\n", compiled.load(), hits.load(), failures.load());
    return failures.load() ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_test_helper: %s\n", e.what());
    return 1;
  }
}
