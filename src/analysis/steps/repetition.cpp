#include "analysis/steps/repetition.h"

#include <algorithm>
#include <array>
#include <bit>
#include <unordered_map>
#include <vector>

namespace gpuleak::analysis {

namespace {

// The set of keys in one piece, as a fixed-size signature: each key sets one
// of 1,024 bits. Two different keys rarely share a bit in a piece of a few
// dozen distinct keys, so the Jaccard similarity of signatures is close to
// that of the sets, at a fixed cost per piece.
class KeySignature {
 public:
  void add(std::uint64_t key) {
    std::uint64_t h = key * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    unsigned bit = static_cast<unsigned>(h & (kBits - 1));
    words_[bit / 64] |= std::uint64_t{1} << (bit % 64);
  }
  void clear() { words_.fill(0); }
  bool empty() const {
    return std::all_of(words_.begin(), words_.end(), [](std::uint64_t w) { return w == 0; });
  }
  double similarity(const KeySignature& other) const {
    unsigned both = 0, either = 0;
    for (std::size_t i = 0; i < words_.size(); ++i) {
      both += static_cast<unsigned>(std::popcount(words_[i] & other.words_[i]));
      either += static_cast<unsigned>(std::popcount(words_[i] | other.words_[i]));
    }
    return either == 0 ? 1.0 : static_cast<double>(both) / either;  // two empty pieces are alike
  }

 private:
  static constexpr unsigned kBits = 1024;
  std::array<std::uint64_t, kBits / 64> words_{};
};

double quantile_of(std::vector<double>& values, double q) {
  auto k = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k), values.end());
  return values[k];
}

struct Judged {
  double similarity = 0;
  std::size_t occurrences = 0, first = 0, last = 0;
};

std::optional<Judged> judge(std::span<const std::uint64_t> keys, std::uint64_t anchor,
                            double quantile) {
  Judged j;
  KeySignature previous, current;
  bool have_previous = false, in_piece = false;
  std::vector<double> similarities;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] != anchor) {
      if (in_piece) current.add(keys[i]);
      continue;
    }
    if (j.occurrences == 0) j.first = i;
    j.last = i;
    ++j.occurrences;
    if (in_piece) {
      if (have_previous) similarities.push_back(previous.similarity(current));
      previous = current;
      have_previous = true;
    }
    current.clear();
    in_piece = true;
  }
  if (similarities.size() < 2) return std::nullopt;
  j.similarity = quantile_of(similarities, quantile);
  return j;
}

}  // namespace

std::optional<double> piece_similarity(std::span<const std::uint64_t> keys, std::uint64_t anchor,
                                       double quantile) {
  auto j = judge(keys, anchor, quantile);
  if (!j) return std::nullopt;
  return j->similarity;
}

std::optional<Repetition> find_repetition(std::span<const std::uint64_t> keys,
                                          const RepetitionOptions& options) {
  std::unordered_map<std::uint64_t, std::size_t> counts;
  for (std::uint64_t k : keys) ++counts[k];
  std::vector<std::pair<std::size_t, std::uint64_t>> candidates;
  for (const auto& [key, count] : counts) {
    if (count >= options.min_occurrences) candidates.emplace_back(count, key);
  }
  // Most frequent first; equal counts in key order, so the answer does not
  // depend on the hash map's order.
  std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (candidates.size() > options.max_candidates) candidates.resize(options.max_candidates);

  std::optional<Repetition> best;
  for (const auto& [count, key] : candidates) {
    // Candidates come most frequent first: once one passed, a rarer key can
    // only win on a tie in occurrences.
    if (best && count < best->occurrences) break;
    auto j = judge(keys, key, options.similarity_quantile);
    if (!j || j->similarity < options.min_similarity) continue;
    Repetition r;
    r.anchor = key;
    r.occurrences = j->occurrences;
    r.first_index = j->first;
    r.last_index = j->last;
    r.similarity = j->similarity;
    r.mean_piece_length =
        static_cast<double>(j->last - j->first) / static_cast<double>(j->occurrences - 1);
    if (options.max_pieces_since_last > 0) {
      double since_last = static_cast<double>(keys.size() - 1 - r.last_index);
      if (since_last > options.max_pieces_since_last * std::max(1.0, r.mean_piece_length)) continue;
    }
    if (!best || r.similarity > best->similarity ||
        (r.similarity == best->similarity && r.first_index < best->first_index)) {
      best = r;
    }
  }
  return best;
}

}  // namespace gpuleak::analysis
