// Status: the result of an operation that a user's input or the environment can make fail.
//
// Library code returns Status (or StatusOr<T>, util/statusor.h) at every API boundary;
// only programming errors abort (util/check.h). Codes follow the canonical set used by
// absl::Status and TensorFlow, so a message such as
//   FAILED_PRECONDITION: Virtual devices cannot be modified after being initialized
// reads the same as it does there.
#ifndef TOWER_UTIL_STATUS_H_
#define TOWER_UTIL_STATUS_H_

#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace tower {

enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
};

// "INVALID_ARGUMENT", "NOT_FOUND", ...
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // OK. Costs one null pointer: the OK path allocates nothing.
  Status() = default;
  Status(StatusCode code, std::string_view message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return ok() ? StatusCode::kOk : state_->code; }
  // Empty for OK.
  const std::string& message() const;

  // "OK", or "NOT_FOUND: <message>".
  std::string ToString() const;

  // Same code, with `context` and ": " put in front of the message; OK stays OK.
  // Used to say where an error happened: "reading data.csv: <original message>".
  Status WithContext(std::string_view context) const;

  // Marks a status as deliberately dropped (best-effort cleanup paths).
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code() == b.code() && a.message() == b.message();
  }
  friend bool operator!=(const Status& a, const Status& b) { return !(a == b); }

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<State> state_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);

inline Status OkStatus() { return Status(); }

// One constructor per canonical code, as absl has them.
Status CancelledError(std::string_view message);
Status UnknownError(std::string_view message);
Status InvalidArgumentError(std::string_view message);
Status DeadlineExceededError(std::string_view message);
Status NotFoundError(std::string_view message);
Status AlreadyExistsError(std::string_view message);
Status PermissionDeniedError(std::string_view message);
Status ResourceExhaustedError(std::string_view message);
Status FailedPreconditionError(std::string_view message);
Status AbortedError(std::string_view message);
Status OutOfRangeError(std::string_view message);
Status UnimplementedError(std::string_view message);
Status InternalError(std::string_view message);
Status UnavailableError(std::string_view message);
Status DataLossError(std::string_view message);

bool IsInvalidArgument(const Status& s);
bool IsNotFound(const Status& s);
bool IsFailedPrecondition(const Status& s);
bool IsResourceExhausted(const Status& s);
bool IsDeadlineExceeded(const Status& s);

}  // namespace tower

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define TOWER_RETURN_IF_ERROR(expr)                  \
  do {                                               \
    ::tower::Status tower_status_ = (expr);          \
    if (!tower_status_.ok()) return tower_status_;   \
  } while (0)

#endif  // TOWER_UTIL_STATUS_H_
