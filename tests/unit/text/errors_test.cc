// Parse errors: each bad input gives one diagnostic with the right message
// and line:column, and no input (truncated, mutated, deeply nested, huge
// numbers) crashes or hangs the parser.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "../shared_data.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

// "LINE:COL: error: message" of parsing `text` (first line of the
// diagnostic, without the file name).
std::string ErrorOf(const std::string& text) {
  auto m = ParseModuleText(text);
  if (m.ok()) return "<parsed>";
  std::string s = m.status().ToString();
  s = s.substr(0, s.find('\n'));
  const std::string prefix = "<string>:";
  if (s.rfind(prefix, 0) == 0) s = s.substr(prefix.size());
  return s;
}

std::string Entry(const std::string& body) {
  return "HloModule m\nENTRY e {\n" + body + "}\n";
}

TEST(ParseErrorTest, UnknownOpcode) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT a = f32[2] addd(p, p)\n")),
            "4:19: error: unknown opcode 'addd'");
}

TEST(ParseErrorTest, MissingCloseParen) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, p\n")),
            "5:1: error: expected ')' after operands, found '}'");
}

TEST(ParseErrorTest, UndefinedValue) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, %x)\n")),
            "4:26: error: use of undefined value '%x'");
  // A use before its definition is undefined too (XLA requires def before use).
  EXPECT_EQ(ErrorOf(Entry("  a = f32[2] negate(p)\n  p = f32[2] parameter(0)\n")),
            "3:21: error: use of undefined value '%p'");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  a = f32[2] negate(p), "
                          "control-predecessors={q}\n")),
            "4:47: error: use of undefined value '%q'");
}

TEST(ParseErrorTest, UnknownElementType) {
  EXPECT_EQ(ErrorOf(Entry("  p = f33[2] parameter(0)\n")),
            "3:7: error: unknown element type 'f33'");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  n = f32[2] negate(f23[2] p)\n")),
            "4:21: error: unknown element type 'f23'");
}

TEST(ParseErrorTest, TruncatedFile) {
  EXPECT_EQ(ErrorOf("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p"),
            "4:24: error: expected ')' after operands, found end of file");
  EXPECT_EQ(ErrorOf("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"),
            "4:1: error: unexpected end of file in computation 'e', expected '}'");
  EXPECT_EQ(ErrorOf("HloModule m"),
            "1:12: error: expected a computation after the HloModule header, found end of file");
  EXPECT_EQ(ErrorOf(""), "1:1: error: expected 'HloModule' at the start of the module, found end of file");
  EXPECT_EQ(ErrorOf("HloModule m\nENTRY e {\n  p = f32[2] parameter(0) /* open\n}\n"),
            "3:27: error: unterminated '/*' comment");
}

TEST(ParseErrorTest, OperandCountOfFixedArityOpcodes) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT a = f32[2] add(p, p, p)\n")),
            "4:19: error: 'add' expects 2 operands, got 3");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT a = f32[2] negate()\n")),
            "4:19: error: 'negate' expects 1 operand, got 0");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  z = f32[] constant(0)\n"
                          "  ROOT r = f32[] reduce(p, z, p)\n")),
            "5:18: error: 'reduce' expects an even number of operands (inputs, then as many "
            "init values), got 3");
}

TEST(ParseErrorTest, Redefinitions) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  p = f32[2] parameter(1)\n")),
            "4:3: error: redefinition of 'p' in computation 'e'");
  EXPECT_EQ(ErrorOf("HloModule m\nc {\n  p = f32[] parameter(0)\n}\nc {\n  q = f32[] parameter(0)\n}\n"),
            "5:1: error: redefinition of computation 'c'");
  EXPECT_EQ(ErrorOf("HloModule m\nENTRY a {\n  p = f32[] parameter(0)\n}\nENTRY b {\n"
                    "  p = f32[] parameter(0)\n}\n"),
            "5:1: error: more than one ENTRY computation (the first is 'a')");
  EXPECT_EQ(ErrorOf(Entry("  ROOT p = f32[2] parameter(0)\n  ROOT q = f32[2] negate(p)\n")),
            "4:3: error: computation 'e' has more than one ROOT (the first is 'p')");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  q = f32[2] parameter(0)\n")),
            "4:24: error: parameter number 0 is already used by 'p'");
}

TEST(ParseErrorTest, BadNumbers) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[99999999999999999999] parameter(0)\n")),
            "3:11: error: integer 99999999999999999999 is out of range");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[4611686018427387904,4] parameter(0)\n")),
            "3:7: error: shape f32[4611686018427387904,4] has more than 2^63 bytes");
  // 2^61 elements fit in int64, their 2^63 bytes do not.
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2305843009213693952] parameter(0)\n")),
            "3:7: error: shape f32[2305843009213693952] has more than 2^63 bytes");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[-2] parameter(0)\n")),
            "3:11: error: dimension size must not be negative, got -2");
  EXPECT_EQ(ErrorOf(Entry("  p = s8[] constant(300)\n")),
            "3:21: error: value 300 is out of range for s8");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[] constant(1e99)\n")),
            "3:22: error: value 1e99 is out of range for f32");
  EXPECT_EQ(ErrorOf(Entry("  p = s32[] constant(1.5)\n")),
            "3:22: error: expected an integer, found '1.5'");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(99999999)\n")),
            "3:24: error: parameter number 99999999 is out of range");
}

TEST(ParseErrorTest, BadConstants) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[100000000000] constant({1})\n")),
            "3:34: error: constant of shape f32[100000000000] has more elements than the "
            "text that follows");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] constant({1, 2, 3})\n")),
            "3:30: error: too many elements in dimension 0 of the constant (expected 2)");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2,2] constant({{1, 2}, {3}})\n")),
            "3:36: error: expected 2 elements in dimension 1 of the constant, found 1");
  EXPECT_EQ(ErrorOf(Entry("  p = pred[] constant(maybe)\n")),
            "3:23: error: expected 'true' or 'false', found 'maybe'");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[100000000000] constant(0)\n")),
            "3:34: error: constant of shape f32[100000000000] is too large");
}

TEST(ParseErrorTest, CalledComputations) {
  EXPECT_EQ(ErrorOf(Entry("  p = (f32[]) parameter(0)\n  ROOT w = (f32[]) while(p), body=b\n")),
            "4:20: error: 'while' requires both condition= and body=");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
                          "  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=nope\n")),
            "5:57: error: use of undefined computation 'nope'");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[4] parameter(0)\n  z = f32[] constant(0)\n"
                          "  ROOT r = f32[] reduce(p, z), dimensions={0}\n")),
            "5:18: error: 'reduce' requires to_apply=");
  EXPECT_EQ(ErrorOf("HloModule m\nc {\n  p = f32[] parameter(0)\n  ROOT r = f32[] call(p), "
                    "to_apply=c\n}\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] "
                    "call(p), to_apply=c\n}\n"),
            "4:8: error: call cycle: 'r' in 'c' calls computation 'c', which is already on "
            "the call stack");
}

TEST(ParseErrorTest, BadAttributes) {
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT c = f32[2] broadcast(p), dimensions={0,}\n")),
            "4:47: error: expected integer, found '}'");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT c = f32[2] convolution(p, p), "
                          "dim_labels=b0f_0io->bxf\n")),
            "4:49: error: bad output labels 'bxf' in dim_labels");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT c = pred[2] compare(p, p), direction=XX\n")),
            "4:45: error: unknown comparison direction 'XX' (expected EQ, NE, GE, GT, LE or LT)");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p), foo=1, foo=2\n")),
            "4:37: error: attribute 'foo' given twice");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0), metadata={op_name=\"x}\n")),
            "3:37: error: unbalanced brackets or quotes in attribute value");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[8] parameter(0)\n  ROOT a = f32[8] all-gather(p), "
                          "replica_groups=[2,4]<=[6], dimensions={0}\n")),
            "4:49: error: iota replica groups: [num_groups,group_size] must hold as many "
            "devices as the iota dimensions");
  EXPECT_EQ(ErrorOf(Entry("  p = f32[2] parameter(0)\n  ROOT r = f32[2] reduce-window(p, p), "
                          "window={size=2 strid=1}\n")),
            "4:55: error: unknown window field 'strid'");
}

TEST(ParseErrorTest, IllegalNames) {
  EXPECT_EQ(ErrorOf(Entry("  f32 = f32[2] parameter(0)\n")),
            "3:3: error: illegal instruction name 'f32'; suggest renaming to 'f32_'");
}

TEST(ParseErrorTest, DiagnosticQuotesTheLineWithACaret) {
  auto m = ParseModuleText(Entry("  p = f32[2] parameter(0)\n  ROOT a = f32[2] addd(p, p)\n"));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().ToString(),
            "<string>:4:19: error: unknown opcode 'addd'\n"
            "  ROOT a = f32[2] addd(p, p)\n"
            "                  ^~~~");
}

TEST(ParseErrorTest, DeepNestingIsAnErrorNotACrash) {
  std::string deep_shape = Entry("  p = " + std::string(100000, '(') + "f32[]" +
                                 std::string(100000, ')') + " parameter(0)\n");
  EXPECT_NE(ErrorOf(deep_shape).find("shape is nested too deeply"), std::string::npos);
  std::string deep_literal = Entry("  p = f32[1] constant(" + std::string(100000, '{') + "1" +
                                   std::string(100000, '}') + ")\n");
  EXPECT_NE(ErrorOf(deep_literal).find("error:"), std::string::npos);
  std::string deep_attr = Entry("  p = f32[1] parameter(0), metadata=" + std::string(100000, '{') +
                                std::string(100000, '}') + "\n");
  EXPECT_NE(ErrorOf(deep_attr).find("error:"), std::string::npos);
}

TEST(ParseErrorTest, GarbageBytes) {
  std::string garbage("\x00\xff\xfe\x01 garbage \x80", 14);
  EXPECT_EQ(ErrorOf(garbage), "1:1: error: expected 'HloModule' at the start of the module, found '?'");
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::string s(1 + rng() % 200, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    if (i % 2 == 0) s = "HloModule m\nENTRY e {\n" + s;
    (void)ParseModuleText(s);  // must return, ok or not
  }
}

// Every prefix of a real module, and single-byte mutations of it, parse or
// fail cleanly.
TEST(ParseErrorTest, TruncationsAndMutationsOfACorpusFile) {
  std::filesystem::path path = std::filesystem::path(MESHSPLIT_SHARED_DIR) /
                               "conformance/xla/propagation/WhileDSManual.hlo";
  MESHSPLIT_SKIP_WITHOUT_SHARED("conformance/xla/propagation/WhileDSManual.hlo");
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  ASSERT_TRUE(ParseModuleText(text).ok());
  int errors = 0;
  for (size_t n = 0; n < text.size(); ++n)
    if (!ParseModuleText(text.substr(0, n)).ok()) ++errors;
  // Every proper prefix is incomplete except those that end just after one
  // of the three computations (then the last one read is the entry): at
  // most the closing '}' plus up to two newlines each.
  EXPECT_GE(errors, static_cast<int>(text.size()) - 9);
  std::mt19937 rng(11);
  const char kBytes[] = "{}()[],=%:\"/*<>x0-9 \n\x80";
  for (int i = 0; i < 2000; ++i) {
    std::string mutated = text;
    mutated[rng() % mutated.size()] = kBytes[rng() % (sizeof(kBytes) - 1)];
    (void)ParseModuleText(mutated);
  }
}

}  // namespace
}  // namespace meshsplit

namespace meshsplit {
namespace {

TEST(ParseErrorTest, InvalidShardingPointsAtTheSharding) {
  auto m = ParseModuleText(Entry("  p = f32[2] parameter(0), sharding={devices=[2]0,1,2}\n"));
  ASSERT_FALSE(m.ok());
  const SourceLoc& loc = m.status().loc();
  EXPECT_EQ(loc.line, 3);
  EXPECT_EQ(loc.column, 37);  // the '{' of the sharding
  EXPECT_GT(loc.length, 1);   // underlined up to the offending character
  EXPECT_LE(loc.length, static_cast<int>(std::string("{devices=[2]0,1,2}").size()));
  EXPECT_EQ(m.status().message().rfind("invalid sharding: ", 0), 0u) << m.status().message();
}

}  // namespace
}  // namespace meshsplit
