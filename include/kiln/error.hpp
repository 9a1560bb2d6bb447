// Errors thrown by the kiln library. Every message names what was wrong, what was expected and what was
// given; bindings map ErrorKind to their own exception types (Python: TypeError, ValueError, RuntimeError).
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

enum class ErrorKind {
  kTypeError,        // wrong dtype or type of an argument
  kValueError,       // wrong shape, stride, alignment, range, layout or device of an argument
  kConfigError,      // a bad DG_JIT_* value or another invalid setting
  kCompileError,     // the device compiler failed; the message carries the command and the full log
  kCudaError,        // a CUDA driver or runtime call failed, or a needed library (libcuda, NVRTC) is missing
  kCacheError,       // the on-disk cache cannot be used in the way asked (for example `kiln cache clear` fails)
  kCaptureError,     // a compile was needed while the stream is being captured into a CUDA graph
  kNotFound,         // an unknown operation, kernel, or (in strict use) a kernel missing from the cache
  kInternal,         // a broken invariant inside kiln: a bug to report
};

const char* to_string(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// A failed compile. what() holds a summary, the command and the full log; the parts are kept apart too.
class CompileError : public Error {
 public:
  CompileError(const std::string& message, std::string command, std::string log)
      : Error(ErrorKind::kCompileError, message), command_(std::move(command)), log_(std::move(log)) {}
  const std::string& command() const noexcept { return command_; }
  const std::string& log() const noexcept { return log_; }

 private:
  std::string command_;
  std::string log_;
};

}  // namespace kiln
