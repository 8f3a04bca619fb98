#include "collector/event_items.h"

#include <cstring>
#include <type_traits>

#include "trace/codec.h"

namespace gpuleak::collector {

namespace {

enum class ItemKind : std::uint8_t { kEncoded = 0, kAlloc = 1, kFree = 2 };

static_assert(std::is_trivially_copyable_v<trace::AllocRecord>);
static_assert(std::is_trivially_copyable_v<trace::FreeRecord>);

template <class T>
char* put(char* out, const T& value) {
  std::memcpy(out, &value, sizeof value);
  return out + sizeof value;
}

template <class T>
const char* get(const char* in, T& value) {
  std::memcpy(&value, in, sizeof value);
  return in + sizeof value;
}

// Reads one record struct at `at` (with `left` bytes after it) and appends
// its encoding to `out`.
template <class Event>
bool translate_event(const char*& at, std::size_t left,
                     std::size_t (*encode)(const Event&, std::uint8_t*), std::string& out) {
  Event event;
  if (left < sizeof event) return false;
  at = get(at, event);
  std::uint8_t encoded[trace::kMaxEventBytes];
  out.append(reinterpret_cast<const char*>(encoded), encode(event, encoded));
  return true;
}

}  // namespace

char* write_encoded_item(char* out, std::string_view encoded, std::uint32_t records) {
  out = put(out, ItemKind::kEncoded);
  out = put(out, records);
  out = put(out, static_cast<std::uint32_t>(encoded.size()));
  std::memcpy(out, encoded.data(), encoded.size());
  return out + encoded.size();
}

char* write_alloc_item(char* out, const trace::AllocRecord& record) {
  return put(put(out, ItemKind::kAlloc), record);
}

char* write_free_item(char* out, const trace::FreeRecord& record) {
  return put(put(out, ItemKind::kFree), record);
}

bool translate_items(std::string_view items, std::string& out, std::uint32_t& records) {
  const char* at = items.data();
  const char* end = at + items.size();
  while (at < end) {
    ItemKind kind;
    at = get(at, kind);
    std::size_t left = static_cast<std::size_t>(end - at);
    switch (kind) {
      case ItemKind::kEncoded: {
        std::uint32_t count = 0, bytes = 0;
        if (left < 8) return false;
        at = get(get(at, count), bytes);
        if (bytes > left - 8) return false;
        out.append(at, bytes);
        at += bytes;
        records += count;
        break;
      }
      case ItemKind::kAlloc:
        if (!translate_event<trace::AllocRecord>(at, left, trace::encode_alloc, out)) return false;
        ++records;
        break;
      case ItemKind::kFree:
        if (!translate_event<trace::FreeRecord>(at, left, trace::encode_free, out)) return false;
        ++records;
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace gpuleak::collector
