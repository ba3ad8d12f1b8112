#include "model/learning_rate_schedule.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>

namespace tower {
namespace {

class Lambda : public LearningRateSchedule {
 public:
  Lambda(std::function<float(int64_t)> rate, std::string description)
      : rate_(std::move(rate)), description_(std::move(description)) {}
  float operator()(int64_t step) const override { return rate_(step); }
  std::string Describe() const override { return description_; }

 private:
  std::function<float(int64_t)> rate_;
  std::string description_;
};

// The shortest decimal that reads back as `value`: "0.1" for 0.1f, not "0.100000" (what
// std::to_string gives) nor "0.100000001".
std::string Number(float value) {
  char buffer[32];
  for (int precision = 1; precision <= 9; ++precision) {  // 9 digits round-trip any float
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtof(buffer, nullptr) == value) break;
  }
  return buffer;
}

// "B1/B2/..." as in the spec grammar.
template <typename T>
std::string Slashed(const std::vector<T>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += "/";
    if constexpr (std::is_floating_point_v<T>) {
      out += Number(items[i]);
    } else {
      out += std::to_string(items[i]);
    }
  }
  return out;
}

constexpr double kPi = 3.14159265358979323846;

bool IsRate(float rate) { return std::isfinite(rate) && rate >= 0; }

}  // namespace

std::shared_ptr<LearningRateSchedule> ConstantLearningRate(float rate) {
  return std::make_shared<Lambda>([rate](int64_t) { return rate; },
                                  "constant(" + Number(rate) + ")");
}

StatusOr<std::shared_ptr<LearningRateSchedule>> ExponentialDecay(float initial_rate,
                                                                 int64_t decay_steps,
                                                                 float decay_rate,
                                                                 bool staircase) {
  if (decay_steps <= 0) {
    return InvalidArgumentError("ExponentialDecay: decay_steps must be > 0, got " +
                                std::to_string(decay_steps));
  }
  if (!(decay_rate > 0) || !std::isfinite(decay_rate)) {
    return InvalidArgumentError("ExponentialDecay: decay_rate must be finite and > 0, got " +
                                Number(decay_rate));
  }
  return std::shared_ptr<LearningRateSchedule>(std::make_shared<Lambda>(
      [=](int64_t step) {
        double exponent = static_cast<double>(step) / decay_steps;
        if (staircase) exponent = std::floor(exponent);
        return static_cast<float>(initial_rate * std::pow(double{decay_rate}, exponent));
      },
      "exponential(initial=" + Number(initial_rate) +
          ", decay_steps=" + std::to_string(decay_steps) + ", decay_rate=" + Number(decay_rate) +
          ", staircase=" + (staircase ? "true" : "false") + ")"));
}

StatusOr<std::shared_ptr<LearningRateSchedule>> PiecewiseConstant(
    std::vector<int64_t> boundaries, std::vector<float> values) {
  if (values.size() != boundaries.size() + 1) {
    return InvalidArgumentError("PiecewiseConstant: " + std::to_string(boundaries.size()) +
                                " boundaries need " + std::to_string(boundaries.size() + 1) +
                                " values (one more), got " + std::to_string(values.size()));
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      return InvalidArgumentError("PiecewiseConstant: boundaries must increase, got " +
                                  std::to_string(boundaries[i]) + " after " +
                                  std::to_string(boundaries[i - 1]));
    }
  }
  std::string description =
      "step(boundaries=" + Slashed(boundaries) + ", values=" + Slashed(values) + ")";
  return std::shared_ptr<LearningRateSchedule>(std::make_shared<Lambda>(
      [boundaries = std::move(boundaries), values = std::move(values)](int64_t step) {
        size_t i = 0;
        while (i < boundaries.size() && step >= boundaries[i]) ++i;
        return values[i];
      },
      std::move(description)));
}

StatusOr<std::shared_ptr<LearningRateSchedule>> CosineDecay(float initial_rate,
                                                            int64_t decay_steps, float alpha) {
  if (decay_steps <= 0) {
    return InvalidArgumentError("CosineDecay: decay_steps must be > 0, got " +
                                std::to_string(decay_steps));
  }
  if (!(alpha >= 0 && alpha <= 1)) {  // NaN fails both
    return InvalidArgumentError("CosineDecay: alpha must be in [0, 1], got " + Number(alpha));
  }
  if (!IsRate(initial_rate)) {
    return InvalidArgumentError("CosineDecay: initial_rate must be finite and >= 0, got " +
                                Number(initial_rate));
  }
  return std::shared_ptr<LearningRateSchedule>(std::make_shared<Lambda>(
      [=](int64_t step) {
        // Past decay_steps the rate stays at alpha·initial_rate (Keras clamps the step too).
        const double fraction =
            static_cast<double>(std::min(step, decay_steps)) / static_cast<double>(decay_steps);
        const double cosine = 0.5 * (1 + std::cos(kPi * fraction));
        return static_cast<float>(double{initial_rate} *
                                  ((1 - double{alpha}) * cosine + double{alpha}));
      },
      "cosine(initial=" + Number(initial_rate) + ", decay_steps=" +
          std::to_string(decay_steps) + ", alpha=" + Number(alpha) + ")"));
}

StatusOr<std::shared_ptr<LearningRateSchedule>> LinearWarmup(
    int64_t warmup_steps, std::shared_ptr<LearningRateSchedule> after, float start_rate) {
  if (warmup_steps <= 0) {
    return InvalidArgumentError("LinearWarmup: warmup_steps must be > 0, got " +
                                std::to_string(warmup_steps));
  }
  if (after == nullptr) {
    return InvalidArgumentError("LinearWarmup: needs a schedule to warm up to, got null");
  }
  if (!IsRate(start_rate)) {
    return InvalidArgumentError("LinearWarmup: start_rate must be finite and >= 0, got " +
                                Number(start_rate));
  }
  std::string description = after->Describe() + " after linear warmup over " +
                            std::to_string(warmup_steps) + " steps from " + Number(start_rate);
  return std::shared_ptr<LearningRateSchedule>(std::make_shared<Lambda>(
      [warmup_steps, after = std::move(after), start_rate](int64_t step) {
        if (step >= warmup_steps) return (*after)(step - warmup_steps);
        // after(0) each call rather than once: `after` may be a LambdaSchedule, whose function
        // need not be pure.
        const double start = start_rate;
        const double target = (*after)(0);
        return static_cast<float>(start + (target - start) * static_cast<double>(step) /
                                              static_cast<double>(warmup_steps));
      },
      std::move(description)));
}

std::shared_ptr<LearningRateSchedule> LambdaSchedule(std::function<float(int64_t)> rate,
                                                     std::string description) {
  return std::make_shared<Lambda>(std::move(rate), std::move(description));
}

namespace {

// ParseLearningRateSchedule's spec: the kinds and each one's grammar after "kind:", for
// error messages (the header documents the same grammar).
struct Kind {
  const char* name;
  const char* params;  // "" for none
};
constexpr Kind kKinds[] = {
    {"constant", ""},
    {"exponential", "decay_steps=N,decay_rate=R[,staircase]"},
    {"step", "boundaries=B1/B2/...,values=V0/V1/..."},
    {"cosine", "decay_steps=N[,alpha=A]"},
};

std::string AllKinds() {
  std::string out = "the schedules are ";
  for (const Kind& kind : kKinds) {
    if (&kind != &kKinds[0]) out += " | ";
    out += kind.name;
    if (*kind.params != '\0') out += std::string(":") + kind.params;
  }
  return out;
}

// The whole of `text` as a base-10 integer: no whitespace, trailing characters or overflow.
std::optional<int64_t> WholeInteger(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno == ERANGE || end != text.c_str() + text.size()) return std::nullopt;
  return static_cast<int64_t>(value);
}

// The whole of `text` as a number (strtod's syntax, so "inf" and "nan" too: callers check).
std::optional<double> WholeReal(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (errno == ERANGE || end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

// One spec's "key=value,flag,..." after "kind:", and errors that quote the spec and show the
// kind's grammar.
class SpecParams {
 public:
  SpecParams(const std::string& spec, const Kind& kind) : spec_(spec), kind_(kind) {}

  Status Error(const std::string& what) const {
    const std::string usage = *kind_.params == '\0'
                                  ? std::string(kind_.name) + " takes no parameters"
                                  : std::string(kind_.name) + " takes " + kind_.params;
    return InvalidArgumentError("--lr-schedule '" + spec_ + "': " + what + "; " + usage);
  }

  // Splits `text` at ','; keys must be among `keys`, each at most once, `flags` without a
  // value and the others with one.
  Status Split(const std::string& text, const std::vector<std::string>& keys,
               const std::vector<std::string>& flags = {}) {
    size_t begin = 0;
    while (true) {
      const size_t comma = text.find(',', begin);
      const std::string item =
          text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
      if (item.empty()) return Error("empty parameter in '" + text + "' (a stray ',')");
      const size_t equals = item.find('=');
      const std::string key = item.substr(0, equals);
      const bool is_flag = Contains(flags, key);
      if (!is_flag && !Contains(keys, key)) return Error("unknown key '" + key + "'");
      if (entries_.count(key) != 0) return Error("duplicate key '" + key + "'");
      if (is_flag && equals != std::string::npos) {
        return Error("'" + key + "' takes no value, got '" + item + "'");
      }
      if (!is_flag && equals == std::string::npos) {
        return Error("'" + key + "' needs a value (" + key + "=...)");
      }
      entries_[key] = is_flag ? "" : item.substr(equals + 1);
      if (comma == std::string::npos) return OkStatus();
      begin = comma + 1;
    }
  }

  bool Has(const std::string& key) const { return entries_.count(key) != 0; }

  StatusOr<int64_t> Integer(const std::string& key) const {
    TOWER_ASSIGN_OR_RETURN(const std::string text, Required(key));
    const std::optional<int64_t> value = WholeInteger(text);
    if (!value) return Error(key + "='" + text + "' is not an integer");
    return *value;
  }

  // A finite float (the schedules compute in float).
  StatusOr<float> Real(const std::string& key) const {
    TOWER_ASSIGN_OR_RETURN(const std::string text, Required(key));
    return Real(key, text, text);
  }

  StatusOr<std::vector<int64_t>> Integers(const std::string& key) const {
    TOWER_ASSIGN_OR_RETURN(const std::string text, Required(key));
    std::vector<int64_t> out;
    for (const std::string& item : SplitSlashes(text)) {
      const std::optional<int64_t> value = WholeInteger(item);
      if (!value) return Error(key + "='" + text + "': '" + item + "' is not an integer");
      out.push_back(*value);
    }
    return out;
  }

  StatusOr<std::vector<float>> Reals(const std::string& key) const {
    TOWER_ASSIGN_OR_RETURN(const std::string text, Required(key));
    std::vector<float> out;
    for (const std::string& item : SplitSlashes(text)) {
      TOWER_ASSIGN_OR_RETURN(const float value, Real(key, text, item));
      out.push_back(value);
    }
    return out;
  }

 private:
  static bool Contains(const std::vector<std::string>& keys, const std::string& key) {
    for (const std::string& k : keys) {
      if (k == key) return true;
    }
    return false;
  }

  static std::vector<std::string> SplitSlashes(const std::string& text) {
    std::vector<std::string> out;
    size_t begin = 0;
    while (true) {
      const size_t slash = text.find('/', begin);
      out.push_back(
          text.substr(begin, slash == std::string::npos ? std::string::npos : slash - begin));
      if (slash == std::string::npos) return out;
      begin = slash + 1;
    }
  }

  StatusOr<std::string> Required(const std::string& key) const {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return Error("missing key '" + key + "'");
    return it->second;
  }

  // `item` of `key`='text' (the whole value, or one element of a list).
  StatusOr<float> Real(const std::string& key, const std::string& text,
                       const std::string& item) const {
    const std::string where =
        key + "='" + text + "'" + (item == text ? std::string() : ": '" + item + "'");
    const std::optional<double> value = WholeReal(item);
    if (!value) return Error(where + " is not a number");
    if (!std::isfinite(static_cast<float>(*value))) {
      return Error(where + " is not a finite float");
    }
    return static_cast<float>(*value);
  }

  const std::string& spec_;
  const Kind& kind_;
  std::map<std::string, std::string> entries_;  // flags map to ""
};

}  // namespace

StatusOr<std::shared_ptr<LearningRateSchedule>> ParseLearningRateSchedule(
    const std::string& spec, float initial_rate, int64_t warmup_steps) {
  const std::string quoted = "--lr-schedule '" + spec + "'";
  if (warmup_steps < 0) {
    return InvalidArgumentError(quoted + ": warmup_steps must be >= 0 (0: no warmup), got " +
                                std::to_string(warmup_steps));
  }
  const size_t colon = spec.find(':');
  const std::string name = spec.empty() ? "constant" : spec.substr(0, colon);
  const Kind* kind = nullptr;
  for (const Kind& k : kKinds) {
    if (name == k.name) kind = &k;
  }
  if (kind == nullptr) {
    return InvalidArgumentError(quoted + ": unknown kind '" + name + "'; " + AllKinds());
  }
  SpecParams params(spec, *kind);
  const std::string text = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const bool has_params = colon != std::string::npos;
  // step ignores initial_rate: its values are explicit.
  if (name != "step" && !IsRate(initial_rate)) {
    return params.Error("the initial rate must be finite and >= 0, got " + Number(initial_rate));
  }

  StatusOr<std::shared_ptr<LearningRateSchedule>> schedule = ConstantLearningRate(initial_rate);
  if (name == "constant") {
    if (has_params) return params.Error("unexpected parameters '" + text + "'");
  } else if (!has_params) {
    return params.Error("missing parameters");
  } else if (name == "exponential") {
    TOWER_RETURN_IF_ERROR(params.Split(text, {"decay_steps", "decay_rate"}, {"staircase"}));
    TOWER_ASSIGN_OR_RETURN(const int64_t decay_steps, params.Integer("decay_steps"));
    TOWER_ASSIGN_OR_RETURN(const float decay_rate, params.Real("decay_rate"));
    schedule = ExponentialDecay(initial_rate, decay_steps, decay_rate, params.Has("staircase"));
  } else if (name == "step") {
    TOWER_RETURN_IF_ERROR(params.Split(text, {"boundaries", "values"}));
    TOWER_ASSIGN_OR_RETURN(std::vector<int64_t> boundaries, params.Integers("boundaries"));
    TOWER_ASSIGN_OR_RETURN(std::vector<float> values, params.Reals("values"));
    for (const float value : values) {
      if (!IsRate(value)) return params.Error("values: " + Number(value) + " is negative");
    }
    schedule = PiecewiseConstant(std::move(boundaries), std::move(values));
  } else if (name == "cosine") {
    TOWER_RETURN_IF_ERROR(params.Split(text, {"decay_steps", "alpha"}));
    TOWER_ASSIGN_OR_RETURN(const int64_t decay_steps, params.Integer("decay_steps"));
    float alpha = 0;
    if (params.Has("alpha")) {
      TOWER_ASSIGN_OR_RETURN(alpha, params.Real("alpha"));
    }
    schedule = CosineDecay(initial_rate, decay_steps, alpha);
  }
  // The constructors' own checks (decay_steps > 0, alpha in [0, 1], increasing boundaries, ...)
  // name the parameter and value; put the spec and grammar around them.
  if (!schedule.ok()) return params.Error(schedule.status().message());
  if (warmup_steps == 0) return schedule;
  return LinearWarmup(warmup_steps, *std::move(schedule), 0);
}

}  // namespace tower
