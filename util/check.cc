#include "util/check.h"

#include <cstdio>
#include <cstdlib>

namespace tower::internal {

CheckFailure::CheckFailure(const char* file, int line, const char* condition) {
  stream_ << file << ":" << line << ": check failed: " << condition << " ";
}

CheckFailure::~CheckFailure() {
  std::fprintf(stderr, "%s\n", stream_.str().c_str());
  std::fflush(stderr);
  std::abort();
}

void IndexOutOfRange(const char* what, long long index, long long size) {
  std::fprintf(stderr, "check failed: %s index %lld out of %lld\n", what, index, size);
  std::fflush(stderr);
  std::abort();
}

}  // namespace tower::internal
