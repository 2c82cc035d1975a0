// Unit tests of the canonical printer: options, single instructions and
// computations, and the fixed point on hand-written edge cases.
#include <gtest/gtest.h>

#include "text/parser.h"
#include "text/printer.h"

namespace meshsplit {
namespace {

constexpr const char* kModule = R"(HloModule m
ENTRY e {
  p = f32[2]{0} parameter(0)
  q = f32[2]{0} parameter(1)
  ROOT a = f32[2]{0} add(p, q), metadata={op_name="x"}
}
)";

TEST(PrinterTest, OperandShapesOption) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  PrintOptions options;
  options.print_operand_shapes = true;
  EXPECT_EQ(PrintInstruction(*(*m)->entry()->root(), options),
            "%a = f32[2]{0} add(f32[2]{0} %p, f32[2]{0} %q), metadata={op_name=\"x\"}");
  // Inline shapes parse back to the same module.
  auto again = ParseModuleText(PrintModule(**m, options));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(PrintModule(**again), PrintModule(**m));
}

TEST(PrinterTest, MetadataOption) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  PrintOptions options;
  options.print_metadata = false;
  EXPECT_EQ(PrintInstruction(*(*m)->entry()->root(), options), "%a = f32[2]{0} add(%p, %q)");
}

TEST(PrinterTest, ComputationText) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(PrintComputation(*(*m)->entry()),
            "ENTRY %e (p: f32[2]{0}, q: f32[2]{0}) -> f32[2]{0} {\n"
            "  %p = f32[2]{0} parameter(0)\n"
            "  %q = f32[2]{0} parameter(1)\n"
            "  ROOT %a = f32[2]{0} add(%p, %q), metadata={op_name=\"x\"}\n"
            "}\n");
}

TEST(PrinterTest, InstructionsAddedOutOfOrderPrintDefinitionsFirst) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  Computation* entry = (*m)->entry();
  // A pass appends a new instruction after its user; the printer still
  // prints operands before users so the text parses.
  auto neg = std::make_unique<Instruction>(Opcode::kNegate, "neg", entry->root()->shape());
  neg->AppendOperand(entry->parameter(0));
  Instruction* n = entry->AddInstruction(std::move(neg));
  entry->root()->ReplaceOperand(1, n);
  std::string printed = PrintModule(**m);
  EXPECT_LT(printed.find("%neg ="), printed.find("ROOT %a"));
  EXPECT_TRUE(ParseModuleText(printed).ok());
}

TEST(PrinterTest, EscapesStrings) {
  auto m = ParseModuleText(
      "HloModule m\nENTRY e {\n  ROOT c = f32[] custom-call(), "
      "custom_call_target=\"a\\\"b\\\\c\\n\"\n}\n");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->entry()->root()->attrs().custom_call_target, "a\"b\\c\n");
  std::string printed = PrintModule(**m);
  EXPECT_NE(printed.find("custom_call_target=\"a\\\"b\\\\c\\n\""), std::string::npos) << printed;
  auto again = ParseModuleText(printed);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(PrintModule(**again), printed);
}

TEST(PrinterTest, PrintIsDeterministic) {
  auto a = ParseModuleText(kModule);
  auto b = ParseModuleText(kModule);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(PrintModule(**a), PrintModule(**b));
}

}  // namespace
}  // namespace meshsplit
