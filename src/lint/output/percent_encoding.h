// Percent-encoding (RFC 3986's "%XX", upper-case hex) of the bytes a format
// reserves: GitHub's workflow commands reserve a few ('%', CR, LF, and in
// properties ':' and ','), a URI reference everything but its unreserved
// characters. One encoder; each output says which bytes stay as they are.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace gpuleak::lint {

// `text` with every byte for which `stays(byte)` is false written as %XX.
std::string percent_encode(std::string_view text, bool (*stays)(unsigned char));

}  // namespace gpuleak::lint
