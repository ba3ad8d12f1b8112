// Checks for programming errors: a violated invariant aborts with file:line and a message.
//
// Only for bugs in Tower or misuse of its API that no input could cause (a pointer freed
// twice, an index the caller computed wrongly). Anything a user, a file or the machine can
// cause is a Status instead (util/status.h).
//
//   TOWER_CHECK(chunk->in_use) << "double free of " << ptr;
//   TOWER_CHECK_OK(status);
#ifndef TOWER_UTIL_CHECK_H_
#define TOWER_UTIL_CHECK_H_

#include <sstream>

#include "util/status.h"

namespace tower::internal {

// Collects the message and aborts in its destructor.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// The failure of a bounds check in a hot accessor (Span::operator[], Shape::dim): out of
// line and cold, so that the accessor itself stays small enough to inline (a TOWER_CHECK
// with its message inline kept both out of line: 1.8 % of a `linreg` step of 8 replicas).
[[noreturn]] __attribute__((noinline, cold)) void IndexOutOfRange(const char* what,
                                                                  long long index,
                                                                  long long size);

// Lets `TOWER_CHECK(x) << ...` be an expression of type void in both branches.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace tower::internal

#define TOWER_CHECK(condition)                  \
  (condition) ? (void)0                         \
              : ::tower::internal::Voidify() &  \
                    ::tower::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define TOWER_CHECK_OK(expr)                                                             \
  do {                                                                                   \
    const ::tower::Status tower_check_status_ = (expr);                                  \
    TOWER_CHECK(tower_check_status_.ok()) << #expr << " = " << tower_check_status_;      \
  } while (0)

#endif  // TOWER_UTIL_CHECK_H_
