// .npy reading and writing. The files under testdata/ were written by NumPy
// 1.24 (np.save / np.lib.format.write_array; see the test names for the
// arrays), so these tests check compatibility with real NumPy output,
// including byte-identical headers from our writer.
#include "runtime/npy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime_test_util.h"
#include "support/float16.h"

namespace meshsplit::rttest {
namespace {

std::string TestData(const std::string& name) {
  return std::string(MESHSPLIT_SOURCE_DIR) + "/tests/unit/runtime/testdata/" + name;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Npy, ReadsNumpyFilesOfEachKind) {
  auto f = ReadNpy(TestData("f32_2x3.npy"));  // np.arange(6, dtype=f32).reshape(2,3) * 1.5
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->shape().ToString(false), "f32[2,3]");
  ExpectNear(*f, {0, 1.5, 3, 4.5, 6, 7.5}, 0);

  auto s = ReadNpy(TestData("i64_scalar.npy"));  // np.array(-7, int64)
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->shape().ToString(false), "s64[]");
  EXPECT_EQ(s->GetInt(0), -7);

  auto b = ReadNpy(TestData("bool_3.npy"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->element_type(), PrimitiveType::PRED);
  EXPECT_EQ(Ints(*b), (std::vector<int64_t>{1, 0, 1}));

  auto be = ReadNpy(TestData("f8_be.npy"));  // big-endian '>f8' [1.0, -2.5]
  ASSERT_TRUE(be.ok());
  ExpectNear(*be, {1.0, -2.5}, 0);

  auto v2 = ReadNpy(TestData("i16_v2.npy"));  // format version 2.0
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(Ints(*v2), (std::vector<int64_t>{1, 2}));

  auto empty = ReadNpy(TestData("u8_empty.npy"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->shape().ToString(false), "u8[0,3]");

  auto h = ReadNpy(TestData("f2_2.npy"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->element_type(), PrimitiveType::F16);
  ExpectNear(*h, {0.5, -65504}, 0);
}

TEST(Npy, WriterMatchesNumpyByteForByte) {
  for (const char* name : {"f32_2x3.npy", "i64_scalar.npy", "bool_3.npy"}) {
    SCOPED_TRACE(name);
    std::string original = Slurp(TestData(name));
    auto lit = ParseNpy(original, name);
    ASSERT_TRUE(lit.ok());
    auto bytes = SerializeNpy(*lit);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(*bytes, original);
  }
}

TEST(Npy, RoundTripsEveryType) {
  for (PrimitiveType t : {PrimitiveType::PRED, PrimitiveType::S8, PrimitiveType::S16, PrimitiveType::S32,
                          PrimitiveType::S64, PrimitiveType::U8, PrimitiveType::U16, PrimitiveType::U32,
                          PrimitiveType::U64, PrimitiveType::F16, PrimitiveType::F32, PrimitiveType::F64}) {
    SCOPED_TRACE(std::string(PrimitiveTypeName(t)));
    Literal l = Make(t, {2, 2}, {0, 1, 1, 0});
    auto bytes = SerializeNpy(l);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(bytes->size() % 64, static_cast<size_t>(l.size_bytes() % 64));  // data 64-byte aligned
    auto back = ParseNpy(*bytes, "x.npy");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_TRUE(back->BitwiseEqual(l));
  }
}

TEST(Npy, Bf16IsStoredAsU2Words) {
  Literal l = Make(PrimitiveType::BF16, {3}, {1.0, -2.0, 0.5});
  auto bytes = SerializeNpy(l);
  ASSERT_TRUE(bytes.ok());
  EXPECT_NE(bytes->find("'descr': '<u2'"), std::string::npos);
  auto back = ParseNpy(*bytes, "b.npy");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->element_type(), PrimitiveType::U16);
  EXPECT_EQ(Ints(*back), (std::vector<int64_t>{F32ToBf16(1.0f), F32ToBf16(-2.0f), F32ToBf16(0.5f)}));
}

TEST(Npy, FortranOrderIsAnError) {
  auto r = ReadNpy(TestData("f32_fortran.npy"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fortran_order"), std::string::npos);
  EXPECT_NE(r.status().ToString().find("f32_fortran.npy: "), std::string::npos);
}

TEST(Npy, MalformedInputsGiveLocatedErrors) {
  std::string good = Slurp(TestData("f32_2x3.npy"));
  auto header_with = [&](const std::string& dict) {
    std::string h = dict;
    h.resize(118, ' ');
    h += '\n';
    std::string out = std::string("\x93NUMPY\x01\x00", 8);
    out += static_cast<char>(h.size() & 0xff);
    out += static_cast<char>(h.size() >> 8);
    return out + h + std::string(24, '\0');
  };
  struct Case {
    std::string bytes;
    const char* expect;
  } cases[] = {
      {"", "bad magic"},
      {"not an npy file at all", "bad magic"},
      {good.substr(0, 9), "bad magic"},
      {good.substr(0, 40), "truncated header"},
      {good.substr(0, good.size() - 1), "data size mismatch"},
      {good + "x", "data size mismatch"},
      {std::string("\x93NUMPY\x07\x00\x10\x00", 10) + std::string(16, ' '), "version 7"},
      {header_with("{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }"), "unsupported dtype '<c8'"},
      {header_with("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,), }"), "descr must be a string"},
      {header_with("{'descr': '<f4', 'shape': (6,), }"), "needs descr, fortran_order and shape"},
      {header_with("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (6,), }"), "True or False"},
      {header_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }"), "shape entries"},
      {header_with("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }"), "too large"},
      {header_with("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}"), "unknown key"},
      {header_with("['descr', '<f4']"), "not a dict"},
  };
  for (const Case& c : cases) {
    auto r = ParseNpy(c.bytes, "bad.npy");
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
    EXPECT_EQ(r.status().ToString().rfind("error: bad.npy: ", 0), 0u) << r.status().ToString();
  }
  // Every prefix of a valid file is rejected without crashing.
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(ParseNpy(good.substr(0, n), "p.npy").ok()) << n;
}

TEST(Npy, MissingFileAndUnwritableTypes) {
  auto r = ReadNpy("/nonexistent/dir/x.npy");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot open"), std::string::npos);
  Literal t = Literal::MakeTuple({F32({1}, {1})});
  EXPECT_FALSE(SerializeNpy(t).ok());
}

}  // namespace
}  // namespace meshsplit::rttest
