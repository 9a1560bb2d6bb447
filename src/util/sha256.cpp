#include "util/sha256.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "kiln/error.hpp"

namespace kiln::util {

namespace {

// The digest implementation, fetched once. Initialising libcrypto without reading openssl.cnf saves about a
// millisecond of start-up, which a warm process would otherwise pay before its first kernel.
const EVP_MD* sha256_md() {
  static const EVP_MD* md = [] {
    OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr);
    const EVP_MD* fetched = EVP_MD_fetch(nullptr, "SHA256", nullptr);
    return fetched ? fetched : EVP_sha256();
  }();
  return md;
}

}  // namespace

struct Sha256::State {
  EVP_MD_CTX* ctx = nullptr;
  bool finished = false;
};

Sha256::Sha256() : state_(std::make_unique<State>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (!state_->ctx || EVP_DigestInit_ex(state_->ctx, sha256_md(), nullptr) != 1)
    throw Error(ErrorKind::kInternal, "OpenSSL: cannot initialise a SHA-256 context");
}

Sha256::~Sha256() { EVP_MD_CTX_free(state_->ctx); }

Sha256& Sha256::update(std::string_view bytes) {
  EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
  return *this;
}

Sha256& Sha256::update(std::span<const uint8_t> bytes) {
  EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
  return *this;
}

std::array<uint8_t, 32> Sha256::digest() {
  if (state_->finished) throw Error(ErrorKind::kInternal, "Sha256::digest called twice");
  state_->finished = true;
  std::array<uint8_t, 32> out{};
  unsigned int len = 0;
  EVP_DigestFinal_ex(state_->ctx, out.data(), &len);
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
