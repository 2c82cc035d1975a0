// Random module generator. Values carry an `exact` flag: true when every
// device computes them bit-for-bit like the reference (no float reduction
// whose summation order the partitioner may change). Ops whose result would
// flip on a last-bit difference (compare, float -> int convert) only take
// exact operands, so every generated module has one right answer up to the
// float tolerance of verify.
#include "verify/random_module.h"

#include <algorithm>
#include <numeric>
#include <cctype>
#include <random>
#include <set>
#include <sstream>

namespace meshsplit {
namespace {

// The op kinds. To switch one off because the partitioner mishandles it,
// set enabled=false and say why (with the failing seed); never weaken the
// comparison instead.
const std::vector<RandomOpKind> kKinds = {
    {"unary", true, ""},        {"binary", true, ""},    {"compare_select", true, ""},
    {"convert", true, ""},      {"broadcast", true, ""}, {"reshape", true, ""},
    {"transpose", true, ""},    {"reduce", true, ""},    {"dot", true, ""},
    {"iota", true, ""},         {"constant", true, ""},  {"slice", true, ""},
    {"concatenate", true, ""},
    // Data-movement ops on (possibly) tiled dims: offsets, negative and
    // interior padding, reversal, dynamic offsets, sorts.
    {"pad", true, ""},          {"reverse", true, ""},   {"dynamic_slice", true, ""},
    {"dynamic_update_slice", true, ""}, {"sort", true, ""},
    {"concatenate_mixed", true, ""},
    // Windowed ops whose results are often tiled along windowed dims
    // (halo exchange): strides, padding, dilations, feature groups.
    {"convolution", true, ""},  {"reduce_window", true, ""},
    // A copy into partial sums ({unreduced}, or a tiling with an unreduced
    // and maybe a replicated subgroup): its users read it through Reshard,
    // which must sum the pieces (all-reduce / reduce-scatter).
    {"partial_sum", true, ""},
    // Per-matrix linear algebra on batches of well-conditioned matrices
    // (p p^T + (n+1) I for cholesky, a strong diagonal for triangular-solve).
    {"cholesky", true, ""},     {"triangular_solve", true, ""},
    // ragged-dot in its three modes (ragged non-contracting / contracting /
    // batch dim) with s32 group sizes from a parameter.
    {"ragged_dot", true, ""},
    // Row gathers and add-scatters along a random operand dim, with one or
    // two batch dims of indices; operand, indices and updates are fresh
    // parameters, each with its own random sharding, so the three disagree.
    {"gather", true, ""},       {"scatter", true, ""},
};

struct Value {
  std::string name;
  std::string type;  // f32, s32
  std::vector<int64_t> dims;
  bool exact = true;
};

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string ShapeText(const Value& v) { return v.type + DimsText(v.dims); }

std::string ListText(const std::vector<int64_t>& xs) {
  std::string s = "{";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? "," : "") + std::to_string(xs[i]);
  return s + "}";
}

class Generator {
 public:
  Generator(uint64_t seed, const RandomModuleOptions& o) : rng_(seed), o_(o) {}

  RandomCase Run(uint64_t seed) {
    RandomCase c;
    c.seed = seed;
    n_ = Uniform(1, o_.max_devices);
    c.num_partitions = n_;
    c.propagate = Coin(0.5);
    int64_t params = Uniform(1, 2);
    for (int64_t i = 0; i < params; ++i) NewParam(Coin(0.8) ? "f32" : "s32", RandomDims(1));
    int64_t ops = Uniform(o_.min_ops, o_.max_ops);
    std::vector<const RandomOpKind*> enabled;
    for (const RandomOpKind& k : kKinds)
      if (k.enabled) enabled.push_back(&k);
    for (int64_t i = 0; i < ops && !enabled.empty(); ++i) {
      for (int attempt = 0; attempt < 20; ++attempt) {
        const RandomOpKind* k = enabled[Uniform(0, enabled.size() - 1)];
        if (Emit(k->name)) {
          c.ops.push_back(k->name);
          break;
        }
      }
    }
    // Root: every value nothing uses (so no op is dead code), as a tuple
    // when there are several.
    std::set<std::string> used;
    for (const std::string& l : lines_) {
      size_t eq = l.find(" = ");
      std::string rhs = l.substr(eq + 3);
      std::string tok;
      for (char ch : rhs + " ") {
        if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') {
          tok += ch;
        } else {
          if (!tok.empty()) used.insert(tok);
          tok.clear();
        }
      }
    }
    std::vector<const Value*> sinks;
    for (const Value& v : values_)
      if (!used.count(v.name) && v.name[0] != 'p') sinks.push_back(&v);
    if (sinks.empty()) sinks.push_back(&values_.back());
    std::ostringstream body;
    for (const std::string& l : lines_) body << "  " << l << "\n";
    if (sinks.size() > 1) {
      std::string shapes, names;
      for (size_t i = 0; i < sinks.size(); ++i) {
        shapes += (i ? ", " : "") + ShapeText(*sinks[i]);
        names += (i ? ", " : "") + sinks[i]->name;
      }
      body << "  ROOT root = (" << shapes << ") tuple(" << names << ")\n";
    } else {
      const Value& last = *sinks[0];
      body << "  ROOT root = " << ShapeText(last) << " copy(" << last.name << ")";
      if (Coin(0.5)) body << ", sharding=" << RandomSharding(last.dims.size());
      body << "\n";
    }
    std::ostringstream text;
    text << "HloModule random_" << seed << ", num_partitions=" << n_ << "\n\n";
    text << "add_f32 {\n  af.x = f32[] parameter(0)\n  af.y = f32[] parameter(1)\n"
            "  ROOT af.r = f32[] add(af.x, af.y)\n}\n\n";
    text << "max_f32 {\n  mf.x = f32[] parameter(0)\n  mf.y = f32[] parameter(1)\n"
            "  ROOT mf.r = f32[] maximum(mf.x, mf.y)\n}\n\n";
    text << "add_s32 {\n  as.x = s32[] parameter(0)\n  as.y = s32[] parameter(1)\n"
            "  ROOT as.r = s32[] add(as.x, as.y)\n}\n\n";
    text << "lt_f32 {\n  lf.x = f32[] parameter(0)\n  lf.y = f32[] parameter(1)\n"
            "  ROOT lf.r = pred[] compare(lf.x, lf.y), direction=LT\n}\n\n";
    text << "lt_s32 {\n  ls.x = s32[] parameter(0)\n  ls.y = s32[] parameter(1)\n"
            "  ROOT ls.r = pred[] compare(ls.x, ls.y), direction=LT\n}\n\n";
    text << "lt_key_f32 {\n  lk.x = f32[] parameter(0)\n  lk.y = f32[] parameter(1)\n"
            "  lk.i = s32[] parameter(2)\n  lk.j = s32[] parameter(3)\n"
            "  ROOT lk.r = pred[] compare(lk.x, lk.y), direction=LT\n}\n\n";
    text << "ENTRY main {\n" << body.str() << "}\n";
    c.text = text.str();
    return c;
  }

 private:
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool Coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  std::vector<int64_t> RandomDims(int64_t min_rank) {
    int64_t rank = Uniform(min_rank, o_.max_rank);
    std::vector<int64_t> dims(rank);
    for (int64_t& d : dims) d = Uniform(1, o_.max_dim);
    return dims;
  }

  std::vector<int64_t> Divisors(int64_t n) {
    std::vector<int64_t> out;
    for (int64_t d = 1; d <= n; ++d)
      if (n % d == 0) out.push_back(d);
    return out;
  }

  // A device list text for an array of `dims` holding all n_ devices.
  std::string DeviceList(const std::vector<int64_t>& dims) {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.5 || n_ == 1) return "<=[" + std::to_string(n_) + "]";
    if (r < 0.75) {
      // Transposed iota: n = a * b, iota [a,b] read transposed.
      std::vector<int64_t> divs = Divisors(n_);
      if (divs.size() > 2) {
        int64_t a = divs[Uniform(1, divs.size() - 2)];
        return "<=[" + std::to_string(a) + "," + std::to_string(n_ / a) + "]T(1,0)";
      }
    }
    if (r < 0.87) {
      // Three-way transposed iota, n = a * b * c read in a random non-identity
      // order ([2,2,4]<=[2,2,4]T(2,1,0), <=[4,2,2]T(1,0,2), ...): the device
      // orders XLA's mesh reshapes produce on 8 and 16 devices.
      std::vector<int64_t> divs = Divisors(n_);
      if (divs.size() > 3) {
        int64_t a = divs[Uniform(1, divs.size() - 2)];
        std::vector<int64_t> rest = Divisors(n_ / a);
        if (rest.size() > 2) {
          int64_t b = rest[Uniform(1, rest.size() - 2)];
          std::vector<int64_t> perm = {0, 1, 2};
          while (perm == std::vector<int64_t>{0, 1, 2}) std::shuffle(perm.begin(), perm.end(), rng_);
          return "<=[" + std::to_string(a) + "," + std::to_string(b) + "," +
                 std::to_string(n_ / a / b) + "]T(" + std::to_string(perm[0]) + "," +
                 std::to_string(perm[1]) + "," + std::to_string(perm[2]) + ")";
        }
      }
    }
    std::vector<int64_t> ids(n_);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng_);
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
    return s;
  }

  std::string RandomSharding(size_t rank) {
    double r = std::uniform_real_distribution<double>(0, 1)(rng_);
    if (r < 0.15 || n_ == 1) return "{replicated}";
    if (r < 0.2) return "{maximal device=" + std::to_string(Uniform(0, n_ - 1)) + "}";
    if (rank == 0) return "{replicated}";
    // Tile counts whose product divides n_; the rest is a replicated subgroup.
    std::vector<int64_t> tiles(rank, 1);
    int64_t remaining = n_;
    std::vector<size_t> order(rank);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng_);
    for (size_t d : order) {
      if (!Coin(0.6)) continue;
      std::vector<int64_t> divs = Divisors(remaining);
      int64_t t = divs[Uniform(0, divs.size() - 1)];
      tiles[d] = t;
      remaining /= t;
    }
    int64_t product = n_ / remaining;
    if (product == 1) return "{replicated}";
    std::vector<int64_t> dims = tiles;
    bool partial = remaining > 1;
    if (partial) dims.push_back(remaining);
    return "{devices=" + DimsText(dims) + DeviceList(dims) +
           (partial ? " last_tile_dim_replicate}" : "}");
  }

  std::string Annotation(size_t rank) {
    if (!Coin(o_.annotate_probability)) return "";
    return ", sharding=" + RandomSharding(rank);
  }

  const Value& Add(Value v, const std::string& rhs, bool annotate = true) {
    v.name = "v" + std::to_string(next_++);
    std::string line = v.name + " = " + ShapeText(v) + " " + rhs;
    if (annotate) line += Annotation(v.dims.size());
    lines_.push_back(line);
    values_.push_back(std::move(v));
    return values_.back();
  }

  const Value& NewParam(const std::string& type, std::vector<int64_t> dims) {
    Value v;
    v.type = type;
    v.dims = std::move(dims);
    v.name = "p" + std::to_string(params_);
    lines_.push_back(v.name + " = " + ShapeText(v) + " parameter(" + std::to_string(params_) +
                     "), sharding=" + RandomSharding(v.dims.size()));
    params_++;
    values_.push_back(std::move(v));
    return values_.back();
  }

  // A random existing value satisfying `ok`, biased towards recent ones;
  // nullptr when none does.
  template <typename F>
  const Value* Pick(F ok) {
    std::vector<size_t> idx;
    for (size_t i = 0; i < values_.size(); ++i)
      if (ok(values_[i])) idx.push_back(i);
    if (idx.empty()) return nullptr;
    // Half the time one of the three most recent candidates.
    if (Coin(0.5)) return &values_[idx[idx.size() - 1 - Uniform(0, std::min<int64_t>(2, idx.size() - 1))]];
    return &values_[idx[Uniform(0, idx.size() - 1)]];
  }

  std::string Scalar(const std::string& type, const std::string& value) {
    std::string name = "c" + std::to_string(next_++);
    lines_.push_back(name + " = " + type + "[] constant(" + value + ")");
    return name;
  }

  bool Emit(const std::string& kind) {
    auto any = [](const Value&) { return true; };
    if (kind == "unary") {
      const Value* v = Pick(any);
      if (!v) return false;
      Value out = *v;
      static const char* kF[] = {"negate", "abs", "tanh", "sine", "exponential"};
      static const char* kI[] = {"negate", "abs"};
      std::string op = out.type == "f32" ? kF[Uniform(0, 4)] : kI[Uniform(0, 1)];
      Add(out, op + "(" + v->name + ")");
      return true;
    }
    if (kind == "binary" || kind == "compare_select") {
      bool cmp = kind == "compare_select";
      const Value* a = Pick([&](const Value& v) { return !cmp || v.exact; });
      if (!a) return false;
      Value av = *a;
      const Value* b = Pick([&](const Value& v) {
        return v.type == av.type && v.dims == av.dims && v.name != av.name && (!cmp || v.exact);
      });
      Value bv = b ? *b : NewParam(av.type, av.dims);
      Value out = av;
      out.exact = av.exact && bv.exact;
      if (!cmp) {
        static const char* kOps[] = {"add", "subtract", "multiply", "maximum", "minimum"};
        Add(out, std::string(kOps[Uniform(0, 4)]) + "(" + av.name + ", " + bv.name + ")");
        return true;
      }
      static const char* kDirs[] = {"LT", "LE", "GT", "GE", "EQ", "NE"};
      std::string p = "k" + std::to_string(next_++);
      lines_.push_back(p + " = pred" + DimsText(av.dims) + " compare(" + av.name + ", " +
                       bv.name + "), direction=" + kDirs[Uniform(0, 5)] +
                       Annotation(av.dims.size()));
      Add(out, "select(" + p + ", " + av.name + ", " + bv.name + ")");
      return true;
    }
    if (kind == "convert") {
      const Value* v = Pick([](const Value& v) { return v.type == "s32" || v.exact; });
      if (!v) return false;
      Value out = *v;
      out.type = v->type == "f32" ? "s32" : "f32";
      Add(out, "convert(" + v->name + ")");
      return true;
    }
    if (kind == "broadcast") {
      const Value* v = Pick([&](const Value& v) {
        return static_cast<int64_t>(v.dims.size()) < o_.max_rank;
      });
      if (!v) return false;
      Value out = *v;
      int64_t pos = Uniform(0, v->dims.size());
      out.dims.insert(out.dims.begin() + pos, Uniform(1, o_.max_dim));
      std::vector<int64_t> map;
      for (int64_t i = 0; i < static_cast<int64_t>(v->dims.size()); ++i)
        map.push_back(i < pos ? i : i + 1);
      Add(out, "broadcast(" + v->name + "), dimensions=" + ListText(map));
      return true;
    }
    if (kind == "reshape") {
      const Value* v = Pick([](const Value& v) { return !v.dims.empty(); });
      if (!v) return false;
      Value out = *v;
      std::vector<int64_t>& d = out.dims;
      int choice = static_cast<int>(Uniform(0, 2));
      if (choice == 0 && d.size() >= 2) {  // merge two adjacent dims
        size_t i = Uniform(0, d.size() - 2);
        d[i] *= d[i + 1];
        d.erase(d.begin() + i + 1);
      } else if (choice == 1) {  // split a composite dim
        std::vector<size_t> composite;
        for (size_t i = 0; i < d.size(); ++i)
          if (Divisors(d[i]).size() > 2) composite.push_back(i);
        if (composite.empty() || static_cast<int64_t>(d.size()) >= o_.max_rank) return false;
        size_t i = composite[Uniform(0, composite.size() - 1)];
        std::vector<int64_t> divs = Divisors(d[i]);
        int64_t a = divs[Uniform(1, divs.size() - 2)];
        int64_t b = d[i] / a;
        d[i] = a;
        d.insert(d.begin() + i + 1, b);
      } else {  // flatten
        int64_t n = 1;
        for (int64_t x : d) n *= x;
        d = {n};
      }
      if (d == v->dims) return false;
      Add(out, "reshape(" + v->name + ")");
      return true;
    }
    if (kind == "transpose") {
      const Value* v = Pick([](const Value& v) { return v.dims.size() >= 2; });
      if (!v) return false;
      std::vector<int64_t> perm(v->dims.size());
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng_);
      Value out = *v;
      for (size_t i = 0; i < perm.size(); ++i) out.dims[i] = v->dims[perm[i]];
      Add(out, "transpose(" + v->name + "), dimensions=" + ListText(perm));
      return true;
    }
    if (kind == "reduce") {
      const Value* v = Pick([](const Value& v) { return !v.dims.empty(); });
      if (!v) return false;
      Value in = *v;
      std::vector<int64_t> reduced, kept_dims;
      for (size_t i = 0; i < in.dims.size(); ++i) {
        if (Coin(0.5))
          reduced.push_back(i);
        else
          kept_dims.push_back(in.dims[i]);
      }
      if (reduced.empty()) {
        reduced.push_back(in.dims.size() - 1);
        kept_dims.pop_back();
      }
      Value out = in;
      out.dims = kept_dims;
      std::string init, comp;
      if (in.type == "s32") {
        init = Scalar("s32", "0");
        comp = "add_s32";
      } else if (Coin(0.5)) {
        init = Scalar("f32", "0");
        comp = "add_f32";
        out.exact = false;
      } else {
        init = Scalar("f32", "-1e+30");
        comp = "max_f32";
      }
      Add(out, "reduce(" + in.name + ", " + init + "), dimensions=" + ListText(reduced) +
                   ", to_apply=" + comp);
      return true;
    }
    if (kind == "dot") {
      const Value* v = Pick([](const Value& v) { return v.type == "f32" && !v.dims.empty(); });
      if (!v) return false;
      Value lhs = *v;
      int64_t r = lhs.dims.size();
      int64_t c = Uniform(0, r - 1);
      int64_t b = -1;
      if (r >= 2 && Coin(0.4)) {
        do b = Uniform(0, r - 1); while (b == c);
      }
      bool rhs_free = Coin(0.8);
      int64_t m = Uniform(1, o_.max_dim);
      std::vector<int64_t> rdims;
      if (b >= 0) rdims.push_back(lhs.dims[b]);
      rdims.push_back(lhs.dims[c]);
      if (rhs_free) rdims.push_back(m);
      Value out;
      out.type = "f32";
      out.exact = false;
      if (b >= 0) out.dims.push_back(lhs.dims[b]);
      for (int64_t i = 0; i < r; ++i)
        if (i != c && i != b) out.dims.push_back(lhs.dims[i]);
      if (rhs_free) out.dims.push_back(m);
      if (static_cast<int64_t>(out.dims.size()) > o_.max_rank) return false;
      const Value& rhs = NewParam("f32", rdims);
      std::string dn;
      if (b >= 0) dn += "lhs_batch_dims={" + std::to_string(b) + "}, rhs_batch_dims={0}, ";
      dn += "lhs_contracting_dims={" + std::to_string(c) + "}, rhs_contracting_dims={" +
            std::to_string(b >= 0 ? 1 : 0) + "}";
      Add(out, "dot(" + lhs.name + ", " + rhs.name + "), " + dn);
      return true;
    }
    if (kind == "iota") {
      Value out;
      out.type = Coin(0.5) ? "f32" : "s32";
      out.dims = RandomDims(1);
      Add(out, "iota(), iota_dimension=" + std::to_string(Uniform(0, out.dims.size() - 1)));
      return true;
    }
    if (kind == "constant") {
      Value out;
      out.type = Coin(0.5) ? "f32" : "s32";
      out.dims = {Uniform(1, o_.max_dim)};
      std::string lit = "{";
      for (int64_t i = 0; i < out.dims[0]; ++i)
        lit += (i ? ", " : "") + std::to_string(Uniform(-3, 3));
      Add(out, "constant(" + lit + "})");
      return true;
    }
    if (kind == "slice") {
      const Value* v = Pick([](const Value& v) {
        return std::any_of(v.dims.begin(), v.dims.end(), [](int64_t d) { return d >= 2; });
      });
      if (!v) return false;
      Value out = *v;
      std::vector<size_t> cand;
      for (size_t i = 0; i < v->dims.size(); ++i)
        if (v->dims[i] >= 2) cand.push_back(i);
      size_t d = cand[Uniform(0, cand.size() - 1)];
      std::string spec = "{";
      for (size_t i = 0; i < v->dims.size(); ++i) {
        int64_t start = 0, limit = v->dims[i], stride = 1;
        if (i == d) {
          start = Uniform(0, v->dims[i] - 1);
          limit = Uniform(start + 1, v->dims[i]);
          stride = Coin(0.25) ? 2 : 1;
        }
        out.dims[i] = (limit - start + stride - 1) / stride;
        spec += (i ? ", " : "") + std::string("[") + std::to_string(start) + ":" +
                std::to_string(limit) + ":" + std::to_string(stride) + "]";
      }
      Add(out, "slice(" + v->name + "), slice=" + spec + "}");
      return true;
    }
    if (kind == "concatenate") {
      const Value* v = Pick([](const Value& v) { return !v.dims.empty(); });
      if (!v) return false;
      Value out = *v;
      int64_t d = Uniform(0, v->dims.size() - 1);
      out.dims[d] *= 2;
      if (out.dims[d] > 2 * o_.max_dim) return false;
      Add(out, "concatenate(" + v->name + ", " + v->name + "), dimensions={" +
                   std::to_string(d) + "}");
      return true;
    }
    return EmitDataMovement(kind);
  }

  // A start index for a dynamic slice along a dim of size n: a constant
  // (possibly out of range, to exercise clamping) or a scalar parameter.
  std::string StartIndex(int64_t n) {
    if (Coin(0.5)) return Scalar("s32", std::to_string(Uniform(-2, n + 1)));
    return NewParam("s32", {}).name;
  }

  bool EmitDataMovement(const std::string& kind) {
    auto ranked = [](const Value& v) { return !v.dims.empty(); };
    if (kind == "pad") {
      const Value* v = Pick(ranked);
      if (!v) return false;
      Value out = *v;
      int64_t d = Uniform(0, v->dims.size() - 1);
      int64_t low = Uniform(-2, 3), high = Uniform(-2, 3);
      int64_t interior = Coin(0.3) ? Uniform(1, 2) : 0;
      int64_t n = v->dims[d];
      out.dims[d] = low + high + n + interior * (n - 1);
      if (out.dims[d] < 1 || out.dims[d] > 3 * o_.max_dim) return false;
      std::string value = Scalar(v->type, Coin(0.5) ? "0" : "-2");
      std::string cfg;
      for (size_t i = 0; i < v->dims.size(); ++i) {
        cfg += i ? "x" : "";
        cfg += static_cast<int64_t>(i) == d ? std::to_string(low) + "_" + std::to_string(high) +
                                                  "_" + std::to_string(interior)
                                            : "0_0_0";
      }
      Add(out, "pad(" + v->name + ", " + value + "), padding=" + cfg);
      return true;
    }
    if (kind == "reverse") {
      const Value* v = Pick(ranked);
      if (!v) return false;
      std::vector<int64_t> dims;
      for (size_t i = 0; i < v->dims.size(); ++i)
        if (Coin(0.5)) dims.push_back(i);
      if (dims.empty()) dims.push_back(Uniform(0, v->dims.size() - 1));
      Add(*v, "reverse(" + v->name + "), dimensions=" + ListText(dims));
      return true;
    }
    if (kind == "dynamic_slice" || kind == "dynamic_update_slice") {
      const Value* v = Pick(ranked);
      if (!v) return false;
      Value in = *v;
      std::vector<int64_t> sizes;
      for (int64_t n : in.dims) sizes.push_back(Coin(0.3) ? n : Uniform(1, n));
      std::string starts;
      for (int64_t n : in.dims) starts += ", " + StartIndex(n);
      if (kind == "dynamic_slice") {
        Value out = in;
        out.dims = sizes;
        Add(out, "dynamic-slice(" + in.name + starts + "), dynamic_slice_sizes=" +
                     ListText(sizes));
        return true;
      }
      const Value& update = NewParam(in.type, sizes);
      std::string name = update.name;
      Add(in, "dynamic-update-slice(" + in.name + ", " + name + starts + ")");
      return true;
    }
    if (kind == "sort") {
      const Value* v = Pick(ranked);
      if (!v) return false;
      Value in = *v;
      int64_t d = Uniform(0, in.dims.size() - 1);
      // A key-value sort moves values by the key order, so a last-bit
      // difference in an inexact key could swap them: exact keys only.
      if (in.type == "f32" && in.exact && Coin(0.4)) {
        Value idx = in;
        idx.type = "s32";
        const Value& io = Add(idx, "iota(), iota_dimension=" + std::to_string(d));
        std::string io_name = io.name;
        std::string tuple = "k" + std::to_string(next_++);
        lines_.push_back(tuple + " = (" + ShapeText(in) + ", " + ShapeText(idx) + ") sort(" +
                         in.name + ", " + io_name + "), dimensions={" + std::to_string(d) +
                         "}, to_apply=lt_key_f32" + Annotation(in.dims.size()));
        Add(in, "get-tuple-element(" + tuple + "), index=0");
        Add(idx, "get-tuple-element(" + tuple + "), index=1");
        return true;
      }
      Add(in, "sort(" + in.name + "), dimensions={" + std::to_string(d) + "}, to_apply=lt_" +
                  in.type);
      return true;
    }
    if (kind == "concatenate_mixed") {
      const Value* v = Pick(ranked);
      if (!v) return false;
      Value in = *v;
      int64_t d = Uniform(0, in.dims.size() - 1);
      std::vector<int64_t> other = in.dims;
      other[d] = Uniform(1, o_.max_dim);
      const Value& p = NewParam(in.type, other);
      std::string pname = p.name;
      Value out = in;
      out.dims[d] += other[d];
      bool first = Coin(0.5);
      Add(out, "concatenate(" + (first ? in.name + ", " + pname : pname + ", " + in.name) +
                   "), dimensions={" + std::to_string(d) + "}");
      return true;
    }
    if (kind == "convolution") return EmitConvolution();
    if (kind == "reduce_window") return EmitReduceWindow();
    if (kind == "partial_sum") return EmitPartialSum();
    if (kind == "cholesky" || kind == "triangular_solve") return EmitLinalg(kind);
    if (kind == "ragged_dot") return EmitRaggedDot();
    if (kind == "gather" || kind == "scatter") return EmitGatherScatter(kind == "scatter");
    return false;
  }

  // gather of slices that drop operand dim d (one index per slice, s32 in
  // [-4, 4]: out of range starts are clamped), or the matching scatter with
  // an add combiner (out of range rows are skipped). Indices have one or two
  // batch dims; the slice keeps the other operand dims whole.
  bool EmitGatherScatter(bool scatter) {
    std::vector<int64_t> od = RandomDims(1);
    const int64_t r = static_cast<int64_t>(od.size());
    const int64_t d = Uniform(0, r - 1);
    std::vector<int64_t> batch = {Uniform(1, o_.max_dim)};
    if (Coin(0.4)) batch.push_back(Uniform(1, 4));
    const int64_t nb = static_cast<int64_t>(batch.size());
    const std::string type = Coin(0.8) ? "f32" : "s32";
    std::string operand = NewParam(type, od).name;
    std::vector<int64_t> idims = batch;
    idims.push_back(1);
    std::string indices = NewParam("s32", idims).name;
    // Window dims: the operand's dims but d, after the batch dims.
    std::vector<int64_t> window_shape = batch, window_dims, slice_sizes;
    for (int64_t i = 0; i < r; ++i) {
      slice_sizes.push_back(i == d ? 1 : od[i]);
      if (i == d) continue;
      window_dims.push_back(static_cast<int64_t>(window_shape.size()));
      window_shape.push_back(od[i]);
    }
    const std::string dd = "{" + std::to_string(d) + "}";
    Value out;
    out.type = type;
    if (!scatter) {
      out.dims = window_shape;
      Add(out, "gather(" + operand + ", " + indices + "), offset_dims=" + ListText(window_dims) +
                   ", collapsed_slice_dims=" + dd + ", start_index_map=" + dd +
                   ", index_vector_dim=" + std::to_string(nb) +
                   ", slice_sizes=" + ListText(slice_sizes));
      return true;
    }
    std::string updates = NewParam(type, window_shape).name;
    out.dims = od;
    out.exact = type != "f32";  // duplicate rows sum in an unspecified order
    Add(out, "scatter(" + operand + ", " + indices + ", " + updates +
                 "), update_window_dims=" + ListText(window_dims) + ", inserted_window_dims=" +
                 dd + ", scatter_dims_to_operand_dims=" + dd +
                 ", index_vector_dim=" + std::to_string(nb) + ", to_apply=add_" + type);
    return true;
  }

  // ragged-dot on fresh parameters, the mode chosen at random: rows of lhs
  // [b, m, k] grouped against rhs [g, b, k, n]; contracting positions of
  // [m, k] x [k, n] grouped into a [g, m, n] result; or a batch-dim ragged
  // [b, m, k] x [b, k, n] (a plain dot). Group sizes are s32 in [-4, 4], so
  // groups may be empty, negative or overrun the dim.
  bool EmitRaggedDot() {
    if (o_.max_rank < 3) return false;
    const int64_t mode = Uniform(0, 2);
    const int64_t b = Uniform(1, o_.max_dim), m = Uniform(1, o_.max_dim),
                  k = Uniform(1, o_.max_dim), n = Uniform(1, o_.max_dim), g = Uniform(1, 4);
    Value out;
    out.type = "f32";
    out.exact = false;
    std::string lhs, rhs, sizes, dn;
    if (mode == 0) {
      lhs = NewParam("f32", {b, m, k}).name;
      rhs = NewParam("f32", {g, b, k, n}).name;
      sizes = NewParam("s32", {b, g}).name;
      out.dims = {b, m, n};
      dn = "lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, "
           "rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}";
    } else if (mode == 1) {
      lhs = NewParam("f32", {m, k}).name;
      rhs = NewParam("f32", {k, n}).name;
      sizes = NewParam("s32", {g}).name;
      out.dims = {g, m, n};
      dn = "lhs_contracting_dims={1}, rhs_contracting_dims={0}, lhs_ragged_dims={1}";
    } else {
      lhs = NewParam("f32", {b, m, k}).name;
      rhs = NewParam("f32", {b, k, n}).name;
      sizes = NewParam("s32", {g}).name;
      out.dims = {b, m, n};
      dn = "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
           "rhs_contracting_dims={1}, lhs_ragged_dims={0}";
    }
    Add(out, "ragged-dot(" + lhs + ", " + rhs + ", " + sizes + "), " + dn);
    return true;
  }

  // A fresh f32[dims] (dims = [b, n, n]) holding `diag` on the diagonal of
  // every matrix and 0 elsewhere; intermediate lines only (no Value).
  std::string DiagonalShift(const std::vector<int64_t>& dims, int64_t diag) {
    const std::string d = DimsText(dims), id = "c" + std::to_string(next_++);
    lines_.push_back(id + "a = s32" + d + " iota(), iota_dimension=1");
    lines_.push_back(id + "b = s32" + d + " iota(), iota_dimension=2");
    lines_.push_back(id + "eq = pred" + d + " compare(" + id + "a, " + id + "b), direction=EQ");
    const std::string k = Scalar("f32", std::to_string(diag)), z = Scalar("f32", "0");
    lines_.push_back(id + "k = f32" + d + " broadcast(" + k + "), dimensions={}");
    lines_.push_back(id + "z = f32" + d + " broadcast(" + z + "), dimensions={}");
    lines_.push_back(id + " = f32" + d + " select(" + id + "eq, " + id + "k, " + id + "z)");
    return id;
  }

  // cholesky of p p^T + (n+1) I (symmetric positive definite), or
  // triangular-solve with a random-option system whose matrix has a strong
  // diagonal, on fresh parameters with a batch dim.
  bool EmitLinalg(const std::string& kind) {
    if (o_.max_rank < 3) return false;
    const int64_t b = Uniform(1, o_.max_dim), n = Uniform(1, std::min<int64_t>(o_.max_dim, 5));
    const std::vector<int64_t> sq{b, n, n};
    const std::string sq_text = "f32" + DimsText(sq);
    const Value& p = NewParam("f32", sq);
    const std::string pname = p.name;
    const std::string shift = DiagonalShift(sq, n + 1);
    Value out;
    out.type = "f32";
    out.exact = false;
    if (kind == "cholesky") {
      const std::string pp = "c" + std::to_string(next_++);
      lines_.push_back(pp + " = " + sq_text + " dot(" + pname + ", " + pname +
                       "), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                       "rhs_contracting_dims={2}");
      const std::string spd = "c" + std::to_string(next_++);
      lines_.push_back(spd + " = " + sq_text + " add(" + pp + ", " + shift + ")");
      out.dims = sq;
      Add(out, "cholesky(" + spd + "), lower=" + (Coin(0.5) ? "true" : "false"));
      return true;
    }
    const std::string a = "c" + std::to_string(next_++);
    lines_.push_back(a + " = " + sq_text + " add(" + pname + ", " + shift + ")");
    const bool left = Coin(0.5);
    const int64_t k = Uniform(1, o_.max_dim);
    const Value& rhs = NewParam("f32", left ? std::vector<int64_t>{b, n, k}
                                            : std::vector<int64_t>{b, k, n});
    const char* transposes[] = {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"};
    out.dims = rhs.dims;
    Add(out, "triangular-solve(" + a + ", " + rhs.name + "), left_side=" +
                 (left ? "true" : "false") + ", lower=" + (Coin(0.5) ? "true" : "false") +
                 ", unit_diagonal=" + (Coin(0.3) ? "true" : "false") +
                 ", transpose_a=" + transposes[Uniform(0, 2)]);
    return true;
  }

  // A sharding holding partial sums: {unreduced}, or tiles on random dims
  // with the remaining devices split into an unreduced subgroup and maybe
  // a replicated one. Empty when there is one device.
  std::string RandomPartialSumSharding(size_t rank) {
    if (n_ == 1) return "";
    if (rank == 0 || Coin(0.25)) return "{unreduced}";
    std::vector<int64_t> tiles(rank, 1);
    int64_t remaining = n_;
    for (size_t d = 0; d < rank; ++d) {
      if (!Coin(0.5)) continue;
      std::vector<int64_t> divs = Divisors(remaining);
      // Leave at least a factor 2 for the unreduced subgroup when possible.
      int64_t t = divs[Uniform(0, divs.size() - 1)];
      if (t == remaining && remaining > 1) continue;
      tiles[d] = t;
      remaining /= t;
    }
    if (remaining == 1) return "{unreduced}";
    std::vector<int64_t> divs = Divisors(remaining);
    int64_t u = divs[Uniform(1, divs.size() - 1)];  // > 1
    int64_t r = remaining / u;
    std::vector<int64_t> dims = tiles;
    dims.push_back(u);
    if (r > 1) dims.push_back(r);
    return "{devices=" + DimsText(dims) + DeviceList(dims) +
           (r > 1 ? " last_tile_dims={unreduced, replicated}}" : " last_tile_dims={unreduced}}");
  }

  bool EmitPartialSum() {
    const Value* v = Pick([](const Value&) { return true; });
    if (!v) return false;
    std::string s = RandomPartialSumSharding(v->dims.size());
    if (s.empty()) return false;
    // Partial sums of x are x on one member and zeros elsewhere: summing
    // them back is exact, so the value keeps its exact flag.
    Value out = *v;
    Add(out, "copy(" + v->name + "), sharding=" + s, /*annotate=*/false);
    return true;
  }

  // A random window along one dim of size `n` and the output size, or
  // false when the window yields no output.
  bool RandomWindowDim(int64_t n, bool allow_base_dilation, std::string& attr_size,
                       std::string& attr_stride, std::string& attr_pad, std::string& attr_lhs,
                       std::string& attr_rhs, int64_t& out, int64_t* size = nullptr) {
    const int64_t k = Uniform(1, 3), s = Uniform(1, 2);
    if (size != nullptr) *size = k;
    const int64_t lo = Uniform(-1, 2), hi = Uniform(-1, 2);
    const int64_t bd = allow_base_dilation && Coin(0.2) ? 2 : 1;
    const int64_t wd = Coin(0.2) ? 2 : 1;
    const int64_t padded = lo + (n - 1) * bd + 1 + hi, extent = (k - 1) * wd + 1;
    if (padded < extent) return false;
    out = (padded - extent) / s + 1;
    auto join = [](std::string& a, const std::string& x) { a += (a.empty() ? "" : "x") + x; };
    join(attr_size, std::to_string(k));
    join(attr_stride, std::to_string(s));
    join(attr_pad, std::to_string(lo) + "_" + std::to_string(hi));
    join(attr_lhs, std::to_string(bd));
    join(attr_rhs, std::to_string(wd));
    return true;
  }

  // A sharding that tiles some of `dims` (often spatial ones) and maybe
  // others, the rest of the devices a replicated subgroup.
  std::string WindowedSharding(size_t rank, const std::vector<int64_t>& dims) {
    if (n_ == 1 || Coin(0.3)) return RandomSharding(rank);
    std::vector<int64_t> tiles(rank, 1);
    int64_t remaining = n_;
    for (int64_t d : dims) {
      std::vector<int64_t> divs = Divisors(remaining);
      int64_t t = divs[Uniform(0, divs.size() - 1)];
      tiles[d] = t;
      remaining /= t;
    }
    if (remaining == n_) return "{replicated}";
    std::vector<int64_t> tdims = tiles;
    if (remaining > 1) tdims.push_back(remaining);
    return "{devices=" + DimsText(tdims) + DeviceList(tdims) +
           (remaining > 1 ? " last_tile_dim_replicate}" : "}");
  }

  // convolution over an f32 value read as [batch, spatial..., feature].
  bool EmitConvolution() {
    const Value* v = Pick([](const Value& v) {
      return v.type == "f32" && v.dims.size() >= 3 && v.dims.size() <= 4;
    });
    if (!v) return false;
    Value lhs = *v;
    const int64_t r = lhs.dims.size(), nsp = r - 2;
    std::string size, stride, pad, lhs_d, rhs_d;
    Value out;
    out.type = "f32";
    out.exact = false;
    out.dims.push_back(lhs.dims[0]);
    std::vector<int64_t> kdims;
    for (int64_t k = 0; k < nsp; ++k) {
      int64_t o = 0, window = 1;
      if (!RandomWindowDim(lhs.dims[1 + k], true, size, stride, pad, lhs_d, rhs_d, o, &window))
        return false;
      out.dims.push_back(o);
      kdims.push_back(window);
    }
    const int64_t f = lhs.dims[r - 1];
    const int64_t groups = f > 1 && Coin(0.3) ? f : 1;  // depthwise
    const int64_t of = groups * Uniform(1, 2);
    out.dims.push_back(of);
    kdims.push_back(f / groups);
    kdims.push_back(of);
    const Value& w = NewParam("f32", kdims);
    std::string labels = nsp == 1 ? "b0f_0io->b0f" : "b01f_01io->b01f";
    std::string attrs = "window={size=" + size + " stride=" + stride + " pad=" + pad +
                        " lhs_dilate=" + lhs_d + " rhs_dilate=" + rhs_d + "}, dim_labels=" +
                        labels;
    if (groups > 1) attrs += ", feature_group_count=" + std::to_string(groups);
    std::vector<int64_t> spatial;
    for (int64_t k = 0; k < nsp; ++k)
      if (Coin(0.7)) spatial.push_back(1 + k);
    const Value& res = Add(out, "convolution(" + lhs.name + ", " + w.name + "), " + attrs,
                           /*annotate=*/false);
    lines_.back() += ", sharding=" + WindowedSharding(res.dims.size(), spatial);
    return true;
  }

  // reduce-window (sum or max) with a random window on every dim.
  bool EmitReduceWindow() {
    const Value* v = Pick([](const Value& v) { return !v.dims.empty(); });
    if (!v) return false;
    Value in = *v;
    std::string size, stride, pad, lhs_d, rhs_d;
    Value out = in;
    std::vector<int64_t> windowed;
    for (size_t d = 0; d < in.dims.size(); ++d) {
      int64_t o = 0;
      if (!RandomWindowDim(in.dims[d], true, size, stride, pad, lhs_d, rhs_d, o)) return false;
      out.dims[d] = o;
      if (Coin(0.7)) windowed.push_back(d);
    }
    const bool is_max = in.type == "f32" && Coin(0.5);
    if (in.type == "f32" && !is_max) out.exact = false;
    std::string init = Scalar(in.type, is_max ? "-inf" : "0");
    std::string fn = is_max ? "max_f32" : (in.type == "f32" ? "add_f32" : "add_s32");
    Add(out,
        "reduce-window(" + in.name + ", " + init + "), window={size=" + size + " stride=" +
            stride + " pad=" + pad + " lhs_dilate=" + lhs_d + " rhs_dilate=" + rhs_d +
            "}, to_apply=" + fn,
        /*annotate=*/false);
    lines_.back() += ", sharding=" + WindowedSharding(out.dims.size(), windowed);
    return true;
  }

  std::mt19937_64 rng_;
  RandomModuleOptions o_;
  int64_t n_ = 1;
  int64_t next_ = 0;
  int64_t params_ = 0;
  std::vector<std::string> lines_;
  std::vector<Value> values_;
};

}  // namespace

const std::vector<RandomOpKind>& RandomOpKinds() { return kKinds; }

RandomCase GenerateRandomCase(uint64_t seed, const RandomModuleOptions& options) {
  Generator g(seed * 0x2545F4914F6CDD1Dull + 12345, options);
  return g.Run(seed);
}

}  // namespace meshsplit
