// Status and StatusOr: how fallible functions report bad input. A Status carries
// a message and, when known, the source location it refers to; the CLI turns it
// into "FILE:LINE:COL: error: message". Broken internal invariants use
// MS_CHECK instead (support/check.h).
#pragma once

#include <memory>
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
    s.error_ = std::make_unique<Rep>(Rep{std::move(message), std::move(loc)});
    return s;
  }

  // An OK status is one null pointer, so creating, moving, copying and
  // destroying one costs a word (collectives and kernels pass them on every
  // call); only errors allocate.
  Status(const Status& other)
      : error_(other.error_ ? std::make_unique<Rep>(*other.error_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) error_ = other.error_ ? std::make_unique<Rep>(*other.error_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  bool ok() const { return error_ == nullptr; }
  // Empty for an OK status.
  const std::string& message() const { return error_ ? error_->message : EmptyMessage(); }
  const SourceLoc& loc() const { return error_ ? error_->loc : EmptyLoc(); }

  // "FILE:LINE:COL: error: message", or "error: message" without a location.
  std::string ToString() const;

 private:
  struct Rep {
    std::string message;
    SourceLoc loc;
  };
  static const std::string& EmptyMessage();
  static const SourceLoc& EmptyLoc();

  std::unique_ptr<Rep> error_;  // null: OK
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
