#include "report/exports/pickle_writer.h"

#include <cstring>

namespace gpuleak::report {

namespace {
// Opcodes of protocol 2 (names as pickletools gives them).
constexpr std::uint8_t kProto = 0x80;
constexpr std::uint8_t kStop = '.';
constexpr std::uint8_t kMark = '(';
constexpr std::uint8_t kEmptyDict = '}';
constexpr std::uint8_t kSetItems = 'u';
constexpr std::uint8_t kEmptyList = ']';
constexpr std::uint8_t kAppends = 'e';
constexpr std::uint8_t kTuple = 't';
constexpr std::uint8_t kBinUnicode = 'X';
constexpr std::uint8_t kBinInt = 'J';
constexpr std::uint8_t kLong1 = 0x8a;
constexpr std::uint8_t kBinFloat = 'G';
constexpr std::uint8_t kNewTrue = 0x88;
constexpr std::uint8_t kNewFalse = 0x89;
constexpr std::uint8_t kNone = 'N';
constexpr std::uint8_t kLongBinPut = 'r';
constexpr std::uint8_t kLongBinGet = 'j';
}  // namespace

PickleWriter::PickleWriter(std::ostream& out) : out_(out) {
  byte(kProto);
  byte(2);
}

// A dict is EMPTY_DICT, MARK, key, value, ..., SETITEMS: the items between
// the mark and SETITEMS go into the dict below the mark.
void PickleWriter::begin_dict() {
  byte(kEmptyDict);
  byte(kMark);
}
void PickleWriter::end_dict() { byte(kSetItems); }
void PickleWriter::begin_list() {
  byte(kEmptyList);
  byte(kMark);
}
void PickleWriter::end_list() { byte(kAppends); }
void PickleWriter::begin_tuple() { byte(kMark); }
void PickleWriter::end_tuple() { byte(kTuple); }

void PickleWriter::string(std::string_view text) {
  byte(kBinUnicode);
  auto n = static_cast<std::uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) byte(static_cast<std::uint8_t>(n >> (8 * i)));
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
}

void PickleWriter::integer(std::int64_t value) {
  if (value >= INT32_MIN && value <= INT32_MAX) {
    byte(kBinInt);
    auto v = static_cast<std::uint32_t>(static_cast<std::int32_t>(value));
    for (int i = 0; i < 4; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
    return;
  }
  // LONG1: a little-endian two's complement of 8 bytes fits every int64.
  byte(kLong1);
  byte(8);
  auto v = static_cast<std::uint64_t>(value);
  for (int i = 0; i < 8; ++i) byte(static_cast<std::uint8_t>(v >> (8 * i)));
}

void PickleWriter::unsigned_integer(std::uint64_t value) {
  if (value <= static_cast<std::uint64_t>(INT64_MAX)) {
    integer(static_cast<std::int64_t>(value));
    return;
  }
  // Above INT64_MAX (a device address never is, but a crafted trace may):
  // nine bytes keep the sign bit clear.
  byte(kLong1);
  byte(9);
  for (int i = 0; i < 8; ++i) byte(static_cast<std::uint8_t>(value >> (8 * i)));
  byte(0);
}

void PickleWriter::real(double value) {
  byte(kBinFloat);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  for (int i = 7; i >= 0; --i) byte(static_cast<std::uint8_t>(bits >> (8 * i)));  // big-endian
}

void PickleWriter::boolean(bool value) { byte(value ? kNewTrue : kNewFalse); }
void PickleWriter::none() { byte(kNone); }
void PickleWriter::finish() { byte(kStop); }

void PickleWriter::memo_put(std::uint32_t index) {
  byte(kLongBinPut);
  for (int i = 0; i < 4; ++i) byte(static_cast<std::uint8_t>(index >> (8 * i)));
}

void PickleWriter::memo_get(std::uint32_t index) {
  byte(kLongBinGet);
  for (int i = 0; i < 4; ++i) byte(static_cast<std::uint8_t>(index >> (8 * i)));
}

}  // namespace gpuleak::report
