// Small string helpers used across layers: byte sizes for humans, joining, number parsing
// that rejects trailing garbage (std::stoi accepts "12abc").
#ifndef TOWER_UTIL_STRINGS_H_
#define TOWER_UTIL_STRINGS_H_

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace tower {

// "0 B", "512 B", "1.5 KiB", "1.00 GiB": binary units, three significant digits.
std::string HumanBytes(uint64_t bytes);

// "1.00 GiB (1073741824 bytes)": for error messages, where the exact count matters too.
std::string BytesWithExact(uint64_t bytes);

template <typename Container>
std::string Join(const Container& items, std::string_view separator) {
  std::ostringstream out;
  bool first = true;
  for (const auto& item : items) {
    if (!first) out << separator;
    out << item;
    first = false;
  }
  return out.str();
}

std::vector<std::string> Split(std::string_view text, char separator);

// Whole-string parses; nullopt on empty text, junk, or overflow.
std::optional<int64_t> ParseInt64(std::string_view text);
std::optional<double> ParseDouble(std::string_view text);

std::string ToLower(std::string_view text);
std::string ToUpper(std::string_view text);
bool StartsWith(std::string_view text, std::string_view prefix);
bool EndsWith(std::string_view text, std::string_view suffix);

// `text` with its control bytes (below 0x20, and 0x7F) written as \xNN: for text read from a
// file (a dtype, a feature or member name) quoted in an error message, which stays one line.
std::string Printable(std::string_view text);

}  // namespace tower

#endif  // TOWER_UTIL_STRINGS_H_
