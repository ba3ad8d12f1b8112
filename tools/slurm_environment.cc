#include "tools/slurm_environment.h"

#include <cctype>
#include <cstdlib>
#include <string_view>

namespace tower {
namespace {

// More hosts than any allocation has: a typo like "n[1-99999999]" is refused, not expanded.
constexpr size_t kMaxHosts = 65536;

Status BadList(const std::string& list, size_t at, const std::string& what) {
  return InvalidArgumentError("Slurm host list '" + list + "': " + what + " at character " +
                              std::to_string(at + 1) +
                              " (expected names and brackets such as node[01-03,07],gpu5)");
}

bool AllDigits(std::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// The numbers of one bracket's contents ("01-03,07" → 01 02 03 07), `at` where the contents
// begin in `list` (for errors).
StatusOr<std::vector<std::string>> ExpandBracket(const std::string& list, size_t at,
                                                 std::string_view contents) {
  std::vector<std::string> numbers;
  size_t start = 0;
  while (start <= contents.size()) {
    const size_t comma = std::min(contents.find(',', start), contents.size());
    const std::string_view range = contents.substr(start, comma - start);
    const size_t dash = range.find('-');
    const std::string_view low = range.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : range.substr(dash + 1);
    if (!AllDigits(low) || !AllDigits(high) || low.size() > 9 || high.size() > 9) {
      return BadList(list, at + start,
                     "'" + std::string(range) + "' is not a number or a range of numbers");
    }
    const long first = std::atol(std::string(low).c_str());
    const long last = std::atol(std::string(high).c_str());
    if (last < first) {
      return BadList(list, at + start, "the range '" + std::string(range) + "' runs backwards");
    }
    if (numbers.size() + static_cast<size_t>(last - first + 1) > kMaxHosts) {
      return BadList(list, at + start, "more than " + std::to_string(kMaxHosts) + " hosts");
    }
    for (long n = first; n <= last; ++n) {
      // As wide as the range's first number: "08-11" → 08 09 10 11.
      std::string digits = std::to_string(n);
      if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
      numbers.push_back(digits);
    }
    start = comma + 1;
  }
  return numbers;
}

// One entry of the list (no comma outside brackets), `at` where it begins in `list`.
Status ExpandEntry(const std::string& list, size_t at, std::string_view entry,
                   std::vector<std::string>* hosts) {
  if (entry.empty()) return BadList(list, at, "an empty host name");
  std::vector<std::string> names = {""};  // the product so far
  size_t i = 0;
  while (i < entry.size()) {
    const size_t open = std::min(entry.find('[', i), entry.size());
    const std::string_view text = entry.substr(i, open - i);
    if (const size_t close = text.find(']'); close != std::string_view::npos) {
      return BadList(list, at + i + close, "a ']' without its '['");
    }
    for (std::string& name : names) name.append(text);
    if (open == entry.size()) break;
    const size_t close = entry.find(']', open);
    if (close == std::string_view::npos) return BadList(list, at + open, "a '[' never closed");
    const std::string_view contents = entry.substr(open + 1, close - open - 1);
    if (const size_t nested = contents.find('['); nested != std::string_view::npos) {
      return BadList(list, at + open + 1 + nested, "a '[' inside brackets");
    }
    TOWER_ASSIGN_OR_RETURN(std::vector<std::string> numbers,
                           ExpandBracket(list, at + open + 1, contents));
    if (names.size() * numbers.size() + hosts->size() > kMaxHosts) {
      return BadList(list, at + open, "more than " + std::to_string(kMaxHosts) + " hosts");
    }
    std::vector<std::string> product;
    for (const std::string& name : names) {
      for (const std::string& number : numbers) product.push_back(name + number);
    }
    names = std::move(product);
    i = close + 1;
  }
  hosts->insert(hosts->end(), names.begin(), names.end());
  return OkStatus();
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandSlurmHostList(const std::string& list) {
  std::vector<std::string> hosts;
  if (list.empty()) return BadList(list, 0, "no host");
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') depth = 0;  // a stray one is named by ExpandEntry
    if (std::isspace(static_cast<unsigned char>(c))) return BadList(list, i, "a space");
    if (c != ',' || (depth > 0 && i < list.size())) continue;
    // A comma outside brackets (or the end) ends an entry; an unclosed '[' at the end is
    // named by ExpandEntry.
    TOWER_RETURN_IF_ERROR(
        ExpandEntry(list, start, std::string_view(list).substr(start, i - start), &hosts));
    start = i + 1;
    depth = 0;
  }
  return hosts;
}

StatusOr<std::vector<int>> ExpandSlurmTasksPerNode(const std::string& text) {
  std::vector<int> tasks;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    // "N" or "N(xM)".
    const size_t paren = entry.find('(');
    const std::string count = entry.substr(0, paren);
    std::string repeat = "1";
    bool ok = AllDigits(count) && count.size() <= 6;
    if (ok && paren != std::string::npos) {
      ok = entry.size() > paren + 3 && entry.compare(paren, 2, "(x") == 0 && entry.back() == ')';
      if (ok) repeat = entry.substr(paren + 2, entry.size() - paren - 3);
      ok = ok && AllDigits(repeat) && repeat.size() <= 6;
    }
    if (!ok || std::atoi(count.c_str()) < 1 || std::atoi(repeat.c_str()) < 1 ||
        tasks.size() + std::atoi(repeat.c_str()) > kMaxHosts) {
      return InvalidArgumentError("Slurm tasks per node '" + text + "': entry '" + entry +
                                  "' is not a count of tasks (≥ 1), with an optional "
                                  "repetition, as in 2(x3),1");
    }
    tasks.insert(tasks.end(), std::atoi(repeat.c_str()), std::atoi(count.c_str()));
    start = comma + 1;
  }
  return tasks;
}

StatusOr<std::optional<SlurmAllocation>> HostsFromSlurmEnvironment(
    const std::function<const char*(const char*)>& getenv) {
  const auto read = [&](const char* name) -> std::string {
    const char* value = getenv != nullptr ? getenv(name) : std::getenv(name);
    return value != nullptr ? value : "";
  };
  std::string variable = "SLURM_JOB_NODELIST";
  std::string list = read("SLURM_JOB_NODELIST");
  if (list.empty()) {
    // Slurm before 20.02 set only this one.
    variable = "SLURM_NODELIST";
    list = read("SLURM_NODELIST");
  }
  if (list.empty()) return std::optional<SlurmAllocation>();
  SlurmAllocation allocation;
  allocation.job_id = read("SLURM_JOB_ID");
  StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostList(list);
  if (!hosts.ok()) return hosts.status().WithContext(variable);
  allocation.hosts = std::move(*hosts);
  const std::string tasks_text = read("SLURM_TASKS_PER_NODE");
  if (tasks_text.empty()) {
    allocation.tasks_per_node.assign(allocation.hosts.size(), 1);
    return std::optional<SlurmAllocation>(std::move(allocation));
  }
  StatusOr<std::vector<int>> tasks = ExpandSlurmTasksPerNode(tasks_text);
  if (!tasks.ok()) return tasks.status().WithContext("SLURM_TASKS_PER_NODE");
  if (tasks->size() != allocation.hosts.size()) {
    return InvalidArgumentError("SLURM_TASKS_PER_NODE='" + tasks_text + "' gives " +
                                std::to_string(tasks->size()) + " task counts for the " +
                                std::to_string(allocation.hosts.size()) + " hosts of " + variable +
                                "='" + list + "': one count per host expected");
  }
  allocation.tasks_per_node = std::move(*tasks);
  return std::optional<SlurmAllocation>(std::move(allocation));
}

}  // namespace tower
