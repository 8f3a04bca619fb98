// A writer of Python pickles (protocol 2) for the memory_viz export: dicts,
// lists, tuples, strings, integers, floats, booleans and None, streamed.
//
// Hand-written because no C++ library in Debian writes pickles, and the
// part of the format needed here is a dozen opcodes
// (https://docs.python.org/3/library/pickle.html, "pickletools" lists
// them).
//
// Use: begin_dict(); key("k"); value...; end_dict(). Containers nest.
#pragma once

#include <cstdint>
#include <ostream>
#include <string_view>

namespace gpuleak::report {

class PickleWriter {
 public:
  explicit PickleWriter(std::ostream& out);

  void begin_dict();
  void end_dict();
  void begin_list();
  void end_list();
  void begin_tuple();
  void end_tuple();
  void key(std::string_view name) { string(name); }
  void string(std::string_view text);
  void integer(std::int64_t value);
  void unsigned_integer(std::uint64_t value);
  void real(double value);
  void boolean(bool value);
  void none();
  // Remembers the object on top of the stack (the one just written) as
  // `index`; memo_get(index) writes it again by reference. Frames shared by
  // thousands of blocks are written once this way, as Python's pickler does.
  void memo_put(std::uint32_t index);
  void memo_get(std::uint32_t index);
  // Ends the pickle (STOP); nothing may be written after it.
  void finish();

 private:
  void byte(std::uint8_t b) { out_.put(static_cast<char>(b)); }
  std::ostream& out_;
};

}  // namespace gpuleak::report
