#!/usr/bin/env bash
# The installed CMake package and add_subdirectory, as a consumer sees them:
#  1. `cmake --install` the build tree into a fresh prefix; configure, build
#     and run examples/cpp_consumer against it (find_package(meshsplit),
#     meshsplit::meshsplit), and run the installed `meshsplit --version`;
#  2. configure an outer project that add_subdirectory()s the source tree
#     without GoogleTest and with its own release flags, which must survive.
# Usage: consumer_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/meshsplit/meshsplit.h"
test -f "$work/prefix/lib/cmake/meshsplit/meshsplitConfig.cmake"
version=$("$work/prefix/bin/meshsplit" --version)
echo "$version"
[[ $version =~ ^meshsplit\ [0-9]+\.[0-9]+\.[0-9]+$ ]]

cmake -S "$src/examples/cpp_consumer" -B "$work/consumer" -G Ninja \
      -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release > "$work/consumer.log"
cmake --build "$work/consumer" >> "$work/consumer.log"
"$work/consumer/cpp_consumer"

mkdir -p "$work/outer"
cat > "$work/outer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(outer CXX C)
add_subdirectory("$src" meshsplit)
if(NOT TARGET meshsplit::meshsplit)
  message(FATAL_ERROR "add_subdirectory(meshsplit) gave no meshsplit::meshsplit")
endif()
if(TARGET gtest OR TARGET GTest::gtest)
  message(FATAL_ERROR "a subproject build must not need GoogleTest")
endif()
file(WRITE "\${CMAKE_BINARY_DIR}/flags.txt" "\${CMAKE_CXX_FLAGS_RELEASE}")
CMAKE
cmake -S "$work/outer" -B "$work/outer/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DOUTER" > "$work/outer.log"
flags=$(cat "$work/outer/build/flags.txt")
if [[ $flags != "-O1 -DOUTER" ]]; then
  echo "error: the outer project's CMAKE_CXX_FLAGS_RELEASE became '$flags'" >&2
  exit 1
fi
echo "add_subdirectory: configured, meshsplit::meshsplit defined, flags kept"
