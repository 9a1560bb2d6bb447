#include "kiln/error.hpp"

namespace kiln {

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kTypeError: return "TypeError";
    case ErrorKind::kValueError: return "ValueError";
    case ErrorKind::kConfigError: return "ConfigError";
    case ErrorKind::kCompileError: return "CompileError";
    case ErrorKind::kCudaError: return "CudaError";
    case ErrorKind::kCacheError: return "CacheError";
    case ErrorKind::kCaptureError: return "CaptureError";
    case ErrorKind::kNotFound: return "NotFound";
    case ErrorKind::kInternal: return "InternalError";
  }
  return "Error";
}

}  // namespace kiln
