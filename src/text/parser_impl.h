// Internal to text/: the recursive-descent HLO parser. parser.cc holds the
// module/computation/instruction grammar, parse_attributes.cc the attribute
// sub-languages and parse_literal.cc constants and shapes. Every method
// returns false after recording the first error in status_.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/module.h"
#include "sharding/mesh.h"
#include "support/status.h"
#include "text/lexer.h"
#include "text/parser.h"

namespace meshsplit::text_internal {

// XLA's NameUniquer (xla/service/name_uniquer): a name "root.N" registers
// suffix N under "root"; a taken suffix is replaced by the smallest free one
// counting up from the generator's cursor.
class NameUniquer {
 public:
  std::string GetUniqueName(std::string_view name);

 private:
  struct IdGenerator {
    int64_t next = 0;
    std::unordered_map<int64_t, bool> used;
    int64_t Register(int64_t id);
  };
  std::unordered_map<std::string, IdGenerator> generators_;
};

// XLA's name sanitizer: what a name becomes when it is not a legal HLO name.
std::string SanitizeName(std::string_view name);

class Parser {
 public:
  Parser(std::shared_ptr<const SourceFile> file, const ParseOptions& options)
      : lex_(std::move(file)), options_(options) {}
  StatusOr<std::unique_ptr<Module>> Run();

 private:
  // --- errors ---------------------------------------------------------------
  bool Error(size_t pos, size_t len, std::string message);
  bool ErrorHere(std::string message);  // at the current token
  // Consumes `c` or reports "expected 'c' <context>, found X".
  bool Expect(char c, const char* context);
  bool ExpectStr(std::string_view s, const char* context);

  // --- module structure (parser.cc) -----------------------------------------
  bool ParseHeader();
  // Lowers named shardings against the mesh `text` from now on.
  bool SetMesh(const std::string& text, size_t pos);
  bool ParseComputation();
  // `(a: f32[2], ...) -> shape`: parameter names are dropped, the result
  // shape is checked against the root.
  bool ParseSignature(Shape* result);
  bool ParseInstruction(Computation* comp, Instruction** root,
                        size_t* root_pos);
  bool ParseOperands(Instruction* instr);
  bool ParseAttributes(Instruction* instr);
  bool FinishComputation(Computation* comp, Instruction* root, size_t pos,
                         const Shape* declared_result);
  bool CheckInstruction(Instruction* instr, size_t op_pos, size_t op_len,
                        size_t first_pending);
  bool InferShape(Instruction* instr, size_t op_pos, size_t op_len);
  bool ResolveCalls();
  bool CheckCallGraph();
  bool RenameInstructions();
  // XLA's async syntax sugar (parser_async.cc): `<op>-start` /
  // `<op>-update` / `<op>-done` spell an async-start / update / done around
  // one <op>. AsyncSugarOpcode returns the async opcode and, for a start,
  // the wrapped one; DesugarAsyncStart moves the parsed <op> into a new
  // wrapped computation and replaces it with the async-start.
  static std::optional<Opcode> AsyncSugarOpcode(std::string_view op_name,
                                                std::optional<Opcode>* wrapped);
  bool DesugarAsyncStart(std::unique_ptr<Instruction>* owned, size_t first_pending,
                         size_t op_pos, size_t op_len);

  // --- shapes, numbers, literals (parse_literal.cc) -------------------------
  bool ParseShape(Shape* shape, int depth = 0);
  bool LooksLikeShape();
  bool ParseInt(int64_t* value, const char* what);
  bool ParseLiteral(const Shape& shape, Literal* literal, int depth = 0);
  bool ParseDenseArray(Literal* literal);
  bool ParseElement(Literal* literal, int64_t index);
  bool ParseFloatText(std::string_view text, size_t pos, PrimitiveType type,
                      double* value);

  // --- attributes (parse_attributes.cc) -------------------------------------
  // Parses the value of attribute `name` on `instr`; the lexer sits after
  // the '='. Unknown or non-applicable attributes are kept verbatim.
  bool ParseAttribute(Instruction* instr, std::string_view name,
                      size_t name_pos);
  bool ParseIntList(std::vector<int64_t>* out, const char* what);  // {1,2}
  bool ParseBracketIntList(std::vector<int64_t>* out, const char* what);  // [1,2]
  bool ParseBool(bool* out);
  bool ParseQuotedString(std::string* out);
  bool ParseBareWord(std::string* out, const char* what);
  bool ParseWindow(Window* window);
  bool ParseXList(std::vector<int64_t>* out, const char* what, char sep = 'x');
  bool ParseDimLabels(ConvolutionDimensionNumbers* dnums);
  bool ParseSliceRanges(std::vector<SliceDimension>* out);
  bool ParsePadding(PaddingConfig* out);
  bool ParseReplicaGroups(ReplicaGroups* out);
  bool ParsePairs(std::vector<std::pair<int64_t, int64_t>>* out);
  bool ParseComputationRef(Instruction* instr, size_t slot);
  bool ParseComputationList(Instruction* instr);
  bool ParseControlPredecessors(Instruction* instr);
  bool ParseVerbatim(std::string* out, size_t value_pos);

  // --xla-strict: an error naming what XLA's parser would refuse.
  bool StrictError(size_t pos, size_t len, const std::string& what);
  bool CheckStrictAttribute(const Instruction& instr, std::string_view name,
                            size_t name_pos);

  Lexer lex_;
  const ParseOptions options_;
  Status status_;
  std::unique_ptr<Module> module_;
  // The module's mesh (frontend attribute meshsplit.mesh, or the older
  // `mesh={...}` header attribute), which named shardings
  // (`sharding={mesh_split [data, _]}`) are lowered against.
  std::optional<Mesh> mesh_;

  // Instructions of the computation being parsed, by their name in the text.
  std::unordered_map<std::string_view, Instruction*> scope_;
  // Computations by name; forward references are resolved at the end.
  std::unordered_map<std::string_view, Computation*> computations_by_name_;
  struct PendingCall {
    Instruction* instr;
    size_t slot;
    std::string_view name;
    size_t pos;
  };
  std::vector<PendingCall> pending_calls_;
  Computation* entry_ = nullptr;
  // The last computation written in the text (computations made for async
  // sugar come after it in the module but are never the implicit entry).
  Computation* last_parsed_ = nullptr;
  // Attribute names seen on the current instruction (duplicate check).
  std::vector<std::string_view> seen_attrs_;
  // The instruction being parsed is the `<op>` of an `<op>-start` (which
  // also takes the async attributes).
  bool parsing_async_sugar_ = false;
};

}  // namespace meshsplit::text_internal
