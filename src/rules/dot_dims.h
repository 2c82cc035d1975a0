// A dot or convolution read as a dot (XLA's DotConvolutionDimsInfo), derived
// from the factors of its sharding rule: batch, contracting and the two sides'
// non-contracting dims, plus windowed spatial dims for real convolutions.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/instruction.h"
#include "rules/op_rules.h"

namespace meshsplit {

struct DotDims {
  struct Dim {
    int64_t lhs = -1, rhs = -1, output = -1;
  };
  std::vector<Dim> batch, contracting, lhs_non_contracting, rhs_non_contracting,
      conv_spatial;
  int64_t lhs_rank = 0, rhs_rank = 0, output_rank = 0;

  // Operand k's dims -> output dims through batch and its own non-contracting
  // dims (-1 elsewhere).
  std::vector<int64_t> OperandToOutput(int k) const {
    std::vector<int64_t> m(k == 0 ? lhs_rank : rhs_rank, -1);
    auto put = [&](const Dim& d) {
      int64_t x = k == 0 ? d.lhs : d.rhs;
      if (x >= 0 && d.output >= 0) m[x] = d.output;
    };
    for (const Dim& d : batch) put(d);
    for (const Dim& d : (k == 0 ? lhs_non_contracting : rhs_non_contracting)) put(d);
    return m;
  }
  // Output dims -> operand k dims (inverse of the above).
  std::vector<int64_t> OutputToOperand(int k) const {
    std::vector<int64_t> m(output_rank, -1);
    std::vector<int64_t> f = OperandToOutput(k);
    for (size_t i = 0; i < f.size(); ++i)
      if (f[i] >= 0) m[f[i]] = i;
    return m;
  }
  // Operand k dims -> the other operand's dims through batch and contracting
  // dims (inverse of the below).
  std::vector<int64_t> OperandToOther(int k) const {
    std::vector<int64_t> m(k == 0 ? lhs_rank : rhs_rank, -1);
    std::vector<int64_t> f = OtherToOperand(k);
    for (size_t i = 0; i < f.size(); ++i)
      if (f[i] >= 0) m[f[i]] = i;
    return m;
  }
  // Other operand's dims -> operand k dims through batch and contracting dims.
  std::vector<int64_t> OtherToOperand(int k) const {
    std::vector<int64_t> m(k == 0 ? rhs_rank : lhs_rank, -1);
    auto put = [&](const Dim& d) {
      int64_t mine = k == 0 ? d.lhs : d.rhs, other = k == 0 ? d.rhs : d.lhs;
      if (mine >= 0 && other >= 0) m[other] = mine;
    };
    for (const Dim& d : batch) put(d);
    for (const Dim& d : contracting) put(d);
    return m;
  }
};

inline DotDims GetDotDims(const OpShardingRule& rule, const Instruction* instr) {
  DotDims d;
  d.lhs_rank = instr->operand(0)->shape().rank();
  d.rhs_rank = instr->operand(1)->shape().rank();
  d.output_rank = instr->shape().rank();
  for (const Factor& f : rule.factors) {
    DotDims::Dim dim{f.operand_dims.size() > 0 ? f.operand_dims[0] : -1,
                     f.operand_dims.size() > 1 ? f.operand_dims[1] : -1,
                     f.result_dim};
    switch (f.dot_role) {
      case DotRole::kBatch: d.batch.push_back(dim); break;
      case DotRole::kContracting: d.contracting.push_back(dim); break;
      case DotRole::kLhsNonContracting: d.lhs_non_contracting.push_back(dim); break;
      case DotRole::kRhsNonContracting: d.rhs_non_contracting.push_back(dim); break;
      case DotRole::kConvSpatial: d.conv_spatial.push_back(dim); break;
      case DotRole::kNone: break;
    }
  }
  return d;
}

}  // namespace meshsplit
