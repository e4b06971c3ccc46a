// NameList: the distinct names of a kind that a trace has a handful of (event categories, flow
// categories), each numbered by the order it was first seen.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string_view>
#include <unordered_map>

namespace opscope::import {

// A trace has two flow categories ("ac2g", "fwdbwd") and a dozen event categories: a search of
// a short list beats hashing, and every event asks. A hostile trace may have a category of its
// own per event, which made the searches quadratic (issue 40: 100 k flow pairs with a category
// each took 55 s), so past kSearchUpTo names the list is hashed as well, and each name costs
// one hash lookup however many there are. T is std::string (the list owns its names) or
// std::string_view (views into a text that outlives the list); a deque, so that the hashed
// views of owned names stay where they are as the list grows.
template <typename T>
class NameList {
 public:
  static constexpr std::size_t kSearchUpTo = 16;

  // The index of `name`, added at the end when it is new.
  std::size_t index(std::string_view name) {
    if (hashed_.empty()) {
      for (std::size_t i = 0; i < names_.size(); ++i) {
        if (names_[i] == name) return i;
      }
      names_.emplace_back(name);
      if (names_.size() > kSearchUpTo) {
        for (std::size_t i = 0; i < names_.size(); ++i) {
          hashed_.emplace(std::string_view(names_[i]), static_cast<std::uint32_t>(i));
        }
      }
      return names_.size() - 1;
    }
    if (const auto it = hashed_.find(name); it != hashed_.end()) return it->second;
    names_.emplace_back(name);
    hashed_.emplace(std::string_view(names_.back()), static_cast<std::uint32_t>(names_.size() - 1));
    return names_.size() - 1;
  }

  // Whether the names are hashed (more than kSearchUpTo of them): what a test of the linear
  // join asks.
  bool hashed() const { return !hashed_.empty(); }

  std::size_t size() const { return names_.size(); }
  const T& operator[](std::size_t i) const { return names_[i]; }
  auto begin() const { return names_.begin(); }
  auto end() const { return names_.end(); }
  void clear() {
    names_.clear();
    hashed_.clear();
  }

 private:
  std::deque<T> names_;
  std::unordered_map<std::string_view, std::uint32_t> hashed_;
};

}  // namespace opscope::import
