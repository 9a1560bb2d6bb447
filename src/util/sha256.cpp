#include "util/sha256.hpp"

// OpenSSL's low-level SHA-256 functions, not EVP: in OpenSSL 3 the first EVP digest starts the provider
// machinery, 0.4 ms on a CI machine and about 1 ms on the H200's host, paid by every warm process before its
// first kernel. The low-level functions are deprecated but present throughout OpenSSL 3, use the same
// assembly (SHA-NI, AVX2), and start in microseconds.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include "kiln/error.hpp"

namespace kiln::util {

struct Sha256::State {
  SHA256_CTX ctx;
  bool finished = false;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  if (SHA256_Init(&state_->ctx) != 1) throw Error(ErrorKind::kInternal, "OpenSSL: cannot initialise SHA-256");
}

Sha256::~Sha256() = default;

Sha256& Sha256::update(std::string_view bytes) {
  SHA256_Update(&state_->ctx, bytes.data(), bytes.size());
  return *this;
}

Sha256& Sha256::update(std::span<const uint8_t> bytes) {
  SHA256_Update(&state_->ctx, bytes.data(), bytes.size());
  return *this;
}

std::array<uint8_t, 32> Sha256::digest() {
  if (state_->finished) throw Error(ErrorKind::kInternal, "Sha256::digest called twice");
  state_->finished = true;
  std::array<uint8_t, 32> out{};
  SHA256_Final(out.data(), &state_->ctx);
  return out;
}

std::string Sha256::hex_digest() {
  auto d = digest();
  return to_hex(d);
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(bytes.size() * 2, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

std::string sha256_hex(std::string_view bytes) { return Sha256().update(bytes).hex_digest(); }

}  // namespace kiln::util
