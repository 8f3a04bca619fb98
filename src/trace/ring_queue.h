// A first-in, first-out queue kept in one array whose slots are reused, for
// the records that pass through the sequencer and the iteration finder.
//
// Why not std::deque: libstdc++'s deque keeps 512-byte nodes, so a queue of
// 160-200-byte records allocated and freed a node every two or three records
// (about a tenth of `gpuleak report`'s time, in malloc and free). Here a
// push assigns into a slot that already exists; the array doubles when full
// and shrinks when it has stayed mostly empty, so a burst (a search that
// held 100,000 records) does not keep its memory for the rest of the run.
//
// A popped slot keeps its old value until it is assigned again: callers move
// a value out (front(), then pop_front()) so that what it owned goes with it.
//
// T must be default-constructible and move-assignable. Not thread-safe.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace gpuleak::trace {

template <class T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return slots_.size(); }

  // The i-th oldest element (0 is the front).
  T& operator[](std::size_t i) { return slots_[(head_ + i) & mask_]; }
  const T& operator[](std::size_t i) const { return slots_[(head_ + i) & mask_]; }
  T& front() { return slots_[head_]; }
  const T& front() const { return slots_[head_]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  template <class U>
  void push_back(U&& value) {
    if (size_ == slots_.size()) resize_to(slots_.empty() ? kMinCapacity : 2 * slots_.size());
    slots_[(head_ + size_) & mask_] = std::forward<U>(value);
    ++size_;
  }
  void pop_front() {
    head_ = (head_ + 1) & mask_;
    --size_;
    // Give a burst's memory back once the queue has drained to a sixteenth.
    if (slots_.size() > kShrinkAbove && size_ * 16 < slots_.size()) resize_to(slots_.size() / 4);
  }
  void clear() {
    head_ = 0;
    size_ = 0;
  }

 private:
  static constexpr std::size_t kMinCapacity = 64;        // a power of two
  static constexpr std::size_t kShrinkAbove = 1u << 14;  // slots: small queues never shrink

  void resize_to(std::size_t capacity) {
    std::vector<T> slots(capacity);
    for (std::size_t i = 0; i < size_; ++i) slots[i] = std::move((*this)[i]);
    slots_ = std::move(slots);
    head_ = 0;
    mask_ = capacity - 1;
  }

  std::vector<T> slots_;  // a power of two in size, or empty
  std::size_t head_ = 0;
  std::size_t size_ = 0;
  std::size_t mask_ = 0;
};

}  // namespace gpuleak::trace
