// InferShape: one case per opcode (a switch with no default, so a new opcode
// in opcodes.def fails to compile until it has a rule). Each case checks the
// operand count, operand shapes, attributes and called computations, and
// returns the result shape.
#include "ir/shape_inference.h"

#include <algorithm>
#include <set>

#include "ir/attribute_text.h"
#include "ir/computation.h"
#include "ir/custom_call_targets.h"
#include "ir/shape_inference_async.h"
#include "ir/shape_inference_p2p.h"
#include "ir/shape_inference_util.h"

namespace meshsplit {

using shape_inference_internal::CheckDims;
using shape_inference_internal::Dims;
using shape_inference_internal::Err;
using shape_inference_internal::StrCat;

namespace {

std::string Str(const Shape& s) { return s.ToString(/*print_layout=*/false); }
std::string_view TypeName(PrimitiveType t) { return PrimitiveTypeName(t); }

PrimitiveType ComplexComponent(PrimitiveType t) {
  if (t == PrimitiveType::C64) return PrimitiveType::F32;
  if (t == PrimitiveType::C128) return PrimitiveType::F64;
  return t;
}

// Bits per element as XLA counts them for bitcast-convert.
int64_t BitWidth(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::S2: case PrimitiveType::U2: return 2;
    case PrimitiveType::S4: case PrimitiveType::U4:
    case PrimitiveType::F4E2M1FN: return 4;
    default: return ByteWidth(t) * 8;
  }
}

bool IsNumeric(PrimitiveType t) {
  return IsInteger(t) || IsFloatingPoint(t) || IsComplex(t);
}

Shape Scalar(PrimitiveType t) { return Shape(t, {}); }

Shape TupleOrSingle(std::vector<Shape> shapes) {
  if (shapes.size() == 1) return std::move(shapes[0]);
  return Shape::Tuple(std::move(shapes));
}

class Inferrer {
 public:
  explicit Inferrer(const Instruction& instr)
      : instr_(instr), a_(instr.attrs()), declared_(instr.shape()) {
    for (const Instruction* op : instr.operands()) ops_.push_back(&op->shape());
  }

  StatusOr<Shape> Run();

 private:
  const Shape& op(int i) const { return *ops_[i]; }
  int n() const { return static_cast<int>(ops_.size()); }

  Status Count(int expected) const {
    if (n() != expected)
      return Err("expects ", expected, " operand", expected == 1 ? "" : "s",
                 " but has ", n());
    return Status::Ok();
  }
  Status CountAtLeast(int expected) const {
    if (n() < expected)
      return Err("expects at least ", expected, " operand",
                 expected == 1 ? "" : "s", " but has ", n());
    return Status::Ok();
  }
  Status Array(int i) const {
    if (!op(i).IsArray())
      return Err("operand ", i, " must be an array but has shape ", Str(op(i)));
    return Status::Ok();
  }
  Status AllArrays() const {
    for (int i = 0; i < n(); ++i) MS_RETURN_IF_ERROR(Array(i));
    return Status::Ok();
  }
  Status DeclaredArray() const {
    if (!declared_.IsArray())
      return Err("result must be an array but is declared ", Str(declared_));
    return Status::Ok();
  }
  // An uninterpreted integer-list attribute; absent is the empty list.
  StatusOr<std::vector<int64_t>> IntList(const std::string& name) const {
    const std::string* text = a_.FindExtra(name);
    if (text == nullptr) return std::vector<int64_t>{};
    return ParseIntListAttribute(name, *text, instr_.loc());
  }
  Status Scalar(int i, const char* what) const {
    if (!op(i).IsArray() || op(i).rank() != 0)
      return Err(what, " (operand ", i, ") must be a scalar but has shape ",
                 Str(op(i)));
    return Status::Ok();
  }
  Status SameType(int i, int j) const {
    if (op(i).element_type() != op(j).element_type())
      return Err("operand ", i, " has element type ",
                 TypeName(op(i).element_type()), " but operand ", j, " has ",
                 TypeName(op(j).element_type()));
    return Status::Ok();
  }
  Status SameDims(int i, int j) const {
    if (op(i).dimensions() != op(j).dimensions())
      return Err("operand ", i, " has shape ", Str(op(i)), " but operand ", j,
                 " has shape ", Str(op(j)));
    return Status::Ok();
  }
  Status TypeIs(int i, bool ok, const char* expected) const {
    if (!ok)
      return Err("operand ", i, " must be ", expected, " but has element type ",
                 TypeName(op(i).element_type()));
    return Status::Ok();
  }
  Status Called(int expected) const {
    int got = static_cast<int>(instr_.called_computations().size());
    if (got != expected)
      return Err("expects ", expected, " called computation",
                 expected == 1 ? "" : "s", " but has ", got);
    return Status::Ok();
  }
  // The start indices of a dynamic-(update-)slice of operand 0, operands
  // `first`.. : one integer scalar per operand dim, or one integer vector
  // (the vector form, which a rank-1 operand cannot tell apart).
  Status StartIndices(int first) const {
    const Shape& operand = op(0);
    const bool vector_form = n() == first + 1 && operand.rank() != 1 && op(first).rank() == 1;
    if (!vector_form && n() != first + operand.rank())
      return Err("expects ", first, " + ", operand.rank(), " operands (one start index per "
                 "dimension) but has ", n());
    for (int i = first; i < n(); ++i) {
      MS_RETURN_IF_ERROR(TypeIs(i, IsInteger(op(i).element_type()), "an integer"));
      if (!vector_form && op(i).rank() != 0)
        return Err("start index operand ", i, " must be a scalar but has shape ", Str(op(i)));
    }
    return Status::Ok();
  }
  // Checks that `c` takes `params` and returns `result` (if given).
  Status Signature(const Computation* c, const char* role,
                   const std::vector<Shape>& params, const Shape* result) const;
  // A reducer over `types` (N accumulators then N values, all scalars)
  // returning N scalars of `types`.
  // `inputs` are the element types of the reduced values; the value
  // parameters may use them instead of `types` (fp precision only).
  Status Reducer(const Computation* c, const char* role,
                 const std::vector<PrimitiveType>& types,
                 const std::vector<PrimitiveType>& inputs) const;
  // The comparator of sort/select: 2 scalars of each type, returns pred[].
  Status Comparator(const Computation* c, const char* role,
                    const std::vector<PrimitiveType>& types) const;

  StatusOr<Shape> Unary();
  StatusOr<Shape> Binary();
  StatusOr<Shape> BitcastConvert();
  StatusOr<Shape> Broadcast();
  StatusOr<Shape> DynamicSlice();
  StatusOr<Shape> DynamicUpdateSlice();
  StatusOr<Shape> Scatter();
  StatusOr<Shape> Reduce();
  StatusOr<Shape> ReduceWindow();
  StatusOr<int> VariadicReductionInputs() const;
  StatusOr<Shape> VariadicReductionResult(int num, const std::vector<int64_t>& dims);
  StatusOr<Shape> SelectAndScatter();
  StatusOr<Shape> Sort();
  StatusOr<Shape> Map();
  StatusOr<Shape> Fft();
  StatusOr<Shape> TriangularSolve();
  StatusOr<Shape> BatchNorm();
  StatusOr<Shape> While();
  StatusOr<Shape> Conditional();
  StatusOr<Shape> Call();
  StatusOr<Shape> Collective();

  const Instruction& instr_;
  const Attributes& a_;
  const Shape& declared_;
  std::vector<const Shape*> ops_;
};

Status Inferrer::Signature(const Computation* c, const char* role,
                           const std::vector<Shape>& params,
                           const Shape* result) const {
  if (c == nullptr) return Err(role, " computation is missing");
  if (c->parameter_count() != static_cast<int>(params.size()))
    return Err(role, " computation %", c->name(), " has ", c->parameter_count(),
               " parameters but ", params.size(), " are expected");
  for (int i = 0; i < c->parameter_count(); ++i) {
    const Instruction* p = c->parameter(i);
    if (p == nullptr)
      return Err(role, " computation %", c->name(), " has no parameter ", i);
    if (!p->shape().Compatible(params[i]))
      return Err("parameter ", i, " of ", role, " computation %", c->name(),
                 " has shape ", Str(p->shape()), " but ", Str(params[i]),
                 " is expected");
  }
  if (result != nullptr) {
    if (c->root() == nullptr)
      return Err(role, " computation %", c->name(), " has no root");
    if (!c->root()->shape().Compatible(*result))
      return Err(role, " computation %", c->name(), " returns ",
                 Str(c->root()->shape()), " but ", Str(*result), " is expected");
  }
  return Status::Ok();
}

Status Inferrer::Reducer(const Computation* c, const char* role,
                         const std::vector<PrimitiveType>& types,
                         const std::vector<PrimitiveType>& inputs) const {
  std::vector<Shape> params, results;
  for (PrimitiveType t : types) params.push_back(meshsplit::Scalar(t));
  for (PrimitiveType t : types) params.push_back(meshsplit::Scalar(t));
  for (PrimitiveType t : types) results.push_back(meshsplit::Scalar(t));
  Shape result = TupleOrSingle(results);
  Status exact = Signature(c, role, params, &result);
  if (exact.ok() || c == nullptr || inputs.size() != types.size() ||
      c->parameter_count() != static_cast<int>(params.size()))
    return exact;
  // Like XLA, the value parameters may differ from the accumulators in
  // floating-point precision (bf16 inputs reduced into an f32 accumulator).
  for (size_t i = 0; i < types.size(); ++i) {
    const Instruction* p = c->parameter(types.size() + i);
    if (p == nullptr || !p->shape().IsArray() || p->shape().rank() != 0)
      return exact;
    PrimitiveType pt = p->shape().element_type();
    bool fp_ok = IsFloatingPoint(pt) && IsFloatingPoint(types[i]) &&
                 IsFloatingPoint(inputs[i]);
    if (pt != types[i] && pt != inputs[i] && !fp_ok) return exact;
    params[types.size() + i] = p->shape();
  }
  return Signature(c, role, params, &result);
}

Status Inferrer::Comparator(const Computation* c, const char* role,
                            const std::vector<PrimitiveType>& types) const {
  std::vector<Shape> params;
  for (PrimitiveType t : types) {
    params.push_back(meshsplit::Scalar(t));
    params.push_back(meshsplit::Scalar(t));
  }
  Shape pred = meshsplit::Scalar(PrimitiveType::PRED);
  return Signature(c, role, params, &pred);
}

StatusOr<Shape> Inferrer::Unary() {
  const Opcode opc = instr_.opcode();
  if (opc == Opcode::kCopy) return op(0);  // any shape, tuples too
  MS_RETURN_IF_ERROR(Array(0));
  const PrimitiveType t = op(0).element_type();
  Shape out = op(0);
  out.set_layout(std::nullopt);
  switch (opc) {
    case Opcode::kCeil: case Opcode::kFloor: case Opcode::kRoundNearestAfz:
    case Opcode::kRoundNearestEven:
      MS_RETURN_IF_ERROR(TypeIs(0, IsFloatingPoint(t), "floating point"));
      return out;
    case Opcode::kCbrt: case Opcode::kCos: case Opcode::kErf: case Opcode::kExp:
    case Opcode::kExpm1: case Opcode::kLog: case Opcode::kLog1p:
    case Opcode::kLogistic: case Opcode::kRsqrt: case Opcode::kSin:
    case Opcode::kSqrt: case Opcode::kTan: case Opcode::kTanh:
      MS_RETURN_IF_ERROR(TypeIs(0, IsFloatingPoint(t) || IsComplex(t),
                                "floating point or complex"));
      return out;
    case Opcode::kAbs: case Opcode::kReal: case Opcode::kImag:
      MS_RETURN_IF_ERROR(TypeIs(0, IsNumeric(t), "numeric"));
      out.set_element_type(ComplexComponent(t));
      return out;
    case Opcode::kSign: case Opcode::kNegate:
      MS_RETURN_IF_ERROR(TypeIs(0, IsNumeric(t), "numeric"));
      return out;
    case Opcode::kClz: case Opcode::kPopcnt:
      MS_RETURN_IF_ERROR(TypeIs(0, IsInteger(t), "an integer"));
      return out;
    case Opcode::kNot:
      MS_RETURN_IF_ERROR(
          TypeIs(0, IsInteger(t) || t == PrimitiveType::PRED, "pred or an integer"));
      return out;
    case Opcode::kIsFinite:
      MS_RETURN_IF_ERROR(TypeIs(0, IsFloatingPoint(t), "floating point"));
      out.set_element_type(PrimitiveType::PRED);
      return out;
    case Opcode::kConvert:
      MS_RETURN_IF_ERROR(DeclaredArray());
      if (IsComplex(t) && !IsComplex(declared_.element_type()))
        return Err("cannot convert complex ", TypeName(t), " to ",
                   TypeName(declared_.element_type()));
      out.set_element_type(declared_.element_type());
      return out;
    case Opcode::kReducePrecision:
      MS_RETURN_IF_ERROR(TypeIs(0, IsFloatingPoint(t), "floating point"));
      if (a_.exponent_bits < 1)
        return Err("exponent_bits must be at least 1, got ", a_.exponent_bits);
      if (a_.mantissa_bits < 0)
        return Err("mantissa_bits must be non-negative, got ", a_.mantissa_bits);
      return out;
    default:
      break;
  }
  return Err("internal: not a unary opcode");
}

StatusOr<Shape> Inferrer::Binary() {
  MS_RETURN_IF_ERROR(AllArrays());
  MS_RETURN_IF_ERROR(SameDims(1, 0));
  const Opcode opc = instr_.opcode();
  const PrimitiveType t = op(0).element_type();
  Shape out(t, op(0).dimensions());
  out.set_dynamic_dimensions(op(0).dynamic_dimensions());
  if (opc == Opcode::kStochasticConvert) {
    MS_RETURN_IF_ERROR(TypeIs(0, IsFloatingPoint(t), "floating point"));
    const PrimitiveType r = op(1).element_type();
    MS_RETURN_IF_ERROR(TypeIs(1, IsUnsignedInteger(r), "an unsigned integer"));
    if (BitWidth(r) != BitWidth(t))
      return Err("random bits ", TypeName(r), " must have the bit width of ",
                 TypeName(t));
    MS_RETURN_IF_ERROR(DeclaredArray());
    out.set_element_type(declared_.element_type());
    return out;
  }
  MS_RETURN_IF_ERROR(SameType(1, 0));
  switch (opc) {
    case Opcode::kCompare:
      if (!a_.comparison_direction.has_value())
        return Err("missing comparison direction (direction=...)");
      out.set_element_type(PrimitiveType::PRED);
      return out;
    case Opcode::kComplex:
      MS_RETURN_IF_ERROR(TypeIs(0, t == PrimitiveType::F32 || t == PrimitiveType::F64,
                                "f32 or f64"));
      out.set_element_type(t == PrimitiveType::F32 ? PrimitiveType::C64
                                                   : PrimitiveType::C128);
      return out;
    case Opcode::kShiftLeft: case Opcode::kShiftRightArithmetic:
    case Opcode::kShiftRightLogical:
      MS_RETURN_IF_ERROR(TypeIs(0, IsInteger(t), "an integer"));
      return out;
    case Opcode::kAnd: case Opcode::kOr: case Opcode::kXor:
      MS_RETURN_IF_ERROR(
          TypeIs(0, IsInteger(t) || t == PrimitiveType::PRED, "pred or an integer"));
      return out;
    case Opcode::kAtan2:
      MS_RETURN_IF_ERROR(TypeIs(0, IsFloatingPoint(t) || IsComplex(t),
                                "floating point or complex"));
      return out;
    default:
      return out;
  }
}

StatusOr<Shape> Inferrer::BitcastConvert() {
  MS_RETURN_IF_ERROR(Array(0));
  MS_RETURN_IF_ERROR(DeclaredArray());
  const PrimitiveType from = op(0).element_type(), to = declared_.element_type();
  const int64_t in_bits = BitWidth(from), out_bits = BitWidth(to);
  std::vector<int64_t> dims = op(0).dimensions();
  if (in_bits > out_bits) {
    if (in_bits % out_bits != 0)
      return Err("cannot bitcast ", TypeName(from), " to ", TypeName(to));
    dims.push_back(in_bits / out_bits);
  } else if (in_bits < out_bits) {
    if (out_bits % in_bits != 0)
      return Err("cannot bitcast ", TypeName(from), " to ", TypeName(to));
    if (dims.empty() || dims.back() != out_bits / in_bits)
      return Err("bitcast from ", TypeName(from), " to ", TypeName(to),
                 " needs a minor dimension of size ", out_bits / in_bits,
                 " but the operand is ", Str(op(0)));
    dims.pop_back();
  }
  return Shape(to, std::move(dims));
}

StatusOr<Shape> Inferrer::Broadcast() {
  MS_RETURN_IF_ERROR(Array(0));
  MS_RETURN_IF_ERROR(DeclaredArray());
  if (declared_.element_type() != op(0).element_type())
    return Err("result element type ", TypeName(declared_.element_type()),
               " differs from operand element type ",
               TypeName(op(0).element_type()));
  if (static_cast<int>(a_.dimensions.size()) != op(0).rank())
    return Err("dimensions ", Dims(a_.dimensions), " has ", a_.dimensions.size(),
               " entries but the operand ", Str(op(0)), " has rank ", op(0).rank());
  MS_RETURN_IF_ERROR(CheckDims("dimensions", a_.dimensions, declared_.rank(), false));
  for (int i = 0; i < op(0).rank(); ++i) {
    int64_t d = a_.dimensions[i];
    if (declared_.dimensions(d) != op(0).dimensions(i))
      return Err("operand dimension ", i, " has size ", op(0).dimensions(i),
                 " but result dimension ", d, " has size ",
                 declared_.dimensions(d));
  }
  return Shape(declared_.element_type(), declared_.dimensions());
}

StatusOr<Shape> Inferrer::DynamicSlice() {
  MS_RETURN_IF_ERROR(CountAtLeast(1));  // a scalar operand has no indices
  MS_RETURN_IF_ERROR(AllArrays());
  const Shape& operand = op(0);
  MS_RETURN_IF_ERROR(StartIndices(1));
  if (static_cast<int>(a_.dynamic_slice_sizes.size()) != operand.rank())
    return Err("dynamic_slice_sizes has ", a_.dynamic_slice_sizes.size(),
               " entries but the operand ", Str(operand), " has rank ",
               operand.rank());
  for (int i = 0; i < operand.rank(); ++i) {
    int64_t s = a_.dynamic_slice_sizes[i];
    if (s < 0 || s > operand.dimensions(i))
      return Err("slice size ", s, " of dimension ", i,
                 " is out of range for operand dimension of size ",
                 operand.dimensions(i));
  }
  return Shape(operand.element_type(), a_.dynamic_slice_sizes);
}

StatusOr<Shape> Inferrer::DynamicUpdateSlice() {
  MS_RETURN_IF_ERROR(CountAtLeast(2));  // scalars have no indices
  MS_RETURN_IF_ERROR(AllArrays());
  const Shape& operand = op(0);
  const Shape& update = op(1);
  MS_RETURN_IF_ERROR(StartIndices(2));
  MS_RETURN_IF_ERROR(SameType(1, 0));
  if (update.rank() != operand.rank())
    return Err("update ", Str(update), " has rank ", update.rank(),
               " but the operand ", Str(operand), " has rank ", operand.rank());
  for (int i = 0; i < operand.rank(); ++i)
    if (update.dimensions(i) > operand.dimensions(i))
      return Err("update dimension ", i, " has size ", update.dimensions(i),
                 " which exceeds operand dimension size ", operand.dimensions(i));
  Shape out = operand;
  out.set_layout(std::nullopt);
  return out;
}

StatusOr<Shape> Inferrer::Scatter() {
  if (n() < 3 || n() % 2 == 0)
    return Err("expects 2N+1 operands (N inputs, indices, N updates) but has ",
               n());
  MS_RETURN_IF_ERROR(AllArrays());
  if (!a_.scatter_dnums.has_value())
    return Err("missing scatter dimension numbers");
  const ScatterDimensionNumbers& d = *a_.scatter_dnums;
  const int num = (n() - 1) / 2;
  const Shape& operand = op(0);
  const Shape& indices = op(num);
  for (int i = 1; i < num; ++i) MS_RETURN_IF_ERROR(SameDims(i, 0));
  for (int i = 1; i < num; ++i) MS_RETURN_IF_ERROR(SameDims(num + 1 + i, num + 1));
  MS_RETURN_IF_ERROR(TypeIs(num, IsInteger(indices.element_type()), "an integer"));
  if (d.index_vector_dim < 0 || d.index_vector_dim > indices.rank())
    return Err("index_vector_dim ", d.index_vector_dim,
               " is out of range for scatter indices of rank ", indices.rank());
  std::vector<int64_t> idx = indices.dimensions();
  if (d.index_vector_dim == indices.rank()) idx.push_back(1);
  const int64_t index_vector_size = idx[d.index_vector_dim];
  const Shape& updates = op(num + 1);
  MS_RETURN_IF_ERROR(CheckDims("update_window_dims", d.update_window_dims,
                               updates.rank(), true));
  MS_RETURN_IF_ERROR(CheckDims("inserted_window_dims", d.inserted_window_dims,
                               operand.rank(), true));
  MS_RETURN_IF_ERROR(CheckDims("input_batching_dims", d.input_batching_dims,
                               operand.rank(), true));
  if (static_cast<int64_t>(d.scatter_dims_to_operand_dims.size()) !=
      index_vector_size)
    return Err("scatter_dims_to_operand_dims has ",
               d.scatter_dims_to_operand_dims.size(),
               " entries but the index vector has size ", index_vector_size);
  MS_RETURN_IF_ERROR(CheckDims("scatter_dims_to_operand_dims",
                               d.scatter_dims_to_operand_dims, operand.rank(),
                               false));
  for (int64_t b : d.input_batching_dims)
    if (std::find(d.inserted_window_dims.begin(), d.inserted_window_dims.end(), b) !=
        d.inserted_window_dims.end())
      return Err("dimension ", b, " is both inserted and a batching dimension");
  MS_RETURN_IF_ERROR(shape_inference_internal::CheckBatchingDims(
      "input_batching_dims", d.input_batching_dims, "scatter_indices_batching_dims",
      d.scatter_indices_batching_dims, operand, indices, d.index_vector_dim,
      "scatter_dims_to_operand_dims", d.scatter_dims_to_operand_dims));
  const int64_t window_rank = operand.rank() - d.inserted_window_dims.size() -
                              d.input_batching_dims.size();
  if (static_cast<int64_t>(d.update_window_dims.size()) != window_rank)
    return Err("update_window_dims has ", d.update_window_dims.size(),
               " entries but operand rank ", operand.rank(), " minus ",
               d.inserted_window_dims.size(), " inserted and ",
               d.input_batching_dims.size(), " batching dimensions is ",
               window_rank);
  const int64_t scatter_rank = static_cast<int64_t>(idx.size()) - 1;
  if (updates.rank() != window_rank + scatter_rank)
    return Err("updates ", Str(updates), " has rank ", updates.rank(),
               " but expected ", window_rank, " window + ", scatter_rank,
               " scatter dimensions");
  // Window dims of the updates may not exceed the operand dims they cover.
  std::vector<int64_t> operand_window_dims;
  for (int i = 0; i < operand.rank(); ++i)
    if (std::find(d.inserted_window_dims.begin(), d.inserted_window_dims.end(), i) ==
            d.inserted_window_dims.end() &&
        std::find(d.input_batching_dims.begin(), d.input_batching_dims.end(), i) ==
            d.input_batching_dims.end())
      operand_window_dims.push_back(i);
  for (size_t w = 0; w < d.update_window_dims.size(); ++w) {
    int64_t ud = d.update_window_dims[w], od = operand_window_dims[w];
    if (updates.dimensions(ud) > operand.dimensions(od))
      return Err("updates window dimension ", ud, " has size ",
                 updates.dimensions(ud), " which exceeds operand dimension ", od,
                 " of size ", operand.dimensions(od));
  }
  std::vector<int64_t> scatter_sizes;
  for (int64_t i = 0; i < static_cast<int64_t>(idx.size()); ++i)
    if (i != d.index_vector_dim) scatter_sizes.push_back(idx[i]);
  size_t si = 0;
  for (int i = 0; i < updates.rank(); ++i) {
    if (std::find(d.update_window_dims.begin(), d.update_window_dims.end(), i) !=
        d.update_window_dims.end())
      continue;
    if (updates.dimensions(i) != scatter_sizes[si])
      return Err("updates scatter dimension ", i, " has size ",
                 updates.dimensions(i), " but the indices have ",
                 scatter_sizes[si]);
    ++si;
  }
  std::vector<PrimitiveType> types;
  std::vector<Shape> results;
  for (int i = 0; i < num; ++i) {
    if (op(num + 1 + i).element_type() != op(i).element_type())
      return Err("updates operand ", num + 1 + i, " has element type ",
                 TypeName(op(num + 1 + i).element_type()), " but operand ", i,
                 " has ", TypeName(op(i).element_type()));
    types.push_back(op(i).element_type());
    results.push_back(Shape(op(i).element_type(), op(i).dimensions()));
  }
  MS_RETURN_IF_ERROR(Called(1));
  std::vector<PrimitiveType> update_types;
  for (int i = 0; i < num; ++i) update_types.push_back(op(num + 1 + i).element_type());
  MS_RETURN_IF_ERROR(Reducer(instr_.to_apply(), "to_apply", types, update_types));
  return TupleOrSingle(std::move(results));
}

StatusOr<Shape> Inferrer::Reduce() {
  MS_ASSIGN_OR_RETURN(const int num, VariadicReductionInputs());
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> dims, InferReducedDims(op(0), a_.dimensions));
  return VariadicReductionResult(num, dims);
}

// reduce / reduce-window operands: N arrays of equal dims, then N init
// values. Returns N.
StatusOr<int> Inferrer::VariadicReductionInputs() const {
  if (n() < 2 || n() % 2 != 0)
    return Err("expects 2N operands (N inputs, N init values) but has ", n());
  MS_RETURN_IF_ERROR(AllArrays());
  const int num = n() / 2;
  for (int i = 1; i < num; ++i) MS_RETURN_IF_ERROR(SameDims(i, 0));
  return num;
}

// The result of reduce / reduce-window: operands are N inputs then N scalar
// init values; result i has init value i's type and `dims`, and to_apply
// must reduce (init types, input types).
StatusOr<Shape> Inferrer::VariadicReductionResult(int num,
                                                  const std::vector<int64_t>& dims) {
  std::vector<PrimitiveType> types;
  std::vector<Shape> results;
  for (int i = 0; i < num; ++i) {
    MS_RETURN_IF_ERROR(Scalar(num + i, "init value"));
    types.push_back(op(num + i).element_type());
    results.push_back(Shape(op(num + i).element_type(), dims));
  }
  MS_RETURN_IF_ERROR(Called(1));
  std::vector<PrimitiveType> input_types;
  for (int i = 0; i < num; ++i) input_types.push_back(op(i).element_type());
  MS_RETURN_IF_ERROR(Reducer(instr_.to_apply(), "to_apply", types, input_types));
  return TupleOrSingle(std::move(results));
}

StatusOr<Shape> Inferrer::ReduceWindow() {
  MS_ASSIGN_OR_RETURN(const int num, VariadicReductionInputs());
  if (!a_.window.has_value() && op(0).rank() > 0) return Err("missing window");
  Window window = a_.window.value_or(Window{});
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                      InferWindowOutputDims(op(0).dimensions(), window));
  return VariadicReductionResult(num, dims);
}

StatusOr<Shape> Inferrer::SelectAndScatter() {
  MS_RETURN_IF_ERROR(AllArrays());
  MS_RETURN_IF_ERROR(Scalar(2, "init value"));
  if (!a_.window.has_value()) return Err("missing window");
  MS_ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                      InferWindowOutputDims(op(0).dimensions(), *a_.window));
  if (op(1).dimensions() != dims)
    return Err("source ", Str(op(1)), " does not match the windowed operand shape ",
               Dims(dims));
  MS_RETURN_IF_ERROR(SameType(1, 0));
  MS_RETURN_IF_ERROR(SameType(2, 0));
  MS_RETURN_IF_ERROR(Called(2));
  const PrimitiveType t = op(0).element_type();
  MS_RETURN_IF_ERROR(Comparator(instr_.called_computations()[0], "select", {t}));
  MS_RETURN_IF_ERROR(Reducer(instr_.called_computations()[1], "scatter", {t},
                             {op(1).element_type()}));
  return Shape(t, op(0).dimensions());
}

StatusOr<Shape> Inferrer::Sort() {
  MS_RETURN_IF_ERROR(CountAtLeast(1));
  MS_RETURN_IF_ERROR(AllArrays());
  for (int i = 1; i < n(); ++i) MS_RETURN_IF_ERROR(SameDims(i, 0));
  if (a_.dimensions.size() != 1)
    return Err("expects one sort dimension but dimensions is ", Dims(a_.dimensions));
  MS_RETURN_IF_ERROR(CheckDims("sort dimension", a_.dimensions, op(0).rank(), false));
  std::vector<PrimitiveType> types;
  std::vector<Shape> results;
  for (int i = 0; i < n(); ++i) {
    types.push_back(op(i).element_type());
    results.push_back(Shape(op(i).element_type(), op(i).dimensions()));
  }
  MS_RETURN_IF_ERROR(Called(1));
  MS_RETURN_IF_ERROR(Comparator(instr_.to_apply(), "comparator", types));
  return TupleOrSingle(std::move(results));
}

StatusOr<Shape> Inferrer::Map() {
  MS_RETURN_IF_ERROR(CountAtLeast(1));
  MS_RETURN_IF_ERROR(AllArrays());
  for (int i = 1; i < n(); ++i) MS_RETURN_IF_ERROR(SameDims(i, 0));
  MS_RETURN_IF_ERROR(Called(1));
  std::vector<Shape> params;
  for (int i = 0; i < n(); ++i) params.push_back(meshsplit::Scalar(op(i).element_type()));
  MS_RETURN_IF_ERROR(Signature(instr_.to_apply(), "to_apply", params, nullptr));
  const Instruction* root = instr_.to_apply()->root();
  if (root == nullptr || !root->shape().IsArray() || root->shape().rank() != 0)
    return Err("to_apply computation must return a scalar");
  return Shape(root->shape().element_type(), op(0).dimensions());
}

StatusOr<Shape> Inferrer::Fft() {
  MS_RETURN_IF_ERROR(Array(0));
  const std::string* type = a_.FindExtra("fft_type");
  const std::string* len_text = a_.FindExtra("fft_length");
  if (type == nullptr || len_text == nullptr) return declared_;  // trust
  StatusOr<std::vector<int64_t>> len = IntList("fft_length");
  if (!len.ok()) return len.status();
  if (len->empty() || len->size() > 3 ||
      std::any_of(len->begin(), len->end(), [](int64_t l) { return l < 0; }))
    return Err("bad fft_length ", *len_text);
  const Shape& in = op(0);
  const int64_t k = len->size();
  if (in.rank() < k)
    return Err("operand ", Str(in), " has fewer than ", k, " dimensions");
  const PrimitiveType t = in.element_type();
  std::vector<int64_t> dims = in.dimensions();
  if (*type == "FFT" || *type == "IFFT") {
    MS_RETURN_IF_ERROR(TypeIs(0, IsComplex(t), "complex"));
    return Shape(t, dims);
  }
  if (*type == "RFFT") {
    MS_RETURN_IF_ERROR(TypeIs(0, t == PrimitiveType::F32 || t == PrimitiveType::F64,
                              "f32 or f64"));
    for (int64_t i = 0; i < k; ++i)
      if (dims[in.rank() - k + i] != (*len)[i])
        return Err("operand dimension ", in.rank() - k + i, " has size ",
                   dims[in.rank() - k + i], " but fft_length is ", Dims(*len));
    dims.back() = len->back() / 2 + 1;
    return Shape(t == PrimitiveType::F32 ? PrimitiveType::C64 : PrimitiveType::C128,
                 dims);
  }
  if (*type == "IRFFT") {
    MS_RETURN_IF_ERROR(TypeIs(0, IsComplex(t), "complex"));
    for (int64_t i = 0; i < k; ++i) {
      int64_t want = i == k - 1 ? (*len)[i] / 2 + 1 : (*len)[i];
      if (dims[in.rank() - k + i] != want)
        return Err("operand dimension ", in.rank() - k + i, " has size ",
                   dims[in.rank() - k + i], " but fft_length ", Dims(*len),
                   " needs ", want);
    }
    dims.back() = len->back();
    return Shape(ComplexComponent(t), dims);
  }
  return Err("unknown fft_type ", *type);
}

StatusOr<Shape> Inferrer::TriangularSolve() {
  MS_RETURN_IF_ERROR(AllArrays());
  MS_RETURN_IF_ERROR(SameType(1, 0));
  const Shape& a = op(0);
  const Shape& b = op(1);
  if (a.rank() < 2 || a.dimensions(a.rank() - 1) != a.dimensions(a.rank() - 2))
    return Err("a ", Str(a), " must be a batch of square matrices");
  if (b.rank() != a.rank())
    return Err("b ", Str(b), " must have the rank of a ", Str(a));
  for (int i = 0; i < a.rank() - 2; ++i)
    if (a.dimensions(i) != b.dimensions(i))
      return Err("batch dimension ", i, " of a has size ", a.dimensions(i),
                 " but b has ", b.dimensions(i));
  const std::string* left = a_.FindExtra("left_side");
  bool left_side = left != nullptr && *left == "true";
  int64_t m = a.dimensions(a.rank() - 1);
  int64_t bd = left_side ? b.dimensions(b.rank() - 2) : b.dimensions(b.rank() - 1);
  if (bd != m)
    return Err("b ", Str(b), " does not match a ", Str(a), " for left_side=",
               left_side ? "true" : "false");
  return Shape(b.element_type(), b.dimensions());
}

StatusOr<Shape> Inferrer::BatchNorm() {
  MS_RETURN_IF_ERROR(AllArrays());
  const Shape& x = op(0);
  MS_RETURN_IF_ERROR(TypeIs(0, IsFloatingPoint(x.element_type()), "floating point"));
  if (a_.feature_index < 0 || a_.feature_index >= x.rank())
    return Err("feature_index ", a_.feature_index,
               " is out of range for operand of rank ", x.rank());
  const int64_t f = x.dimensions(a_.feature_index);
  const Opcode opc = instr_.opcode();
  // batch-norm-grad's operand 4 is grad_output, shaped like the operand.
  for (int i = 1; i < n(); ++i) {
    MS_RETURN_IF_ERROR(SameType(i, 0));
    if (opc == Opcode::kBatchNormGrad && i == 4) {
      MS_RETURN_IF_ERROR(SameDims(4, 0));
      continue;
    }
    if (op(i).rank() != 1 || op(i).dimensions(0) != f)
      return Err("operand ", i, " has shape ", Str(op(i)), " but the feature "
                 "dimension ", a_.feature_index, " has size ", f);
  }
  Shape xs(x.element_type(), x.dimensions());
  Shape fs(x.element_type(), {f});
  if (opc == Opcode::kBatchNormInference) return xs;
  return Shape::Tuple({xs, fs, fs});
}

StatusOr<Shape> Inferrer::While() {
  MS_RETURN_IF_ERROR(Called(2));
  Shape pred = meshsplit::Scalar(PrimitiveType::PRED);
  MS_RETURN_IF_ERROR(Signature(instr_.while_condition(), "condition", {op(0)}, &pred));
  MS_RETURN_IF_ERROR(Signature(instr_.while_body(), "body", {op(0)}, &op(0)));
  return op(0);
}

StatusOr<Shape> Inferrer::Conditional() {
  MS_RETURN_IF_ERROR(CountAtLeast(1));
  const auto& branches = instr_.called_computations();
  if (branches.empty()) return Err("has no branch computations");
  if (n() != static_cast<int>(branches.size()) + 1)
    return Err("has ", branches.size(), " branches but ", n() - 1,
               " branch operands");
  const Shape& index = op(0);
  if (index.IsArray() && index.rank() == 0 &&
      index.element_type() == PrimitiveType::PRED) {
    if (branches.size() != 2)
      return Err("a pred branch index needs 2 branches but there are ",
                 branches.size());
  } else if (!(index.IsArray() && index.rank() == 0 &&
               index.element_type() == PrimitiveType::S32)) {
    return Err("branch index (operand 0) must be pred[] or s32[] but has shape ",
               Str(index));
  }
  for (size_t b = 0; b < branches.size(); ++b) {
    if (branches[b] == nullptr || branches[b]->root() == nullptr)
      return Err("branch computation ", b, " is missing or has no root");
    std::string role = StrCat("branch ", b);
    const Shape& result = branches[0]->root()->shape();
    MS_RETURN_IF_ERROR(Signature(branches[b], role.c_str(), {op(b + 1)}, &result));
  }
  return branches[0]->root()->shape();
}

StatusOr<Shape> Inferrer::Call() {
  MS_RETURN_IF_ERROR(Called(1));
  const Computation* c = instr_.to_apply();
  std::vector<Shape> params;
  for (int i = 0; i < n(); ++i) params.push_back(op(i));
  MS_RETURN_IF_ERROR(Signature(c, "to_apply", params, nullptr));
  if (c->root() == nullptr) return Err("computation %", c->name(), " has no root");
  return c->root()->shape();
}

StatusOr<Shape> Inferrer::Collective() {
  // A collective start is checked as the collective it starts; its declared
  // result is the matching part of its tuple (shape_inference_async.h).
  const Opcode opc = SyncCollectiveOf(instr_.opcode());
  const Shape& declared = DeclaredStartResult(instr_);
  MS_RETURN_IF_ERROR(CountAtLeast(1));
  std::optional<int64_t> group_size;
  if (a_.replica_groups.has_value()) {
    // Like XLA, only ops whose shapes depend on the group size need groups
    // of one size; all-reduce may mix sizes.
    if (opc == Opcode::kAllReduce || opc == Opcode::kCollectivePermute) {
      MS_RETURN_IF_ERROR(
          shape_inference_internal::CheckReplicaGroupIds(*a_.replica_groups));
    } else {
      MS_ASSIGN_OR_RETURN(group_size, ReplicaGroupSize(*a_.replica_groups));
    }
  }
  if (opc == Opcode::kCollectivePermute) {
    std::set<int64_t> sources, targets;
    for (const auto& [s, t] : a_.source_target_pairs) {
      if (s < 0 || t < 0)
        return Err("source_target_pairs contain a negative id in {", s, ",", t, "}");
      if (!sources.insert(s).second)
        return Err("source ", s, " appears more than once in source_target_pairs");
      if (!targets.insert(t).second)
        return Err("target ", t, " appears more than once in source_target_pairs");
    }
    if (n() == 1) return op(0);
    return declared;  // in-place / combined forms: trust the declared shape
  }
  MS_RETURN_IF_ERROR(AllArrays());
  // The declared shape of operand i's result, for forms that trust it.
  auto declared_leaf = [&](int i) -> const Shape* {
    if (n() == 1) return declared.IsArray() ? &declared : nullptr;
    if (declared.IsTuple() && i < declared.tuple_size() &&
        declared.tuple_shapes(i).IsArray())
      return &declared.tuple_shapes(i);
    return nullptr;
  };
  std::vector<Shape> results;
  if (opc == Opcode::kAllReduce) {
    for (int i = 0; i < n(); ++i)
      results.push_back(Shape(op(i).element_type(), op(i).dimensions()));
    MS_RETURN_IF_ERROR(Called(1));
    const Computation* c = instr_.to_apply();
    // The reducer must be binary over scalars; XLA applies it per element type.
    if (c == nullptr || c->parameter_count() != 2 || c->root() == nullptr ||
        !c->root()->shape().IsArray() || c->root()->shape().rank() != 0)
      return Err("to_apply must take two scalars and return a scalar");
    return TupleOrSingle(std::move(results));
  }
  if (opc == Opcode::kAllToAll && a_.dimensions.empty()) {
    for (int i = 0; i < n(); ++i)
      results.push_back(Shape(op(i).element_type(), op(i).dimensions()));
    return TupleOrSingle(std::move(results));
  }
  if (a_.dimensions.size() != 1)
    return Err("expects one dimension but dimensions is ", Dims(a_.dimensions));
  const int64_t dim = a_.dimensions[0];
  for (int i = 0; i < n(); ++i) {
    const Shape& in = op(i);
    if (dim < 0 || dim >= in.rank())
      return Err("dimension ", dim, " is out of range for operand ", i, " ",
                 Str(in));
    std::vector<int64_t> dims = in.dimensions();
    int64_t size = dims[dim];
    if (opc == Opcode::kAllToAll) {
      if (group_size.has_value() && size % *group_size != 0)
        return Err("dimension ", dim, " of size ", size,
                   " is not divisible by the group size ", *group_size);
    } else if (group_size.has_value()) {
      if (opc == Opcode::kAllGather) {
        dims[dim] = size * *group_size;
      } else {  // reduce-scatter
        if (size % *group_size != 0)
          return Err("dimension ", dim, " of size ", size,
                     " is not divisible by the group size ", *group_size);
        dims[dim] = size / *group_size;
      }
    } else {
      // Empty replica groups: every device takes part; the count is not
      // known here, so trust the declared size if it is consistent.
      const Shape* d = declared_leaf(i);
      if (d != nullptr && d->rank() == in.rank()) {
        int64_t ds = d->dimensions(dim);
        bool ok = opc == Opcode::kAllGather
                      ? (size == 0 ? ds == 0 : ds % size == 0)
                      : (ds == 0 ? size == 0 : size % ds == 0);
        if (!ok)
          return Err("declared dimension ", dim, " size ", ds,
                     " is not consistent with operand ", i, " size ", size);
        dims[dim] = ds;
      }
    }
    results.push_back(Shape(in.element_type(), std::move(dims)));
  }
  if (opc == Opcode::kReduceScatter) {
    MS_RETURN_IF_ERROR(Called(1));
  }
  return TupleOrSingle(std::move(results));
}

StatusOr<Shape> Inferrer::Run() {
  const Opcode opc = instr_.opcode();
  const int arity = OpcodeArity(opc);
  // Operand counts fixed by opcodes.def; dynamic-slice style ops check their
  // own counts below.
  if (arity >= 0) MS_RETURN_IF_ERROR(Count(arity));
  switch (opc) {
    case Opcode::kParameter:
      return declared_;
    case Opcode::kConstant:
      if (instr_.has_literal() && !instr_.literal().shape().Compatible(declared_))
        return Err("literal has shape ", Str(instr_.literal().shape()),
                   " but the constant is declared ", Str(declared_));
      return declared_;
    case Opcode::kIota:
      MS_RETURN_IF_ERROR(DeclaredArray());
      if (declared_.rank() == 0) return Err("result must have rank at least 1");
      if (a_.iota_dimension < 0 || a_.iota_dimension >= declared_.rank())
        return Err("iota_dimension ", a_.iota_dimension,
                   " is out of range for rank ", declared_.rank());
      return Shape(declared_.element_type(), declared_.dimensions());
    case Opcode::kPartitionId:
    case Opcode::kReplicaId:
      return meshsplit::Scalar(PrimitiveType::U32);
    case Opcode::kAfterAll:
      for (int i = 0; i < n(); ++i)
        if (!op(i).IsToken())
          return Err("operand ", i, " must be a token but has shape ", Str(op(i)));
      return Shape::Token();

    case Opcode::kAbs: case Opcode::kCbrt: case Opcode::kCeil: case Opcode::kClz:
    case Opcode::kCos: case Opcode::kErf: case Opcode::kExp: case Opcode::kExpm1:
    case Opcode::kFloor: case Opcode::kImag: case Opcode::kIsFinite:
    case Opcode::kLog: case Opcode::kLog1p: case Opcode::kLogistic:
    case Opcode::kNegate: case Opcode::kNot: case Opcode::kPopcnt:
    case Opcode::kReal: case Opcode::kRoundNearestAfz:
    case Opcode::kRoundNearestEven: case Opcode::kRsqrt: case Opcode::kSign:
    case Opcode::kSin: case Opcode::kSqrt: case Opcode::kTan: case Opcode::kTanh:
    case Opcode::kCopy: case Opcode::kConvert: case Opcode::kReducePrecision:
      return Unary();

    case Opcode::kStochasticConvert:
    case Opcode::kAdd: case Opcode::kAnd: case Opcode::kAtan2:
    case Opcode::kComplex: case Opcode::kDivide: case Opcode::kMaximum:
    case Opcode::kMinimum: case Opcode::kMultiply: case Opcode::kOr:
    case Opcode::kPower: case Opcode::kRemainder: case Opcode::kShiftLeft:
    case Opcode::kShiftRightArithmetic: case Opcode::kShiftRightLogical:
    case Opcode::kSubtract: case Opcode::kXor: case Opcode::kCompare:
      return Binary();

    case Opcode::kSelect: {
      MS_RETURN_IF_ERROR(AllArrays());
      MS_RETURN_IF_ERROR(TypeIs(0, op(0).element_type() == PrimitiveType::PRED, "pred"));
      MS_RETURN_IF_ERROR(SameDims(2, 1));
      MS_RETURN_IF_ERROR(SameType(2, 1));
      if (op(0).rank() != 0) MS_RETURN_IF_ERROR(SameDims(0, 1));
      return Shape(op(1).element_type(), op(1).dimensions());
    }
    case Opcode::kClamp: {
      MS_RETURN_IF_ERROR(AllArrays());
      for (int i : {0, 2}) {
        MS_RETURN_IF_ERROR(SameType(i, 1));
        if (op(i).rank() != 0) MS_RETURN_IF_ERROR(SameDims(i, 1));
      }
      return Shape(op(1).element_type(), op(1).dimensions());
    }

    case Opcode::kBitcast:
      if (op(0).IsArray() && declared_.IsArray() &&
          op(0).ByteSize() != declared_.ByteSize())
        return Err("operand ", Str(op(0)), " has ", op(0).ByteSize(),
                   " bytes but the result ", Str(declared_), " has ",
                   declared_.ByteSize());
      return declared_;
    case Opcode::kBitcastConvert:
      return BitcastConvert();
    case Opcode::kBroadcast:
      return Broadcast();
    case Opcode::kReshape:
      MS_RETURN_IF_ERROR(Array(0));
      MS_RETURN_IF_ERROR(DeclaredArray());
      if (declared_.element_type() != op(0).element_type())
        return Err("result element type ", TypeName(declared_.element_type()),
                   " differs from operand element type ",
                   TypeName(op(0).element_type()));
      if (declared_.ElementCount() != op(0).ElementCount())
        return Err("operand ", Str(op(0)), " has ", op(0).ElementCount(),
                   " elements but the result ", Str(declared_), " has ",
                   declared_.ElementCount());
      return Shape(declared_.element_type(), declared_.dimensions());
    case Opcode::kTranspose:
      return InferTransposeShape(op(0), a_.dimensions);
    case Opcode::kSlice:
      return InferSliceShape(op(0), a_.slice);
    case Opcode::kDynamicSlice:
      return DynamicSlice();
    case Opcode::kDynamicUpdateSlice:
      return DynamicUpdateSlice();
    case Opcode::kPad:
      MS_RETURN_IF_ERROR(AllArrays());
      MS_RETURN_IF_ERROR(Scalar(1, "padding value"));
      MS_RETURN_IF_ERROR(SameType(1, 0));
      return InferPadShape(op(0), a_.padding);
    case Opcode::kConcatenate:
      if (a_.dimensions.size() != 1)
        return Err("expects one dimension but dimensions is ", Dims(a_.dimensions));
      return InferConcatenateShape(ops_, a_.dimensions[0]);
    case Opcode::kReverse: {
      MS_RETURN_IF_ERROR(Array(0));
      MS_RETURN_IF_ERROR(CheckDims("dimensions", a_.dimensions, op(0).rank(), false));
      return Shape(op(0).element_type(), op(0).dimensions());
    }
    case Opcode::kGather:
      if (!a_.gather_dnums.has_value()) return Err("missing gather dimension numbers");
      return InferGatherShape(op(0), op(1), *a_.gather_dnums, a_.gather_slice_sizes);
    case Opcode::kScatter:
      return Scatter();
    case Opcode::kGetDimensionSize:
      MS_RETURN_IF_ERROR(Array(0));
      if (a_.dimensions.size() != 1)
        return Err("expects one dimension but dimensions is ", Dims(a_.dimensions));
      if (a_.dimensions[0] < 0 || a_.dimensions[0] >= op(0).rank())
        return Err("dimension ", a_.dimensions[0], " is out of range for rank ",
                   op(0).rank());
      return meshsplit::Scalar(PrimitiveType::S32);

    case Opcode::kReduce:
      return Reduce();
    case Opcode::kReduceWindow:
      return ReduceWindow();
    case Opcode::kSelectAndScatter:
      return SelectAndScatter();
    case Opcode::kSort:
      return Sort();
    case Opcode::kMap:
      return Map();
    case Opcode::kTopK: {
      // XLA's topk: the k largest (smallest) along the last dim, with their
      // s32 positions.
      MS_RETURN_IF_ERROR(Array(0));
      const Shape& x = op(0);
      if (x.rank() < 1) return Err("operand must have rank >= 1 but is ", Str(x));
      const std::optional<int64_t> k = TopKK(instr_);
      if (!k.has_value()) return Err("missing or malformed k=");
      if (!TopKLargest(instr_).has_value()) return Err("largest= must be true or false");
      if (*k < 0 || *k > x.dimensions(x.rank() - 1))
        return Err("k=", *k, " is out of range for operand ", Str(x));
      std::vector<int64_t> dims = x.dimensions();
      dims.back() = *k;
      return Shape::Tuple({Shape(x.element_type(), dims), Shape(PrimitiveType::S32, dims)});
    }

    case Opcode::kDot: {
      DotDimensionNumbers dn = a_.dot_dnums.value_or(DotDimensionNumbers{});
      // The declared element type acts as XLA's preferred_element_type.
      PrimitiveType t = declared_.IsArray() ? declared_.element_type()
                                            : op(0).element_type();
      return InferDotShape(op(0), op(1), dn, t);
    }
    case Opcode::kRaggedDot: {
      MS_RETURN_IF_ERROR(Count(3));
      MS_RETURN_IF_ERROR(AllArrays());
      MS_RETURN_IF_ERROR(DeclaredArray());
      MS_ASSIGN_OR_RETURN(std::vector<int64_t> ragged, IntList("lhs_ragged_dims"));
      MS_ASSIGN_OR_RETURN(std::vector<int64_t> group, IntList("rhs_group_dims"));
      return InferRaggedDotShape(op(0), op(1), op(2), a_.dot_dnums.value_or(DotDimensionNumbers{}),
                                 ragged, group, declared_.element_type());
    }
    case Opcode::kConvolution: {
      if (!a_.conv_dnums.has_value()) return Err("missing dim_labels");
      PrimitiveType t = declared_.IsArray() ? declared_.element_type()
                                            : op(0).element_type();
      return InferConvolutionShape(op(0), op(1), *a_.conv_dnums, a_.window,
                                   a_.feature_group_count, a_.batch_group_count, t);
    }
    case Opcode::kFft:
      return Fft();
    case Opcode::kCholesky: {
      MS_RETURN_IF_ERROR(Array(0));
      const Shape& x = op(0);
      if (x.rank() < 2 || x.dimensions(x.rank() - 1) != x.dimensions(x.rank() - 2))
        return Err("operand ", Str(x), " must be a batch of square matrices");
      return Shape(x.element_type(), x.dimensions());
    }
    case Opcode::kTriangularSolve:
      return TriangularSolve();
    case Opcode::kBatchNormTraining:
    case Opcode::kBatchNormInference:
    case Opcode::kBatchNormGrad:
      return BatchNorm();

    case Opcode::kTuple: {
      std::vector<Shape> elems;
      for (int i = 0; i < n(); ++i) elems.push_back(op(i));
      return Shape::Tuple(std::move(elems));
    }
    case Opcode::kGetTupleElement:
      if (!op(0).IsTuple())
        return Err("operand must be a tuple but has shape ", Str(op(0)));
      if (a_.tuple_index < 0 || a_.tuple_index >= op(0).tuple_size())
        return Err("index ", a_.tuple_index, " is out of range for a tuple of ",
                   op(0).tuple_size(), " elements");
      return op(0).tuple_shapes(a_.tuple_index);
    case Opcode::kWhile:
      return While();
    case Opcode::kConditional:
      return Conditional();
    case Opcode::kCall:
      return Call();
    case Opcode::kCustomCall: {
      // The sharding markers annotate one value; propagation and the
      // partitioner read their operand 0. Sharding and the shard barriers
      // are identities that propagation may replace by their operand, so
      // they keep its shape.
      const std::string& target = a_.custom_call_target;
      const bool identity =
          target == "Sharding" || target == "ShardBarrierFrom" || target == "ShardBarrierTo";
      if ((identity || target == "SPMDFullToShardShape" || target == "SPMDShardToFullShape") &&
          n() != 1)
        return Err(target, " custom-call takes 1 operand, not ", n());
      if (identity && !op(0).Compatible(declared_))
        return Err(target, " custom-call must keep its operand shape ", Str(op(0)));
      // The manual-region markers change the dims (full <-> shard), never
      // the element type or the rank: the partitioner reuses the operand's.
      if ((target == "SPMDFullToShardShape" || target == "SPMDShardToFullShape") &&
          (!op(0).IsArray() || !declared_.IsArray() ||
           op(0).element_type() != declared_.element_type() || op(0).rank() != declared_.rank()))
        return Err(target, " custom-call keeps the element type and rank of its operand ",
                   Str(op(0)), ", not ", Str(declared_));
      // The block-scaled dot is evaluated and partitioned as a dot, so its
      // result is inferred like one (runtime/kernels_block_scaled_dot.cc).
      if (target == kBlockScaledDotTarget) {
        MS_RETURN_IF_ERROR(DeclaredArray());
        return InferBlockScaledDotShape(ops_, declared_.element_type());
      }
      return declared_;
    }
    case Opcode::kOptimizationBarrier:
    case Opcode::kDomain:
      return op(0);
    case Opcode::kAddDependency:
      if (!op(1).IsToken())
        return Err("operand 1 must be a token but has shape ", Str(op(1)));
      return op(0);
    case Opcode::kInfeed:
      if (!op(0).IsToken())
        return Err("operand must be a token but has shape ", Str(op(0)));
      if (!declared_.IsTuple() || declared_.tuple_size() != 2 ||
          !declared_.tuple_shapes(1).IsToken())
        return Err("result must be (data, token) but is declared ", Str(declared_));
      return declared_;
    case Opcode::kOutfeed:
      if (!op(1).IsToken())
        return Err("operand 1 must be a token but has shape ", Str(op(1)));
      return Shape::Token();
    case Opcode::kRng: {
      MS_RETURN_IF_ERROR(Scalar(0, "a"));
      MS_RETURN_IF_ERROR(Scalar(1, "b"));
      MS_RETURN_IF_ERROR(SameType(1, 0));
      MS_RETURN_IF_ERROR(DeclaredArray());
      if (declared_.element_type() != op(0).element_type())
        return Err("result element type ", TypeName(declared_.element_type()),
                   " differs from the parameters' ", TypeName(op(0).element_type()));
      if (a_.rng_distribution == "rng_normal" &&
          !IsFloatingPoint(op(0).element_type()))
        return Err("rng_normal needs floating point parameters");
      return Shape(declared_.element_type(), declared_.dimensions());
    }
    case Opcode::kRngBitGenerator:
      MS_RETURN_IF_ERROR(Array(0));
      // XLA's verifier wants (state, data), but XLA's own tests also write a
      // bare data result (e.g. ReplicateRngBitGeneratorSeed); accept both.
      if (declared_.IsArray()) return declared_;
      if (!declared_.IsTuple() || declared_.tuple_size() != 2 ||
          !declared_.tuple_shapes(0).Compatible(op(0)) ||
          !declared_.tuple_shapes(1).IsArray())
        return Err("result must be (", Str(op(0)), ", data) but is declared ",
                   Str(declared_));
      return declared_;
    case Opcode::kRngGetAndUpdateState:
      return Shape(PrimitiveType::U64, {2});

    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
      return Collective();

    // Fusion and the asynchronous pairs (shape_inference_async.cc).
    case Opcode::kAllReduceStart:
    case Opcode::kAllGatherStart:
    case Opcode::kCollectivePermuteStart: {
      MS_ASSIGN_OR_RETURN(Shape sync_result, Collective());
      return InferCollectiveStartShape(instr_, sync_result);
    }
    case Opcode::kFusion:
    case Opcode::kAsyncStart:
    case Opcode::kAsyncUpdate:
    case Opcode::kAsyncDone:
    case Opcode::kAllReduceDone:
    case Opcode::kAllGatherDone:
    case Opcode::kCollectivePermuteDone:
    case Opcode::kCopyStart:
    case Opcode::kCopyDone:
      return InferAsyncOrFusionShape(instr_);

    // Point-to-point transfers and dynamic sizes (shape_inference_p2p.cc).
    case Opcode::kSend:
    case Opcode::kSendDone:
    case Opcode::kRecv:
    case Opcode::kRecvDone:
    case Opcode::kCollectiveBroadcast:
    case Opcode::kRaggedAllToAll:
    case Opcode::kSetDimensionSize:
    case Opcode::kDynamicReshape:
      return InferP2POrDynamicSizeShape(instr_);
  }
  return Err("internal: unhandled opcode");
}

}  // namespace

StatusOr<Shape> InferShape(const Instruction& instr) {
  StatusOr<Shape> result = Inferrer(instr).Run();
  if (result.ok()) return result;
  // Keep a more precise location (into an attribute's text) when there is one.
  const SourceLoc& inner = result.status().loc();
  return Status::Error(StrCat(OpcodeName(instr.opcode()), " %", instr.name(), ": ",
                              result.status().message()),
                       inner.known() ? inner : instr.loc());
}

std::optional<int64_t> TopKK(const Instruction& instr) {
  const std::string* v = instr.attrs().FindExtra("k");
  if (v == nullptr || v->empty() || v->size() > 18) return std::nullopt;
  int64_t k = 0;
  for (char c : *v) {
    if (c < '0' || c > '9') return std::nullopt;
    k = k * 10 + (c - '0');
  }
  return k;
}

std::optional<bool> TopKLargest(const Instruction& instr) {
  const std::string* v = instr.attrs().FindExtra("largest");
  if (v == nullptr || *v == "true") return true;
  if (*v == "false") return false;
  return std::nullopt;
}

}  // namespace meshsplit
