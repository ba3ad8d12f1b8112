#include "util/status.h"

#include <utility>

namespace tower {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kCancelled: return "CANCELLED";
    case StatusCode::kUnknown: return "UNKNOWN";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
  }
  return "UNKNOWN_CODE";
}

Status::Status(StatusCode code, std::string_view message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_unique<State>(State{code, std::string(message)});
  }
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  }
  return *this;
}

const std::string& Status::message() const {
  static const std::string* const kEmpty = new std::string();
  return ok() ? *kEmpty : state_->message;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(state_->code));
  out += ": ";
  out += state_->message;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return Status();
  std::string message(context);
  message += ": ";
  message += state_->message;
  return Status(state_->code, message);
}

std::ostream& operator<<(std::ostream& os, const Status& status) {
  return os << status.ToString();
}

#define TOWER_DEFINE_STATUS_CONSTRUCTOR(Name, code) \
  Status Name(std::string_view message) { return Status(StatusCode::code, message); }

TOWER_DEFINE_STATUS_CONSTRUCTOR(CancelledError, kCancelled)
TOWER_DEFINE_STATUS_CONSTRUCTOR(UnknownError, kUnknown)
TOWER_DEFINE_STATUS_CONSTRUCTOR(InvalidArgumentError, kInvalidArgument)
TOWER_DEFINE_STATUS_CONSTRUCTOR(DeadlineExceededError, kDeadlineExceeded)
TOWER_DEFINE_STATUS_CONSTRUCTOR(NotFoundError, kNotFound)
TOWER_DEFINE_STATUS_CONSTRUCTOR(AlreadyExistsError, kAlreadyExists)
TOWER_DEFINE_STATUS_CONSTRUCTOR(PermissionDeniedError, kPermissionDenied)
TOWER_DEFINE_STATUS_CONSTRUCTOR(ResourceExhaustedError, kResourceExhausted)
TOWER_DEFINE_STATUS_CONSTRUCTOR(FailedPreconditionError, kFailedPrecondition)
TOWER_DEFINE_STATUS_CONSTRUCTOR(AbortedError, kAborted)
TOWER_DEFINE_STATUS_CONSTRUCTOR(OutOfRangeError, kOutOfRange)
TOWER_DEFINE_STATUS_CONSTRUCTOR(UnimplementedError, kUnimplemented)
TOWER_DEFINE_STATUS_CONSTRUCTOR(InternalError, kInternal)
TOWER_DEFINE_STATUS_CONSTRUCTOR(UnavailableError, kUnavailable)
TOWER_DEFINE_STATUS_CONSTRUCTOR(DataLossError, kDataLoss)

#undef TOWER_DEFINE_STATUS_CONSTRUCTOR

bool IsInvalidArgument(const Status& s) { return s.code() == StatusCode::kInvalidArgument; }
bool IsNotFound(const Status& s) { return s.code() == StatusCode::kNotFound; }
bool IsFailedPrecondition(const Status& s) {
  return s.code() == StatusCode::kFailedPrecondition;
}
bool IsResourceExhausted(const Status& s) {
  return s.code() == StatusCode::kResourceExhausted;
}
bool IsDeadlineExceeded(const Status& s) {
  return s.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace tower
