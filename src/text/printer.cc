// Module -> canonical HLO text. One fixed attribute order per opcode, extras
// verbatim, computations callees-first, so that printing what was parsed from
// printed text gives the same text again.
#include "text/printer.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_set>

#include "support/float16.h"
#include "text/minifloat.h"

namespace meshsplit {

namespace {

// Array constants of more elements than this that hold one value print as a
// broadcast of a scalar constant (see SplatValue); smaller ones in full.
constexpr int64_t kSplatThreshold = 64;

void AppendInt(std::string& out, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

void AppendIntList(std::string& out, const std::vector<int64_t>& v,
                   const char* sep = ",") {
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += sep;
    AppendInt(out, v[i]);
  }
}

void AppendBraced(std::string& out, const std::vector<int64_t>& v) {
  out += '{';
  AppendIntList(out, v);
  out += '}';
}

// Shortest text that reads back to the same float (or double).
std::string FormatFloat(double v, bool is_double) {
  if (std::isnan(v)) return NanText(v, is_double ? PrimitiveType::F64 : PrimitiveType::F32);
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::to_chars_result r = is_double
                               ? std::to_chars(buf, buf + sizeof(buf), v)
                               : std::to_chars(buf, buf + sizeof(buf), static_cast<float>(v));
  return std::string(buf, r.ptr);
}

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

// Types Literal::ToString does not print faithfully (complex, sub-byte
// signed integers, 8- and 4-bit floats) are formatted here, in its layout.
bool NeedsOwnFormat(PrimitiveType t) {
  switch (t) {
    case PrimitiveType::PRED: case PrimitiveType::S8: case PrimitiveType::S16:
    case PrimitiveType::S32: case PrimitiveType::S64: case PrimitiveType::U8:
    case PrimitiveType::U16: case PrimitiveType::U32: case PrimitiveType::U64:
    case PrimitiveType::F16: case PrimitiveType::BF16: case PrimitiveType::F32:
    case PrimitiveType::F64: case PrimitiveType::U2: case PrimitiveType::U4:
      return false;
    default:
      return true;
  }
}

std::string FormatOwnElement(const Literal& l, int64_t i) {
  PrimitiveType t = l.element_type();
  switch (t) {
    case PrimitiveType::C64:
      return "(" + FormatFloat(l.data<float>()[2 * i], false) + ", " +
             FormatFloat(l.data<float>()[2 * i + 1], false) + ")";
    case PrimitiveType::C128:
      return "(" + FormatFloat(l.data<double>()[2 * i], true) + ", " +
             FormatFloat(l.data<double>()[2 * i + 1], true) + ")";
    case PrimitiveType::S2: case PrimitiveType::S4:
      return std::to_string(static_cast<int>(l.data<int8_t>()[i]));
    default:
      if (IsFloatingPoint(t))
        return FormatFloat(text_internal::DecodeMiniFloat(t, l.data<uint8_t>()[i]), false);
      return std::to_string(static_cast<int>(l.data<uint8_t>()[i]));
  }
}

void FormatOwnArray(const Literal& l, int dim, int64_t& index, std::string& out) {
  const auto& dims = l.shape().dimensions();
  if (dim == static_cast<int>(dims.size())) {
    out += FormatOwnElement(l, index++);
    return;
  }
  out += '{';
  for (int64_t i = 0; i < dims[dim]; ++i) {
    if (i > 0) out += ", ";
    FormatOwnArray(l, dim + 1, index, out);
  }
  out += '}';
}

void FormatLiteral(const Literal& l, std::string& out) {
  if (l.shape().IsTuple()) {
    out += '(';
    for (size_t i = 0; i < l.elements().size(); ++i) {
      if (i > 0) out += ", ";
      FormatLiteral(l.elements()[i], out);
    }
    out += ')';
    return;
  }
  if (!NeedsOwnFormat(l.element_type())) {
    out += l.ToString();
    return;
  }
  int64_t index = 0;
  FormatOwnArray(l, 0, index, out);
}

const char* DirectionName(ComparisonDirection d) {
  switch (d) {
    case ComparisonDirection::kEq: return "EQ";
    case ComparisonDirection::kNe: return "NE";
    case ComparisonDirection::kGe: return "GE";
    case ComparisonDirection::kGt: return "GT";
    case ComparisonDirection::kLe: return "LE";
    case ComparisonDirection::kLt: return "LT";
  }
  return "EQ";
}

std::string WindowToString(const Window& w) {
  std::string out = "{";
  if (w.empty()) return "{}";
  auto field = [&](const char* name, auto get, int64_t dflt, bool always) {
    bool any = always;
    for (const auto& d : w) any |= get(d) != dflt;
    if (!any) return;
    if (out.size() > 1) out += ' ';
    out += name;
    out += '=';
    for (size_t i = 0; i < w.size(); ++i) {
      if (i > 0) out += 'x';
      AppendInt(out, get(w[i]));
    }
  };
  field("size", [](const WindowDimension& d) { return d.size; }, 1, true);
  field("stride", [](const WindowDimension& d) { return d.stride; }, 1, false);
  bool any_pad = false;
  for (const auto& d : w) any_pad |= d.padding_low != 0 || d.padding_high != 0;
  if (any_pad) {
    out += " pad=";
    for (size_t i = 0; i < w.size(); ++i) {
      if (i > 0) out += 'x';
      AppendInt(out, w[i].padding_low);
      out += '_';
      AppendInt(out, w[i].padding_high);
    }
  }
  field("lhs_dilate", [](const WindowDimension& d) { return d.base_dilation; }, 1, false);
  field("rhs_dilate", [](const WindowDimension& d) { return d.window_dilation; }, 1, false);
  field("rhs_reversal",
        [](const WindowDimension& d) { return static_cast<int64_t>(d.window_reversal); }, 0,
        false);
  return out + "}";
}

std::string DimLabels(const ConvolutionDimensionNumbers& d) {
  auto labels = [](int64_t a, char ca, int64_t b, char cb,
                   const std::vector<int64_t>& spatial) {
    std::string s(spatial.size() + 2, '?');
    auto put = [&](int64_t pos, char c) {
      if (pos >= 0 && pos < static_cast<int64_t>(s.size())) s[pos] = c;
    };
    put(a, ca);
    put(b, cb);
    for (size_t i = 0; i < spatial.size(); ++i) put(spatial[i], static_cast<char>('0' + i % 10));
    return s;
  };
  return labels(d.input_batch_dimension, 'b', d.input_feature_dimension, 'f',
                d.input_spatial_dimensions) +
         "_" +
         labels(d.kernel_input_feature_dimension, 'i', d.kernel_output_feature_dimension, 'o',
                d.kernel_spatial_dimensions) +
         "->" +
         labels(d.output_batch_dimension, 'b', d.output_feature_dimension, 'f',
                d.output_spatial_dimensions);
}

std::string ReplicaGroupsToString(const ReplicaGroups& g) {
  std::string out;
  if (g.is_iota) {
    out += '[';
    AppendIntList(out, g.group_dims);
    out += "]<=[";
    AppendIntList(out, g.reshape_dims);
    out += ']';
    if (!g.transpose_perm.empty()) {
      out += "T(";
      AppendIntList(out, g.transpose_perm);
      out += ')';
    }
    return out;
  }
  out += '{';
  for (size_t i = 0; i < g.groups.size(); ++i) {
    if (i > 0) out += ',';
    AppendBraced(out, g.groups[i]);
  }
  return out + "}";
}

class InstructionPrinter {
 public:
  // `splat_scalar`: print the constant `instr` as a broadcast of this
  // operand text, its scalar (see SplatValue).
  InstructionPrinter(const Instruction& instr, const PrintOptions& options, std::string& out,
                     const std::string* splat_scalar = nullptr)
      : instr_(instr), a_(instr.attrs()), options_(options), out_(out),
        splat_scalar_(splat_scalar) {}

  void Print() {
    out_ += '%';
    out_ += instr_.name();
    out_ += " = ";
    out_ += instr_.shape().ToString();
    out_ += ' ';
    out_ += splat_scalar_ != nullptr ? "broadcast" : OpcodeName(instr_.opcode());
    out_ += '(';
    if (splat_scalar_ != nullptr) {
      out_ += *splat_scalar_;
    } else if (instr_.opcode() == Opcode::kParameter) {
      AppendInt(out_, a_.parameter_number);
    } else if (instr_.opcode() == Opcode::kConstant) {
      if (instr_.has_literal()) FormatLiteral(instr_.literal(), out_);
    } else {
      for (int i = 0; i < instr_.operand_count(); ++i) {
        if (i > 0) out_ += ", ";
        const Instruction* op = instr_.operand(i);
        if (options_.print_operand_shapes) {
          out_ += op->shape().ToString();
          out_ += ' ';
        }
        out_ += '%';
        out_ += op->name();
      }
    }
    out_ += ')';
    if (splat_scalar_ != nullptr) out_ += ", dimensions={}";
    PrintTypedAttributes();
    PrintCalls();
    if (!instr_.control_predecessors().empty()) {
      out_ += ", control-predecessors={";
      for (size_t i = 0; i < instr_.control_predecessors().size(); ++i) {
        if (i > 0) out_ += ", ";
        out_ += '%';
        out_ += instr_.control_predecessors()[i]->name();
      }
      out_ += '}';
    }
    if (instr_.has_sharding()) Attr("sharding", instr_.sharding()->ToString());
    for (const auto& [k, v] : a_.extra)
      if (k != "metadata" && k != "backend_config" && !PrintedWithCalls(k)) Attr(k, v);
    if (options_.print_metadata)
      if (const std::string* m = a_.FindExtra("metadata")) Attr("metadata", *m);
    if (const std::string* b = a_.FindExtra("backend_config")) Attr("backend_config", *b);
  }

 private:
  void Attr(std::string_view name, std::string_view value) {
    out_ += ", ";
    out_ += name;
    out_ += '=';
    out_ += value;
  }
  void IntAttr(std::string_view name, int64_t v) {
    out_ += ", ";
    out_ += name;
    out_ += '=';
    AppendInt(out_, v);
  }
  void ListAttr(std::string_view name, const std::vector<int64_t>& v) {
    out_ += ", ";
    out_ += name;
    out_ += '=';
    AppendBraced(out_, v);
  }
  void ListAttrIfAny(std::string_view name, const std::vector<int64_t>& v) {
    if (!v.empty()) ListAttr(name, v);
  }
  void TrueAttr(std::string_view name, bool b) {
    if (b) Attr(name, "true");
  }

  void PrintTypedAttributes() {
    switch (instr_.opcode()) {
      case Opcode::kGetTupleElement:
        IntAttr("index", a_.tuple_index);
        break;
      case Opcode::kIota:
        IntAttr("iota_dimension", a_.iota_dimension);
        break;
      case Opcode::kBroadcast: case Opcode::kTranspose: case Opcode::kReduce:
      case Opcode::kReverse: case Opcode::kConcatenate: case Opcode::kMap:
      case Opcode::kGetDimensionSize:
        ListAttr("dimensions", a_.dimensions);
        break;
      case Opcode::kSort:
        ListAttr("dimensions", a_.dimensions);
        TrueAttr("is_stable", a_.is_stable);
        break;
      case Opcode::kSlice: {
        out_ += ", slice={";
        for (size_t i = 0; i < a_.slice.size(); ++i) {
          if (i > 0) out_ += ", ";
          out_ += '[';
          AppendInt(out_, a_.slice[i].start);
          out_ += ':';
          AppendInt(out_, a_.slice[i].limit);
          if (a_.slice[i].stride != 1) {
            out_ += ':';
            AppendInt(out_, a_.slice[i].stride);
          }
          out_ += ']';
        }
        out_ += '}';
        break;
      }
      case Opcode::kDynamicSlice:
        ListAttr("dynamic_slice_sizes", a_.dynamic_slice_sizes);
        break;
      case Opcode::kPad: {
        bool interior = false;
        for (const auto& d : a_.padding) interior |= d.interior != 0;
        out_ += ", padding=";
        for (size_t i = 0; i < a_.padding.size(); ++i) {
          if (i > 0) out_ += 'x';
          AppendInt(out_, a_.padding[i].low);
          out_ += '_';
          AppendInt(out_, a_.padding[i].high);
          if (interior) {
            out_ += '_';
            AppendInt(out_, a_.padding[i].interior);
          }
        }
        break;
      }
      case Opcode::kCompare:
        if (a_.comparison_direction) Attr("direction", DirectionName(*a_.comparison_direction));
        if (!a_.comparison_type.empty()) Attr("type", a_.comparison_type);
        break;
      case Opcode::kReducePrecision:
        IntAttr("exponent_bits", a_.exponent_bits);
        IntAttr("mantissa_bits", a_.mantissa_bits);
        break;
      case Opcode::kCustomCall:
        Attr("custom_call_target", "\"" + Escape(a_.custom_call_target) + "\"");
        break;
      case Opcode::kRng:
        if (!a_.rng_distribution.empty()) Attr("distribution", a_.rng_distribution);
        break;
      case Opcode::kRngBitGenerator:
        if (!a_.rng_algorithm.empty()) Attr("algorithm", a_.rng_algorithm);
        break;
      case Opcode::kBatchNormTraining: case Opcode::kBatchNormInference:
      case Opcode::kBatchNormGrad:
        Attr("epsilon", FormatFloat(a_.epsilon, false));
        IntAttr("feature_index", a_.feature_index);
        break;
      case Opcode::kConvolution:
        if (a_.window) Attr("window", WindowToString(*a_.window));
        if (a_.conv_dnums) Attr("dim_labels", DimLabels(*a_.conv_dnums));
        if (a_.feature_group_count != 1) IntAttr("feature_group_count", a_.feature_group_count);
        if (a_.batch_group_count != 1) IntAttr("batch_group_count", a_.batch_group_count);
        break;
      case Opcode::kReduceWindow: case Opcode::kSelectAndScatter:
        if (a_.window) Attr("window", WindowToString(*a_.window));
        break;
      case Opcode::kDot: case Opcode::kRaggedDot:
        if (a_.dot_dnums) {
          ListAttrIfAny("lhs_batch_dims", a_.dot_dnums->lhs_batch_dimensions);
          ListAttrIfAny("lhs_contracting_dims", a_.dot_dnums->lhs_contracting_dimensions);
          ListAttrIfAny("rhs_batch_dims", a_.dot_dnums->rhs_batch_dimensions);
          ListAttrIfAny("rhs_contracting_dims", a_.dot_dnums->rhs_contracting_dimensions);
        }
        break;
      case Opcode::kGather:
        if (a_.gather_dnums) {
          const GatherDimensionNumbers& g = *a_.gather_dnums;
          ListAttr("offset_dims", g.offset_dims);
          ListAttr("collapsed_slice_dims", g.collapsed_slice_dims);
          ListAttr("start_index_map", g.start_index_map);
          ListAttrIfAny("operand_batching_dims", g.operand_batching_dims);
          ListAttrIfAny("start_indices_batching_dims", g.start_indices_batching_dims);
          IntAttr("index_vector_dim", g.index_vector_dim);
        }
        ListAttr("slice_sizes", a_.gather_slice_sizes);
        TrueAttr("indices_are_sorted", a_.indices_are_sorted);
        break;
      case Opcode::kScatter:
        if (a_.scatter_dnums) {
          const ScatterDimensionNumbers& s = *a_.scatter_dnums;
          ListAttr("update_window_dims", s.update_window_dims);
          ListAttr("inserted_window_dims", s.inserted_window_dims);
          ListAttr("scatter_dims_to_operand_dims", s.scatter_dims_to_operand_dims);
          ListAttrIfAny("input_batching_dims", s.input_batching_dims);
          ListAttrIfAny("scatter_indices_batching_dims", s.scatter_indices_batching_dims);
          IntAttr("index_vector_dim", s.index_vector_dim);
        }
        TrueAttr("indices_are_sorted", a_.indices_are_sorted);
        TrueAttr("unique_indices", a_.unique_indices);
        break;
      case Opcode::kAllReduce: case Opcode::kAllGather: case Opcode::kReduceScatter:
      case Opcode::kAllToAll:
      case Opcode::kAllReduceStart: case Opcode::kAllGatherStart:
        if (a_.channel_id) IntAttr("channel_id", *a_.channel_id);
        if (a_.replica_groups) Attr("replica_groups", ReplicaGroupsToString(*a_.replica_groups));
        if (instr_.opcode() == Opcode::kAllToAll) {
          ListAttrIfAny("dimensions", a_.dimensions);
        } else if (instr_.opcode() != Opcode::kAllReduce &&
                   instr_.opcode() != Opcode::kAllReduceStart) {
          ListAttr("dimensions", a_.dimensions);
        }
        TrueAttr("constrain_layout", a_.constrain_layout);
        TrueAttr("use_global_device_ids", a_.use_global_device_ids);
        break;
      // Point-to-point transfers and their relatives (p2pops).
      case Opcode::kSend: case Opcode::kSendDone: case Opcode::kRecv:
      case Opcode::kRecvDone:
        if (a_.channel_id) IntAttr("channel_id", *a_.channel_id);
        break;
      case Opcode::kCollectiveBroadcast: case Opcode::kRaggedAllToAll:
        if (a_.channel_id) IntAttr("channel_id", *a_.channel_id);
        if (a_.replica_groups) Attr("replica_groups", ReplicaGroupsToString(*a_.replica_groups));
        TrueAttr("constrain_layout", a_.constrain_layout);
        TrueAttr("use_global_device_ids", a_.use_global_device_ids);
        break;
      case Opcode::kSetDimensionSize:
        ListAttr("dimensions", a_.dimensions);
        break;
      case Opcode::kCollectivePermute: case Opcode::kCollectivePermuteStart: {
        if (a_.channel_id) IntAttr("channel_id", *a_.channel_id);
        out_ += ", source_target_pairs={";
        for (size_t i = 0; i < a_.source_target_pairs.size(); ++i) {
          if (i > 0) out_ += ',';
          out_ += '{';
          AppendInt(out_, a_.source_target_pairs[i].first);
          out_ += ',';
          AppendInt(out_, a_.source_target_pairs[i].second);
          out_ += '}';
        }
        out_ += '}';
        break;
      }
      default:
        break;
    }
  }

  void Ref(std::string_view name, const Computation* c) {
    out_ += ", ";
    out_ += name;
    out_ += "=%";
    out_ += c != nullptr ? c->name() : std::string("<null>");
  }

  void RefList(std::string_view name, const std::vector<Computation*>& cs) {
    out_ += ", ";
    out_ += name;
    out_ += "={";
    for (size_t i = 0; i < cs.size(); ++i) {
      if (i > 0) out_ += ", ";
      out_ += '%';
      out_ += cs[i] != nullptr ? cs[i]->name() : std::string("<null>");
    }
    out_ += '}';
  }

  // Extras printed by PrintCalls instead (a fusion's kind).
  bool PrintedWithCalls(const std::string& key) const {
    return key == "kind" && instr_.opcode() == Opcode::kFusion &&
           instr_.called_computations().size() >= 1;
  }

  void PrintCalls() {
    const auto& called = instr_.called_computations();
    if (called.empty()) return;
    switch (instr_.opcode()) {
      case Opcode::kWhile:
        if (called.size() == 2) {
          Ref("condition", called[0]);
          Ref("body", called[1]);
          return;
        }
        break;
      case Opcode::kSelectAndScatter:
        if (called.size() == 2) {
          Ref("select", called[0]);
          Ref("scatter", called[1]);
          return;
        }
        break;
      case Opcode::kConditional:
        if (called.size() == 2 && instr_.operand_count() > 0 &&
            instr_.operand(0)->shape().element_type() == PrimitiveType::PRED) {
          Ref("true_computation", called[0]);
          Ref("false_computation", called[1]);
        } else {
          RefList("branch_computations", called);
        }
        return;
      case Opcode::kCustomCall:
        RefList("called_computations", called);
        return;
      case Opcode::kFusion: case Opcode::kAsyncStart: case Opcode::kAsyncUpdate:
      case Opcode::kAsyncDone:
        // XLA prints a fusion's kind just before its computation.
        if (instr_.opcode() == Opcode::kFusion)
          if (const std::string* kind = a_.FindExtra("kind")) Attr("kind", *kind);
        if (called.size() == 1) {
          Ref("calls", called[0]);
        } else {
          RefList("calls", called);
        }
        return;
      default:
        break;
    }
    if (called.size() == 1) {
      Ref("to_apply", called[0]);
    } else {
      RefList("called_computations", called);
    }
  }

  const Instruction& instr_;
  const Attributes& a_;
  const PrintOptions& options_;
  std::string& out_;
  const std::string* splat_scalar_;
};

// A name for the scalar of splat constant `instr` that no instruction of
// the module has (`names`, which it joins).
std::string SplatScalarName(const Instruction& instr, std::unordered_set<std::string>& names) {
  std::string name = instr.name() + ".scalar";
  for (int i = 1; names.count(name); ++i) name = instr.name() + ".scalar" + std::to_string(i);
  names.insert(name);
  return name;
}

// Prints `instr` (one line per instruction, two for a splat constant).
// `names`: every instruction name of the module, for fresh scalar names.
void PrintInstructionLines(const Instruction& instr, bool is_root, const PrintOptions& options,
                           std::unordered_set<std::string>& names, std::string& out) {
  std::optional<Literal> splat = SplatValue(instr);
  std::string scalar_name;
  if (splat.has_value()) {
    scalar_name = SplatScalarName(instr, names);
    out += "  %" + scalar_name + " = " + splat->shape().ToString() + " constant(";
    FormatLiteral(*splat, out);
    out += ')';
    // A scalar has no dims to tile: under a tiled sharding (kept by the
    // broadcast) it is replicated; a maximal or manual one applies to both.
    if (instr.has_sharding())
      out += ", sharding=" +
             (instr.sharding()->IsTiled() ? std::string("{replicated}")
                                          : instr.sharding()->ToString());
    out += '\n';
  }
  out += "  ";
  if (is_root) out += "ROOT ";
  const std::string operand = "%" + scalar_name;
  InstructionPrinter(instr, options, out, splat.has_value() ? &operand : nullptr).Print();
  out += '\n';
}

std::unordered_set<std::string> InstructionNames(const Computation& comp) {
  std::unordered_set<std::string> names;
  for (const auto& instr : comp.instructions()) names.insert(instr->name());
  return names;
}

void PrintComputationTo(const Computation& comp, const PrintOptions& options,
                        std::unordered_set<std::string>& names, std::string& out) {
  if (comp.IsEntry()) out += "ENTRY ";
  out += '%';
  out += comp.name();
  out += " (";
  bool first = true;
  for (const Instruction* p : comp.parameters()) {
    if (p == nullptr) continue;
    if (!first) out += ", ";
    first = false;
    out += p->name();
    out += ": ";
    out += p->shape().ToString();
  }
  out += ") -> ";
  out += comp.root() != nullptr ? comp.root()->shape().ToString() : std::string("()");
  out += " {\n";
  for (const Instruction* instr : comp.MakePostOrder()) {
    PrintInstructionLines(*instr, instr == comp.root(), options, names, out);
  }
  out += '}';
  if (!comp.execution_thread().empty() && comp.execution_thread() != "main")
    out += ", execution_thread=\"" + Escape(comp.execution_thread()) + "\"";
  out += '\n';
}

}  // namespace

// The one value of a constant array of more than kSplatThreshold elements
// that are all equal, as a scalar; nullopt otherwise. XLA's parser reads a
// rank >= 1 literal element by element, so such a constant prints as
// `%c.scalar = f32[] constant(v)` and `%c = f32[...] broadcast(%c.scalar),
// dimensions={}` rather than a huge literal (docs/xla_output.md).
std::optional<Literal> SplatValue(const Instruction& instr) {
  if (instr.opcode() != Opcode::kConstant || !instr.has_literal()) return std::nullopt;
  const Literal& l = instr.literal();
  if (!l.shape().IsArray() || l.shape().rank() == 0 || l.element_count() <= kSplatThreshold)
    return std::nullopt;
  const int64_t count = l.element_count();
  const int64_t width = ByteWidth(l.element_type());
  for (int64_t i = 1; i < count; ++i)
    if (std::memcmp(l.raw(), l.raw() + i * width, width) != 0) return std::nullopt;
  Literal scalar(Shape(l.element_type(), {}));
  std::memcpy(scalar.raw(), l.raw(), width);
  return scalar;
}

std::string PrintModule(const Module& module, const PrintOptions& options) {
  std::string out = "HloModule " + module.name();
  for (const auto& [k, v] : module.header_attrs()) {
    out += ", ";
    out += k;
    out += '=';
    out += v;
  }
  if (module.replica_count() != 1)
    out += ", replica_count=" + std::to_string(module.replica_count());
  if (module.num_partitions() != 1)
    out += ", num_partitions=" + std::to_string(module.num_partitions());
  out += '\n';
  std::unordered_set<std::string> names;
  for (const auto& comp : module.computations()) names.merge(InstructionNames(*comp));
  for (const Computation* comp : module.MakeComputationPostOrder()) {
    out += '\n';
    PrintComputationTo(*comp, options, names, out);
  }
  return out;
}

std::string PrintComputation(const Computation& computation, const PrintOptions& options) {
  std::string out;
  std::unordered_set<std::string> names = InstructionNames(computation);
  PrintComputationTo(computation, options, names, out);
  return out;
}

std::string PrintInstruction(const Instruction& instruction, const PrintOptions& options) {
  std::string out;
  // One line: a splat constant's scalar as a nested instruction, which XLA
  // also reads.
  std::optional<Literal> splat = SplatValue(instruction);
  std::string nested;
  if (splat.has_value()) {
    nested = splat->shape().ToString() + " constant(";
    FormatLiteral(*splat, nested);
    nested += ')';
  }
  InstructionPrinter(instruction, options, out, splat.has_value() ? &nested : nullptr).Print();
  return out;
}

}  // namespace meshsplit
