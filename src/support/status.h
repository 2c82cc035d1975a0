// Status and StatusOr: how fallible functions report bad input. A Status carries
// a message and, when known, the source location it refers to; the CLI turns it
// into "FILE:LINE:COL: error: message". Broken internal invariants use
// MS_CHECK instead (support/check.h).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "support/source_loc.h"

namespace meshsplit {

class Status {
 public:
  Status() = default;  // OK
  static Status Ok() { return Status(); }
  static Status Error(std::string message, SourceLoc loc = {}) {
    Status s;
    s.ok_ = false;
    s.message_ = std::move(message);
    s.loc_ = loc;
    return s;
  }

  bool ok() const { return ok_; }
  const std::string& message() const { return message_; }
  const SourceLoc& loc() const { return loc_; }

  // "FILE:LINE:COL: error: message", or "error: message" without a location.
  std::string ToString() const;

 private:
  bool ok_ = true;
  std::string message_;
  SourceLoc loc_;
};

template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace meshsplit

#define MS_CONCAT_IMPL(a, b) a##b
#define MS_CONCAT(a, b) MS_CONCAT_IMPL(a, b)

// Returns from the enclosing function if `expr` (a Status) is an error.
#define MS_RETURN_IF_ERROR(expr)                    \
  do {                                              \
    ::meshsplit::Status _ms_status = (expr);        \
    if (!_ms_status.ok()) return _ms_status;        \
  } while (0)

// `MS_ASSIGN_OR_RETURN(auto x, F())` unwraps a StatusOr or returns its error.
#define MS_ASSIGN_OR_RETURN(lhs, expr) \
  MS_ASSIGN_OR_RETURN_IMPL(MS_CONCAT(_ms_statusor_, __LINE__), lhs, expr)
#define MS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
