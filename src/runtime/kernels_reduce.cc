// Reduction-family kernels: reduce, reduce-window, select-and-scatter, sort
// and map. Each has a general path that calls the attached computation per
// element (any variadic reducer or comparator) and a fast path for the common
// scalar reducers (add/multiply/maximum/minimum/and/or/xor) and comparators
// (one compare of a parameter pair), which run as typed loops. Between the
// two, single-result reducers and comparators that are plain scalar
// arithmetic run as a compiled ScalarProgram.
#include <algorithm>
#include <cstring>

#include "runtime/fast_scalar.h"
#include "runtime/kernels.h"

namespace meshsplit::interp {
namespace {

// Values of a reducer call result: the scalar, or the scalars of a tuple.
StatusOr<std::vector<Literal>> SplitResult(const Instruction& instr, Literal r, size_t n) {
  std::vector<Literal> out;
  if (r.shape().IsTuple()) {
    if (r.elements().size() != n)
      return InstrError(instr, "computation returns " + std::to_string(r.elements().size()) +
                                   " values, expected " + std::to_string(n));
    for (Literal& e : r.elements()) out.push_back(std::move(e));
  } else {
    if (n != 1) return InstrError(instr, "computation returns one value, expected " + std::to_string(n));
    out.push_back(std::move(r));
  }
  for (const Literal& e : out)
    if (!e.shape().IsArray() || e.element_count() != 1)
      return InstrError(instr, "computation must return scalars");
  return out;
}

Literal MakeResult(std::vector<Literal> outs) {
  if (outs.size() == 1) return std::move(outs[0]);
  return Literal::MakeTuple(std::move(outs));
}

// Maps pred add/multiply onto or/and, which is what they compute on 0/1.
ReducerKind FastKind(const Computation* c, PrimitiveType t) {
  ReducerKind kind = ClassifyReducer(c);
  if (IsComplex(t)) return ReducerKind::kNone;  // interpreted (kernels_complex.cc)
  if (t == PrimitiveType::PRED) {
    if (kind == ReducerKind::kAdd) return ReducerKind::kOr;
    if (kind == ReducerKind::kMul) return ReducerKind::kAnd;
  }
  return kind;
}

// The array shapes of the instruction's results.
std::vector<Shape> ResultShapes(const Shape& s) {
  if (s.IsTuple()) return s.tuple_shapes();
  return {s};
}

// A single-result reducer that is plain scalar arithmetic over elements of
// type t (a select, a clamp, a reducer returning one of its parameters...),
// compiled once: interpreting it per element costs a Literal per argument and
// made a reduce-window over a few million elements take a minute.
class CompiledReducer {
 public:
  static std::optional<CompiledReducer> Make(const Computation* c, PrimitiveType t) {
    if (c == nullptr || !ScalarProgramsEnabled()) return std::nullopt;
    std::optional<ScalarProgram> p = ScalarProgram::Compile(*c);
    if (!p || p->param_count() != 2 || p->param_type(0) != t || p->param_type(1) != t ||
        p->root_type() != t)
      return std::nullopt;
    return CompiledReducer(std::move(*p), ByteWidth(t));
  }
  // acc = reducer(acc, x), both pointing at element storage.
  void Apply(uint8_t* acc, const uint8_t* x) const {
    const void* args[2] = {acc, x};
    uint64_t bits = program_.Run(args);
    std::memcpy(acc, &bits, width_);  // the bits are little-endian, zero-extended
  }
  int64_t width() const { return width_; }

 private:
  CompiledReducer(ScalarProgram p, int64_t width) : program_(std::move(p)), width_(width) {}
  ScalarProgram program_;
  int64_t width_;
};

// Reduce over `reduced` dims with a scalar binary reducer. Accumulates into
// `out` (pre-filled with the init value) in row-major input order; Round
// applies the storage rounding of 16-bit floats after each step.
template <typename T, typename Round>
void ReduceFast(const T* in, const std::vector<int64_t>& dims, const std::vector<int64_t>& out_strides,
                T* out, ReducerKind kind, Round round) {
  int r = static_cast<int>(dims.size());
  for (int64_t d : dims)
    if (d == 0) return;
  if (r == 0) {
    out[0] = round(ApplyReducerKind<T>(kind, out[0], in[0]));
    return;
  }
  int64_t inner = dims[r - 1];
  int64_t inner_os = out_strides[r - 1];
  std::vector<int64_t> idx(r - 1, 0);
  int64_t ooff = 0;
  const T* p = in;
  while (true) {
    if (inner_os == 0) {
      T acc = out[ooff];
      for (int64_t j = 0; j < inner; ++j) acc = round(ApplyReducerKind<T>(kind, acc, p[j]));
      out[ooff] = acc;
    } else {
      T* o = out + ooff;
      for (int64_t j = 0; j < inner; ++j) o[j] = round(ApplyReducerKind<T>(kind, o[j], p[j]));
    }
    p += inner;
    int d = r - 2;
    for (; d >= 0; --d) {
      ooff += out_strides[d];
      if (++idx[d] < dims[d]) break;
      ooff -= out_strides[d] * dims[d];
      idx[d] = 0;
    }
    if (d < 0) break;
  }
}

void FillWith(Literal& out, const Literal& scalar) {
  int64_t elem = ByteWidth(out.element_type());
  int64_t n = out.element_count();
  for (int64_t i = 0; i < n; ++i) std::memcpy(out.raw() + i * elem, scalar.raw(), elem);
}

// Runs fast reducer loops for type t, staging 16-bit floats through f32.
// `body(T* ...)` receives pointers of the compute type and a rounding
// function; returns false when the type has no fast path.
template <typename Body>
bool WithComputeType(PrimitiveType t, Body&& body) {
  if (IsStagedFloat(t)) {
    body.template operator()<float>([t](float v) { return RoundToStaged(v, t); });
    return true;
  }
  return DispatchCompute(t, [&]<typename T>() { body.template operator()<T>([](T v) { return v; }); });
}

Literal ToCompute(const Literal& l) {
  return IsStagedFloat(l.element_type()) ? WidenToF32(l) : l;
}
Literal FromCompute(const Literal& l, PrimitiveType t) {
  return IsStagedFloat(t) ? NarrowFromF32(l, t) : l;
}

// For each output position and window position along one dimension, the
// operand index it reads, or -1 for padding and base-dilation holes.
std::vector<std::vector<int64_t>> WindowTables(const Window& w, const std::vector<int64_t>& in_dims,
                                               const std::vector<int64_t>& out_dims) {
  std::vector<std::vector<int64_t>> tables(in_dims.size());
  for (size_t d = 0; d < in_dims.size(); ++d) {
    const WindowDimension& wd = w[d];
    auto& t = tables[d];
    t.assign(out_dims[d] * wd.size, -1);
    for (int64_t o = 0; o < out_dims[d]; ++o)
      for (int64_t k = 0; k < wd.size; ++k) {
        int64_t pos = o * wd.stride - wd.padding_low + k * wd.window_dilation;
        if (pos < 0 || pos % wd.base_dilation != 0) continue;
        int64_t i = pos / wd.base_dilation;
        if (i < in_dims[d]) t[o * wd.size + k] = i;
      }
  }
  return tables;
}

Status CheckWindow(const Instruction& instr, const std::optional<Window>& w, int rank) {
  if (!w || static_cast<int>(w->size()) != rank)
    return InstrError(instr, "window has " + std::to_string(w ? w->size() : 0) +
                                 " dimensions, the operand rank is " + std::to_string(rank));
  for (const WindowDimension& d : *w)
    if (d.size < 0 || d.stride < 1 || d.window_dilation < 1 || d.base_dilation < 1)
      return InstrError(instr, "window sizes, strides and dilations must be positive");
  return Status::Ok();
}

// Calls f(out_linear, in_linear) for every valid (output, window) pair in
// row-major output order, window positions in row-major order.
template <typename F>
void ForEachWindowElement(const std::vector<std::vector<int64_t>>& tables, const Window& w,
                          const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims,
                          F f) {
  int r = static_cast<int>(in_dims.size());
  std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  std::vector<int64_t> wdims(r);
  int64_t out_n = 1, win_n = 1;
  for (int d = 0; d < r; ++d) {
    wdims[d] = w[d].size;
    out_n *= out_dims[d];
    win_n *= w[d].size;
  }
  if (out_n == 0) return;
  std::vector<int64_t> oi(r, 0), wi(r, 0);
  for (int64_t o = 0; o < out_n; ++o, NextIndex(oi, out_dims)) {
    if (win_n == 0) continue;
    std::fill(wi.begin(), wi.end(), 0);
    do {
      int64_t off = 0;
      bool valid = true;
      for (int d = 0; d < r; ++d) {
        int64_t i = tables[d][oi[d] * wdims[d] + wi[d]];
        if (i < 0) {
          valid = false;
          break;
        }
        off += i * in_strides[d];
      }
      if (valid) f(o, off);
    } while (NextIndex(wi, wdims));
  }
}

// Reduce-window fast path when the last r - q dimensions (`inner` elements)
// are untouched by the window: for each output position over the first q
// dimensions and each valid window position (row-major), combines a whole
// contiguous row of `inner` elements.
template <typename T, typename Round>
void ReduceWindowRows(const std::vector<std::vector<int64_t>>& tables, const Window& w,
                      const std::vector<int64_t>& in_dims, const std::vector<int64_t>& out_dims,
                      int q, int64_t inner, const T* p, T* o, ReducerKind kind, Round round) {
  std::vector<int64_t> in_strides = RowMajorStrides(in_dims);
  std::vector<int64_t> odims(out_dims.begin(), out_dims.begin() + q), wdims(q);
  int64_t out_n = 1, win_n = 1;
  for (int d = 0; d < q; ++d) {
    wdims[d] = w[d].size;
    out_n *= odims[d];
    win_n *= wdims[d];
  }
  if (out_n == 0 || win_n == 0) return;
  auto rows = [&](auto op) {
    std::vector<int64_t> oi(q, 0), wi(q, 0);
    for (int64_t ob = 0; ob < out_n; ++ob, NextIndex(oi, odims)) {
      T* dst = o + ob * inner;
      std::fill(wi.begin(), wi.end(), 0);
      do {
        int64_t off = 0;
        bool valid = true;
        for (int d = 0; d < q; ++d) {
          int64_t i = tables[d][oi[d] * wdims[d] + wi[d]];
          if (i < 0) {
            valid = false;
            break;
          }
          off += i * in_strides[d];
        }
        if (!valid) continue;
        const T* src = p + off;
        for (int64_t j = 0; j < inner; ++j) dst[j] = round(op(dst[j], src[j]));
      } while (NextIndex(wi, wdims));
    }
  };
  switch (kind) {
    case ReducerKind::kAdd: rows([](T a, T b) { return ApplyReducerKind(ReducerKind::kAdd, a, b); }); break;
    case ReducerKind::kMul: rows([](T a, T b) { return ApplyReducerKind(ReducerKind::kMul, a, b); }); break;
    case ReducerKind::kMax: rows([](T a, T b) { return ApplyReducerKind(ReducerKind::kMax, a, b); }); break;
    case ReducerKind::kMin: rows([](T a, T b) { return ApplyReducerKind(ReducerKind::kMin, a, b); }); break;
    default: rows([kind](T a, T b) { return ApplyReducerKind(kind, a, b); }); break;
  }
}

}  // namespace

StatusOr<Literal> EvalReduce(KernelArgs& k) {
  const Instruction& instr = k.instr;
  size_t n = k.ops.size() / 2;
  if (n == 0 || k.ops.size() != 2 * n) return InstrError(instr, "reduce needs inputs and init values");
  const Shape& in_shape = k.op(0).shape();
  const auto& in_dims = in_shape.dimensions();
  int r = in_shape.rank();
  std::vector<bool> reduced(r, false);
  for (int64_t d : instr.attrs().dimensions) {
    if (d < 0 || d >= r) return InstrError(instr, "reduce dimension " + std::to_string(d) + " out of range");
    reduced[d] = true;
  }
  std::vector<int64_t> out_dims;
  for (int d = 0; d < r; ++d)
    if (!reduced[d]) out_dims.push_back(in_dims[d]);
  std::vector<Shape> shapes = ResultShapes(instr.shape());
  if (shapes.size() != n) return InstrError(instr, "reduce result arity does not match its inputs");
  for (size_t i = 0; i < n; ++i) {
    if (k.op(i).shape().dimensions() != in_dims || k.op(n + i).element_count() != 1 ||
        shapes[i].dimensions() != out_dims || shapes[i].element_type() != k.op(n + i).element_type())
      return InstrError(instr, "reduce operand, init or result shapes are inconsistent");
  }
  // Out stride per input dim (0 for reduced dims).
  std::vector<int64_t> ostr_out = RowMajorStrides(out_dims);
  std::vector<int64_t> out_strides(r, 0);
  for (int d = 0, j = 0; d < r; ++d)
    if (!reduced[d]) out_strides[d] = ostr_out[j++];

  PrimitiveType t = k.op(0).element_type();
  ReducerKind kind = FastKind(instr.to_apply(), t);
  if (n == 1 && kind != ReducerKind::kNone && shapes[0].element_type() == t) {
    Literal in = ToCompute(k.op(0));
    Literal init = ToCompute(k.op(1));
    Shape cs(in.element_type(), out_dims);
    Literal out(cs);
    FillWith(out, init);
    WithComputeType(t, [&]<typename T>(auto round) {
      ReduceFast<T>(in.data<T>(), in_dims, out_strides, out.data<T>(), kind, round);
    });
    return FromCompute(out, t);
  }
  if (instr.to_apply() == nullptr) return InstrError(instr, "reduce has no to_apply computation");
  // General path: acc = to_apply(acc..., x...) per input element, in
  // row-major input order.
  std::vector<Literal> outs;
  for (size_t i = 0; i < n; ++i) {
    outs.emplace_back(Shape(shapes[i].element_type(), out_dims));
    FillWith(outs.back(), k.op(n + i));
  }
  int64_t total = in_shape.ElementCount();
  std::vector<int64_t> idx(r, 0);
  std::optional<CompiledReducer> compiled;
  if (n == 1 && shapes[0].element_type() == t) compiled = CompiledReducer::Make(instr.to_apply(), t);
  if (compiled) {
    uint8_t* acc = outs[0].raw();
    const uint8_t* in = k.op(0).raw();
    int64_t width = compiled->width();
    for (int64_t e = 0; e < total; ++e, NextIndex(idx, in_dims)) {
      int64_t o = 0;
      for (int d = 0; d < r; ++d) o += idx[d] * out_strides[d];
      compiled->Apply(acc + o * width, in + e * width);
    }
    return MakeResult(std::move(outs));
  }
  std::vector<Literal> scalars(2 * n);
  std::vector<const Literal*> args(2 * n);
  for (int64_t e = 0; e < total; ++e) {
    int64_t o = 0;
    for (int d = 0; d < r; ++d) o += idx[d] * out_strides[d];
    for (size_t i = 0; i < n; ++i) {
      scalars[i] = ElementAsScalar(outs[i], o);
      scalars[n + i] = ElementAsScalar(k.op(i), e);
    }
    for (size_t i = 0; i < 2 * n; ++i) args[i] = &scalars[i];
    MS_ASSIGN_OR_RETURN(Literal res, k.interp.Call(*instr.to_apply(), args));
    MS_ASSIGN_OR_RETURN(std::vector<Literal> vals, SplitResult(instr, std::move(res), n));
    for (size_t i = 0; i < n; ++i) {
      if (vals[i].element_type() != outs[i].element_type())
        return InstrError(instr, "reducer returns the wrong element type");
      StoreScalar(vals[i], outs[i], o);
    }
    NextIndex(idx, in_dims);
  }
  return MakeResult(std::move(outs));
}

StatusOr<Literal> EvalReduceWindow(KernelArgs& k) {
  const Instruction& instr = k.instr;
  size_t n = k.ops.size() / 2;
  if (n == 0 || k.ops.size() != 2 * n)
    return InstrError(instr, "reduce-window needs inputs and init values");
  const auto& in_dims = k.op(0).shape().dimensions();
  int r = static_cast<int>(in_dims.size());
  MS_RETURN_IF_ERROR(CheckWindow(instr, instr.attrs().window, r));
  const Window& w = *instr.attrs().window;
  std::vector<Shape> shapes = ResultShapes(instr.shape());
  if (shapes.size() != n) return InstrError(instr, "reduce-window result arity does not match its inputs");
  const auto& out_dims = shapes[0].dimensions();
  if (static_cast<int>(out_dims.size()) != r) return InstrError(instr, "reduce-window result rank differs");
  for (size_t i = 0; i < n; ++i)
    if (k.op(i).shape().dimensions() != in_dims || shapes[i].dimensions() != out_dims ||
        k.op(n + i).element_count() != 1 || shapes[i].element_type() != k.op(n + i).element_type())
      return InstrError(instr, "reduce-window operand, init or result shapes are inconsistent");
  auto tables = WindowTables(w, in_dims, out_dims);
  PrimitiveType t = k.op(0).element_type();
  ReducerKind kind = FastKind(instr.to_apply(), t);
  if (n == 1 && kind != ReducerKind::kNone && shapes[0].element_type() == t) {
    Literal in = ToCompute(k.op(0));
    Literal out(Shape(in.element_type(), out_dims));
    FillWith(out, ToCompute(k.op(1)));
    // Trailing dimensions the window leaves alone (size 1, no stride, padding
    // or dilation) form a contiguous run that is reduced as a vector; the
    // order of window positions per output element is unchanged.
    int q = r;
    int64_t inner = 1;
    while (q > 0) {
      const WindowDimension& wd = w[q - 1];
      if (wd.size != 1 || wd.stride != 1 || wd.padding_low != 0 || wd.padding_high != 0 ||
          wd.window_dilation != 1 || wd.base_dilation != 1 || in_dims[q - 1] != out_dims[q - 1])
        break;
      inner *= in_dims[--q];
    }
    WithComputeType(t, [&]<typename T>(auto round) {
      const T* p = in.data<T>();
      T* o = out.data<T>();
      if (inner > 1 && ScalarProgramsEnabled()) {
        ReduceWindowRows<T>(tables, w, in_dims, out_dims, q, inner, p, o, kind, round);
        return;
      }
      ForEachWindowElement(tables, w, in_dims, out_dims, [&](int64_t oi, int64_t ii) {
        o[oi] = round(ApplyReducerKind<T>(kind, o[oi], p[ii]));
      });
    });
    return FromCompute(out, t);
  }
  if (instr.to_apply() == nullptr) return InstrError(instr, "reduce-window has no to_apply computation");
  std::vector<Literal> outs;
  for (size_t i = 0; i < n; ++i) {
    outs.emplace_back(Shape(shapes[i].element_type(), out_dims));
    FillWith(outs.back(), k.op(n + i));
  }
  std::optional<CompiledReducer> compiled;
  if (n == 1 && shapes[0].element_type() == t) compiled = CompiledReducer::Make(instr.to_apply(), t);
  if (compiled) {
    uint8_t* acc = outs[0].raw();
    const uint8_t* in = k.op(0).raw();
    int64_t width = compiled->width();
    ForEachWindowElement(tables, w, in_dims, out_dims, [&](int64_t oi, int64_t ii) {
      compiled->Apply(acc + oi * width, in + ii * width);
    });
    return MakeResult(std::move(outs));
  }
  Status status;
  std::vector<Literal> scalars(2 * n);
  std::vector<const Literal*> args(2 * n);
  ForEachWindowElement(tables, w, in_dims, out_dims, [&](int64_t oi, int64_t ii) {
    if (!status.ok()) return;
    for (size_t i = 0; i < n; ++i) {
      scalars[i] = ElementAsScalar(outs[i], oi);
      scalars[n + i] = ElementAsScalar(k.op(i), ii);
    }
    for (size_t i = 0; i < 2 * n; ++i) args[i] = &scalars[i];
    StatusOr<Literal> res = k.interp.Call(*instr.to_apply(), args);
    if (!res.ok()) {
      status = res.status();
      return;
    }
    StatusOr<std::vector<Literal>> vals = SplitResult(instr, std::move(res).value(), n);
    if (!vals.ok()) {
      status = vals.status();
      return;
    }
    for (size_t i = 0; i < n; ++i) {
      if ((*vals)[i].element_type() != outs[i].element_type()) {
        status = InstrError(instr, "reducer returns the wrong element type");
        return;
      }
      StoreScalar((*vals)[i], outs[i], oi);
    }
  });
  MS_RETURN_IF_ERROR(status);
  return MakeResult(std::move(outs));
}

namespace {

// A select computation recognised as `compare(p0, p1), direction=GE|GT`.
std::optional<ComparisonDirection> SimpleSelect(const Computation* c) {
  if (c == nullptr || c->parameter_count() != 2) return std::nullopt;
  const Instruction* root = c->root();
  if (root->opcode() != Opcode::kCompare || !root->attrs().comparison_direction ||
      root->attrs().comparison_type == "TOTALORDER")
    return std::nullopt;
  if (root->operand(0) != c->parameter(0) || root->operand(1) != c->parameter(1)) return std::nullopt;
  ComparisonDirection d = *root->attrs().comparison_direction;
  if (d == ComparisonDirection::kGe || d == ComparisonDirection::kGt || d == ComparisonDirection::kLe ||
      d == ComparisonDirection::kLt)
    return d;
  return std::nullopt;
}

}  // namespace

StatusOr<Literal> EvalSelectAndScatter(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (instr.called_computations().size() < 2)
    return InstrError(instr, "select-and-scatter needs select and scatter computations");
  const Computation* select = instr.called_computations()[0];
  const Computation* scatter = instr.called_computations()[1];
  const Literal& operand = k.op(0);
  const Literal& source = k.op(1);
  const Literal& init = k.op(2);
  const auto& in_dims = operand.shape().dimensions();
  int r = static_cast<int>(in_dims.size());
  MS_RETURN_IF_ERROR(CheckWindow(instr, instr.attrs().window, r));
  const Window& w = *instr.attrs().window;
  const auto& src_dims = source.shape().dimensions();
  if (static_cast<int>(src_dims.size()) != r || init.element_count() != 1 ||
      k.shape().dimensions() != in_dims || source.element_type() != k.shape().element_type())
    return InstrError(instr, "select-and-scatter operand, source and result shapes are inconsistent");
  for (int d = 0; d < r; ++d) {
    int64_t padded = in_dims[d] + w[d].padding_low + w[d].padding_high;
    int64_t expect = padded < w[d].size ? 0 : (padded - w[d].size) / w[d].stride + 1;
    if (src_dims[d] != expect)
      return InstrError(instr, "source dimension " + std::to_string(d) + " should be " +
                                   std::to_string(expect));
  }
  auto tables = WindowTables(w, in_dims, src_dims);
  // For each source element, the operand position the select computation
  // picks in its window (first valid element, replaced whenever
  // select(current, candidate) is false).
  int64_t src_n = source.element_count();
  std::vector<int64_t> chosen(src_n, -1);
  auto sel_dir = SimpleSelect(select);
  PrimitiveType t = operand.element_type();
  Status status;
  if (sel_dir && t != PrimitiveType::PRED) {
    Literal op_c = ToCompute(operand);
    WithComputeType(t, [&]<typename T>(auto) {
      const T* p = op_c.data<T>();
      ForEachWindowElement(tables, w, in_dims, src_dims, [&](int64_t si, int64_t ii) {
        if (chosen[si] < 0 || !CompareByDirection(*sel_dir, p[chosen[si]], p[ii])) chosen[si] = ii;
      });
    });
  } else {
    ForEachWindowElement(tables, w, in_dims, src_dims, [&](int64_t si, int64_t ii) {
      if (!status.ok()) return;
      if (chosen[si] < 0) {
        chosen[si] = ii;
        return;
      }
      Literal a = ElementAsScalar(operand, chosen[si]), b = ElementAsScalar(operand, ii);
      StatusOr<Literal> res = k.interp.Call(*select, {&a, &b});
      if (!res.ok()) {
        status = res.status();
        return;
      }
      if (res->element_type() != PrimitiveType::PRED || !res->shape().IsArray()) {
        status = InstrError(instr, "select computation must return pred");
        return;
      }
      if (res->data<uint8_t>()[0] == 0) chosen[si] = ii;
    });
  }
  MS_RETURN_IF_ERROR(status);
  Literal out(k.shape());
  FillWith(out, init);
  ReducerKind kind = FastKind(scatter, t);
  if (kind != ReducerKind::kNone) {
    Literal src_c = ToCompute(source);
    Literal out_c = ToCompute(out);
    WithComputeType(t, [&]<typename T>(auto round) {
      const T* s = src_c.data<T>();
      T* o = out_c.data<T>();
      for (int64_t i = 0; i < src_n; ++i)
        if (chosen[i] >= 0) o[chosen[i]] = round(ApplyReducerKind<T>(kind, o[chosen[i]], s[i]));
    });
    return FromCompute(out_c, t);
  }
  for (int64_t i = 0; i < src_n; ++i) {
    if (chosen[i] < 0) continue;
    Literal a = ElementAsScalar(out, chosen[i]), b = ElementAsScalar(source, i);
    MS_ASSIGN_OR_RETURN(Literal res, k.interp.Call(*scatter, {&a, &b}));
    if (!res.shape().IsArray() || res.element_type() != out.element_type())
      return InstrError(instr, "scatter computation returns the wrong type");
    StoreScalar(res, out, chosen[i]);
  }
  return out;
}

namespace {

// Stable merge sort of `perm` under `less`, safe for comparators that are
// not strict weak orders (it never indexes outside the range). Returns the
// first error `less` reports.
template <typename Less>
Status MergeSort(std::vector<int64_t>& perm, Less less) {
  size_t n = perm.size();
  std::vector<int64_t> tmp(n);
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      size_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi) {
        StatusOr<bool> r = less(perm[j], perm[i]);
        if (!r.ok()) return r.status();
        tmp[o++] = *r ? perm[j++] : perm[i++];
      }
      while (i < mid) tmp[o++] = perm[i++];
      while (j < hi) tmp[o++] = perm[j++];
    }
    perm.swap(tmp);
  }
  return Status::Ok();
}

struct SimpleComparator {
  int operand;
  ComparisonDirection dir;
  bool total_order;
};

// `compare(p[2i], p[2i+1]), direction=LT|GT` (or swapped operands).
std::optional<SimpleComparator> ClassifyComparator(const Computation* c, size_t n) {
  if (c == nullptr || c->parameter_count() != static_cast<int>(2 * n)) return std::nullopt;
  const Instruction* root = c->root();
  if (root->opcode() != Opcode::kCompare || !root->attrs().comparison_direction) return std::nullopt;
  const Instruction* a = root->operand(0);
  const Instruction* b = root->operand(1);
  if (a->opcode() != Opcode::kParameter || b->opcode() != Opcode::kParameter) return std::nullopt;
  int64_t pa = a->attrs().parameter_number, pb = b->attrs().parameter_number;
  ComparisonDirection d = *root->attrs().comparison_direction;
  if (d != ComparisonDirection::kLt && d != ComparisonDirection::kGt) return std::nullopt;
  if (pa / 2 != pb / 2 || pa == pb) return std::nullopt;
  if (pa % 2 == 1) d = d == ComparisonDirection::kLt ? ComparisonDirection::kGt : ComparisonDirection::kLt;
  return SimpleComparator{static_cast<int>(pa / 2), d, root->attrs().comparison_type == "TOTALORDER"};
}

template <typename T>
auto SortKey(T v, bool total) {
  if constexpr (std::is_same_v<T, float>) {
    return total ? static_cast<double>(TotalOrderKey(v)) : static_cast<double>(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return total ? static_cast<long double>(TotalOrderKey(v)) : static_cast<long double>(v);
  } else {
    return v;
  }
}

}  // namespace

StatusOr<Literal> EvalSort(KernelArgs& k) {
  const Instruction& instr = k.instr;
  size_t n = k.ops.size();
  if (n == 0 || instr.attrs().dimensions.size() != 1) return InstrError(instr, "sort needs operands and one dimension");
  const auto& dims = k.op(0).shape().dimensions();
  int64_t dim = instr.attrs().dimensions[0];
  if (dim < 0 || dim >= static_cast<int64_t>(dims.size())) return InstrError(instr, "sort dimension out of range");
  for (size_t i = 0; i < n; ++i)
    if (k.op(i).shape().dimensions() != dims) return InstrError(instr, "sort operands differ in shape");
  const Computation* cmp = instr.to_apply();
  if (cmp == nullptr) return InstrError(instr, "sort has no comparator");
  int64_t len = dims[dim];
  std::vector<int64_t> strides = RowMajorStrides(dims);
  int64_t stride = strides[dim];
  std::vector<int64_t> outer_dims = dims;
  outer_dims[dim] = 1;
  std::vector<Literal> outs;
  for (size_t i = 0; i < n; ++i) outs.emplace_back(Shape(k.op(i).element_type(), dims));
  auto simple = ClassifyComparator(cmp, n);
  if (simple && IsStagedFloat(k.op(simple->operand).element_type())) simple.reset();
  int64_t slices = 1;
  for (int64_t d : outer_dims) slices *= d;
  if (len == 0 || slices == 0) return MakeResult(std::move(outs));
  // Other comparators: compiled to a ScalarProgram when they are plain scalar
  // arithmetic, else interpreted per comparison.
  std::optional<ScalarProgram> program;
  std::vector<const uint8_t*> op_raw(n);
  std::vector<int64_t> op_width(n);
  if (!simple && ScalarProgramsEnabled()) {
    program = ScalarProgram::Compile(*cmp);
    if (program && (program->param_count() != static_cast<int>(2 * n) ||
                    program->root_type() != PrimitiveType::PRED))
      program.reset();
    for (size_t i = 0; program && i < n; ++i) {
      PrimitiveType t = k.op(i).element_type();
      if (program->param_type(2 * i) != t || program->param_type(2 * i + 1) != t) program.reset();
      op_raw[i] = k.op(i).raw();
      op_width[i] = ByteWidth(t);
    }
  }
  std::vector<int64_t> idx(dims.size(), 0), perm(len);
  std::vector<Literal> scalars(2 * n);
  std::vector<const Literal*> args(2 * n);
  for (int64_t s = 0; s < slices; ++s, NextIndex(idx, outer_dims)) {
    int64_t base = 0;
    for (size_t d = 0; d < dims.size(); ++d) base += idx[d] * strides[d];
    for (int64_t i = 0; i < len; ++i) perm[i] = i;
    Status st;
    if (simple) {
      const Literal& key = k.op(simple->operand);
      DispatchCompute(key.element_type(), [&]<typename T>() {
        const T* p = key.data<T>();
        std::vector<decltype(SortKey(T{}, false))> keys(len);
        for (int64_t i = 0; i < len; ++i) keys[i] = SortKey(p[base + i * stride], simple->total_order);
        bool lt = simple->dir == ComparisonDirection::kLt;
        st = MergeSort(perm, [&](int64_t a, int64_t b) -> StatusOr<bool> {
          return lt ? keys[a] < keys[b] : keys[a] > keys[b];
        });
      });
    } else if (program) {
      // Compiled comparator: parameters point straight into the operands.
      std::vector<const void*> pargs(2 * n);
      st = MergeSort(perm, [&](int64_t a, int64_t b) -> StatusOr<bool> {
        for (size_t i = 0; i < n; ++i) {
          pargs[2 * i] = op_raw[i] + (base + a * stride) * op_width[i];
          pargs[2 * i + 1] = op_raw[i] + (base + b * stride) * op_width[i];
        }
        return (program->Run(pargs.data()) & 0xff) != 0;
      });
    } else {
      st = MergeSort(perm, [&](int64_t a, int64_t b) -> StatusOr<bool> {
        for (size_t i = 0; i < n; ++i) {
          scalars[2 * i] = ElementAsScalar(k.op(i), base + a * stride);
          scalars[2 * i + 1] = ElementAsScalar(k.op(i), base + b * stride);
        }
        for (size_t i = 0; i < 2 * n; ++i) args[i] = &scalars[i];
        MS_ASSIGN_OR_RETURN(Literal r, k.interp.Call(*cmp, args));
        if (!r.shape().IsArray() || r.element_type() != PrimitiveType::PRED)
          return InstrError(instr, "sort comparator must return pred");
        return r.data<uint8_t>()[0] != 0;
      });
    }
    MS_RETURN_IF_ERROR(st);
    for (size_t i = 0; i < n; ++i) {
      int64_t elem = ByteWidth(outs[i].element_type());
      const uint8_t* src = k.op(i).raw();
      uint8_t* dst = outs[i].raw();
      for (int64_t j = 0; j < len; ++j)
        std::memcpy(dst + (base + j * stride) * elem, src + (base + perm[j] * stride) * elem, elem);
    }
  }
  return MakeResult(std::move(outs));
}

StatusOr<Literal> EvalMap(KernelArgs& k) {
  const Instruction& instr = k.instr;
  if (instr.to_apply() == nullptr) return InstrError(instr, "map has no computation");
  Literal out(instr.shape());
  int64_t count = out.element_count();
  for (const Literal* o : k.ops)
    if (o->element_count() != count) return InstrError(instr, "map operands differ in shape");
  std::vector<Literal> scalars(k.ops.size());
  std::vector<const Literal*> args(k.ops.size());
  for (int64_t e = 0; e < count; ++e) {
    for (size_t i = 0; i < k.ops.size(); ++i) {
      scalars[i] = ElementAsScalar(*k.ops[i], e);
      args[i] = &scalars[i];
    }
    MS_ASSIGN_OR_RETURN(Literal r, k.interp.Call(*instr.to_apply(), args));
    if (!r.shape().IsArray() || r.element_type() != out.element_type())
      return InstrError(instr, "map computation returns the wrong type");
    StoreScalar(r, out, e);
  }
  return out;
}

}  // namespace meshsplit::interp
