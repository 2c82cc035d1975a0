// NumPy .npy files in and out: how `meshsplit run` exchanges tensors with the
// outside world. Format versions 1.0, 2.0 and 3.0 are read; 1.0 is written
// (2.0 when the header would not fit in 64 KiB).
//
// dtypes: <f2 <f4 <f8, <i1..<i8, <u1..<u8 and |b1 (pred). Big-endian files
// (>f4 ...) are byte-swapped on read. NumPy has no bfloat16, so a bf16
// tensor is written as `<u2` holding the raw 16-bit words; reading such a
// file yields a u16 literal that callers reinterpret (runtime/run_module.h
// does so for bf16 parameters). Only C (row-major) order is accepted:
// fortran_order True is an error.
#pragma once

#include <string>

#include "ir/literal.h"
#include "support/status.h"

namespace meshsplit {

// Parses the bytes of a .npy file. `name` is used in error messages, which
// read "error: NAME: ..." and never crash on malformed input.
StatusOr<Literal> ParseNpy(const std::string& bytes, const std::string& name);

// Reads and parses a file.
StatusOr<Literal> ReadNpy(const std::string& path);

// Serialises an array literal (bf16 as <u2 words). Tuples and f8/complex
// types are errors.
StatusOr<std::string> SerializeNpy(const Literal& literal);

// Writes `literal` to `path` (overwriting it).
Status WriteNpy(const Literal& literal, const std::string& path);

// The .npy dtype string for an element type ("<f4"), or "" when .npy cannot
// hold it.
std::string NpyDescr(PrimitiveType type);

}  // namespace meshsplit
