// Host-side references the FP8 GEMM GPU tests share: counter-based random inputs, a parallel loop for the
// float64 references, the e4m3 codec (OCP FN: bias 7, no infinities, 0x7f/0xff NaN, max 448), float64 dot
// products, bf16 decoding and DeepGEMM's calc_diff.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::gpu_test {

// The splitmix64 finaliser: inputs are a function of (seed, position), so any row can be regenerated.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in [-1, 1).
inline float uniform(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }
// Magnitudes vary by powers of two (2^-4 .. 2^4) between rows / blocks so the scales differ.
inline float magnitude(uint64_t h) { return std::ldexp(1.0f, static_cast<int>(h % 9) - 4); }

// body(begin, end) over [0, count) in contiguous chunks on up to 32 threads (the references are float64).
inline void parallel_for(size_t count, const std::function<void(size_t, size_t)>& body) {
  const size_t threads = std::max<size_t>(1, std::min<size_t>(std::thread::hardware_concurrency(), 32));
  const size_t chunk = std::max<size_t>(1, (count + threads - 1) / threads);
  std::vector<std::thread> pool;
  for (size_t begin = 0; begin < count; begin += chunk) pool.emplace_back(body, begin, std::min(count, begin + chunk));
  for (auto& t : pool) t.join();
}

inline double e4m3_to_double(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  if (exp == 15 && man == 7) return std::nan("");
  const double v = exp == 0 ? std::ldexp(man, -9)  // subnormal: man * 2^-6 / 8
                            : std::ldexp(1.0 + man / 8.0, exp - 7);
  return sign ? -v : v;
}

// Round to nearest even, saturating at +-448 (what cvt.rn.satfinite does and what quantisers rely on).
inline uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < std::ldexp(1.0f, -6)) {
    // Subnormal range: multiples of 2^-9; 8 * 2^-9 rounds up to the smallest normal, whose code is 0x08.
    const float q = std::nearbyint(a * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
  }
  int e2 = 0;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int exp = e2 - 1;    // a = 1.m * 2^exp, exp in [-6, 8]
  float q = std::nearbyint((std::ldexp(a, -exp) - 1.0f) * 8.0f);  // 0..8
  if (q >= 8.0f) {
    q = 0.0f;
    ++exp;
  }
  if (exp > 8 || (exp == 8 && q > 6.0f)) return sign | 0x7e;
  return static_cast<uint8_t>(sign | ((exp + 7) << 3) | static_cast<int>(q));
}

// The 256 e4m3 codes decoded once.
inline const double* e4m3_lut() {
  static double lut[256];
  static std::once_flag once;
  std::call_once(once, [] {
    for (int i = 0; i < 256; ++i) lut[i] = e4m3_to_double(static_cast<uint8_t>(i));
  });
  return lut;
}

// A float64 dot product with four partial sums (the reference's inner loop).
inline double dot(const double* x, const double* y, size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i] * y[i];
    s1 += x[i + 1] * y[i + 1];
    s2 += x[i + 2] * y[i + 2];
    s3 += x[i + 3] * y[i + 3];
  }
  for (; i < n; ++i) s0 += x[i] * y[i];
  return (s0 + s1) + (s2 + s3);
}

inline double bf16_to_double(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// DeepGEMM's calc_diff: 1 - 2 sum(xy) / sum(x^2 + y^2); NaN-propagating.
inline double calc_diff(const std::vector<double>& x, const std::vector<double>& y) {
  double xy = 0, sq = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += x[i] * y[i];
    sq += x[i] * x[i] + y[i] * y[i];
  }
  return sq == 0 ? 0.0 : 1.0 - 2.0 * xy / sq;
}

}  // namespace kiln::gpu_test
