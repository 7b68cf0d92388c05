// SPDX-License-Identifier: Apache-2.0
// Integers read from the JSON files Tessera writes and reads back (a partition store's
// meta.json, a checkpoint's state): nlohmann's get<T>() turns a float, or an integer T cannot
// hold, into T with undefined behaviour or silently. These throw std::domain_error ("key 'run':
// expected an integer in [...], found 2.5e+52") instead, which each reader reports as
// InvalidInput naming its file.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

template <class T>
T json_integer(const nlohmann::json& value, const char* key) {
  const bool ok = value.is_number_unsigned()
                      ? std::in_range<T>(value.get<std::uint64_t>())
                      : value.is_number_integer() && std::in_range<T>(value.get<std::int64_t>());
  if (!ok) {
    throw std::domain_error(std::string("key '") + key + "': expected an integer in [" +
                            std::to_string(std::numeric_limits<T>::min()) + ", " +
                            std::to_string(std::numeric_limits<T>::max()) + "], found " +
                            value.dump());
  }
  return value.get<T>();
}

// object.at(key) as T (nlohmann's out_of_range when the key is missing).
template <class T>
T json_integer_at(const nlohmann::json& object, const char* key) {
  return json_integer<T>(object.at(key), key);
}

// An array of integers at object.at(key).
template <class T>
std::vector<T> json_integers_at(const nlohmann::json& object, const char* key) {
  const nlohmann::json& array = object.at(key);
  if (!array.is_array()) {
    throw std::domain_error(std::string("key '") + key + "': expected an array, found " +
                            array.dump());
  }
  std::vector<T> out;
  out.reserve(array.size());
  for (const nlohmann::json& value : array) out.push_back(json_integer<T>(value, key));
  return out;
}

}  // namespace tessera
