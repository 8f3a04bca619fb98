// Small helpers for the words every reporter writes: a count with its noun,
// and text cut to a width. One definition, so that text, job and HTML
// reports say "1 process" and cut "..." the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuleak::report {

// "1 allocation", "3 allocations".
std::string plural(std::uint64_t n, std::string_view one, std::string_view many);

// `text` cut to at most `max_chars` bytes, ending in "..." when cut, never
// inside a UTF-8 character.
std::string shortened(std::string text, std::size_t max_chars);

}  // namespace gpuleak::report
