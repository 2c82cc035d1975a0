// HLO text -> Module: the module, computation and instruction grammar, name
// resolution and XLA's renaming of duplicate names. Attribute values are in
// parse_attributes.cc, shapes and constants in parse_literal.cc.
#include "text/parser.h"

#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <unordered_set>

#include "ir/attribute_text.h"
#include "text/parser_impl.h"
#include "text/xla_attributes.h"

namespace meshsplit {
namespace text_internal {

// --- names -----------------------------------------------------------------

namespace {

bool IsPrimitiveTypeKeyword(std::string_view name) {
  auto t = ParsePrimitiveType(name);
  return t.has_value() && *t != PrimitiveType::TUPLE;
}

// True if XLA's sanitizer leaves `name` unchanged.
bool IsLegalName(std::string_view name) {
  if (name.empty()) return false;
  if (!IsAlpha(name[0]) && name[0] != '_') return false;
  for (char c : name)
    if (!IsNameChar(c)) return false;
  if (IsPrimitiveTypeKeyword(name)) return false;
  if (name.size() >= 2 && name[0] == '_' && name[1] == '_' &&
      name.substr(0, 6) != "__xla_")
    return false;
  return true;
}

}  // namespace

std::string SanitizeName(std::string_view name) {
  if (name.empty()) return "";
  std::string out(name);
  if (!IsAlpha(out[0]) && out[0] != '_') out[0] = '_';
  for (size_t i = 1; i < out.size(); ++i)
    if (!IsNameChar(out[i])) out[i] = '_';
  if (IsPrimitiveTypeKeyword(out)) out += "_";
  if (out.size() >= 2 && out[0] == '_' && out[1] == '_' &&
      out.substr(0, 6) != "__xla_")
    out[0] = 'a';
  return out;
}

int64_t NameUniquer::IdGenerator::Register(int64_t id) {
  if (used.emplace(id, true).second) return id;
  while (!used.emplace(next, true).second) ++next;
  return next++;
}

std::string NameUniquer::GetUniqueName(std::string_view name) {
  std::string root = SanitizeName(name.empty() ? "name" : name);
  bool has_suffix = false;
  int64_t suffix = 0;
  size_t sep = root.rfind('.');
  if (sep != std::string::npos && sep > 0 && sep + 1 < root.size()) {
    const char* b = root.data() + sep + 1;
    const char* e = root.data() + root.size();
    int64_t v = 0;
    auto r = std::from_chars(b, e, v);
    if (r.ec == std::errc() && r.ptr == e) {
      has_suffix = true;
      suffix = v;
      root.resize(sep);
    }
  }
  suffix = generators_[root].Register(suffix);
  if (suffix == 0) return has_suffix ? root + ".0" : root;
  return root + "." + std::to_string(suffix);
}

// --- errors ----------------------------------------------------------------

bool Parser::Error(size_t pos, size_t len, std::string message) {
  if (!status_.ok()) return false;
  // Running off the end inside an unterminated block comment is the real
  // problem; point there instead.
  if (lex_.unterminated_comment() != Lexer::kNpos && pos >= lex_.text().size()) {
    status_ = Status::Error("unterminated '/*' comment",
                            lex_.Loc(lex_.unterminated_comment(), 2));
    return false;
  }
  status_ = Status::Error(std::move(message), lex_.Loc(pos, len));
  return false;
}

bool Parser::ErrorHere(std::string message) {
  lex_.SkipTrivia();
  size_t p = lex_.pos();
  size_t q = p;
  while (q < lex_.text().size() && q - p < 80 && IsNameChar(lex_.text()[q])) ++q;
  return Error(p, q > p ? q - p : 1, std::move(message));
}

bool Parser::Expect(char c, const char* context) {
  if (lex_.Eat(c)) return true;
  std::string msg = std::string("expected '") + c + "'";
  if (context != nullptr && *context) msg += std::string(" ") + context;
  return ErrorHere(msg + ", found " + lex_.DescribeNext());
}

bool Parser::ExpectStr(std::string_view s, const char* context) {
  if (lex_.EatString(s)) return true;
  std::string msg = "expected '" + std::string(s) + "'";
  if (context != nullptr && *context) msg += std::string(" ") + context;
  return ErrorHere(msg + ", found " + lex_.DescribeNext());
}

// --- module ----------------------------------------------------------------

StatusOr<std::unique_ptr<Module>> Parser::Run() {
  if (!ParseHeader()) return status_;
  while (!lex_.AtEnd()) {
    if (!ParseComputation()) return status_;
  }
  if (lex_.unterminated_comment() != Lexer::kNpos) {
    Error(lex_.text().size(), 1, "");
    return status_;
  }
  if (module_->computations().empty()) {
    ErrorHere("expected a computation after the HloModule header, found " +
              lex_.DescribeNext());
    return status_;
  }
  // Without an ENTRY marker the last computation is the entry, as in XLA.
  module_->set_entry(entry_ != nullptr ? entry_ : last_parsed_);
  if (!ResolveCalls() || !CheckCallGraph() || !RenameInstructions())
    return status_;
  return std::move(module_);
}

bool Parser::ParseHeader() {
  if (!lex_.EatKeyword("HloModule")) {
    // XLA also accepts a module without a header (tests write bare ENTRY
    // computations); it gets a default name.
    lex_.SkipTrivia();
    size_t p = lex_.pos();
    if (lex_.EatKeyword("ENTRY") || !lex_.LexName().empty()) {
      lex_.set_pos(p);
      module_ = std::make_unique<Module>("module");
      return true;
    }
    return ErrorHere("expected 'HloModule' at the start of the module, found " +
                     lex_.DescribeNext());
  }
  std::string_view name = lex_.LexName();
  if (name.empty())
    return ErrorHere("expected module name after 'HloModule', found " +
                     lex_.DescribeNext());
  module_ = std::make_unique<Module>(std::string(name));
  size_t mesh_pos = std::string::npos;  // of a `mesh=` value
  bool mesh_from_attribute = false;
  while (lex_.Eat(',')) {
    lex_.SkipTrivia();
    size_t key_pos = lex_.pos();
    std::string_view key = lex_.LexWord();
    if (key.empty())
      return ErrorHere("expected module attribute name, found " +
                       lex_.DescribeNext());
    if (!Expect('=', "after module attribute name")) return false;
    lex_.SkipTrivia();
    size_t value_pos = lex_.pos();
    if (key == "num_partitions" || key == "replica_count") {
      int64_t n = 0;
      if (!ParseInt(&n, key == "num_partitions" ? "number of partitions"
                                                 : "replica count"))
        return false;
      if (n < 1)
        return Error(value_pos, lex_.pos() - value_pos,
                     std::string(key) + " must be at least 1, got " +
                         std::to_string(n));
      if (key == "num_partitions") {
        module_->set_num_partitions(n);
      } else {
        module_->set_replica_count(n);
      }
      continue;
    }
    if (options_.xla_strict && !XlaAcceptsModuleAttribute(key))
      return StrictError(key_pos, key.size(),
                         key == "mesh"
                             ? "'mesh=' is not an XLA module attribute; write the mesh as "
                               "frontend_attributes={" + std::string(kModuleMeshAttribute) +
                                   "=\"...\"}"
                             : "unexpected module attribute '" + std::string(key) + "'");
    std::string value;
    if (!ParseVerbatim(&value, value_pos)) return false;
    if (key == "mesh") {
      // The older spelling: read for compatibility, kept as the module
      // frontend attribute that the printer writes (XLA has no `mesh=`).
      if (!mesh_from_attribute && !SetMesh(value, value_pos)) return false;
      mesh_pos = value_pos;
      continue;
    }
    if (key == "frontend_attributes") {
      std::optional<FrontendAttributePairs> pairs = ParseFrontendAttributes(value);
      if (!pairs && options_.xla_strict)
        return StrictError(value_pos, value.size(),
                           "frontend_attributes must be {key=\"value\", ...}");
      if (pairs)
        for (const auto& [k, v] : *pairs)
          if (k == kModuleMeshAttribute) {
            if (!SetMesh(v, value_pos)) return false;
            mesh_from_attribute = true;
          }
    }
    module_->mutable_header_attrs().emplace_back(std::string(key),
                                                 std::move(value));
  }
  // A `mesh=` header becomes the frontend attribute, unless one was given
  // too (which then wins, being the newer spelling).
  if (mesh_pos != std::string::npos && !mesh_from_attribute)
    SetModuleFrontendAttribute(*module_, kModuleMeshAttribute, mesh_->ToString());
  return true;
}

bool Parser::SetMesh(const std::string& text, size_t pos) {
  StatusOr<Mesh> mesh = Mesh::Parse(text);
  if (!mesh.ok()) return Error(pos, text.size(), "invalid mesh: " + mesh.status().message());
  mesh_ = std::move(mesh).value();
  return true;
}

bool Parser::StrictError(size_t pos, size_t len, const std::string& what) {
  return Error(pos, len, what + " (XLA's HLO parser refuses it; --xla-strict)");
}

bool Parser::ParseComputation() {
  lex_.SkipTrivia();
  size_t entry_pos = lex_.pos();
  bool is_entry = lex_.EatKeyword("ENTRY");
  lex_.SkipTrivia();
  size_t name_pos = lex_.pos();
  std::string_view name = lex_.LexName();
  if (name.empty())
    return ErrorHere("expected computation name, found " + lex_.DescribeNext());
  if (computations_by_name_.count(name))
    return Error(name_pos, name.size() + 1,
                 "redefinition of computation '" + std::string(name) + "'");
  Shape declared;
  bool has_signature = false;
  if (lex_.Peek() == '(') {
    if (!ParseSignature(&declared)) return false;
    has_signature = true;
  }
  if (!lex_.Eat('{') && !Expect('{', ("to begin computation '" + std::string(name) + "'").c_str()))
    return false;

  auto owned = std::make_unique<Computation>(std::string(name));
  owned->set_loc(lex_.Loc(name_pos, lex_.text()[name_pos] == '%' ? name.size() + 1
                                                                  : name.size()));
  Computation* comp = module_->AddComputation(std::move(owned));
  computations_by_name_.emplace(name, comp);
  last_parsed_ = comp;
  scope_.clear();
  Instruction* root = nullptr;
  size_t root_pos = 0;
  while (lex_.Peek() != '}') {
    if (lex_.AtEnd())
      return ErrorHere("unexpected end of file in computation '" +
                       std::string(name) + "', expected '}'");
    if (!ParseInstruction(comp, &root, &root_pos)) return false;
  }
  lex_.Eat('}');
  if (!FinishComputation(comp, root, name_pos,
                         has_signature ? &declared : nullptr))
    return false;

  // `}, execution_thread="name"` after the body.
  size_t before_comma = lex_.pos();
  if (lex_.Eat(',')) {
    lex_.SkipTrivia();
    size_t attr_pos = lex_.pos();
    std::string_view attr = lex_.LexWord();
    if (attr != "execution_thread") {
      lex_.set_pos(attr_pos);
      return ErrorHere("expected 'execution_thread' after ',' following computation '" +
                       std::string(name) + "', found " + lex_.DescribeNext());
    }
    std::string thread;
    if (!Expect('=', "after 'execution_thread'") || !ParseQuotedString(&thread))
      return false;
    comp->set_execution_thread(std::move(thread));
  } else {
    lex_.set_pos(before_comma);
  }
  if (is_entry) {
    if (entry_ != nullptr)
      return Error(entry_pos, 5, "more than one ENTRY computation (the first is '" +
                                     entry_->name() + "')");
    entry_ = comp;
  }
  return true;
}

bool Parser::ParseSignature(Shape* result) {
  if (!Expect('(', "to begin the parameter list")) return false;
  if (!lex_.Eat(')')) {
    do {
      std::string_view pname = lex_.LexName();
      if (pname.empty())
        return ErrorHere("expected parameter name, found " + lex_.DescribeNext());
      Shape ignored;
      if (!Expect(':', "after parameter name") || !ParseShape(&ignored))
        return false;
    } while (lex_.Eat(','));
    if (!Expect(')', "to end the parameter list")) return false;
  }
  if (!ExpectStr("->", "after the parameter list")) return false;
  return ParseShape(result);
}

bool Parser::FinishComputation(Computation* comp, Instruction* root,
                               size_t name_pos, const Shape* declared) {
  if (comp->instructions().empty())
    return Error(name_pos, comp->name().size(),
                 "computation '" + comp->name() + "' has no instructions");
  if (root == nullptr) root = comp->instructions().back().get();
  comp->set_root(root);
  for (int i = 0; i < comp->parameter_count(); ++i) {
    if (comp->parameter(i) == nullptr)
      return Error(name_pos, comp->name().size(),
                   "computation '" + comp->name() + "' has no parameter(" +
                       std::to_string(i) + ") but has parameter(" +
                       std::to_string(comp->parameter_count() - 1) + ")");
  }
  if (declared != nullptr && !declared->Compatible(root->shape()))
    return Error(name_pos, comp->name().size(),
                 "computation '" + comp->name() + "' declares result shape " +
                     declared->ToString() + " but its root '" + root->name() +
                     "' has shape " + root->shape().ToString());
  return true;
}

// --- instructions ----------------------------------------------------------

bool Parser::ParseInstruction(Computation* comp, Instruction** root,
                              size_t* root_pos) {
  lex_.SkipTrivia();
  size_t start = lex_.pos();
  bool is_root = lex_.EatKeyword("ROOT");
  lex_.SkipTrivia();
  size_t name_pos = lex_.pos();
  std::string_view name = lex_.LexName();
  if (name.empty())
    return ErrorHere("expected instruction name or '}', found " +
                     lex_.DescribeNext());
  size_t name_len = lex_.pos() - name_pos;
  if (!IsLegalName(name))
    return Error(name_pos, name_len,
                 "illegal instruction name '" + std::string(name) +
                     "'; suggest renaming to '" + SanitizeName(name) + "'");
  if (scope_.count(name))
    return Error(name_pos, name_len,
                 "redefinition of '" + std::string(name) + "' in computation '" +
                     comp->name() + "'");
  if (!Expect('=', "after instruction name")) return false;
  // XLA lets the shape be left out where it can be inferred (`tuple(a, b)`).
  Shape shape;
  bool has_shape = LooksLikeShape();
  if (has_shape && !ParseShape(&shape)) return false;
  lex_.SkipTrivia();
  size_t op_pos = lex_.pos();
  std::string_view op_name = lex_.LexWord();
  if (op_name.empty())
    return ErrorHere("expected opcode, found " + lex_.DescribeNext());
  std::optional<Opcode> opcode = ParseOpcode(op_name);
  std::optional<Opcode> sugar_wrapped;  // <op> of an `<op>-start`
  if (!opcode) opcode = AsyncSugarOpcode(op_name, &sugar_wrapped);
  if (!opcode)
    return Error(op_pos, op_name.size(),
                 "unknown opcode '" + std::string(op_name) + "'");

  // A sugared start parses as its wrapped op (whose attributes it carries)
  // and becomes an async-start below.
  auto owned = std::make_unique<Instruction>(sugar_wrapped.value_or(*opcode),
                                             std::string(name), std::move(shape));
  Instruction* instr = owned.get();
  instr->set_loc(lex_.Loc(name_pos, name_len));
  size_t first_pending = pending_calls_.size();
  if (!has_shape && (*opcode == Opcode::kParameter || *opcode == Opcode::kConstant))
    return Error(op_pos, op_name.size(),
                 "'" + std::string(op_name) + "' needs a shape before the opcode");

  if (*opcode == Opcode::kParameter) {
    int64_t number = 0;
    if (!Expect('(', "before parameter number")) return false;
    lex_.SkipTrivia();
    size_t num_pos = lex_.pos();
    if (!ParseInt(&number, "parameter number")) return false;
    if (number < 0 || number > (1 << 20))
      return Error(num_pos, lex_.pos() - num_pos,
                   "parameter number " + std::to_string(number) +
                       " is out of range");
    if (number < comp->parameter_count() && comp->parameter(number) != nullptr)
      return Error(num_pos, lex_.pos() - num_pos,
                   "parameter number " + std::to_string(number) +
                       " is already used by '" + comp->parameter(number)->name() +
                       "'");
    if (!Expect(')', "after parameter number")) return false;
    instr->mutable_attrs().parameter_number = number;
  } else if (*opcode == Opcode::kConstant) {
    if (!Expect('(', "before constant literal")) return false;
    Literal literal;
    if (!ParseLiteral(instr->shape(), &literal)) return false;
    if (!Expect(')', "after constant literal")) return false;
    instr->set_literal(std::move(literal));
  } else {
    if (!ParseOperands(instr)) return false;
  }
  parsing_async_sugar_ = sugar_wrapped.has_value();
  if (!ParseAttributes(instr)) return false;
  if (sugar_wrapped.has_value()) {
    if (!DesugarAsyncStart(&owned, first_pending, op_pos, op_name.size())) return false;
    instr = owned.get();
  }
  if (!CheckInstruction(instr, op_pos, op_name.size(), first_pending))
    return false;
  if (!has_shape && !InferShape(instr, op_pos, op_name.size())) return false;

  comp->AddInstruction(std::move(owned));
  scope_.emplace(name, instr);
  if (is_root) {
    if (*root != nullptr)
      return Error(start, 4, "computation '" + comp->name() +
                                 "' has more than one ROOT (the first is '" +
                                 (*root)->name() + "')");
    *root = instr;
    *root_pos = start;
  }
  return true;
}

bool Parser::ParseOperands(Instruction* instr) {
  if (!lex_.Eat('(') && !Expect('(', ("before the operands of '" + instr->name() + "'").c_str()))
    return false;
  if (lex_.Eat(')')) return true;
  do {
    Shape declared;
    bool has_shape = false;
    if (LooksLikeShape()) {
      if (!ParseShape(&declared)) return false;
      has_shape = true;
    }
    lex_.SkipTrivia();
    size_t p = lex_.pos();
    std::string_view name = lex_.LexName();
    if (name.empty())
      return ErrorHere("expected operand name, found " + lex_.DescribeNext());
    auto it = scope_.find(name);
    if (it == scope_.end())
      return Error(p, lex_.pos() - p,
                   "use of undefined value '%" + std::string(name) + "'");
    if (has_shape && !declared.Compatible(it->second->shape()))
      return Error(p, lex_.pos() - p,
                   "operand '" + std::string(name) + "' is declared as " +
                       declared.ToString() + " but has shape " +
                       it->second->shape().ToString());
    instr->AppendOperand(it->second);
  } while (lex_.Eat(','));
  return Expect(')', "after operands");
}

bool Parser::ParseAttributes(Instruction* instr) {
  seen_attrs_.clear();
  while (lex_.Peek() == ',') {
    lex_.Eat(',');
    lex_.SkipTrivia();
    size_t name_pos = lex_.pos();
    std::string_view name = lex_.LexWord();
    if (name.empty())
      return ErrorHere("expected attribute name after ',', found " +
                       lex_.DescribeNext());
    for (std::string_view seen : seen_attrs_)
      if (seen == name)
        return Error(name_pos, name.size(),
                     "attribute '" + std::string(name) + "' given twice");
    seen_attrs_.push_back(name);
    if (options_.xla_strict && !CheckStrictAttribute(*instr, name, name_pos)) return false;
    if (!lex_.Eat('=') && !Expect('=', ("after attribute '" + std::string(name) + "'").c_str()))
      return false;
    lex_.SkipTrivia();
    if (!ParseAttribute(instr, name, name_pos)) return false;
  }
  return true;
}

bool Parser::CheckStrictAttribute(const Instruction& instr, std::string_view name,
                                  size_t name_pos) {
  const Opcode op = instr.opcode();
  if (XlaAcceptsAttribute(op, name, parsing_async_sugar_)) return true;
  std::string own = XlaOpcodeAttributeList(op);
  return StrictError(name_pos, name.size(),
                     "attribute '" + std::string(name) + "' is not an attribute of " +
                         std::string(OpcodeName(op)) + " (" +
                         (own.empty() ? "it takes only the common ones"
                                      : "its own are " + own) +
                         ")");
}

bool Parser::CheckInstruction(Instruction* instr, size_t op_pos, size_t op_len,
                              size_t first_pending) {
  Opcode op = instr->opcode();
  std::string op_name(OpcodeName(op));
  int n = instr->operand_count();
  auto fail = [&](const std::string& msg) { return Error(op_pos, op_len, msg); };
  int arity = OpcodeArity(op);
  if (arity >= 0 && n != arity && op != Opcode::kParameter &&
      op != Opcode::kConstant)
    return fail("'" + op_name + "' expects " + std::to_string(arity) +
                " operand" + (arity == 1 ? "" : "s") + ", got " +
                std::to_string(n));
  switch (op) {
    case Opcode::kReduce:
    case Opcode::kReduceWindow:
      if (n < 2 || n % 2 != 0)
        return fail("'" + op_name +
                    "' expects an even number of operands (inputs, then as many "
                    "init values), got " + std::to_string(n));
      break;
    case Opcode::kScatter:
      if (n < 3 || n % 2 != 1)
        return fail("'scatter' expects operands, indices and as many updates "
                    "as operands (an odd count >= 3), got " + std::to_string(n));
      break;
    case Opcode::kDynamicSlice:
      if (n < 2) return fail("'dynamic-slice' expects an operand and start indices");
      break;
    case Opcode::kDynamicUpdateSlice:
      if (n < 3)
        return fail("'dynamic-update-slice' expects an operand, an update and "
                    "start indices");
      break;
    case Opcode::kConcatenate:
    case Opcode::kSort:
    case Opcode::kMap:
    case Opcode::kConditional:
    case Opcode::kAllReduce:
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
    case Opcode::kAllToAll:
    case Opcode::kCollectivePermute:
    case Opcode::kAllReduceStart:
    case Opcode::kAllGatherStart:
    case Opcode::kCollectivePermuteStart:
      if (n < 1) return fail("'" + op_name + "' expects at least one operand");
      break;
    default:
      break;
  }

  // Called computations: every slot must be named (pending names count).
  const auto& called = instr->called_computations();
  std::vector<bool> filled(called.size());
  for (size_t i = 0; i < called.size(); ++i) filled[i] = called[i] != nullptr;
  for (size_t i = first_pending; i < pending_calls_.size(); ++i)
    if (pending_calls_[i].slot < filled.size()) filled[pending_calls_[i].slot] = true;
  for (size_t i = 0; i < filled.size(); ++i) {
    if (!filled[i]) {
      if (op == Opcode::kWhile)
        return fail("'while' requires both condition= and body=");
      if (op == Opcode::kSelectAndScatter)
        return fail("'select-and-scatter' requires both select= and scatter=");
      if (op == Opcode::kConditional)
        return fail("'conditional' requires both true_computation= and "
                    "false_computation=");
      return fail("'" + op_name + "' has a missing called computation");
    }
  }
  size_t need = 0;
  const char* what = "to_apply=";
  switch (op) {
    case Opcode::kWhile: need = 2; what = "condition= and body="; break;
    case Opcode::kSelectAndScatter: need = 2; what = "select= and scatter="; break;
    case Opcode::kReduce: case Opcode::kReduceWindow: case Opcode::kScatter:
    case Opcode::kSort: case Opcode::kMap: case Opcode::kCall:
    case Opcode::kAllReduce: case Opcode::kReduceScatter:
    case Opcode::kAllReduceStart:
      need = 1;
      break;
    case Opcode::kFusion: case Opcode::kAsyncStart:
      need = 1;
      what = "calls=";
      break;
    case Opcode::kConditional:
      need = 1;
      what = "branch_computations= (or true_computation= and false_computation=)";
      break;
    default:
      break;
  }
  if (called.size() < need)
    return fail("'" + op_name + "' requires " + what);
  if (op == Opcode::kConditional &&
      static_cast<size_t>(n) != called.size() + 1)
    return fail("'conditional' has " + std::to_string(called.size()) +
                " branch computations but " + std::to_string(n) +
                " operands (expected one more operand than branches)");
  return true;
}

// The few shapes XLA infers when the text leaves them out: elementwise ops,
// tuple, get-tuple-element and while.
bool Parser::InferShape(Instruction* instr, size_t op_pos, size_t op_len) {
  Opcode op = instr->opcode();
  if (op == Opcode::kTuple) {
    std::vector<Shape> elements;
    for (const Instruction* operand : instr->operands())
      elements.push_back(operand->shape());
    instr->set_shape(Shape::Tuple(std::move(elements)));
    return true;
  }
  if (op == Opcode::kGetTupleElement) {
    const Shape& t = instr->operand(0)->shape();
    int64_t i = instr->attrs().tuple_index;
    if (!t.IsTuple() || i < 0 || i >= t.tuple_size())
      return Error(op_pos, op_len, "cannot infer the shape of get-tuple-element index " +
                                       std::to_string(i) + " of " + t.ToString());
    instr->set_shape(t.tuple_shapes(static_cast<int>(i)));
    return true;
  }
  if (op == Opcode::kWhile || (IsElementwise(op) && op != Opcode::kConvert &&
                               op != Opcode::kBitcastConvert &&
                               op != Opcode::kStochasticConvert)) {
    // Ternary select/clamp take their shape from the value operands.
    const Instruction* src = instr->operand(op == Opcode::kSelect ? 1 : 0);
    Shape s = src->shape();
    if (op == Opcode::kCompare) s.set_element_type(PrimitiveType::PRED);
    instr->set_shape(std::move(s));
    return true;
  }
  return Error(op_pos, op_len, "cannot infer the shape of '" +
                                   std::string(OpcodeName(op)) +
                                   "'; write the shape before the opcode");
}

// --- whole-module passes ---------------------------------------------------

bool Parser::ResolveCalls() {
  for (const PendingCall& p : pending_calls_) {
    auto it = computations_by_name_.find(p.name);
    if (it == computations_by_name_.end())
      return Error(p.pos, p.name.size(),
                   "use of undefined computation '" + std::string(p.name) + "'");
    std::vector<Computation*> called = p.instr->called_computations();
    called[p.slot] = it->second;
    p.instr->set_called_computations(std::move(called));
  }
  pending_calls_.clear();
  return true;
}

bool Parser::CheckCallGraph() {
  // Iterative three-colour DFS over call edges; a grey callee is a cycle.
  std::unordered_map<const Computation*, int> colour;
  struct Frame {
    Computation* comp;
    size_t instr = 0;
    size_t callee = 0;
  };
  for (const auto& start : module_->computations()) {
    if (colour[start.get()] != 0) continue;
    std::vector<Frame> stack{{start.get()}};
    colour[start.get()] = 1;
    while (!stack.empty()) {
      Frame& f = stack.back();
      const auto& instrs = f.comp->instructions();
      if (f.instr >= instrs.size()) {
        colour[f.comp] = 2;
        stack.pop_back();
        continue;
      }
      Instruction* instr = instrs[f.instr].get();
      const auto& called = instr->called_computations();
      if (f.callee >= called.size()) {
        ++f.instr;
        f.callee = 0;
        continue;
      }
      Computation* callee = called[f.callee++];
      int& c = colour[callee];
      if (c == 1) {
        const SourceLoc& loc = instr->loc();
        status_ = Status::Error("call cycle: '" + instr->name() + "' in '" +
                                    f.comp->name() + "' calls computation '" +
                                    callee->name() + "', which is already on the call stack",
                                loc);
        return false;
      }
      if (c == 0) {
        c = 1;
        stack.push_back({callee});
      }
    }
  }
  return true;
}

bool Parser::RenameInstructions() {
  // XLA gives every instruction a module-unique name when the parsed
  // computations are added to the module: in text order, through one
  // NameUniquer, so the first occurrence of a name keeps it.
  NameUniquer uniquer;
  for (const auto& comp : module_->computations()) {
    for (const auto& instr : comp->instructions()) {
      std::string unique = uniquer.GetUniqueName(instr->name());
      if (unique != instr->name()) instr->set_name(unique);
      module_->ReserveName(instr->name());
    }
  }
  return true;
}

}  // namespace text_internal

StatusOr<std::unique_ptr<Module>> ParseModule(
    std::shared_ptr<const SourceFile> file, const ParseOptions& options) {
  text_internal::Parser parser(std::move(file), options);
  return parser.Run();
}

StatusOr<std::unique_ptr<Module>> ParseModuleText(const std::string& text,
                                                  const ParseOptions& options) {
  auto file = std::make_shared<SourceFile>();
  file->name = "<string>";
  file->text = text;
  return ParseModule(std::move(file), options);
}

StatusOr<std::shared_ptr<const SourceFile>> ReadSourceFile(const std::string& path) {
  auto file = std::make_shared<SourceFile>();
  file->name = path;
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    file->text = ss.str();
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      return Status::Error("cannot read '" + path + "': it is a directory");
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status::Error("cannot open '" + path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return Status::Error("cannot read '" + path + "'");
    file->text = ss.str();
  }
  return std::shared_ptr<const SourceFile>(std::move(file));
}

StatusOr<std::unique_ptr<Module>> ParseModuleFile(const std::string& path,
                                                  const ParseOptions& options) {
  MS_ASSIGN_OR_RETURN(std::shared_ptr<const SourceFile> file, ReadSourceFile(path));
  return ParseModule(std::move(file), options);
}

}  // namespace meshsplit
