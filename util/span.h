// Span<T>: a pointer and a length (C++17 has no std::span). Views, never owns.
#ifndef TOWER_UTIL_SPAN_H_
#define TOWER_UTIL_SPAN_H_

#include <cstddef>
#include <initializer_list>
#include <vector>

#include "util/check.h"

namespace tower {

template <typename T>
class Span {
 public:
  constexpr Span() = default;
  constexpr Span(T* data, size_t size) : data_(data), size_(size) {}
  template <typename U>
  Span(const std::vector<U>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  template <typename U>
  Span(std::vector<U>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  template <typename U, size_t N>
  Span(U (&array)[N]) : data_(array), size_(N) {}  // NOLINT
  // For parameters only, as absl::Span: f({&a, &b}) keeps the list alive for the call.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  Span(std::initializer_list<std::remove_const_t<T>> list)  // NOLINT
      : data_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) const {
    if (__builtin_expect(i >= size_, 0)) {
      internal::IndexOutOfRange("Span", static_cast<long long>(i), static_cast<long long>(size_));
    }
    return data_[i];
  }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tower

#endif  // TOWER_UTIL_SPAN_H_
