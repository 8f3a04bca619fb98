# Turns the HTML report's assets into one C++ header in the build tree:
# uPlot's, d3's and d3-flame-graph's script and style (from node_modules,
# pinned by package-lock.json)
# and the page's own script and style (report.js, report.css beside this
# file). Run by the build (see html_assets.cmake), never by hand:
#
#   cmake -DOUTPUT=<header> -DUPLOT_JS=<file> -DUPLOT_CSS=<file> -DD3_JS=<file>
#         -DFLAMEGRAPH_JS=<file> -DFLAMEGRAPH_CSS=<file>
#         -DPAGE_JS=<file> -DPAGE_CSS=<file> -P embed_assets.cmake
#
# Each asset becomes a string literal made only of \xHH escapes, so no byte
# of it can end the literal early. Scripts also get the base64 SHA-256 that a
# Content-Security-Policy names to allow exactly them. An asset that would
# end its own <script>/<style> element early is refused here, at build time.

foreach(var OUTPUT UPLOT_JS UPLOT_CSS D3_JS FLAMEGRAPH_JS FLAMEGRAPH_CSS PAGE_JS PAGE_CSS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed_assets.cmake: -D${var}=... is missing")
  endif()
endforeach()

set(base64_alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

# hex_to_base64(<hex digits> <out var>): standard base64 with padding.
function(hex_to_base64 hex out_var)
  string(LENGTH "${hex}" length)
  set(result "")
  set(offset 0)
  while(offset LESS length)
    math(EXPR left "${length} - ${offset}")
    if(left GREATER_EQUAL 6)
      set(take 6)
    else()
      set(take ${left})
    endif()
    string(SUBSTRING "${hex}" ${offset} ${take} chunk)
    math(EXPR offset "${offset} + ${take}")
    # Pad the group to three bytes; the padding becomes '='.
    set(padded "${chunk}")
    string(LENGTH "${padded}" padded_length)
    while(padded_length LESS 6)
      string(APPEND padded "0")
      math(EXPR padded_length "${padded_length} + 1")
    endwhile()
    math(EXPR group "0x${padded}")
    math(EXPR bytes "${take} / 2")
    math(EXPR chars "${bytes} + 1")
    foreach(shift 18 12 6 0)
      math(EXPR index "(${group} >> ${shift}) & 63")
      if(chars GREATER 0)
        string(SUBSTRING "${base64_alphabet}" ${index} 1 letter)
        string(APPEND result "${letter}")
      else()
        string(APPEND result "=")
      endif()
      math(EXPR chars "${chars} - 1")
    endforeach()
  endwhile()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

# embed(<C++ name> <file> <closing tag that must not occur>)
set(body "")
function(embed name file closing_tag)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "embed_assets.cmake: ${file} does not exist (run scripts/setup)")
  endif()
  file(READ "${file}" text)
  string(TOLOWER "${text}" lowered)
  foreach(forbidden "${closing_tag}" "<!--")
    string(FIND "${lowered}" "${forbidden}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "embed_assets.cmake: ${file} contains '${forbidden}', which would "
                          "end its inline element early; it cannot be inlined as it is")
    endif()
  endforeach()

  file(READ "${file}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  set(literal "")
  set(offset 0)
  while(offset LESS hex_length)
    string(SUBSTRING "${hex}" ${offset} 240 chunk)
    string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" chunk "${chunk}")
    string(APPEND literal "    \"${chunk}\"\n")
    math(EXPR offset "${offset} + 240")
  endwhile()
  if(literal STREQUAL "")
    set(literal "    \"\"\n")
  endif()

  get_filename_component(file_name "${file}" NAME)
  string(APPEND body "// ${file_name}, ${size} bytes.\n")
  string(APPEND body "inline constexpr char ${name}Text[] =\n${literal};\n")
  string(APPEND body "inline constexpr std::string_view ${name}{${name}Text, ${size}};\n")
  if(closing_tag STREQUAL "</script")
    file(SHA256 "${file}" digest)
    hex_to_base64("${digest}" digest_base64)
    string(APPEND body "inline constexpr std::string_view ${name}Sha256{\"${digest_base64}\"};\n")
  endif()
  string(APPEND body "\n")
  set(body "${body}" PARENT_SCOPE)
endfunction()

embed(kUplotJs "${UPLOT_JS}" "</script")
embed(kUplotCss "${UPLOT_CSS}" "</style")
embed(kD3Js "${D3_JS}" "</script")
embed(kFlamegraphJs "${FLAMEGRAPH_JS}" "</script")
embed(kFlamegraphCss "${FLAMEGRAPH_CSS}" "</style")
embed(kPageJs "${PAGE_JS}" "</script")
embed(kPageCss "${PAGE_CSS}" "</style")

set(header "// Generated at build time by src/report/html/embed_assets.cmake. Do not edit,
// do not commit: it holds uPlot (npm, node_modules) and src/report/html/*.
#pragma once

#include <string_view>

namespace gpuleak::report::html_assets {

${body}}  // namespace gpuleak::report::html_assets
")

# Rewrite only on change, so dependants do not rebuild for nothing.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" previous)
  if(previous STREQUAL header)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${header}")
