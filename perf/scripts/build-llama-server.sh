#!/usr/bin/env bash
# Builds llama.cpp's llama-server for CPU into a cache directory, from the
# llama.cpp source that the npm package node-llama-cpp ships as a git bundle
# (llama/gitRelease.bundle in its tarball). `make llama-server` runs it.
#
#   build-llama-server.sh VERSION CACHE_DIR [JOBS]
#
# VERSION is node-llama-cpp's (3.21.1); the binary lands in
# CACHE_DIR/bin/llama-server and the bundle's commit in CACHE_DIR/COMMIT.
# When CACHE_DIR/bin/llama-server is there already the script does nothing.
#
# What it downloads: the node-llama-cpp tarball, with `npm pack` (which runs no
# install script). Nothing else: the build is CPU only and portable
# (GGML_NATIVE=OFF), shared libraries, tests, examples, the unified app, the
# web UI and its prebuilt download (LLAMA_USE_PREBUILT_UI) are off, and so
# is HTTPS (LLAMA_OPENSSL; this llama.cpp has no LLAMA_CURL any more). It
# needs npm, git, cmake and a C++17 compiler. "Portable" is ggml's meaning
# of GGML_NATIVE=OFF on x86-64: AVX2, FMA, F16C and BMI2 (any x86 CPU since
# 2013), not -march=native.
set -euo pipefail

version=${1:?usage: build-llama-server.sh VERSION CACHE_DIR [JOBS]}
cache=${2:?usage: build-llama-server.sh VERSION CACHE_DIR [JOBS]}
jobs=${3:-2}
bin="$cache/bin/llama-server"

if [ -x "$bin" ]; then
  echo "llama-server: cached at $bin ($(cat "$cache/COMMIT" 2>/dev/null || echo 'commit unknown'))"
  exit 0
fi
for tool in npm git cmake c++; do
  command -v "$tool" >/dev/null 2>&1 || { echo "llama-server: $tool is missing (needs npm, git, cmake, g++)" >&2; exit 1; }
done

mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
bin="$cache/bin/llama-server"
# One build per cache directory at a time: a second make waits for the first
# and then finds the binary.
exec 9>"$cache/.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
  if [ -x "$bin" ]; then echo "llama-server: built meanwhile at $bin"; exit 0; fi
fi

work=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)

echo "llama-server: fetching node-llama-cpp@$version (npm pack, no scripts)"
(cd "$work" && npm pack --silent --ignore-scripts "node-llama-cpp@$version" >/dev/null)
tar -xzf "$work/node-llama-cpp-$version.tgz" -C "$work" package/llama/gitRelease.bundle
git clone --quiet "$work/package/llama/gitRelease.bundle" "$work/src" 2>/dev/null
commit=$(git -C "$work/src" rev-parse HEAD)
echo "llama-server: llama.cpp $commit; building with $jobs jobs"

cmake -S "$work/src" -B "$work/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF \
  -DGGML_CCACHE=OFF \
  >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j "$jobs" >"$work/build.log" 2>&1 ||
  { tail -50 "$work/build.log" >&2; exit 1; }

mkdir -p "$cache/bin"
install -m 0755 "$work/build/bin/llama-server" "$bin.tmp"
echo "$commit" >"$cache/COMMIT"
mv "$bin.tmp" "$bin"
echo "llama-server: built $bin in $(($(date +%s) - start)) s"
