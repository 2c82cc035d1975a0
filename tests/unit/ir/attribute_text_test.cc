// ParseIntListAttribute / ReadIntListAttribute (ir/attribute_text.h): the one
// reader of integer-list attribute text (lhs_ragged_dims, rhs_group_dims,
// fft_length). Well-formed lists, every kind of malformed text as an error
// (never an exception), and errors located at the culprit character. Frontend
// attribute text and the module's frontend attributes (the mesh among them).
#include "ir/attribute_text.h"

#include <gtest/gtest.h>

#include <memory>

#include "ir/computation.h"
#include "ir/verifier.h"
#include "text/parser.h"

namespace meshsplit {
namespace {

std::vector<int64_t> Parse(const std::string& text) {
  StatusOr<std::vector<int64_t>> r = ParseIntListAttribute("dims", text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().ToString();
  return r.ok() ? *r : std::vector<int64_t>{-999};
}

// The error message for `text`, or "ok" when it parses.
std::string ErrorOf(const std::string& text) {
  StatusOr<std::vector<int64_t>> r = ParseIntListAttribute("dims", text);
  return r.ok() ? "ok" : r.status().message();
}

TEST(AttributeText, WellFormedLists) {
  EXPECT_EQ(Parse("{}"), std::vector<int64_t>{});
  EXPECT_EQ(Parse("{ }"), std::vector<int64_t>{});
  EXPECT_EQ(Parse("{0}"), std::vector<int64_t>{0});
  EXPECT_EQ(Parse("{1,2,3}"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(Parse(" { 3 , -4 } "), (std::vector<int64_t>{3, -4}));
  EXPECT_EQ(Parse("{007}"), std::vector<int64_t>{7});
  EXPECT_EQ(Parse("{9223372036854775807,-9223372036854775808}"),
            (std::vector<int64_t>{INT64_MAX, INT64_MIN}));
}

TEST(AttributeText, MalformedTextIsAnErrorNamingTheCulprit) {
  EXPECT_EQ(ErrorOf("{-}"), "dims={-}: expected a number (character 2)");
  EXPECT_EQ(ErrorOf("{1,,2}"), "dims={1,,2}: expected a number (character 4)");
  EXPECT_EQ(ErrorOf("{1,}"), "dims={1,}: expected a number (character 4)");
  EXPECT_EQ(ErrorOf("{,1}"), "dims={,1}: expected a number (character 2)");
  EXPECT_EQ(ErrorOf("{--1}"), "dims={--1}: expected a number (character 2)");
  EXPECT_EQ(ErrorOf("1,2"), "dims=1,2: expected '{' (character 1)");
  EXPECT_EQ(ErrorOf(""), "dims=: expected '{' (character 1)");
  EXPECT_EQ(ErrorOf("{1,2"), "dims={1,2: expected ',' or '}' (character 5)");
  EXPECT_EQ(ErrorOf("{1 2}"), "dims={1 2}: expected ',' or '}' (character 4)");
  EXPECT_EQ(ErrorOf("{1.5}"), "dims={1.5}: expected ',' or '}' (character 3)");
  EXPECT_EQ(ErrorOf("{1}x"), "dims={1}x: unexpected text after '}' (character 4)");
  EXPECT_EQ(ErrorOf("{1}{2}"), "dims={1}{2}: unexpected text after '}' (character 4)");
  EXPECT_EQ(ErrorOf("{+1}"), "dims={+1}: expected a number (character 2)");
}

TEST(AttributeText, HugeNumbersAreErrorsNotExceptions) {
  EXPECT_EQ(ErrorOf("{9223372036854775808}"),
            "dims={9223372036854775808}: number out of range (character 2)");
  EXPECT_EQ(ErrorOf("{1,-9223372036854775809}"),
            "dims={1,-9223372036854775809}: number out of range (character 4)");
  EXPECT_EQ(ErrorOf("{" + std::string(5000, '9') + "}").substr(5007),
            ": number out of range (character 2)");
}

TEST(AttributeText, ErrorIsLocatedAtTheCulpritInTheSourceLine) {
  auto file = std::make_shared<SourceFile>();
  file->name = "f.hlo";
  file->text = "line one\n  d = f32[2] op(a), x_dims={0}, lhs_ragged_dims={1,,2}\n";
  SourceLoc instr_loc{file, /*line=*/2, /*column=*/3, /*length=*/1};
  StatusOr<std::vector<int64_t>> r =
      ParseIntListAttribute("lhs_ragged_dims", "{1,,2}", instr_loc);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().loc().line, 2);
  // "{1,,2}" starts at column 49; its 4th character is the second ','.
  EXPECT_EQ(file->text.find("{1,,2}") - file->text.find('\n'), 49u);
  EXPECT_EQ(r.status().loc().column, 52);

  // A line that does not spell the attribute keeps the instruction's place.
  StatusOr<std::vector<int64_t>> other = ParseIntListAttribute("rhs_group_dims", "{x}", instr_loc);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().loc().column, 3);
  // So does a location without a file.
  StatusOr<std::vector<int64_t>> unknown = ParseIntListAttribute("d", "{x}");
  ASSERT_FALSE(unknown.ok());
  EXPECT_FALSE(unknown.status().loc().known());
}

constexpr char kRaggedModule[] = R"(HloModule m
ENTRY e {
  a = f32[3,4,6] parameter(0)
  b = f32[3,6,8] parameter(1)
  c = s32[3,1] parameter(2)
  ROOT d = f32[3,4,8] ragged-dot(a, b, c), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims=RAGGED
}
)";

std::unique_ptr<Module> RaggedModule(const std::string& ragged) {
  std::string text = kRaggedModule;
  text.replace(text.find("RAGGED"), 6, ragged);
  auto m = ParseModuleText(text);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(m).value() : nullptr;
}

TEST(AttributeText, ReadFromAnInstruction) {
  std::unique_ptr<Module> m = RaggedModule("{1}");
  ASSERT_NE(m, nullptr);
  const Instruction& d = *m->entry()->root();
  StatusOr<std::vector<int64_t>> ragged = ReadIntListAttribute(d, "lhs_ragged_dims");
  ASSERT_TRUE(ragged.ok()) << ragged.status().ToString();
  EXPECT_EQ(*ragged, std::vector<int64_t>{1});
  // Absent: the empty list.
  StatusOr<std::vector<int64_t>> group = ReadIntListAttribute(d, "rhs_group_dims");
  ASSERT_TRUE(group.ok());
  EXPECT_TRUE(group->empty());
}

TEST(AttributeText, ReadErrorNamesTheInstructionAndPointsIntoTheValue) {
  std::unique_ptr<Module> m = RaggedModule("{-}");
  ASSERT_NE(m, nullptr);
  const Instruction& d = *m->entry()->root();
  StatusOr<std::vector<int64_t>> ragged = ReadIntListAttribute(d, "lhs_ragged_dims");
  ASSERT_FALSE(ragged.ok());
  EXPECT_EQ(ragged.status().message(),
            "lhs_ragged_dims={-}: expected a number (character 2) (in %d)");
  const std::string line = "  ROOT d = f32[3,4,8] ragged-dot(a, b, c), lhs_batch_dims={0}, "
                           "rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                           "rhs_contracting_dims={1}, lhs_ragged_dims={-}";
  EXPECT_EQ(ragged.status().loc().line, 6);
  EXPECT_EQ(ragged.status().loc().column, static_cast<int>(line.size()) - 1);  // the '-'
}

TEST(AttributeText, BadFftLengthIsALocatedVerifierError) {
  auto m = ParseModuleText(R"(HloModule m
ENTRY e {
  a = c64[4,8] parameter(0)
  ROOT f = c64[4,8] fft(a), fft_type=FFT, fft_length={8,,}
}
)");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Status s = VerifyModule(**m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fft_length={8,,}: expected a number (character 4)"),
            std::string::npos)
      << s.ToString();
  EXPECT_EQ(s.loc().line, 4);
  EXPECT_EQ(s.loc().column, 57);
}

TEST(FrontendAttributes, ParseAndFormat) {
  auto pairs = ParseFrontendAttributes(R"({a="x", b = "q\"uote,}", c={"j": {"k": "}"}}})");
  ASSERT_TRUE(pairs.has_value());
  ASSERT_EQ(pairs->size(), 3u);
  EXPECT_EQ((*pairs)[0], (std::pair<std::string, std::string>{"a", "x"}));
  EXPECT_EQ((*pairs)[1].second, "q\"uote,}");
  EXPECT_EQ((*pairs)[2].second, R"({"j": {"k": "}"}})");
  EXPECT_EQ(FormatFrontendAttributes(*pairs),
            R"({a="x",b="q\"uote,}",c="{\"j\": {\"k\": \"}\"}}"})");
  // What it prints reads back to the same pairs.
  EXPECT_EQ(ParseFrontendAttributes(FormatFrontendAttributes(*pairs)), pairs);
  EXPECT_EQ(ParseFrontendAttributes("{}"), FrontendAttributePairs{});
  for (const char* bad : {"", "a=\"x\"", "{a=x}", "{a=\"x\"", "{=\"x\"}", "{a=\"x\"} tail",
                          "{a=\"x\" b=\"y\"}"})
    EXPECT_FALSE(ParseFrontendAttributes(bad).has_value()) << bad;
}

TEST(FrontendAttributes, ModuleAttributeSetKeepsTheOthers) {
  auto module = ParseModuleText(
      "HloModule m, frontend_attributes={onnx_output_names=\"y\"}\n"
      "ENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  EXPECT_EQ(ModuleFrontendAttribute(**module, kModuleMeshAttribute), std::nullopt);
  SetModuleFrontendAttribute(**module, kModuleMeshAttribute, "data=2");
  SetModuleFrontendAttribute(**module, kModuleMeshAttribute, "data=4");
  EXPECT_EQ(ModuleFrontendAttribute(**module, kModuleMeshAttribute), "data=4");
  EXPECT_EQ(ModuleFrontendAttribute(**module, "onnx_output_names"), "y");
  ASSERT_EQ((*module)->header_attrs().size(), 1u);
  EXPECT_EQ((*module)->header_attrs()[0].second, R"({onnx_output_names="y",meshsplit.mesh="data=4"})");
}

TEST(FrontendAttributes, OlderMeshHeaderReadsAsTheAttribute) {
  auto module = ParseModuleText(
      "HloModule m, mesh={data=2,model=2}\n"
      "ENTRY e {\n  ROOT p = f32[4,2] parameter(0), sharding={mesh_split [model, _]}\n}\n");
  ASSERT_TRUE(module.ok()) << module.status().ToString();
  EXPECT_EQ(ModuleFrontendAttribute(**module, kModuleMeshAttribute), "data=2,model=2");
  EXPECT_EQ((*module)->entry()->root()->sharding()->ToString(false),
            "{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  ParseOptions strict;
  strict.xla_strict = true;
  EXPECT_FALSE(ParseModuleText("HloModule m, mesh={data=2}\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n",
                               strict)
                   .ok());
}

}  // namespace
}  // namespace meshsplit
