// SPDX-License-Identifier: Apache-2.0
// EpochHook<Record>: what training calls after every epoch with its record. A callable that
// returns bool says whether to go on (false: training ends after this epoch, on every rank, as a
// finished training — early stopping); one that returns nothing always goes on. An empty one is
// no callback. The callable must not throw on one rank alone: the other ranks would wait for it.
#pragma once

#include <concepts>
#include <functional>
#include <type_traits>
#include <utility>

namespace tessera {

template <class Record>
class EpochHook {
 public:
  EpochHook() = default;
  template <class F>
  requires(std::invocable<F&, const Record&> && !std::same_as<std::decay_t<F>, EpochHook>)
      EpochHook(F f) {  // NOLINT(google-explicit-constructor): lambdas convert implicitly
    if constexpr (std::is_constructible_v<bool, const F&>) {
      if (!static_cast<bool>(f)) return;  // an empty std::function
    }
    if constexpr (std::is_void_v<std::invoke_result_t<F&, const Record&>>) {
      fn_ = [f = std::move(f)](const Record& r) mutable {
        f(r);
        return true;
      };
    } else {
      fn_ = [f = std::move(f)](const Record& r) mutable { return static_cast<bool>(f(r)); };
    }
  }

  explicit operator bool() const { return static_cast<bool>(fn_); }
  // true: go on; false: stop after this epoch.
  bool operator()(const Record& record) const { return fn_(record); }

 private:
  std::function<bool(const Record&)> fn_;
};

}  // namespace tessera
