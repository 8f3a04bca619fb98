// JSON text that carries any bytes. Strings from traced programs, from /proc
// and from the file system are bytes, not always UTF-8 (a Latin-1 argument,
// a path from another locale); nlohmann's dump() refuses those or replaces
// them. Here every byte that is not part of valid UTF-8 is written as the
// escape \udcXX (XX its value), the PEP 383 "surrogateescape" convention:
// in Python, os.fsencode(value) gives back the original bytes; JavaScript
// and most parsers read it as a lone surrogate; valid UTF-8 is written as
// it is. The layout matches nlohmann's dump(indent).
//
// Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace gpuleak::report {

// `indent` < 0: compact, as dump() with no argument.
std::string json_text(const nlohmann::json& value, int indent = -1);

// One string as a JSON string literal, quotes included.
void append_json_string(std::string& out, std::string_view bytes);

// Length of the valid UTF-8 sequence that starts at text[at] (1 to 4), or 0
// when the byte there starts none (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
std::size_t utf8_sequence_bytes(std::string_view text, std::size_t at);

}  // namespace gpuleak::report
