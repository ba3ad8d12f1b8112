#include "util/failed_call.h"

namespace tower {

std::string FailedCallMessage(std::string_view statement, const char* file, int line,
                              std::string_view where, std::string_view text,
                              std::string_view detail) {
  std::string message(statement);
  message += " failed at ";
  message += file;
  message += ":" + std::to_string(line);
  if (!where.empty()) {
    message += " on ";
    message += where;
  }
  message += ": ";
  message += text;
  if (!detail.empty()) {
    message += " (";
    message += detail;
    message += ")";
  }
  return message;
}

}  // namespace tower
