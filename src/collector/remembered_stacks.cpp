#include "collector/remembered_stacks.h"

#include <pthread.h>

#include <algorithm>
#include <new>

#include "collector/native_unwinder.h"

namespace gpuleak::collector {

thread_local RememberedStacks* t_remembered_stacks = nullptr;

namespace {

// Learning is judged over this many captures at a place. A learned stack
// saves a plain unwind (about 100 ns) each time it is reused and costs
// about ten of them to learn: where fewer than four reuses came per stack
// learned, the place stops learning for kPausedWindows windows (it keeps
// reusing what it has).
constexpr std::uint32_t kWindowCaptures = 512;
constexpr std::uint32_t kReusesPerLearned = 4;
constexpr std::uint32_t kPausedWindows = 8;

pthread_key_t g_memory_key;
pthread_once_t g_memory_key_once = PTHREAD_ONCE_INIT;
bool g_memory_key_ok = false;

thread_local bool t_memory_unavailable = false;

void free_thread_memory(void* memory) {
  // Runs on the exiting thread: captures made later during its exit (by
  // other destructors) are unwound, without a new memory to leak.
  if (t_remembered_stacks == memory) t_remembered_stacks = nullptr;
  t_memory_unavailable = true;
  delete static_cast<RememberedStacks*>(memory);
}

void make_memory_key() {
  g_memory_key_ok = pthread_key_create(&g_memory_key, free_thread_memory) == 0;
}

// This thread's memory, made on first use. Null when it cannot be made or the
// thread's stack bounds are unknown (nothing is remembered then).
RememberedStacks* thread_memory() {
  if (t_remembered_stacks) return t_remembered_stacks;
  // Asking again would read /proc/self/maps on every capture (the main
  // thread's stack bounds come from there).
  if (t_memory_unavailable) return nullptr;
  t_memory_unavailable = true;
  pthread_once(&g_memory_key_once, make_memory_key);
  if (!g_memory_key_ok) return nullptr;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return nullptr;
  void* low = nullptr;
  size_t size = 0;
  int got = pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  if (got != 0 || size == 0) return nullptr;
  auto* memory = new (std::nothrow) RememberedStacks;
  if (!memory) return nullptr;
  memory->stack_low = reinterpret_cast<std::uintptr_t>(low);
  memory->stack_high = memory->stack_low + size;
  if (pthread_setspecific(g_memory_key, memory) != 0) {
    delete memory;
    return nullptr;
  }
  t_remembered_stacks = memory;
  t_memory_unavailable = false;
  return memory;
}

// Holds the memory for one capture; a capture from a signal handler on this
// thread meanwhile finds it busy and unwinds plainly.
class Using {
 public:
  explicit Using(RememberedStacks* memory) : memory_(memory && !memory->busy ? memory : nullptr) {
    if (memory_) {
      memory_->busy = true;
      std::atomic_signal_fence(std::memory_order_seq_cst);
    }
  }
  ~Using() {
    if (memory_) {
      std::atomic_signal_fence(std::memory_order_seq_cst);
      memory_->busy = false;
    }
  }
  RememberedStacks* get() const { return memory_; }

 private:
  RememberedStacks* memory_;
};

RememberedPlace* find_place(RememberedStacks& m, std::uintptr_t frame_address,
                            std::uintptr_t return_address, int max_frames) {
  for (RememberedPlace& p : m.places) {
    if (p.in_use && p.frame_address == frame_address && p.return_address == return_address &&
        p.max_frames == max_frames)
      return &p;
  }
  return nullptr;
}

void drop_candidate(RememberedStacks& m, RememberedPlace& p, int c) {
  m.stacks[p.entries[c]].count = 0;
  m.stacks[p.entries[c]].place = -1;
  m.stacks[p.entries[c]].stack_id = 0;
  --p.candidates;
  p.entries[c] = p.entries[p.candidates];
  p.split_ips[c] = p.split_ips[p.candidates];
}

void forget_place(RememberedStacks& m, RememberedPlace& p) {
  while (p.candidates > 0) drop_candidate(m, p, p.candidates - 1);
  p = RememberedPlace{};
}

// The place for this capture, made (in place of the least recently used
// one, when all are taken) if it is new.
RememberedPlace& place_for(RememberedStacks& m, std::uintptr_t frame_address,
                           std::uintptr_t return_address, int max_frames) {
  if (RememberedPlace* p = find_place(m, frame_address, return_address, max_frames)) return *p;
  RememberedPlace* chosen = &m.places[0];
  for (RememberedPlace& p : m.places) {
    if (!p.in_use) {
      chosen = &p;
      break;
    }
    if (p.last_used < chosen->last_used) chosen = &p;
  }
  forget_place(m, *chosen);
  chosen->in_use = true;
  chosen->frame_address = frame_address;
  chosen->return_address = return_address;
  chosen->max_frames = max_frames;
  chosen->last_used = ++m.clock;
  return *chosen;
}

// A free entry, or the least recently used one (taken from its place).
int free_entry(RememberedStacks& m) {
  int chosen = 0;
  for (int i = 0; i < kMaxRememberedStacks; ++i) {
    if (m.stacks[i].count == 0) return i;
    if (m.stacks[i].last_used < m.stacks[chosen].last_used) chosen = i;
  }
  RememberedPlace& owner = m.places[m.stacks[chosen].place];
  for (int c = 0; c < owner.candidates; ++c) {
    if (owner.entries[c] == chosen) {
      drop_candidate(m, owner, c);
      break;
    }
  }
  m.stacks[chosen].count = 0;
  m.stacks[chosen].stack_id = 0;
  return chosen;
}

bool same_slot(const StackSlot& a, const StackSlot& b) {
  return a.address == b.address && a.ip == b.ip;
}

// Adds the stack in entry `index` to `place`, moving the split nearer when
// it differs from the others earlier. Returns false (the entry stays free)
// when it cannot be told apart from them by one slot.
bool add_candidate(RememberedStacks& m, RememberedPlace& place, int index) {
  RememberedStack& e = m.stacks[index];
  if (place.candidates == 0) {
    place.split = e.count;
  } else {
    const RememberedStack& first = m.stacks[place.entries[0]];
    int common = 0;
    int shortest = std::min(first.count, e.count);
    while (common < shortest && same_slot(first.slots[common], e.slots[common])) ++common;
    if (common == e.count) return false;  // the same stack, or a part of one remembered
    int split = std::min(place.split, common);
    // Every candidate needs a slot at the split, at one address.
    if (first.count <= split || first.slots[split].address != e.slots[split].address) return false;
    if (split < place.split) {
      for (int c = place.candidates; c-- > 0;) {
        const RememberedStack& other = m.stacks[place.entries[c]];
        if (other.count <= split || other.slots[split].address != first.slots[split].address)
          drop_candidate(m, place, c);
      }
      place.split = split;
      for (int c = 0; c < place.candidates; ++c)
        place.split_ips[c] = m.stacks[place.entries[c]].slots[split].ip;
    }
    if (place.candidates == 0) place.split = e.count;
  }
  int c = place.candidates++;
  place.entries[c] = static_cast<std::uint8_t>(index);
  place.split_ips[c] = place.split < e.count ? e.slots[place.split].ip : 0;
  e.place = static_cast<int>(&place - m.places);
  e.last_used = ++m.clock;
  return true;
}

std::uint64_t hash_stack(const std::uint64_t* frames, int count) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(count);
  for (int i = 0; i < count; ++i) h = (h ^ frames[i]) * 0x100000001b3ull;
  // The low bits of a product depend only on the low bits of what went in,
  // and return addresses of neighbouring call sites differ above them.
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return h ? h : 1;
}

}  // namespace

void remember_stack_id(const RememberedHit& hit, std::uint32_t stack_id) {
  if (hit.entry < 0 || hit.entry >= kMaxRememberedStacks) return;
  Using use(t_remembered_stacks);
  RememberedStacks* m = use.get();
  if (!m) return;
  RememberedStack& e = m->stacks[hit.entry];
  if (e.count > 0 && e.last_used == hit.stamp) e.stack_id = stack_id;
}

bool should_learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address, int max_frames,
                        const std::uint64_t* frames, int count) {
  Using use(thread_memory());
  RememberedStacks* m = use.get();
  if (!m || count <= 0 || count > kMaxRememberedFrames) return false;
  RememberedPlace& place = place_for(*m, frame_address, return_address, max_frames);
  place.last_used = ++m->clock;
  ++place.misses;
  if (place.hits + place.misses >= kWindowCaptures) {
    if (place.paused_windows > 0) {
      --place.paused_windows;
    } else if (place.learned * kReusesPerLearned > place.hits) {
      place.paused_windows = kPausedWindows;
    }
    place.hits = place.misses = place.learned = 0;
  }
  if (place.paused_windows > 0) return false;
  // At a place that remembers stacks already, a new one is learned at
  // once (the place is a loop's; the economy above stops what does not
  // pay). At a new place, the second time a stack is seen: a one-off is
  // not worth the slower walk.
  if (place.candidates > 0) return true;
  std::uint64_t h = hash_stack(frames, count);
  std::uint64_t& seen = place.seen[h >> 58];
  if (seen == h) {
    seen = 0;
    return true;
  }
  seen = h;
  return false;
}

[[gnu::noinline]] int learn_stack(std::uintptr_t frame_address, std::uintptr_t return_address,
                                  std::uint64_t* frames, int max_frames) {
  unw_context_t context;
  unw_cursor_t cursor;
  if (unw_getcontext(&context) != 0 || unw_init_local(&cursor, &context) != 0) return 0;
  StackSlot walked[kMaxNativeFrames + kOwnFrames];
  int count = 0;
  int limit = max_frames + kOwnFrames;
  do {
    unw_word_t ip = 0, sp = 0;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0)
      break;
    // A frame's return address sits just below its caller's stack pointer.
    walked[count++] = StackSlot{static_cast<std::uintptr_t>(sp) - sizeof(std::uint64_t), ip};
  } while (count < limit && unw_step(&cursor) > 0);

  int first = 0;
  while (first < count && is_collector_frame(walked[first].ip)) ++first;
  int kept = std::min(count - first, max_frames);
  for (int i = 0; i < kept; ++i) frames[i] = walked[first + i].ip;

  Using use(t_remembered_stacks);
  RememberedStacks* m = use.get();
  if (!m || kept <= 0 || kept > kMaxRememberedFrames) return kept;
  // Remembered only when every slot lies in this thread's stack, above the
  // capture, and holds the return address the walk found there (a signal
  // frame, for one, does not).
  for (int i = 0; i < kept; ++i) {
    const StackSlot& slot = walked[first + i];
    if (slot.address < frame_address - sizeof(std::uint64_t) || slot.address < m->stack_low ||
        slot.address + sizeof(std::uint64_t) > m->stack_high ||
        // A stack slot's address, read back to check it still holds the return address.
        // NOLINTNEXTLINE(performance-no-int-to-ptr)
        *reinterpret_cast<const std::uint64_t*>(slot.address) != slot.ip)
      return kept;
  }
  RememberedPlace* place = find_place(*m, frame_address, return_address, max_frames);
  if (!place) return kept;
  int index = free_entry(*m);
  RememberedStack& e = m->stacks[index];
  for (int i = 0; i < kept; ++i) e.slots[i] = walked[first + i];
  e.count = kept;
  e.stack_id = 0;
  if (!add_candidate(*m, *place, index)) {
    e.count = 0;
    e.place = -1;
    return kept;
  }
  ++place->learned;
  return kept;
}

}  // namespace gpuleak::collector
