// Helpers for the interpreter tests: parse HLO text, run it, build and read
// literals. Expected values in the tests are computed independently (by hand
// or with NumPy, as noted at each test), never by the interpreter.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ir/literal.h"
#include "runtime/interpreter.h"
#include "text/parser.h"

namespace meshsplit::rttest {

// Parses `hlo` and evaluates its entry on `args`; fails the test on error.
inline Literal RunHlo(const std::string& hlo, std::vector<Literal> args = {},
                   const EvalContext& ctx = {}) {
  auto module = ParseModuleText(hlo);
  EXPECT_TRUE(module.ok()) << module.status().ToString();
  if (!module.ok()) return Literal();
  auto result = EvaluateModule(**module, std::move(args), ctx);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok()) return Literal();
  return std::move(result).value();
}

// Like Run but returns the status (for error tests).
inline Status RunStatus(const std::string& hlo, std::vector<Literal> args = {}) {
  auto module = ParseModuleText(hlo);
  if (!module.ok()) return module.status();
  auto result = EvaluateModule(**module, std::move(args));
  return result.status();
}

// An array literal of type `t` and dims holding `values` (converted).
inline Literal Make(PrimitiveType t, std::vector<int64_t> dims, const std::vector<double>& values) {
  Literal l(Shape(t, std::move(dims)));
  EXPECT_EQ(static_cast<int64_t>(values.size()), l.element_count());
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < l.element_count(); ++i)
    l.SetDouble(static_cast<int64_t>(i), values[i]);
  return l;
}
inline Literal F32(std::vector<int64_t> dims, const std::vector<double>& v) {
  return Make(PrimitiveType::F32, std::move(dims), v);
}
inline Literal S32(std::vector<int64_t> dims, const std::vector<double>& v) {
  return Make(PrimitiveType::S32, std::move(dims), v);
}

inline std::vector<double> Values(const Literal& l) {
  std::vector<double> v;
  if (!l.shape().IsArray()) return v;
  for (int64_t i = 0; i < l.element_count(); ++i) v.push_back(l.GetDouble(i));
  return v;
}

inline std::vector<int64_t> Ints(const Literal& l) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < l.element_count(); ++i) v.push_back(l.GetInt(i));
  return v;
}

// Elementwise comparison with a relative+absolute tolerance; NaN matches NaN.
inline void ExpectNear(const Literal& got, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<double> g = Values(got);
  ASSERT_EQ(g.size(), want.size()) << got.shape().ToString();
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(g[i])) << "at " << i;
      continue;
    }
    if (std::isinf(want[i])) {
      EXPECT_EQ(g[i], want[i]) << "at " << i;
      continue;
    }
    EXPECT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << "at " << i;
  }
}

// Deterministic small-integer test data: ((i * 7 + seed) % 11) - 5.
inline std::vector<double> Pattern(int64_t n, int seed = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(((i * 7 + seed) % 11) - 5);
  return v;
}

}  // namespace meshsplit::rttest
