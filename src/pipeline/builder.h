// A small instruction builder for the pipeline pass: appends instructions to
// one computation with module-unique names (the computation is sorted
// topologically by the caller when done).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/computation.h"
#include "ir/module.h"

namespace meshsplit {

class Builder {
 public:
  Builder(Module& module, Computation& comp, SourceLoc loc)
      : module_(module), comp_(comp), loc_(std::move(loc)) {}

  Computation& computation() { return comp_; }

  Instruction* Add(Opcode op, Shape shape, std::vector<Instruction*> operands,
                   const std::string& hint);
  Instruction* Parameter(int64_t number, Shape shape, const std::string& hint);
  Instruction* ConstantS32(int64_t v);
  Instruction* Scalar(PrimitiveType type, double v);
  Instruction* Element(Instruction* tuple, int64_t index);
  Instruction* Tuple(std::vector<Instruction*> elements);
  Instruction* Binary(Opcode op, Instruction* a, Instruction* b);
  Instruction* Compare(Instruction* a, Instruction* b, ComparisonDirection dir);
  // A scalar broadcast to `dims` (of the scalar's type).
  Instruction* Broadcast(Instruction* scalar, const std::vector<int64_t>& dims);
  Instruction* Reshape(Instruction* x, const std::vector<int64_t>& dims);
  Instruction* Transpose(Instruction* x, const std::vector<int64_t>& perm);
  // x[index, :, :, ...] along dim 0 with the leading 1 kept.
  Instruction* SliceRow(Instruction* x, Instruction* index);
  // x[starts[0] : +sizes[0], starts[1] : +sizes[1], ...] for the leading
  // dims that `starts` gives; the other dims whole.
  Instruction* SliceBlock(Instruction* x, const std::vector<Instruction*>& starts,
                          const std::vector<int64_t>& sizes);
  // x with the block `update` written at `starts` (leading dims; 0 for the rest).
  Instruction* UpdateBlock(Instruction* x, Instruction* update,
                           const std::vector<Instruction*>& starts);
  // x with row `index` of dim 0 set to `row` (shape [1, ...]).
  Instruction* UpdateRow(Instruction* x, Instruction* row, Instruction* index);
  // custom-call(x), custom_call_target=`target`, with `sharding`.
  Instruction* CustomCall(const std::string& target, Instruction* x, Shape shape,
                          const Sharding& sharding);

 private:
  Module& module_;
  Computation& comp_;
  SourceLoc loc_;
};

}  // namespace meshsplit
