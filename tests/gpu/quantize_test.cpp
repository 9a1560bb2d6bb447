// GPU test of the FP8 casts through the public C++ API (kiln::per_token_cast_to_fp8, per_block_cast_to_fp8):
// random bf16 inputs with all-zero rows, rows below the 1e-4 amax floor, large, tiny and subnormal values and
// negative zeros; outputs poisoned with 0xFF; several shapes (ragged m and n, k in {128, 512, 7168}, row
// strides larger than k whose padding holds huge values that must never be read); the default stream and a
// created one; PDL on; a small grid forced with set_num_sms so every thread loops. Every fp8 byte and every
// scale is compared bit for bit with a CPU reference that computes what the kernels promise:
//   scale = max(amax, 1e-4f) / 448.0f (IEEE fp32 division), q = e4m3_rn_satfinite((float)x / scale).
// The padding of the TMA-aligned scale layout (rows m .. aligned m) must stay poisoned.
//
// One PASS/FAIL line per case; exit status 0 only when every case passed, 1 otherwise, 77 when there is no
// GPU. `--small` skips the shapes with thousands of rows (for runs under compute-sanitizer). DG_JIT_USE_NVRTC=1 / DG_JIT_USE_RUNTIME_API=1 select the other compiler / launch API as usual.
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "kiln/error.hpp"
#include "kiln/ops.hpp"
#include "kiln/tensor.hpp"
#include "gpu_test_support.hpp"

namespace {

using kiln::gpu_test::bf16_to_f32;
using kiln::gpu_test::DeviceBuffer;
using kiln::gpu_test::f32_to_bf16;

// ---- reference numerics --------------------------------------------------------------------------------------

// e4m3 (OCP "fn": bias 7, no infinities, 0x7f NaN) magnitudes of codes 0x00..0x7e, increasing.
const std::vector<double>& e4m3_magnitudes() {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (int code = 0; code <= 0x7e; ++code) {
      const int exp = code >> 3, man = code & 7;
      t.push_back(exp == 0 ? std::ldexp(man, -9) : std::ldexp(1.0 + man / 8.0, exp - 7));
    }
    return t;
  }();
  return table;
}

// Round to nearest, ties to the even code, finite values beyond 448 saturate to 448; NaN -> 0x7f.
uint8_t f32_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(f));
  const auto& t = e4m3_magnitudes();
  if (a >= t.back()) return sign | 0x7e;
  const size_t hi = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), a) - t.begin());  // t[hi-1] <= a < t[hi]
  const size_t lo = hi - 1;
  const double dl = a - t[lo], dh = t[hi] - a;
  size_t code = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint8_t>(sign | code);
}

float scale_of(float amax) { return (amax < 1e-4f ? 1e-4f : amax) / 448.0f; }

// ---- inputs ------------------------------------------------------------------------------------------------

constexpr uint16_t kPaddingPoison = 0x7f7f;  // bf16 3.39e38: would dominate any amax it leaked into

// [rows, k] values with row stride `ld` (padding poisoned). Rows vary in magnitude over 2^-10 .. 2^10; some
// rows are zero, some below the amax floor, some carry huge, tiny, subnormal or negative-zero entries.
std::vector<uint16_t> make_input(int64_t rows, int64_t k, int64_t ld, uint32_t seed) {
  std::vector<uint16_t> x(static_cast<size_t>(std::max<int64_t>(rows, 1) * ld), kPaddingPoison);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-10, 10);
  std::uniform_int_distribution<int64_t> column(0, k - 1);
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* row = x.data() + r * ld;
    const int kind = static_cast<int>(r % 23);
    const float magnitude = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < k; ++c) {
      float v = normal(rng) * magnitude;
      if (kind == 5) v = 0.0f;                             // all-zero row
      if (kind == 7) v = normal(rng) * 1e-6f;              // amax below the 1e-4 floor
      if (kind == 11 && c % 3 == 0) v = -0.0f;             // negative zeros
      if (kind == 13 && c % 5 == 0) v = normal(rng) * 1e-39f;  // bf16 subnormals beside normal values
      row[c] = f32_to_bf16(v);
    }
    if (kind == 17) row[column(rng)] = f32_to_bf16(30000.0f);  // one outlier dominates the group
    if (kind == 19) row[column(rng)] = f32_to_bf16(-3.0e38f);  // near the bf16 maximum
    if (kind == 21) row[column(rng)] = f32_to_bf16(1e-30f);
  }
  return x;
}

// ---- device buffers --------------------------------------------------------------------------------------------

// Collects mismatches; reports the first few.
struct Mismatches {
  int64_t count = 0;
  std::string first;
  void add(const std::string& what) {
    if (count++ < 4) first += "\n    " + what;
  }
};

struct RunOptions {
  CUstream stream = nullptr;
  bool pdl = false;
  int num_sms = 0;
  std::string label() const {
    std::string s;
    if (stream) s += " stream=created";
    if (pdl) s += " pdl=on";
    if (num_sms) s += " num_sms=" + std::to_string(num_sms);
    return s;
  }
};

void apply(const RunOptions& o) {
  kiln::set_pdl(o.pdl);
  kiln::set_num_sms(o.num_sms);
}

void synchronize(const RunOptions& o) {
  const auto& cu = kiln::cuda::DriverApi::get();
  if (o.stream) KILN_CU_CHECK(cu.cuStreamSynchronize(o.stream));
  KILN_CU_CHECK(cu.cuCtxSynchronize());
}

char buf[512];

// A cast's bf16 input [rows, k] with row stride ld (random, on the device), and its two outputs, poisoned.
struct CastBuffers {
  std::vector<uint16_t> host_x;
  DeviceBuffer x, out, scales;
  kiln::TensorView tx, tout;
  CastBuffers(int64_t rows, int64_t k, int64_t ld, int64_t scale_floats, uint32_t seed)
      : host_x(make_input(rows, k, ld, seed)),
        x(host_x.size() * 2),
        out(static_cast<size_t>(rows * k)),
        scales(static_cast<size_t>(scale_floats) * 4),
        tx(kiln::TensorView::contiguous(x.data(), kiln::DType::kBFloat16, {rows, k})),
        tout(kiln::TensorView::contiguous(out.data(), kiln::DType::kFloat8E4M3, {rows, k})) {
    tx.strides = {ld, 1};
    x.upload(host_x.data());
    out.poison();
    scales.poison();
  }
};

// The cast's outputs, read back after the run.
struct CastOutput {
  std::vector<uint8_t> values;
  std::vector<uint32_t> scale_bits;
  CastOutput(const DeviceBuffer& out, const DeviceBuffer& scales) : values(out.bytes), scale_bits(scales.bytes / 4) {
    out.download(values.data());
    scales.download(scale_bits.data());
  }
};

// One scaling group (gr, gc) against the reference: its scale's bits (scale_of the group's amax) and every
// element's e4m3 byte (the element over the scale, rounded). `for_each(visit)` calls visit(x, got byte, row,
// column) for each element of the group.
template <typename ForEach>
void check_group(Mismatches& bad, int64_t gr, int64_t gc, uint32_t got_bits, const ForEach& for_each) {
  float amax = 0;
  for_each([&](float x, uint8_t, int64_t, int64_t) { amax = std::max(amax, std::fabs(x)); });
  const float s = scale_of(amax);
  uint32_t want_bits;
  std::memcpy(&want_bits, &s, 4);
  if (got_bits != want_bits) {
    float gs;
    std::memcpy(&gs, &got_bits, 4);
    std::snprintf(buf, sizeof(buf), "scale (%lld, %lld): got %a (0x%08x), want %a (amax %a)", static_cast<long long>(gr),
                  static_cast<long long>(gc), gs, got_bits, s, amax);
    bad.add(buf);
  }
  for_each([&](float x, uint8_t have, int64_t r, int64_t c) {
    const uint8_t want = f32_to_e4m3(x / s);
    if (have != want) {
      std::snprintf(buf, sizeof(buf), "out (%lld, %lld): got 0x%02x, want 0x%02x (x %a, scale %a, x/scale %a)",
                    static_cast<long long>(r), static_cast<long long>(c), have, want, x, s, x / s);
      bad.add(buf);
    }
  });
}

bool report(const std::string& name, const Mismatches& bad) {
  if (bad.count)
    std::printf("FAIL %s: %lld mismatches%s\n", name.c_str(), static_cast<long long>(bad.count), bad.first.c_str());
  else
    std::printf("PASS %s\n", name.c_str());
  return bad.count == 0;
}

// ---- per token ---------------------------------------------------------------------------------------------

bool test_per_token(int64_t m, int64_t k, int64_t ld, const RunOptions& o, uint32_t seed) {
  const int64_t groups = k / 128, aligned_m = kiln::get_tma_aligned_size(m, 4);
  std::snprintf(buf, sizeof(buf), "per_token_cast_to_fp8 m=%lld k=%lld row_stride=%lld%s", static_cast<long long>(m),
                static_cast<long long>(k), static_cast<long long>(ld), o.label().c_str());
  const std::string name = buf;
  const CastBuffers b(m, k, ld, kiln::per_token_scales_storage(m, k), seed);
  const std::vector<uint16_t>& host_x = b.host_x;
  kiln::TensorView tscales = kiln::TensorView::contiguous(b.scales.data(), kiln::DType::kFloat32, {m, groups});
  tscales.strides = {1, aligned_m};
  apply(o);
  kiln::per_token_cast_to_fp8(b.tx, b.tout, tscales, o.stream);
  synchronize(o);

  const CastOutput got(b.out, b.scales);
  Mismatches bad;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t g = 0; g < groups; ++g)
      check_group(bad, r, g, got.scale_bits[static_cast<size_t>(g * aligned_m + r)], [&](const auto& visit) {
        for (int64_t c = g * 128; c < (g + 1) * 128; ++c)
          visit(bf16_to_f32(host_x[static_cast<size_t>(r * ld + c)]), got.values[static_cast<size_t>(r * k + c)], r, c);
      });
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = m; r < aligned_m; ++r)
      if (got.scale_bits[static_cast<size_t>(g * aligned_m + r)] != 0xffffffffu) {
        std::snprintf(buf, sizeof(buf), "TMA padding of scales (%lld, %lld) was written", static_cast<long long>(r),
                      static_cast<long long>(g));
        bad.add(buf);
      }
  return report(name, bad);
}

// ---- per block ---------------------------------------------------------------------------------------------

bool test_per_block(int64_t n, int64_t k, int64_t ld, const RunOptions& o, uint32_t seed) {
  const int64_t row_blocks = kiln::ceil_div(n, 128), col_blocks = k / 128;
  std::snprintf(buf, sizeof(buf), "per_block_cast_to_fp8 n=%lld k=%lld row_stride=%lld%s", static_cast<long long>(n),
                static_cast<long long>(k), static_cast<long long>(ld), o.label().c_str());
  const std::string name = buf;
  const CastBuffers b(n, k, ld, row_blocks * col_blocks, seed);
  const std::vector<uint16_t>& host_x = b.host_x;
  const kiln::TensorView tscales =
      kiln::TensorView::contiguous(b.scales.data(), kiln::DType::kFloat32, {row_blocks, col_blocks});
  apply(o);
  kiln::per_block_cast_to_fp8(b.tx, b.tout, tscales, o.stream);
  synchronize(o);

  const CastOutput got(b.out, b.scales);
  Mismatches bad;
  for (int64_t br = 0; br < row_blocks; ++br)
    for (int64_t bc = 0; bc < col_blocks; ++bc)
      // Rows beyond n count as zeros: they cannot raise the amax, so the block is its rows below n.
      check_group(bad, br, bc, got.scale_bits[static_cast<size_t>(br * col_blocks + bc)], [&](const auto& visit) {
        for (int64_t r = br * 128; r < std::min(n, (br + 1) * 128); ++r)
          for (int64_t c = bc * 128; c < (bc + 1) * 128; ++c)
            visit(bf16_to_f32(host_x[static_cast<size_t>(r * ld + c)]), got.values[static_cast<size_t>(r * k + c)], r, c);
      });
  return report(name, bad);
}

// ---- scales to the MN-major layout -------------------------------------------------------------------------

// Random scales [rows, cols] with row stride in_stride, converted into out (column stride out_stride): every
// element must arrive bit for bit, and the padding rows of out (rows..out_stride - 1) stay poisoned.
bool test_mn_major(int64_t rows, int64_t cols, int64_t in_stride, int64_t out_stride, const RunOptions& o,
                   uint32_t seed) {
  std::snprintf(buf, sizeof(buf), "to_mn_major_scales [%lld, %lld] row_stride=%lld out_stride=%lld%s",
                static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(in_stride),
                static_cast<long long>(out_stride), o.label().c_str());
  const std::string name = buf;
  std::vector<uint32_t> host(static_cast<size_t>(std::max<int64_t>(rows, 1) * in_stride));
  uint32_t state = seed * 2654435761u + 1;
  for (auto& v : host) {
    state = state * 1664525u + 1013904223u;
    v = (state >> 9) | 0x3c000000u;  // positive, normal floats
  }
  DeviceBuffer in(host.size() * 4), out(static_cast<size_t>(cols * out_stride) * 4);
  in.upload(host.data());
  out.poison();
  kiln::TensorView tin = kiln::TensorView::contiguous(in.data(), kiln::DType::kFloat32, {rows, cols});
  tin.strides = {in_stride, 1};
  kiln::TensorView tout = kiln::TensorView::contiguous(out.data(), kiln::DType::kFloat32, {rows, cols});
  tout.strides = {1, out_stride};
  apply(o);
  kiln::to_mn_major_scales(tin, tout, o.stream);
  synchronize(o);
  std::vector<uint32_t> got(out.bytes / 4);
  out.download(got.data());
  Mismatches bad;
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < out_stride; ++r) {
      const uint32_t have = got[static_cast<size_t>(c * out_stride + r)];
      const uint32_t want = r < rows ? host[static_cast<size_t>(r * in_stride + c)] : 0xffffffffu;
      if (have != want) {
        std::snprintf(buf, sizeof(buf), "%s (%lld, %lld): got 0x%08x, want 0x%08x", r < rows ? "out" : "padding",
                      static_cast<long long>(r), static_cast<long long>(c), have, want);
        bad.add(buf);
      }
    }
  return report(name, bad);
}

// The reference's own rounding, on values whose e4m3 encoding is known.
bool test_reference() {
  struct Case {
    float in;
    uint8_t out;
  } cases[] = {{0.0f, 0x00},   {-0.0f, 0x80},     {448.0f, 0x7e},   {-448.0f, 0xfe},  {460.0f, 0x7e},
               {1e9f, 0x7e},   {1.0f, 0x38},      {1.0625f, 0x38},  {1.1875f, 0x3a},  {0x1p-9f, 0x01},
               {0x1p-10f, 0x00}, {0x1.8p-10f, 0x01}, {0x1.8p-9f, 0x02}, {0x1p-6f, 0x08}, {-2.5f, 0xc2}};
  bool ok = true;
  for (const auto& c : cases)
    if (f32_to_e4m3(c.in) != c.out) {
      std::printf("FAIL reference e4m3(%a) = 0x%02x, want 0x%02x\n", c.in, f32_to_e4m3(c.in), c.out);
      ok = false;
    }
  if (ok) std::printf("PASS reference e4m3 rounding (%zu cases)\n", std::size(cases));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const bool small = argc > 1 && std::string(argv[1]) == "--small";
  if (!kiln::cuda::DriverApi::available() || kiln::cuda::device_count() == 0) {
    std::printf("SKIP quantize_test: no CUDA driver or GPU on this machine\n");
    return 77;
  }
  int failures = 0;
  auto check = [&](bool ok) { failures += ok ? 0 : 1; };
  try {
    kiln::cuda::current_device();  // make device 0's primary context current for the allocations
    check(test_reference());
    const RunOptions plain;
    uint32_t seed = 1;
    // Per token: ragged m, k in {128, 512, 7168}, padded rows.
    for (int64_t m : {1, 3, 4097})
      for (int64_t k : {128, 512, 7168})
        if (!small || m < 1000) check(test_per_token(m, k, k, plain, seed++));
    check(test_per_token(64, 7168, 7168 + 64, plain, seed++));
    check(test_per_token(333, 512, 520, plain, seed++));
    check(test_per_token(2, 128, 4096, plain, seed++));
    // Per block: ragged n, padded rows.
    for (int64_t n : {1, 127, 128, 129, 300})
      for (int64_t k : {128, 512, 7168}) check(test_per_block(n, k, k, plain, seed++));
    if (!small) check(test_per_block(4097, 7168, 7168, plain, seed++));
    check(test_per_block(250, 1024, 1024 + 8, plain, seed++));

    // Scales to the MN-major layout: the GEMM's shapes, ragged edges of the 32 x 32 tiles, padded rows of
    // sf and a column stride of out beyond the TMA alignment.
    check(test_mn_major(4096, 56, 56, 4096, plain, seed++));
    check(test_mn_major(37, 56, 60, 40, plain, seed++));
    check(test_mn_major(1, 1, 1, 4, plain, seed++));
    check(test_mn_major(33, 130, 130, 64, plain, seed++));
    check(test_mn_major(1000, 12, 16, 1000, plain, seed++));

    // Launch variants: a created stream, PDL, and a grid of 3 SMs so every thread loops many times (and the
    // per-block kernel's double-buffered reduction is exercised).
    CUstream stream = nullptr;
    KILN_CU_CHECK(kiln::cuda::DriverApi::get().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    RunOptions on_stream;
    on_stream.stream = stream;
    RunOptions pdl;
    pdl.pdl = true;
    RunOptions few_sms;
    few_sms.num_sms = 3;
    for (const RunOptions& o : {on_stream, pdl, few_sms}) {
      if (!small) check(test_per_token(4097, 7168, 7168, o, seed++));
      check(test_per_token(5, 512, 512, o, seed++));
      check(test_per_block(1000, 2048, 2048, o, seed++));
      check(test_mn_major(4097, 56, 56, 4100, o, seed++));
    }
    kiln::set_pdl(false);
    kiln::set_num_sms(0);
    (void)kiln::cuda::DriverApi::get().cuStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::printf("FAIL quantize_test: %s\n", e.what());
    return 1;
  }
  std::printf("%s: %d failed\n", failures ? "FAIL quantize_test" : "PASS quantize_test", failures);
  return failures ? 1 : 0;
}
