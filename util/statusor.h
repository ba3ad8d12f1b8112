// StatusOr<T>: either a value of type T or a non-OK Status saying why there is none.
//
//   StatusOr<DeviceName> name = DeviceName::Parse("/GPU:0");
//   if (!name.ok()) return name.status();
//   Use(*name);
//
// Reading the value of a StatusOr that holds an error is a programming error (it aborts
// with the status), so always test ok() first or use TOWER_ASSIGN_OR_RETURN.
#ifndef TOWER_UTIL_STATUSOR_H_
#define TOWER_UTIL_STATUSOR_H_

#include <optional>
#include <type_traits>
#include <utility>

#include "util/check.h"
#include "util/status.h"

namespace tower {

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // Holds an error; `status` must not be OK.
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    TOWER_CHECK(!status_.ok()) << "StatusOr constructed from an OK status without a value";
  }
  StatusOr(const T& value) : value_(value) {}       // NOLINT: implicit by design
  StatusOr(T&& value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  // Converting constructor: StatusOr<std::unique_ptr<Base>> from std::unique_ptr<Derived>.
  template <typename U, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                    !std::is_same_v<std::decay_t<U>, T> &&
                                                    !std::is_same_v<std::decay_t<U>, Status>>>
  StatusOr(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT

  bool ok() const { return status_.ok(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }

  const T& value() const& {
    CheckHasValue();
    return *value_;
  }
  T& value() & {
    CheckHasValue();
    return *value_;
  }
  // By value from an rvalue, so `for (x : *F())` does not dangle.
  T value() && {
    CheckHasValue();
    return std::move(*value_);
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  T operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  void CheckHasValue() const {
    TOWER_CHECK(status_.ok()) << "value() of a StatusOr holding " << status_;
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace tower

#define TOWER_STATUS_CONCAT_INNER_(a, b) a##b
#define TOWER_STATUS_CONCAT_(a, b) TOWER_STATUS_CONCAT_INNER_(a, b)

// Declares or assigns `lhs` from a StatusOr expression, or returns its error.
//   TOWER_ASSIGN_OR_RETURN(DeviceName name, DeviceName::Parse(text));
#define TOWER_ASSIGN_OR_RETURN(lhs, expr) \
  TOWER_ASSIGN_OR_RETURN_IMPL_(TOWER_STATUS_CONCAT_(tower_statusor_, __LINE__), lhs, expr)

#define TOWER_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // TOWER_UTIL_STATUSOR_H_
