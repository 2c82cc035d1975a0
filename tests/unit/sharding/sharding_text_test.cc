// Parse/print tests for sharding text: every `sharding={...}` in the shared
// corpus round-trips, canonical printing, and parse errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <fstream>
#include <set>
#include <sstream>

#include "../shared_data.h"
#include "sharding/sharding.h"

namespace meshsplit {
namespace {

Sharding P(std::string_view text) {
  StatusOr<Sharding> s = Sharding::Parse(text);
  EXPECT_TRUE(s.ok()) << text << ": " << s.status().message();
  return s.ok() ? *s : Sharding();
}

std::string Canon(std::string_view text) { return P(text).ToString(); }

// Every "sharding={...}" in the file (braces balanced, strings skipped), plus
// the sharding column of .expected files.
void Extract(const std::string& text, bool expected_file,
             std::set<std::string>& out) {
  size_t i = 0;
  while ((i = text.find("sharding={", i)) != std::string::npos) {
    size_t k = i + 9, m = k;
    int depth = 0;
    for (; m < text.size(); ++m) {
      char c = text[m];
      if (c == '"') {
        for (++m; m < text.size() && text[m] != '"'; ++m)
          if (text[m] == '\\') ++m;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    out.insert(text.substr(k, m + 1 - k));
    i = m;
  }
  if (expected_file) {
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      size_t tab = line.rfind('\t');
      if (tab != std::string::npos && tab + 1 < line.size() &&
          line[tab + 1] == '{')
        out.insert(line.substr(tab + 1));
    }
  }
}

TEST(ShardingText, EveryCorpusShardingRoundTrips) {
  namespace fs = std::filesystem;
  MESHSPLIT_SKIP_WITHOUT_SHARED("conformance/xla");
  std::set<std::string> all;
  for (const char* sub : {"/conformance/xla", "/models/hlo"}) {
    fs::path root = fs::path(MESHSPLIT_SHARED_DIR) / (sub + 1);
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path());
      std::stringstream buf;
      buf << in.rdbuf();
      Extract(buf.str(), entry.path().extension() == ".expected", all);
    }
  }
  ASSERT_GT(all.size(), 400u) << "corpus not found or extraction broken";
  int checked = 0;
  for (const std::string& text : all) {
    StatusOr<Sharding> s = Sharding::Parse(text);
    ASSERT_TRUE(s.ok()) << text << ": " << s.status().message();
    std::string printed = s->ToString();
    StatusOr<Sharding> again = Sharding::Parse(printed);
    ASSERT_TRUE(again.ok()) << printed << ": " << again.status().message();
    EXPECT_EQ(*s, *again) << text << " -> " << printed;
    EXPECT_EQ(again->ToString(), printed) << "printing is not idempotent";
    EXPECT_EQ(again->metadata(), s->metadata());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(all.size()));
}

TEST(ShardingText, SimpleForms) {
  EXPECT_EQ(Canon("{replicated}"), "{replicated}");
  EXPECT_EQ(Canon("{ manual }"), "{manual}");
  EXPECT_EQ(Canon("{unknown shard_as 0}"), "{unknown shard_as 0}");
  EXPECT_EQ(Canon("{replicated shard_like 3}"), "{replicated shard_like 3}");
  EXPECT_EQ(Canon("{unreduced}"), "{unreduced}");
  EXPECT_EQ(Canon("{maximal device=3}"), "{maximal device=3}");
  EXPECT_EQ(Canon("{}"), "{}");
  EXPECT_TRUE(P("{}").IsTuple());
  EXPECT_EQ(Canon("{replicated metadata={op_name=\"a\"}}"),
            "{replicated metadata={op_name=\"a\"}}");
  EXPECT_EQ(P("{replicated metadata={op_name=\"a\"}}").ToString(false),
            "{replicated}");
}

TEST(ShardingText, CanonicalIota) {
  EXPECT_EQ(Canon("{devices=[2,4]0,1,2,3,4,5,6,7}"), "{devices=[2,4]<=[8]}");
  EXPECT_EQ(Canon("{devices=[2,2]0,2,1,3}"), "{devices=[2,2]<=[2,2]T(1,0)}");
  EXPECT_EQ(Canon("{devices=[4,2]0,4,1,5,2,6,3,7}"),
            "{devices=[4,2]<=[2,4]T(1,0)}");
  // A transposed iota whose reshape dims collapse.
  EXPECT_EQ(Canon("{devices=[2,4]<=[2,2,2]T(0,1,2)}"), "{devices=[2,4]<=[8]}");
  EXPECT_EQ(Canon("{devices=[8]<=[2,1,4]T(1,0,2)}"), "{devices=[8]<=[8]}");
  EXPECT_EQ(Canon("{devices=[2,4]<=[2,2,2]T(2,1,0)}"),
            "{devices=[2,4]<=[2,2,2]T(2,1,0)}");
  EXPECT_EQ(Canon("{devices=[2,4]0,4,2,6,1,5,3,7}"),
            "{devices=[2,4]<=[2,2,2]T(2,1,0)}");
  // Not an iota: stays explicit.
  EXPECT_EQ(Canon("{devices=[2,1,2,1]0,1,4,5 }"),
            "{devices=[2,1,2,1]0,1,4,5}");
  EXPECT_EQ(Canon("{devices=[2,2]1,0,2,3}"), "{devices=[2,2]1,0,2,3}");
  EXPECT_EQ(Canon("{devices=[3]1,2,3}"), "{devices=[3]1,2,3}");
  // Whitespace and line breaks inside the id list.
  EXPECT_EQ(Canon("{devices=[1,4] 0,1,\n  2,3}"), "{devices=[1,4]<=[4]}");
}

TEST(ShardingText, Tuples) {
  EXPECT_EQ(Canon("{{replicated},{devices=[2,1]0,1}}"),
            "{{replicated}, {devices=[2,1]<=[2]}}");
  std::string six = "{{manual}, {manual}, {manual}, {manual}, {manual}, "
                    "/*index=5*/{manual}}";
  EXPECT_EQ(Canon(six), six);
  EXPECT_EQ(Canon("{{replicated metadata={op_name=\"d\"}}, {devices=[2]0,1}}"),
            "{{replicated metadata={op_name=\"d\"}}, {devices=[2]<=[2]}}");
}

std::string Error(std::string_view text) {
  StatusOr<Sharding> s = Sharding::Parse(text);
  EXPECT_FALSE(s.ok()) << text << " parsed as " << s->ToString();
  return s.ok() ? "" : s.status().message();
}

TEST(ShardingText, Errors) {
  EXPECT_NE(Error("{devices=[2,2]0,1,2,3,4,5}")
                .find("sharding tile assignment has 6 devices but dims [2,2] "
                      "need 4"),
            std::string::npos);
  EXPECT_NE(Error("{devices=[2,2]0,1,2}").find("has 3 devices"),
            std::string::npos);
  EXPECT_NE(Error("{devices=[2,2]<=[8]}").find("has 8 devices but dims [2,2]"),
            std::string::npos);
  EXPECT_NE(Error("{devices=[2,2]0,1,1,3}").find("device id 1 repeated"),
            std::string::npos);
  EXPECT_NE(Error("{devices=[2,2]<=[2,2]T(0,0)}").find("not a permutation"),
            std::string::npos);
  EXPECT_NE(Error("{devices=[2,0]<=[2]}").find("must be positive"),
            std::string::npos);
  EXPECT_NE(Error("{replicate}").find("unknown sharding attribute 'replicate'"),
            std::string::npos);
  EXPECT_NE(Error("{maximal}").find("needs device=N"), std::string::npos);
  EXPECT_NE(Error("{replicated manual}").find("conflicting"), std::string::npos);
  EXPECT_NE(Error("{devices=[2]0,1 last_tile_dims={foo}}")
                .find("unknown subgroup type 'foo'"),
            std::string::npos);
  EXPECT_NE(Error("{devices=[2]0,1 last_tile_dims={manual, replicated}}")
                .find("2 subgroup dims but the tile assignment has rank 1"),
            std::string::npos);
  Error("{replicated");
  Error("{devices=[2]0,1} extra");
  Error("{{replicated}, }");
  Error("{devices=[2]0,-1}");
  Error("");
  size_t offset = 0;
  StatusOr<Sharding> bad = Sharding::Parse("{devices=[2,2]0,1,1,3}", &offset);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(offset, 14u);
  EXPECT_EQ(bad.status().message(),
            "device id 1 repeated in sharding tile assignment");
  EXPECT_EQ(Error("{devices=[2,2]0,1,1,3}"),
            "device id 1 repeated in sharding tile assignment (at column 15 "
            "of the sharding)");
  ASSERT_FALSE(Sharding::Parse("{replicated, foo}", &offset).ok());
  EXPECT_EQ(offset, 11u);
}

}  // namespace
}  // namespace meshsplit

namespace meshsplit {
namespace {

// Mutated corpus-like strings must parse or fail cleanly (no crash, no
// hang), and whatever parses must print to text that parses back equal.
TEST(ShardingText, MutationsNeverCrash) {
  const std::vector<std::string> seeds = {
      "{devices=[2,1,2]0,1,2,3 last_tile_dims={manual}}",
      "{devices=[2,4]<=[2,2,2]T(2,1,0) last_tile_dim_replicate}",
      "{{replicated}, {maximal device=1 metadata={op_name=\"a\"}}}",
      "{unknown shard_as 0}",
      "{devices=[1,1,2,2]<=[4] last_tile_dims={replicated, manual}}",
  };
  const std::string alphabet = "{}[](),<=T 0123456789-_/*\"abdelmnoprstuvx";
  std::mt19937 rng(5);
  int parsed = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s = seeds[rng() % seeds.size()];
    int edits = 1 + rng() % 3;
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          s.erase(pos, 1 + rng() % 3);
          break;
        case 2:
          s.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    StatusOr<Sharding> r = Sharding::Parse(s);
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
      continue;
    }
    ++parsed;
    std::string printed = r->ToString();
    StatusOr<Sharding> again = Sharding::Parse(printed);
    ASSERT_TRUE(again.ok()) << s << " -> " << printed << ": "
                            << again.status().message();
    ASSERT_EQ(*again, *r) << s << " -> " << printed;
  }
  EXPECT_GT(parsed, 100);
}

}  // namespace
}  // namespace meshsplit
