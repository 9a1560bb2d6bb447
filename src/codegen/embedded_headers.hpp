// The device headers compiled into the library (see cmake/embed_headers.cmake). NVRTC takes them from memory;
// NVCC reads a copy materialised once under the cache directory. The cache key hashes their content.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kiln::codegen {

struct EmbeddedHeader {
  std::string_view path;     // relative include path, e.g. "kiln/kernels/quantize.cuh"
  std::string_view content;
  std::string_view sha256;   // of content, computed at build time so a warm process hashes no header text
};

// Every embedded header, sorted by path.
std::span<const EmbeddedHeader> embedded_headers();

// The header with that include path, or nullptr.
const EmbeddedHeader* find_embedded_header(std::string_view path);

// SHA-256 (hex) over the path and content digest of every kiln header that `source` includes, transitively
// ("kiln/..." includes only; anything else is part of the toolchain and covered by the compiler identity).
// Computed from memory; no file I/O.
std::string included_headers_digest(std::string_view source);

// SHA-256 (hex) over all embedded headers: names the directory NVCC's copy is materialised in.
const std::string& all_headers_digest();

}  // namespace kiln::codegen
