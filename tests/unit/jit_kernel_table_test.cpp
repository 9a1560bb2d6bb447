#include "jit/kernel_table.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace kiln::jit {
namespace {

using Table = KernelTable<int, 4>;

Table::Key key(int64_t a, int64_t b = 0) { return Table::Key{{a, b, 0, 0}}; }

TEST(KernelTable, FindsWhatWasInsertedAndNothingElse) {
  Table table;
  std::vector<int> values(100);
  EXPECT_EQ(table.find(key(1)), nullptr);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(table.insert(key(i, i * 7), &values[i]), &values[i]);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(table.find(key(i, i * 7)), &values[i]);
  EXPECT_EQ(table.find(key(5, 6)), nullptr);
}

TEST(KernelTable, FirstInsertWins) {
  Table table;
  int a = 1, b = 2;
  EXPECT_EQ(table.insert(key(9), &a), &a);
  EXPECT_EQ(table.insert(key(9), &b), &a);
}

TEST(KernelTable, ReadersRaceWithAWriter) {
  Table table;
  std::vector<int> values(2000);
  std::atomic<bool> done{false};
  std::atomic<int> wrong{0};
  std::thread writer([&] {
    for (int i = 0; i < 2000; ++i) table.insert(key(i), &values[i]);
    done = true;
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r)
    readers.emplace_back([&] {
      while (!done)
        for (int i = 0; i < 2000; i += 37)
          if (const int* v = table.find(key(i)); v && v != &values[i]) wrong.fetch_add(1);
    });
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(table.find(key(i)), &values[i]);
}

// Not a timed assertion: prints the cost of a hit for the record (the benchmark measures it properly).
TEST(KernelTable, HitCostIsPrinted) {
  Table table;
  std::vector<int> values(64);
  for (int i = 0; i < 64; ++i) table.insert(key(i, 4096), &values[i]);
  const int kIters = 2'000'000;
  auto t0 = std::chrono::steady_clock::now();
  int64_t sum = 0;
  for (int i = 0; i < kIters; ++i) sum += *table.find(key(i & 63, 4096));
  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kIters;
  std::printf("KernelTable hit: %.1f ns (checksum %lld)\n", ns, static_cast<long long>(sum));
  SUCCEED();
}

}  // namespace
}  // namespace kiln::jit
