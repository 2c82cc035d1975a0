// Running a whole module on tensors from disk: the pieces behind `meshsplit
// run`. Inputs come from `DIR/<parameter name>.npy` (else `DIR/param<i>.npy`),
// outputs go to `DIR/out<i>.npy`, one per element of the entry's result
// (a non-tuple result is out0.npy). Outputs are written to temporary files and
// renamed only when all of them were written, so a failure leaves no partial
// output.
#pragma once

#include <string>
#include <vector>

#include "ir/module.h"
#include "runtime/interpreter.h"
#include "support/status.h"

namespace meshsplit {

// Reads one literal per entry parameter from `dir`. bf16 parameters accept
// `<u2` files holding raw bf16 words. Element type and dimensions must match
// the parameter exactly; errors name the parameter and the file.
StatusOr<std::vector<Literal>> ReadEntryInputs(const Computation& entry, const std::string& dir);

struct RunOptions {
  EvalContext context;  // partition/replica id, collectives, rng seed
};

// Evaluates the entry computation on `inputs` (one per parameter).
StatusOr<Literal> RunEntry(const Module& module, std::vector<Literal> inputs,
                           const RunOptions& options = {});

// The output arrays of a result: the elements of a tuple (nested tuples
// flattened depth-first) or the result itself.
std::vector<const Literal*> OutputArrays(const Literal& result);

// Writes one .npy file per output array into `dir` (created if missing),
// atomically as a set: <names[i]>.npy when `names` has one usable file name
// per output (unique after replacing characters other than letters, digits,
// '.', '-' and '_' by '_'), else out<i>.npy. `written` receives the file
// names.
Status WriteOutputs(const Literal& result, const std::string& dir,
                    const std::vector<std::string>& names = {},
                    std::vector<std::string>* written = nullptr);

// "f32[2,2] {{1, 2}, {3, 4}}", cut after about `max_chars` characters.
std::string FormatOutput(const Literal& literal, size_t max_chars = 2000);

}  // namespace meshsplit
