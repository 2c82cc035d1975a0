#!/usr/bin/env bash
# Installs the Debian 12 packages meshsplit needs, when any is missing.
# Run as root (it calls apt-get). Safe to run repeatedly.
set -euo pipefail
pkgs=(g++ cmake ninja-build python3 libgtest-dev libgmock-dev libbenchmark-dev
      libopenblas-dev nlohmann-json3-dev libcli11-dev llvm-14-tools ccache
      libonnx-dev libprotobuf-dev protobuf-compiler
      openmpi-bin libopenmpi-dev
      python3-dev python3-pybind11 pybind11-dev python3-numpy python3-pytest  # python/
      coinor-libcbc-dev  # autoshard --solver ilp/lp (CBC, CLP)
      clang-15 libfuzzer-15-dev  # the asan-ubsan preset: sanitizers + libFuzzer targets
      llvm-15  # llvm-symbolizer-15: file:line in sanitizer reports (clang-15 only recommends it)
      chromium)  # headless browser test of `meshsplit report --html`
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}" >&2
  if [ "$(id -u)" -ne 0 ]; then
    echo "install_deps: error: need root to apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
