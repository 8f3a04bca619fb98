// Finding the unit that repeats in a sequence of keys: the body of a loop.
//
// A loop body makes (nearly) the same calls each time round, so the keys of
// its events repeat. find_repetition picks an *anchor*: a key that occurs
// once per time round. The pieces of the sequence between two occurrences of
// a good anchor look alike (the same keys in each), whatever their length:
// an iteration may allocate more for a longer batch, a few allocations may
// depend on the data, and the loop may take longer some time round.
//
// How an anchor is judged: the sets of keys in consecutive pieces are
// compared (Jaccard similarity, each set as a 1,024-bit signature, so a
// piece costs the same whatever its length); the anchor must keep that
// similarity high for almost every pair (a low quantile, not the mean, so
// that a key inside an inner loop, whose pieces alternate between "the inner
// body" and "the inner body and the rest", fails when the rest comes often).
// Among the keys that pass, the one that occurs most often wins: the finest
// unit that still repeats whole. Keys that occur inside every piece several
// times, or only in some pieces, never pass.
//
// Pure functions over a span; no state, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace gpuleak::analysis {

struct RepetitionOptions {
  // The anchor must occur at least this often (pieces = occurrences - 1).
  std::size_t min_occurrences = 8;
  // The low quantile of the similarity of consecutive pieces must reach this.
  double min_similarity = 0.6;
  double similarity_quantile = 0.1;
  // Only the most frequent keys are tried as anchors.
  std::size_t max_candidates = 48;
  // The repetition must still be going on at the end of the sequence: its
  // last occurrence no further from the end than this many mean pieces
  // (a loop that ended long ago is not the loop the program is in now).
  // Zero: no such condition.
  double max_pieces_since_last = 0;
};

struct Repetition {
  std::uint64_t anchor = 0;
  std::size_t occurrences = 0;
  std::size_t first_index = 0;  // index of the first and last occurrence
  std::size_t last_index = 0;
  double similarity = 0;         // the low quantile that was judged
  double mean_piece_length = 0;  // keys from one occurrence to the next
};

// The repetition with the finest anchor that passes, or nullopt when no key
// repeats whole (no loop, noise, or too few rounds yet).
std::optional<Repetition> find_repetition(std::span<const std::uint64_t> keys,
                                          const RepetitionOptions& options = {});

// How alike the pieces between occurrences of `anchor` are (the low
// quantile of RepetitionOptions), or nullopt with fewer than three pieces.
std::optional<double> piece_similarity(std::span<const std::uint64_t> keys, std::uint64_t anchor,
                                       double quantile);

}  // namespace gpuleak::analysis
