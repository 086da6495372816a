// Result<T>: the value of a fallible construction, or the error that prevented it.
//
// libstdc++ 12 (Debian bookworm) has no std::expected, so this is a small stand-in with the
// same shape (has_value, value, error, operator bool, operator*, operator->). It never throws:
// reading value() of an error is a programming error caught by an assert in debug builds.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace rondel::core {

// Error carries a human-readable message; callers add context (file:line:col, backend id).
struct Error {
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}      // NOLINT: implicit
  Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT: implicit

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  T& value() & noexcept { assert(has_value()); return *std::get_if<0>(&v_); }
  const T& value() const& noexcept { assert(has_value()); return *std::get_if<0>(&v_); }
  T&& value() && noexcept { assert(has_value()); return std::move(*std::get_if<0>(&v_)); }
  T& operator*() & noexcept { return value(); }
  const T& operator*() const& noexcept { return value(); }
  T* operator->() noexcept { return &value(); }
  const T* operator->() const noexcept { return &value(); }

  const Error& error() const noexcept { assert(!has_value()); return *std::get_if<1>(&v_); }

 private:
  std::variant<T, Error> v_;
};

// Makes an Error result from a message: `return fail("duplicate backend id " + id);`.
inline Error fail(std::string message) { return Error{std::move(message)}; }

}  // namespace rondel::core
