// Attribute values of HLO instructions: which opcode owns which typed
// attribute, and the small sub-languages (windows, dim_labels, paddings,
// slices, replica groups). Attributes an opcode does not own are kept
// verbatim in Attributes::extra, so nothing in the input is lost.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

#include "ir/attribute_text.h"
#include "text/parser_impl.h"

namespace meshsplit::text_internal {

namespace {

bool OneOf(Opcode op, std::initializer_list<Opcode> ops) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

bool IsCollective(Opcode op) {
  return OneOf(op, {Opcode::kAllReduce, Opcode::kAllGather,
                    Opcode::kReduceScatter, Opcode::kAllToAll,
                    Opcode::kCollectivePermute,
                    // The async starts carry their collective's attributes.
                    Opcode::kAllReduceStart, Opcode::kAllGatherStart,
                    Opcode::kCollectivePermuteStart});
}

bool Product(const std::vector<int64_t>& v, int64_t* out) {
  int64_t p = 1;
  for (int64_t d : v)
    if (d < 0 || __builtin_mul_overflow(p, d, &p)) return false;
  *out = p;
  return true;
}

std::string Unescape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) {
      out += c;
      continue;
    }
    char d = s[++i];
    switch (d) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case 'x':
        if (i + 2 < s.size() + 0 && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
          out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
          i += 2;
        } else {
          out += "\\x";
        }
        break;
      default: out += d; break;  // \" \\ \'
    }
  }
  return out;
}

}  // namespace

bool Parser::ParseAttribute(Instruction* instr, std::string_view name,
                            size_t name_pos) {
  const Opcode op = instr->opcode();
  Attributes& a = instr->mutable_attrs();
  lex_.SkipTrivia();
  const size_t value_pos = lex_.pos();

  // Attributes every instruction may carry.
  if (name == "sharding") {
    if (lex_.Peek() != '{')
      return ErrorHere("expected '{' to begin a sharding, found " + lex_.DescribeNext());
    size_t end = lex_.ScanBalanced(value_pos, 64);
    if (end == Lexer::kNpos) return Error(value_pos, 1, "unbalanced '{' in sharding");
    std::string_view text = lex_.text().substr(value_pos, end - value_pos);
    if (IsNamedShardingText(text)) {
      if (options_.xla_strict)
        return StrictError(value_pos, text.size(),
                           "mesh_split sharding; write the sharding it lowers to");
      // `{mesh_split [data, _]}`: lowered to an ordinary sharding here, so
      // the rest of the pipeline (and the printer) never sees the named form.
      if (!mesh_.has_value())
        return Error(value_pos, text.size(),
                     "mesh_split needs a mesh: add frontend_attributes={meshsplit.mesh=\"data=2,model=4\"} "
                     "to the HloModule line");
      StatusOr<Sharding> named = ParseNamedSharding(text, *mesh_);
      if (!named.ok())
        return Error(value_pos, text.size(),
                     "invalid mesh_split sharding: " + named.status().message());
      instr->set_sharding(std::move(named).value());
      lex_.set_pos(end);
      return true;
    }
    size_t error_offset = 0;
    StatusOr<Sharding> sharding = Sharding::Parse(text, &error_offset);
    if (!sharding.ok()) {
      // The caret goes under the start of the sharding (tests/errors rely on
      // that column); the underline reaches the offending character.
      size_t at = std::min(error_offset, text.size() - 1);
      return Error(value_pos, at + 1, "invalid sharding: " + sharding.status().message());
    }
    instr->set_sharding(std::move(sharding).value());
    lex_.set_pos(end);
    return true;
  }
  if (name == "control-predecessors") return ParseControlPredecessors(instr);

  // Called computations, in the slots documented in instruction.h.
  if (name == "to_apply") return ParseComputationRef(instr, 0);
  if (op == Opcode::kWhile && name == "condition") return ParseComputationRef(instr, 0);
  if (op == Opcode::kWhile && name == "body") return ParseComputationRef(instr, 1);
  if (op == Opcode::kSelectAndScatter && name == "select")
    return ParseComputationRef(instr, 0);
  if (op == Opcode::kSelectAndScatter && name == "scatter")
    return ParseComputationRef(instr, 1);
  if (op == Opcode::kConditional && name == "true_computation")
    return ParseComputationRef(instr, 0);
  if (op == Opcode::kConditional && name == "false_computation")
    return ParseComputationRef(instr, 1);
  if (name == "branch_computations" || name == "called_computations" ||
      name == "calls") {
    if (!instr->called_computations().empty())
      return Error(name_pos, name.size(),
                   "'" + std::string(name) + "' conflicts with another called computation attribute");
    // XLA writes a single callee bare: `calls=%fused_computation`.
    if (name == "calls" && lex_.Peek() != '{') return ParseComputationRef(instr, 0);
    return ParseComputationList(instr);
  }

  // Typed attributes of the opcodes that own them.
  switch (op) {
    case Opcode::kParameter:
      break;
    case Opcode::kIota:
      if (name == "iota_dimension") return ParseInt(&a.iota_dimension, "iota dimension");
      break;
    case Opcode::kGetTupleElement:
      if (name == "index") return ParseInt(&a.tuple_index, "tuple index");
      break;
    case Opcode::kSlice:
      if (name == "slice") return ParseSliceRanges(&a.slice);
      break;
    case Opcode::kDynamicSlice:
      if (name == "dynamic_slice_sizes")
        return ParseIntList(&a.dynamic_slice_sizes, "slice sizes");
      break;
    case Opcode::kPad:
      if (name == "padding") return ParsePadding(&a.padding);
      break;
    case Opcode::kCompare:
      if (name == "direction") {
        std::string d;
        if (!ParseBareWord(&d, "comparison direction")) return false;
        static const std::pair<const char*, ComparisonDirection> kDirs[] = {
            {"EQ", ComparisonDirection::kEq}, {"NE", ComparisonDirection::kNe},
            {"GE", ComparisonDirection::kGe}, {"GT", ComparisonDirection::kGt},
            {"LE", ComparisonDirection::kLe}, {"LT", ComparisonDirection::kLt}};
        for (const auto& [text, dir] : kDirs) {
          if (d == text) {
            a.comparison_direction = dir;
            return true;
          }
        }
        return Error(value_pos, d.size(), "unknown comparison direction '" + d +
                                              "' (expected EQ, NE, GE, GT, LE or LT)");
      }
      if (name == "type") return ParseBareWord(&a.comparison_type, "comparison type");
      break;
    case Opcode::kReducePrecision:
      if (name == "exponent_bits") return ParseInt(&a.exponent_bits, "exponent bits");
      if (name == "mantissa_bits") return ParseInt(&a.mantissa_bits, "mantissa bits");
      break;
    case Opcode::kCustomCall:
      if (name == "custom_call_target") return ParseQuotedString(&a.custom_call_target);
      break;
    case Opcode::kRng:
      if (name == "distribution") return ParseBareWord(&a.rng_distribution, "distribution");
      break;
    case Opcode::kRngBitGenerator:
      if (name == "algorithm") return ParseBareWord(&a.rng_algorithm, "algorithm");
      break;
    case Opcode::kSort:
      if (name == "is_stable") return ParseBool(&a.is_stable);
      break;
    case Opcode::kBatchNormTraining:
    case Opcode::kBatchNormInference:
    case Opcode::kBatchNormGrad:
      if (name == "feature_index") return ParseInt(&a.feature_index, "feature index");
      if (name == "epsilon") {
        std::string_view t = lex_.LexNumberText();
        if (t.empty()) return ErrorHere("expected epsilon value, found " + lex_.DescribeNext());
        double v = 0;
        if (!ParseFloatText(t, value_pos, PrimitiveType::F32, &v)) return false;
        a.epsilon = static_cast<float>(v);
        return true;
      }
      break;
    case Opcode::kConvolution:
      if (name == "window") return ParseWindow(&a.window.emplace());
      if (name == "dim_labels") return ParseDimLabels(&a.conv_dnums.emplace());
      if (name == "feature_group_count")
        return ParseInt(&a.feature_group_count, "feature group count");
      if (name == "batch_group_count")
        return ParseInt(&a.batch_group_count, "batch group count");
      break;
    case Opcode::kReduceWindow:
    case Opcode::kSelectAndScatter:
      if (name == "window") return ParseWindow(&a.window.emplace());
      break;
    case Opcode::kDot:
    case Opcode::kRaggedDot: {
      DotDimensionNumbers& d = a.dot_dnums ? *a.dot_dnums : a.dot_dnums.emplace();
      if (name == "lhs_batch_dims") return ParseIntList(&d.lhs_batch_dimensions, "dimensions");
      if (name == "rhs_batch_dims") return ParseIntList(&d.rhs_batch_dimensions, "dimensions");
      if (name == "lhs_contracting_dims")
        return ParseIntList(&d.lhs_contracting_dimensions, "dimensions");
      if (name == "rhs_contracting_dims")
        return ParseIntList(&d.rhs_contracting_dimensions, "dimensions");
      break;
    }
    case Opcode::kGather: {
      GatherDimensionNumbers& g = a.gather_dnums ? *a.gather_dnums : a.gather_dnums.emplace();
      if (name == "offset_dims") return ParseIntList(&g.offset_dims, "dimensions");
      if (name == "collapsed_slice_dims") return ParseIntList(&g.collapsed_slice_dims, "dimensions");
      if (name == "start_index_map") return ParseIntList(&g.start_index_map, "dimensions");
      if (name == "operand_batching_dims") return ParseIntList(&g.operand_batching_dims, "dimensions");
      if (name == "start_indices_batching_dims")
        return ParseIntList(&g.start_indices_batching_dims, "dimensions");
      if (name == "index_vector_dim") return ParseInt(&g.index_vector_dim, "index vector dimension");
      if (name == "slice_sizes") return ParseIntList(&a.gather_slice_sizes, "slice sizes");
      if (name == "indices_are_sorted") return ParseBool(&a.indices_are_sorted);
      break;
    }
    case Opcode::kScatter: {
      ScatterDimensionNumbers& s = a.scatter_dnums ? *a.scatter_dnums : a.scatter_dnums.emplace();
      if (name == "update_window_dims") return ParseIntList(&s.update_window_dims, "dimensions");
      if (name == "inserted_window_dims") return ParseIntList(&s.inserted_window_dims, "dimensions");
      if (name == "scatter_dims_to_operand_dims")
        return ParseIntList(&s.scatter_dims_to_operand_dims, "dimensions");
      if (name == "input_batching_dims") return ParseIntList(&s.input_batching_dims, "dimensions");
      if (name == "scatter_indices_batching_dims")
        return ParseIntList(&s.scatter_indices_batching_dims, "dimensions");
      if (name == "index_vector_dim") return ParseInt(&s.index_vector_dim, "index vector dimension");
      if (name == "indices_are_sorted") return ParseBool(&a.indices_are_sorted);
      if (name == "unique_indices") return ParseBool(&a.unique_indices);
      break;
    }
    default:
      break;
  }
  if (name == "dimensions" &&
      OneOf(op, {Opcode::kBroadcast, Opcode::kTranspose, Opcode::kReduce,
                 Opcode::kReverse, Opcode::kConcatenate, Opcode::kSort,
                 Opcode::kAllGather, Opcode::kAllToAll, Opcode::kReduceScatter,
                 Opcode::kMap, Opcode::kGetDimensionSize,
                 Opcode::kAllGatherStart}))
    return ParseIntList(&a.dimensions, "dimensions");
  if (IsCollective(op)) {
    if (name == "channel_id") {
      int64_t id = 0;
      if (!ParseInt(&id, "channel id")) return false;
      a.channel_id = id;
      return true;
    }
    if (op == Opcode::kCollectivePermute || op == Opcode::kCollectivePermuteStart) {
      if (name == "source_target_pairs") return ParsePairs(&a.source_target_pairs);
    } else {
      if (name == "replica_groups") return ParseReplicaGroups(&a.replica_groups.emplace());
      if (name == "use_global_device_ids") return ParseBool(&a.use_global_device_ids);
      if (name == "constrain_layout") return ParseBool(&a.constrain_layout);
    }
  }

  // send / recv and their -done ops: a channel id; collective-broadcast and
  // ragged-all-to-all: also replica groups (is_host_transfer and the
  // frontend attributes stay verbatim).
  if (OneOf(op, {Opcode::kSend, Opcode::kSendDone, Opcode::kRecv, Opcode::kRecvDone,
                 Opcode::kCollectiveBroadcast, Opcode::kRaggedAllToAll})) {
    if (name == "channel_id") {
      int64_t id = 0;
      if (!ParseInt(&id, "channel id")) return false;
      a.channel_id = id;
      return true;
    }
    if (op == Opcode::kCollectiveBroadcast || op == Opcode::kRaggedAllToAll) {
      if (name == "replica_groups") return ParseReplicaGroups(&a.replica_groups.emplace());
      if (name == "use_global_device_ids") return ParseBool(&a.use_global_device_ids);
      if (name == "constrain_layout") return ParseBool(&a.constrain_layout);
    }
  }
  if (name == "dimensions" && op == Opcode::kSetDimensionSize)
    return ParseIntList(&a.dimensions, "dimensions");

  std::string value;
  if (!ParseVerbatim(&value, value_pos)) return false;
  if (options_.xla_strict && name == "frontend_attributes" && !ParseFrontendAttributes(value))
    return StrictError(value_pos, value.size(), "frontend_attributes must be {key=\"value\", ...}");
  a.extra.emplace_back(std::string(name), std::move(value));
  return true;
}

// --- small value forms -----------------------------------------------------

bool Parser::ParseVerbatim(std::string* out, size_t value_pos) {
  size_t end = lex_.ScanValue(value_pos);
  if (end == Lexer::kNpos)
    return Error(value_pos, 1, "unbalanced brackets or quotes in attribute value");
  if (end == value_pos)
    return ErrorHere("expected attribute value, found " + lex_.DescribeNext());
  out->assign(lex_.text().substr(value_pos, end - value_pos));
  lex_.set_pos(end);
  return true;
}

bool Parser::ParseIntList(std::vector<int64_t>* out, const char* what) {
  out->clear();
  if (!lex_.Eat('{') && !Expect('{', (std::string("to begin the ") + what).c_str())) return false;
  if (lex_.Eat('}')) return true;
  do {
    int64_t v = 0;
    if (!ParseInt(&v, "integer")) return false;
    out->push_back(v);
  } while (lex_.Eat(','));
  return lex_.Eat('}') || Expect('}', (std::string("to end the ") + what).c_str());
}

bool Parser::ParseBracketIntList(std::vector<int64_t>* out, const char* what) {
  out->clear();
  if (!lex_.Eat('[') && !Expect('[', (std::string("to begin the ") + what).c_str())) return false;
  if (lex_.Eat(']')) return true;
  do {
    int64_t v = 0;
    if (!ParseInt(&v, "integer")) return false;
    out->push_back(v);
  } while (lex_.Eat(','));
  return lex_.Eat(']') || Expect(']', (std::string("to end the ") + what).c_str());
}

bool Parser::ParseBool(bool* out) {
  if (lex_.EatKeyword("true")) {
    *out = true;
    return true;
  }
  if (lex_.EatKeyword("false")) {
    *out = false;
    return true;
  }
  return ErrorHere("expected 'true' or 'false', found " + lex_.DescribeNext());
}

bool Parser::ParseQuotedString(std::string* out) {
  if (lex_.Peek() != '"')
    return ErrorHere("expected a quoted string, found " + lex_.DescribeNext());
  size_t p = lex_.pos();
  size_t end = lex_.ScanString(p);
  if (end == Lexer::kNpos) return Error(p, 1, "unterminated string");
  *out = Unescape(lex_.text().substr(p + 1, end - p - 2));
  lex_.set_pos(end);
  return true;
}

bool Parser::ParseBareWord(std::string* out, const char* what) {
  std::string_view w = lex_.LexWord();
  if (w.empty())
    return ErrorHere(std::string("expected ") + what + ", found " + lex_.DescribeNext());
  out->assign(w);
  return true;
}

// `3x3`, `1_1x2_2` items: integers separated by `sep`, no spaces.
bool Parser::ParseXList(std::vector<int64_t>* out, const char* what, char sep) {
  out->clear();
  do {
    int64_t v = 0;
    if (!ParseInt(&v, what)) return false;
    out->push_back(v);
    if (lex_.PeekRaw() != sep) break;
    lex_.set_pos(lex_.pos() + 1);
  } while (true);
  return true;
}

bool Parser::ParseWindow(Window* window) {
  window->clear();
  if (!Expect('{', "to begin the window")) return false;
  std::vector<int64_t> size, stride, lhs_dilate, rhs_dilate, reversal;
  std::vector<std::pair<int64_t, int64_t>> pad;
  bool has_size = false;
  size_t start = lex_.pos();
  while (lex_.Peek() != '}') {
    if (lex_.AtEnd()) return ErrorHere("expected '}' to end the window, found end of file");
    lex_.SkipTrivia();
    size_t key_pos = lex_.pos();
    std::string_view key = lex_.LexWord();
    if (key.empty() || !Expect('=', "after window field name"))
      return key.empty() ? ErrorHere("expected window field, found " + lex_.DescribeNext())
                         : false;
    if (key == "size") {
      has_size = true;
      if (!ParseXList(&size, "window size")) return false;
    } else if (key == "stride") {
      if (!ParseXList(&stride, "window stride")) return false;
    } else if (key == "lhs_dilate") {
      if (!ParseXList(&lhs_dilate, "dilation")) return false;
    } else if (key == "rhs_dilate") {
      if (!ParseXList(&rhs_dilate, "dilation")) return false;
    } else if (key == "rhs_reversal") {
      if (!ParseXList(&reversal, "reversal flag")) return false;
    } else if (key == "pad") {
      pad.clear();
      do {
        std::vector<int64_t> lh;
        if (!ParseXList(&lh, "padding", '_')) return false;
        if (lh.size() != 2) {
          return ErrorHere("window padding must be low_high per dimension");
        }
        pad.emplace_back(lh[0], lh[1]);
        if (lex_.PeekRaw() != 'x') break;
        lex_.set_pos(lex_.pos() + 1);
      } while (true);
    } else {
      return Error(key_pos, key.size(), "unknown window field '" + std::string(key) + "'");
    }
  }
  lex_.Eat('}');
  size_t rank = size.size();
  if (!has_size && (!stride.empty() || !pad.empty() || !lhs_dilate.empty() ||
                    !rhs_dilate.empty() || !reversal.empty()))
    return Error(start, 1, "window has no size=");
  auto check = [&](size_t n, const char* field) {
    if (n != 0 && n != rank)
      return Error(start, 1, std::string("window ") + field + " has " +
                                 std::to_string(n) + " dimensions but size= has " +
                                 std::to_string(rank));
    return true;
  };
  if (!check(stride.size(), "stride") || !check(pad.size(), "pad") ||
      !check(lhs_dilate.size(), "lhs_dilate") || !check(rhs_dilate.size(), "rhs_dilate") ||
      !check(reversal.size(), "rhs_reversal"))
    return false;
  window->resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    WindowDimension& d = (*window)[i];
    d.size = size[i];
    if (!stride.empty()) d.stride = stride[i];
    if (!pad.empty()) {
      d.padding_low = pad[i].first;
      d.padding_high = pad[i].second;
    }
    if (!lhs_dilate.empty()) d.base_dilation = lhs_dilate[i];
    if (!rhs_dilate.empty()) d.window_dilation = rhs_dilate[i];
    if (!reversal.empty()) d.window_reversal = reversal[i] != 0;
  }
  return true;
}

bool Parser::ParseDimLabels(ConvolutionDimensionNumbers* dnums) {
  lex_.SkipTrivia();
  size_t p = lex_.pos();
  std::string_view text = lex_.text();
  size_t q = p;
  while (q < text.size() && (IsNameChar(text[q]) || text[q] == '>' || text[q] == '?')) ++q;
  std::string_view all = text.substr(p, q - p);
  size_t under = all.find('_');
  size_t arrow = all.find("->");
  if (under == std::string_view::npos || arrow == std::string_view::npos || arrow < under)
    return Error(p, std::max<size_t>(1, all.size()),
                 "expected dim_labels like b01f_01io->b01f, found '" +
                     std::string(all.substr(0, 60)) + "'");
  std::string_view in = all.substr(0, under);
  std::string_view kernel = all.substr(under + 1, arrow - under - 1);
  std::string_view out = all.substr(arrow + 2);
  // Reads one label string: two letters at fixed roles plus spatial digits.
  auto read = [&](std::string_view labels, char first, char second,
                  int64_t* first_dim, int64_t* second_dim,
                  std::vector<int64_t>* spatial, const char* which) -> bool {
    size_t n = labels.size();
    if (n < 2 || n > 12)
      return Error(p, all.size(), std::string("bad ") + which + " labels '" +
                                      std::string(labels) + "' in dim_labels");
    spatial->assign(n - 2, -1);
    bool seen_first = false, seen_second = false;
    for (size_t i = 0; i < n; ++i) {
      char c = labels[i];
      bool ok = true;
      if (c == first) {
        ok = !seen_first;
        seen_first = true;
        *first_dim = static_cast<int64_t>(i);
      } else if (c == second) {
        ok = !seen_second;
        seen_second = true;
        *second_dim = static_cast<int64_t>(i);
      } else if (IsDigit(c) && static_cast<size_t>(c - '0') < n - 2) {
        int64_t& slot = (*spatial)[c - '0'];
        ok = slot < 0;
        slot = static_cast<int64_t>(i);
      } else {
        ok = false;
      }
      if (!ok)
        return Error(p, all.size(), std::string("bad ") + which + " labels '" +
                                        std::string(labels) + "' in dim_labels");
    }
    if (!seen_first || !seen_second)
      return Error(p, all.size(), std::string("bad ") + which + " labels '" +
                                      std::string(labels) + "' in dim_labels");
    return true;
  };
  if (!read(in, 'b', 'f', &dnums->input_batch_dimension, &dnums->input_feature_dimension,
            &dnums->input_spatial_dimensions, "input") ||
      !read(kernel, 'i', 'o', &dnums->kernel_input_feature_dimension,
            &dnums->kernel_output_feature_dimension, &dnums->kernel_spatial_dimensions,
            "kernel") ||
      !read(out, 'b', 'f', &dnums->output_batch_dimension, &dnums->output_feature_dimension,
            &dnums->output_spatial_dimensions, "output"))
    return false;
  if (in.size() != kernel.size() || in.size() != out.size())
    return Error(p, all.size(), "dim_labels '" + std::string(all) +
                                    "' have different ranks for input, kernel and output");
  lex_.set_pos(q);
  return true;
}

bool Parser::ParseSliceRanges(std::vector<SliceDimension>* out) {
  out->clear();
  if (!Expect('{', "to begin slice ranges")) return false;
  if (lex_.Eat('}')) return true;
  do {
    SliceDimension d;
    if (!Expect('[', "to begin a slice range") || !ParseInt(&d.start, "slice start") ||
        !Expect(':', "after slice start") || !ParseInt(&d.limit, "slice limit"))
      return false;
    if (lex_.Eat(':') && !ParseInt(&d.stride, "slice stride")) return false;
    if (!Expect(']', "to end a slice range")) return false;
    out->push_back(d);
  } while (lex_.Eat(','));
  return Expect('}', "to end slice ranges");
}

bool Parser::ParsePadding(PaddingConfig* out) {
  out->clear();
  // A rank-0 pad prints as `padding=` with nothing after it.
  char c = lex_.PeekRaw();
  if (!(IsDigit(c) || c == '-')) return true;
  do {
    std::vector<int64_t> parts;
    if (!ParseXList(&parts, "padding", '_')) return false;
    if (parts.size() != 2 && parts.size() != 3)
      return ErrorHere("padding must be low_high or low_high_interior per dimension");
    PaddingDimension d;
    d.low = parts[0];
    d.high = parts[1];
    if (parts.size() == 3) d.interior = parts[2];
    out->push_back(d);
    if (lex_.PeekRaw() != 'x') break;
    lex_.set_pos(lex_.pos() + 1);
  } while (true);
  return true;
}

bool Parser::ParseReplicaGroups(ReplicaGroups* out) {
  *out = ReplicaGroups();
  lex_.SkipTrivia();
  size_t p = lex_.pos();
  if (lex_.Peek() == '[') {
    out->is_iota = true;
    if (!ParseBracketIntList(&out->group_dims, "replica group dimensions") ||
        !ExpectStr("<=", "in iota replica groups") ||
        !ParseBracketIntList(&out->reshape_dims, "iota dimensions"))
      return false;
    if (lex_.PeekRaw() == 'T') {
      lex_.set_pos(lex_.pos() + 1);
      if (!Expect('(', "after 'T'")) return false;
      if (!lex_.Eat(')')) {
        do {
          int64_t v = 0;
          if (!ParseInt(&v, "permutation index")) return false;
          out->transpose_perm.push_back(v);
        } while (lex_.Eat(','));
        if (!Expect(')', "to end the transpose permutation")) return false;
      }
    }
    int64_t groups = 0, devices = 0;
    size_t len = lex_.pos() - p;
    if (out->group_dims.size() != 2)
      return Error(p, len, "iota replica groups need [num_groups,group_size]");
    if (!Product(out->group_dims, &groups) || !Product(out->reshape_dims, &devices) ||
        groups != devices)
      return Error(p, len, "iota replica groups: [num_groups,group_size] must hold "
                           "as many devices as the iota dimensions");
    if (!out->transpose_perm.empty()) {
      std::vector<int64_t> sorted = out->transpose_perm;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 0; i < sorted.size(); ++i)
        if (sorted[i] != static_cast<int64_t>(i) ||
            sorted.size() != out->reshape_dims.size())
          return Error(p, len, "iota replica groups: T(...) is not a permutation of "
                               "the iota dimensions");
    }
    return true;
  }
  if (!Expect('{', "to begin replica groups")) return false;
  if (lex_.Eat('}')) return true;
  do {
    out->groups.emplace_back();
    if (!ParseIntList(&out->groups.back(), "replica group")) return false;
  } while (lex_.Eat(','));
  return Expect('}', "to end replica groups");
}

bool Parser::ParsePairs(std::vector<std::pair<int64_t, int64_t>>* out) {
  out->clear();
  if (!Expect('{', "to begin source_target_pairs")) return false;
  if (lex_.Eat('}')) return true;
  do {
    int64_t s = 0, t = 0;
    if (!Expect('{', "to begin a source-target pair") || !ParseInt(&s, "source") ||
        !Expect(',', "between source and target") || !ParseInt(&t, "target") ||
        !Expect('}', "to end a source-target pair"))
      return false;
    out->emplace_back(s, t);
  } while (lex_.Eat(','));
  return Expect('}', "to end source_target_pairs");
}

bool Parser::ParseComputationRef(Instruction* instr, size_t slot) {
  lex_.SkipTrivia();
  size_t p = lex_.pos();
  std::string_view name = lex_.LexName();
  if (name.empty())
    return ErrorHere("expected computation name, found " + lex_.DescribeNext());
  std::vector<Computation*> called = instr->called_computations();
  if (called.size() <= slot) called.resize(slot + 1, nullptr);
  auto it = computations_by_name_.find(name);
  if (it != computations_by_name_.end()) {
    called[slot] = it->second;
  } else {
    pending_calls_.push_back({instr, slot, name, lex_.text()[p] == '%' ? p + 1 : p});
  }
  instr->set_called_computations(std::move(called));
  return true;
}

bool Parser::ParseComputationList(Instruction* instr) {
  if (!Expect('{', "to begin a list of computations")) return false;
  if (lex_.Eat('}')) return true;
  size_t slot = 0;
  do {
    if (!ParseComputationRef(instr, slot++)) return false;
  } while (lex_.Eat(','));
  return Expect('}', "to end the list of computations");
}

bool Parser::ParseControlPredecessors(Instruction* instr) {
  if (!Expect('{', "to begin control-predecessors")) return false;
  if (lex_.Eat('}')) return true;
  do {
    lex_.SkipTrivia();
    size_t p = lex_.pos();
    std::string_view name = lex_.LexName();
    if (name.empty())
      return ErrorHere("expected instruction name, found " + lex_.DescribeNext());
    auto it = scope_.find(name);
    if (it == scope_.end())
      return Error(p, lex_.pos() - p,
                   "use of undefined value '%" + std::string(name) + "'");
    instr->AddControlPredecessor(it->second);
  } while (lex_.Eat(','));
  return Expect('}', "to end control-predecessors");
}

}  // namespace meshsplit::text_internal
