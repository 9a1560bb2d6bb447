// SHA-256 through OpenSSL's libcrypto: the cache key and the entry checksum.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace kiln::util {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  Sha256& update(std::string_view bytes);
  Sha256& update(std::span<const uint8_t> bytes);
  std::array<uint8_t, 32> digest();  // finishes the hash; call once
  std::string hex_digest();          // finishes the hash; 64 lowercase hex characters

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string sha256_hex(std::string_view bytes);
std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace kiln::util
