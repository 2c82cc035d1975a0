// ScalarProgram: compiles a scalar computation into a flat list of typed
// steps over 64-bit registers. Each step mirrors the per-element semantics of
// the corresponding elementwise kernel (kernels_elementwise.cc), including
// f16/bf16 staging through f32 and XLA's saturating float->int convert.
#include "runtime/fast_scalar.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// MESHSPLIT_NO_FAST_KERNELS=1 turns the fast paths off (for A/B timing).
std::atomic<bool> g_enabled{std::getenv("MESHSPLIT_NO_FAST_KERNELS") == nullptr};

enum ScalarOp {
  kParam, kConst, kConvert, kBitcast, kCompare, kSelect, kAnd, kOr, kXor, kNot,
  kAdd, kSub, kMul, kMax, kMin, kNeg
};

template <typename T>
inline T Load(uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}
template <typename T>
inline uint64_t Store(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

inline float HalfToF32(uint64_t bits, PrimitiveType t) {
  uint16_t h = static_cast<uint16_t>(bits);
  return t == PrimitiveType::BF16 ? Bf16ToF32(h) : F16ToF32(h);
}
inline uint64_t F32ToHalf(float f, PrimitiveType t) {
  return t == PrimitiveType::BF16 ? F32ToBf16(f) : F32ToF16(f);
}

// Programs keep the direction as an int operand.
template <typename T>
inline bool Cmp(int dir, T a, T b) {
  return CompareByDirection(static_cast<ComparisonDirection>(dir), a, b);
}

// Converts a value of type `from` (bits) to `to`, as ConvertLiteral does.
uint64_t ConvertBits(uint64_t bits, PrimitiveType from, PrimitiveType to) {
  if (from == to) return bits;
  if (Is16BitFloat(from)) {
    float f = HalfToF32(bits, from);
    return ConvertBits(Store(f), PrimitiveType::F32, to);
  }
  if (Is16BitFloat(to)) {  // from != F64 (Compile refuses that pair)
    float f = 0;
    DispatchCompute(from, [&]<typename F>() { f = SaturatingConvert<float>(Load<F>(bits)); });
    return F32ToHalf(f, to);
  }
  uint64_t out = 0;
  DispatchCompute(from, [&]<typename F>() {
    F x = Load<F>(bits);
    if (to == PrimitiveType::PRED) {
      out = x != 0;
      return;
    }
    DispatchCompute(to, [&]<typename T>() { out = Store(SaturatingConvert<T>(x)); });
  });
  return out;
}

template <typename T>
inline T Arith(int op, T x, T y) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case kAdd: return x + y;
      case kSub: return x - y;
      case kMul: return x * y;
      case kMax: return ApplyReducerKind(ReducerKind::kMax, x, y);
      case kMin: return ApplyReducerKind(ReducerKind::kMin, x, y);
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case kAdd: return static_cast<T>(U(x) + U(y));
      case kSub: return static_cast<T>(U(x) - U(y));
      case kMul: return static_cast<T>(U(x) * U(y));
      case kMax: return x > y ? x : y;
      case kMin: return x < y ? x : y;
      case kAnd: return static_cast<T>(x & y);
      case kOr: return static_cast<T>(x | y);
      case kXor: return static_cast<T>(x ^ y);
    }
  }
  return x;
}

bool Supported(PrimitiveType t) {
  // f8 and complex values have no scalar compute type here: interpreted.
  if (IsF8Type(t) || IsComplex(t)) return false;
  return t == PrimitiveType::PRED || Is16BitFloat(t) || IsSupportedType(t);
}

}  // namespace

void SetScalarProgramsEnabled(bool enabled) { g_enabled = enabled; }
bool ScalarProgramsEnabled() { return g_enabled; }

std::optional<ScalarProgram> ScalarProgram::Compile(const Computation& c) {
  const Instruction* root = c.root();
  if (root == nullptr) return std::nullopt;
  ScalarProgram p;
  for (int i = 0; i < c.parameter_count(); ++i) {
    const Shape& s = c.parameter(i)->shape();
    if (!s.IsArray() || s.rank() != 0 || !Supported(s.element_type())) return std::nullopt;
    p.param_types_.push_back(s.element_type());
  }
  std::unordered_map<const Instruction*, int> reg;
  // Iterative post-order from the root.
  std::vector<std::pair<const Instruction*, int>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [in, next] = stack.back();
    if (reg.count(in)) {
      stack.pop_back();
      continue;
    }
    if (next < in->operand_count()) {
      const Instruction* o = in->operand(next++);
      if (!reg.count(o)) stack.push_back({o, 0});
      continue;
    }
    const Shape& s = in->shape();
    if (!s.IsArray() || s.rank() != 0 || !Supported(s.element_type())) return std::nullopt;
    if (!in->called_computations().empty()) return std::nullopt;
    Step st;
    st.type = s.element_type();
    for (int i = 0; i < in->operand_count(); ++i) {
      const Shape& os = in->operand(i)->shape();
      if (!os.IsArray() || os.rank() != 0) return std::nullopt;
    }
    // An init-capture: clang 15 cannot capture a structured binding.
    auto opnd = [&reg, in = in](int i) { return reg.at(in->operand(i)); };
    PrimitiveType t = st.type;
    PrimitiveType t0 = in->operand_count() > 0 ? in->operand(0)->shape().element_type() : t;
    st.in_type = t0;
    int n = in->operand_count();
    switch (in->opcode()) {
      case Opcode::kParameter: {
        int64_t num = in->attrs().parameter_number;
        if (num < 0 || num >= c.parameter_count() || p.param_types_[num] != t) return std::nullopt;
        st.op = kParam;
        st.a = static_cast<int>(num);
        break;
      }
      case Opcode::kConstant: {
        if (!in->has_literal() || in->literal().element_type() != t ||
            in->literal().size_bytes() != ByteWidth(t))
          return std::nullopt;
        st.op = kConst;
        std::memcpy(&st.imm, in->literal().raw(), ByteWidth(t));
        break;
      }
      case Opcode::kConvert:
        if (n != 1 || (t0 == PrimitiveType::F64 && Is16BitFloat(t))) return std::nullopt;
        st.op = kConvert;
        st.a = opnd(0);
        break;
      case Opcode::kBitcastConvert:
        if (n != 1 || ByteWidth(t0) != ByteWidth(t)) return std::nullopt;
        st.op = kBitcast;
        st.a = opnd(0);
        break;
      case Opcode::kCompare: {
        if (n != 2 || t != PrimitiveType::PRED || !in->attrs().comparison_direction ||
            in->operand(1)->shape().element_type() != t0)
          return std::nullopt;
        st.op = kCompare;
        st.a = opnd(0);
        st.b = opnd(1);
        st.aux = static_cast<int>(*in->attrs().comparison_direction);
        st.imm = in->attrs().comparison_type == "TOTALORDER" ? 1 : 0;
        break;
      }
      case Opcode::kSelect:
        if (n != 3 || t0 != PrimitiveType::PRED || in->operand(1)->shape().element_type() != t ||
            in->operand(2)->shape().element_type() != t)
          return std::nullopt;
        st.op = kSelect;
        st.a = opnd(0);
        st.b = opnd(1);
        st.c = opnd(2);
        break;
      case Opcode::kNot:
      case Opcode::kNegate:
        if (n != 1 || t0 != t) return std::nullopt;
        if (in->opcode() == Opcode::kNot && IsFloatingPoint(t)) return std::nullopt;
        if (in->opcode() == Opcode::kNegate && t == PrimitiveType::PRED) return std::nullopt;
        st.op = in->opcode() == Opcode::kNot ? kNot : kNeg;
        st.a = opnd(0);
        break;
      case Opcode::kAnd: case Opcode::kOr: case Opcode::kXor:
      case Opcode::kAdd: case Opcode::kSubtract: case Opcode::kMultiply:
      case Opcode::kMaximum: case Opcode::kMinimum: {
        if (n != 2 || t0 != t || in->operand(1)->shape().element_type() != t) return std::nullopt;
        Opcode op = in->opcode();
        bool logical = op == Opcode::kAnd || op == Opcode::kOr || op == Opcode::kXor;
        if (logical && IsFloatingPoint(t)) return std::nullopt;
        st.op = op == Opcode::kAnd ? kAnd : op == Opcode::kOr ? kOr : op == Opcode::kXor ? kXor
              : op == Opcode::kAdd ? kAdd : op == Opcode::kSubtract ? kSub
              : op == Opcode::kMultiply ? kMul : op == Opcode::kMaximum ? kMax : kMin;
        if (t == PrimitiveType::PRED) {
          // As BinaryPred: min/mul are and, max/add are or, subtract is xor.
          if (st.op == kMin || st.op == kMul) st.op = kAnd;
          else if (st.op == kMax || st.op == kAdd) st.op = kOr;
          else if (st.op == kSub) st.op = kXor;
        }
        st.a = opnd(0);
        st.b = opnd(1);
        break;
      }
      default:
        return std::nullopt;
    }
    reg[in] = static_cast<int>(p.steps_.size());
    p.steps_.push_back(st);
    stack.pop_back();
  }
  p.regs_.resize(p.steps_.size());
  return p;
}

uint64_t ScalarProgram::Run(const void* const* args) const {
  uint64_t* r = regs_.data();
  for (size_t i = 0; i < steps_.size(); ++i) {
    const Step& s = steps_[i];
    uint64_t v = 0;
    switch (s.op) {
      case kParam: std::memcpy(&v, args[s.a], ByteWidth(s.type)); break;
      case kConst: v = s.imm; break;
      case kConvert: v = ConvertBits(r[s.a], s.in_type, s.type); break;
      case kBitcast:
        v = r[s.a];
        if (s.type == PrimitiveType::PRED) v = (v & 0xff) != 0;
        break;
      case kSelect: v = (r[s.a] & 0xff) != 0 ? r[s.b] : r[s.c]; break;
      case kCompare: {
        uint64_t x = r[s.a], y = r[s.b];
        PrimitiveType t = s.in_type;
        bool total = s.imm != 0;
        if (Is16BitFloat(t)) {
          float fx = HalfToF32(x, t), fy = HalfToF32(y, t);
          v = total ? Cmp(s.aux, TotalOrderKey(fx), TotalOrderKey(fy)) : Cmp(s.aux, fx, fy);
          break;
        }
        DispatchStorage(t, [&]<typename T>() {
          T a = Load<T>(x), b = Load<T>(y);
          if constexpr (std::is_floating_point_v<T>) {
            if (total) {
              v = Cmp(s.aux, TotalOrderKey(a), TotalOrderKey(b));
              return;
            }
          }
          v = Cmp(s.aux, a, b);
        });
        break;
      }
      case kNot:
        if (s.type == PrimitiveType::PRED) {
          v = !(r[s.a] & 0xff);
        } else {
          DispatchCompute(s.type, [&]<typename T>() {
            if constexpr (std::is_integral_v<T>) v = Store(static_cast<T>(~Load<T>(r[s.a])));
          });
        }
        break;
      case kNeg:
        if (Is16BitFloat(s.type)) {
          v = F32ToHalf(-HalfToF32(r[s.a], s.type), s.type);
        } else {
          DispatchCompute(s.type, [&]<typename T>() {
            T x = Load<T>(r[s.a]);
            if constexpr (std::is_floating_point_v<T>) v = Store(static_cast<T>(-x));
            else v = Store(static_cast<T>(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(x)));
          });
        }
        break;
      default: {  // binary arithmetic / logical
        uint64_t x = r[s.a], y = r[s.b];
        if (s.type == PrimitiveType::PRED) {
          uint8_t a = static_cast<uint8_t>(x), b = static_cast<uint8_t>(y);
          v = s.op == kAnd ? (a & b) : s.op == kOr ? (a | b) : (a ^ b);
        } else if (Is16BitFloat(s.type)) {
          v = F32ToHalf(Arith(s.op, HalfToF32(x, s.type), HalfToF32(y, s.type)), s.type);
        } else {
          DispatchCompute(s.type, [&]<typename T>() { v = Store(Arith(s.op, Load<T>(x), Load<T>(y))); });
        }
        break;
      }
    }
    r[i] = v;
  }
  return r[steps_.size() - 1];
}

}  // namespace meshsplit::interp
