// The pure parts of a launch: which attributes a LaunchConfig produces (driver and runtime forms), their
// description in errors, and the "largest value raised so far" mark shared by concurrent launches.
#include "cuda/launch_setup.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace kiln::cuda::detail {
namespace {

TEST(LaunchAttributes, PlainLaunchHasNone) {
  LaunchConfig c;
  c.grid[0] = 64;
  c.block[0] = 128;
  c.shared_bytes = 100 * 1024;  // shared memory is a config field, never an attribute
  CUlaunchAttribute driver[kMaxLaunchAttributes];
  cudaLaunchAttribute runtime[kMaxLaunchAttributes];
  EXPECT_EQ(fill_attributes(c, driver), 0u);
  EXPECT_EQ(fill_attributes(c, runtime), 0u);
  EXPECT_FALSE(has_cluster(c));
  EXPECT_FALSE(needs_non_portable_cluster(c));
}

TEST(LaunchAttributes, ClusterOnlyWhenNotOneByOneByOne) {
  LaunchConfig c;
  c.cluster[0] = 2;
  CUlaunchAttribute driver[kMaxLaunchAttributes];
  ASSERT_EQ(fill_attributes(c, driver), 1u);
  EXPECT_EQ(driver[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(driver[0].value.clusterDim.x, 2u);
  EXPECT_EQ(driver[0].value.clusterDim.y, 1u);
  EXPECT_EQ(driver[0].value.clusterDim.z, 1u);

  cudaLaunchAttribute runtime[kMaxLaunchAttributes];
  c.cluster[0] = 1;
  c.cluster[1] = 2;
  c.cluster[2] = 2;
  ASSERT_EQ(fill_attributes(c, runtime), 1u);
  EXPECT_EQ(runtime[0].id, cudaLaunchAttributeClusterDimension);
  EXPECT_EQ(runtime[0].val.clusterDim.x, 1u);
  EXPECT_EQ(runtime[0].val.clusterDim.y, 2u);
  EXPECT_EQ(runtime[0].val.clusterDim.z, 2u);
}

TEST(LaunchAttributes, ProgrammaticDependentLaunch) {
  LaunchConfig c;
  c.pdl = true;
  CUlaunchAttribute driver[kMaxLaunchAttributes];
  ASSERT_EQ(fill_attributes(c, driver), 1u);
  EXPECT_EQ(driver[0].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(driver[0].value.programmaticStreamSerializationAllowed, 1);
  cudaLaunchAttribute runtime[kMaxLaunchAttributes];
  ASSERT_EQ(fill_attributes(c, runtime), 1u);
  EXPECT_EQ(runtime[0].id, cudaLaunchAttributeProgrammaticStreamSerialization);
  EXPECT_EQ(runtime[0].val.programmaticStreamSerializationAllowed, 1);
}

TEST(LaunchAttributes, ClusterAndPdlTogether) {
  LaunchConfig c;
  c.cluster[0] = 4;
  c.cluster[1] = 4;
  c.pdl = true;
  CUlaunchAttribute driver[kMaxLaunchAttributes];
  ASSERT_EQ(fill_attributes(c, driver), 2u);
  EXPECT_EQ(driver[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(driver[1].id, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  EXPECT_EQ(cluster_size(c), 16u);
  EXPECT_TRUE(needs_non_portable_cluster(c));
  c.cluster[1] = 2;
  EXPECT_FALSE(needs_non_portable_cluster(c));  // 8 CTAs is the portable maximum
}

TEST(LaunchAttributes, DescriptionNamesEveryField) {
  LaunchConfig c;
  c.grid[0] = 64;
  c.block[0] = 128;
  c.cluster[0] = 2;
  c.shared_bytes = 102400;
  c.pdl = true;
  EXPECT_EQ(describe(c),
            "grid (64,1,1), block (128,1,1), cluster (2,1,1), 102400 bytes of dynamic shared memory, PDL on");
}

TEST(RaisedMark, RaisesOnlyUpwards) {
  RaisedMark mark;
  std::vector<uint32_t> set;
  auto record = [&](uint32_t v) { set.push_back(v); };
  EXPECT_TRUE(mark.covers(0));
  EXPECT_FALSE(mark.covers(1));
  EXPECT_TRUE(mark.raise(1000, record));
  EXPECT_FALSE(mark.raise(1000, record));
  EXPECT_FALSE(mark.raise(10, record));
  EXPECT_TRUE(mark.covers(1000));
  EXPECT_FALSE(mark.covers(1001));
  EXPECT_TRUE(mark.raise(5000, record));
  EXPECT_EQ(set, (std::vector<uint32_t>{1000, 5000}));
  EXPECT_EQ(mark.value(), 5000u);
}

TEST(RaisedMark, FailedSetLeavesMarkUnchanged) {
  RaisedMark mark;
  EXPECT_THROW(mark.raise(4096, [](uint32_t) { throw std::runtime_error("driver said no"); }), std::runtime_error);
  EXPECT_FALSE(mark.covers(4096));
  EXPECT_TRUE(mark.raise(4096, [](uint32_t) {}));
  EXPECT_TRUE(mark.covers(4096));
}

// Many threads asking for random sizes: the attribute is only ever raised (never lowered by a late smaller
// request), ends at the maximum asked for, and every request is covered once its raise() returns.
TEST(RaisedMark, ConcurrentRequestsNeverLower) {
  RaisedMark mark;
  std::vector<uint32_t> set;  // written under the mark's lock only
  std::atomic<uint32_t> attribute{0};
  std::atomic<int> violations{0};
  std::atomic<uint32_t> max_asked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 20000; ++i) {
        uint32_t want = rng() % 230000;
        uint32_t seen = max_asked.load();
        while (want > seen && !max_asked.compare_exchange_weak(seen, want)) {
        }
        if (!mark.covers(want)) {
          mark.raise(want, [&](uint32_t v) {
            set.push_back(v);
            attribute.store(v);
          });
        }
        // What a launch relies on: the attribute now allows at least what this launch asks for.
        if (attribute.load() < want) violations.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_TRUE(std::is_sorted(set.begin(), set.end()));
  EXPECT_EQ(std::adjacent_find(set.begin(), set.end()), set.end());  // strictly increasing
  EXPECT_EQ(mark.value(), max_asked.load());
  EXPECT_EQ(attribute.load(), max_asked.load());
}

}  // namespace
}  // namespace kiln::cuda::detail
