#!/usr/bin/env bash
# Installs what the build and the tests need, only what is missing (idempotent, quiet when all is there).
# Debian packages through apt-get, Python test tools through pip. The CUDA toolkit (nvcc, NVRTC, headers)
# is expected on the machine; we say so clearly if it is not.
set -euo pipefail

# libhiredis-dev: the Redis remote cache tier (optional at build time); redis-server: its tests.
debian_packages=(cmake ninja-build g++ libssl-dev nlohmann-json3-dev libcli11-dev libgtest-dev libhiredis-dev redis-server)
python_packages=(pytest)

missing=()
for p in "${debian_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

py_missing=()
for p in "${python_packages[@]}"; do
  python3 -c "import $p" >/dev/null 2>&1 || py_missing+=("$p")
done
if ((${#py_missing[@]})); then
  echo "install-deps: installing Python packages: ${py_missing[*]}"
  python3 -m pip install -q "${py_missing[@]}"
fi

if ! command -v nvcc >/dev/null 2>&1 && [[ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]]; then
  echo "install-deps: the CUDA toolkit (12.8 or newer, with nvcc and NVRTC) is required but was not found." >&2
  echo "install-deps: install it, or set CUDA_HOME to its root (for example /usr/local/cuda)." >&2
  exit 1
fi
