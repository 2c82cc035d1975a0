// Tests of the module-running helpers behind `meshsplit run`: input lookup by
// parameter name then param<i>, exact type/shape checks, bf16 from <u2, and
// all-or-nothing output writing.
#include "runtime/run_module.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/npy.h"
#include "runtime_test_util.h"

namespace meshsplit::rttest {
namespace {

namespace fs = std::filesystem;

class RunModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ms_run_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "in");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string In(const std::string& f) { return (dir_ / "in" / f).string(); }
  fs::path dir_;
};

const char* kModule = R"(HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  w = bf16[2] parameter(1)
  wf = f32[2] convert(w)
  ROOT r = f32[2] add(x, wf)
})";

TEST_F(RunModuleTest, NameBeatsIndexAndBf16ReadsFromU2) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(WriteNpy(F32({2}, {1, 2}), In("x.npy")).ok());
  ASSERT_TRUE(WriteNpy(F32({2}, {100, 200}), In("param0.npy")).ok());  // shadowed by x.npy
  ASSERT_TRUE(WriteNpy(Make(PrimitiveType::BF16, {2}, {0.5, 4}), In("param1.npy")).ok());
  auto inputs = ReadEntryInputs(*(*m)->entry(), (dir_ / "in").string());
  ASSERT_TRUE(inputs.ok()) << inputs.status().ToString();
  EXPECT_EQ((*inputs)[1].element_type(), PrimitiveType::BF16);
  auto r = RunEntry(**m, std::move(inputs).value());
  ASSERT_TRUE(r.ok());
  ExpectNear(*r, {1.5, 6}, 0);
}

TEST_F(RunModuleTest, MismatchesNameTheParameter) {
  auto m = ParseModuleText(kModule);
  ASSERT_TRUE(m.ok());
  ASSERT_TRUE(WriteNpy(F32({3}, {1, 2, 3}), In("x.npy")).ok());
  auto inputs = ReadEntryInputs(*(*m)->entry(), (dir_ / "in").string());
  ASSERT_FALSE(inputs.ok());
  EXPECT_NE(inputs.status().message().find("parameter 0 'x' expects f32[2] but the file holds f32[3]"),
            std::string::npos)
      << inputs.status().message();
  ASSERT_TRUE(WriteNpy(F32({2}, {1, 2}), In("x.npy")).ok());
  inputs = ReadEntryInputs(*(*m)->entry(), (dir_ / "in").string());
  ASSERT_FALSE(inputs.ok());
  EXPECT_NE(inputs.status().message().find("missing input for parameter 1 'w'"), std::string::npos)
      << inputs.status().message();
}

TEST_F(RunModuleTest, OutputsAreAllOrNothing) {
  fs::path out = dir_ / "out";
  // The second output cannot be written as .npy, so nothing is written.
  Literal bad = Literal::MakeTuple({F32({2}, {1, 2}), Literal(Shape(PrimitiveType::C64, {2}))});
  EXPECT_FALSE(WriteOutputs(bad, out.string()).ok());
  EXPECT_FALSE(fs::exists(out / "out0.npy"));
  Literal good = Literal::MakeTuple({F32({2}, {1, 2}), S32({1}, {7})});
  ASSERT_TRUE(WriteOutputs(good, out.string()).ok());
  auto o0 = ReadNpy((out / "out0.npy").string());
  auto o1 = ReadNpy((out / "out1.npy").string());
  ASSERT_TRUE(o0.ok() && o1.ok());
  EXPECT_TRUE(o0->BitwiseEqual(good.elements()[0]));
  EXPECT_TRUE(o1->BitwiseEqual(good.elements()[1]));
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(out)) files += e.is_regular_file();
  EXPECT_EQ(files, 2);
}

TEST_F(RunModuleTest, OutputsNamedAfterTheModelsOutputs) {
  Literal two = Literal::MakeTuple({F32({2}, {1, 2}), S32({1}, {7})});
  std::vector<std::string> files;
  ASSERT_TRUE(WriteOutputs(two, (dir_ / "named").string(), {"loss", "new.h/0:w"}, &files).ok());
  EXPECT_EQ(files, (std::vector<std::string>{"loss.npy", "new.h_0_w.npy"}));
  auto loss = ReadNpy((dir_ / "named" / "loss.npy").string());
  ASSERT_TRUE(loss.ok());
  EXPECT_TRUE(loss->BitwiseEqual(two.elements()[0]));
  // Names that do not give one distinct file per output fall back to out<i>.
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{"a"}, std::vector<std::string>{"a/b", "a:b"},
        std::vector<std::string>{"", "b"}, std::vector<std::string>{"..", "b"}}) {
    ASSERT_TRUE(WriteOutputs(two, (dir_ / "fallback").string(), names, &files).ok());
    EXPECT_EQ(files, (std::vector<std::string>{"out0.npy", "out1.npy"})) << names[0];
  }
}

TEST_F(RunModuleTest, FormatOutputTruncatesLongArrays) {
  Literal big(Shape(PrimitiveType::F32, {100000}));
  std::string s = FormatOutput(big, 200);
  EXPECT_LT(s.size(), 400u);
  EXPECT_NE(s.find("100000 elements, truncated"), std::string::npos) << s;
  EXPECT_EQ(FormatOutput(F32({2}, {1, 2.5})), "f32[2] {1, 2.5}");
}

}  // namespace
}  // namespace meshsplit::rttest
