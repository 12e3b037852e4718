#ifndef GPUTRAVEL_UTIL_STATUS_MACROS_H_
#define GPUTRAVEL_UTIL_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// The project's one set of early-return macros for absl::Status and
// absl::StatusOr.

#define GT_STATUS_CONCAT_INNER(a, b) a##b
#define GT_STATUS_CONCAT(a, b) GT_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` (an absl::Status) if it is not OK. Variadic so
// that a lambda argument's commas need no extra parentheses.
#define GT_RETURN_IF_ERROR(...)                     \
  do {                                              \
    absl::Status gt_status_ = (__VA_ARGS__);        \
    if (!gt_status_.ok()) return gt_status_;        \
  } while (0)

// `lhs = std::move(*expr)` for an absl::StatusOr `expr`, or returns its
// status. `lhs` may declare a variable ("auto x").
#define GT_ASSIGN_OR_RETURN(lhs, expr) \
  GT_ASSIGN_OR_RETURN_IMPL(GT_STATUS_CONCAT(gt_status_or_, __COUNTER__), lhs, expr)
#define GT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(*tmp)

#endif  // GPUTRAVEL_UTIL_STATUS_MACROS_H_
