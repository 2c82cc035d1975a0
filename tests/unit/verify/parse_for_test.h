// Parsing helper shared by the spmd unit tests: a module from HLO text, with
// a parse error reported as a test failure (and nullptr) rather than a crash.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "text/parser.h"

namespace meshsplit::spmd_test {

inline std::unique_ptr<Module> Parse(const std::string& text) {
  auto m = ParseModuleText(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

}  // namespace meshsplit::spmd_test
