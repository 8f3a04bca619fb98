// The pprof export: a gzip-compressed profile.proto (github.com/google/pprof,
// proto/profile.proto), which `go tool pprof`, pprof's web UI, Pyroscope
// and most profilers' viewers read.
//
// One sample per (process, site), with four values: the site's growth per
// step, its live bytes and allocations at exit, and its bytes at the peak
// (0 where a view does not have it). `-sample_index` picks the view; the
// default is growth when anything grows, else live bytes. Each sample has
// a numeric `pid` label. Frames are locations with one line each, leaf
// first, as the format wants.
//
// The wire encoding is written here (varints and length-delimited fields):
// a protobuf runtime and its code generator would be a large dependency for
// eight message types, and the encoding is fixed by the protobuf spec.
#include <fmt/format.h>
#include <zlib.h>

#include <array>
#include <map>
#include <stdexcept>
#include <string>

#include "report/exports/flame_stacks.h"
#include "report/exports/writers.h"

namespace gpuleak::report {

namespace {

// Protobuf wire encoding (protobuf.dev/programming-guides/encoding).
class Message {
 public:
  void varint_field(int field, std::uint64_t value) {
    key(field, 0);
    varint(value);
  }
  void int64_field(int field, std::int64_t value) {
    varint_field(field, static_cast<std::uint64_t>(value));
  }
  void bytes_field(int field, const std::string& bytes) {
    key(field, 2);
    varint(bytes.size());
    data_ += bytes;
  }
  void message_field(int field, const Message& m) { bytes_field(field, m.data_); }
  void packed_field(int field, const std::vector<std::uint64_t>& values) {
    Message packed;
    for (std::uint64_t v : values) packed.varint(v);
    bytes_field(field, packed.data_);
  }
  const std::string& data() const { return data_; }

 private:
  void key(int field, int wire_type) {
    varint((static_cast<std::uint64_t>(field) << 3) | wire_type);
  }
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      data_ += static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    data_ += static_cast<char>(v);
  }
  std::string data_;
};

// Field numbers of profile.proto.
enum ProfileField {
  kSampleType = 1,
  kSample = 2,
  kLocation = 4,
  kFunction = 5,
  kStringTable = 6,
  kTimeNanos = 9,
  kPeriodType = 11,
  kPeriod = 12,
  kComment = 13,
  kDefaultSampleType = 14,
};

class StringTable {
 public:
  StringTable() { index(""); }  // index 0 is the empty string, always
  std::int64_t index(const std::string& s) {
    auto [it, inserted] = ids_.try_emplace(s, static_cast<std::int64_t>(strings_.size()));
    if (inserted) strings_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& strings() const { return strings_; }

 private:
  std::map<std::string, std::int64_t> ids_;
  std::vector<std::string> strings_;
};

Message value_type(StringTable& strings, const char* type, const char* unit) {
  Message m;
  m.int64_field(1, strings.index(type));
  m.int64_field(2, strings.index(unit));
  return m;
}

std::string gzip(const std::string& data) {
  z_stream z{};
  // 15 window bits + 16: a gzip header and trailer, as pprof expects.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("cannot start gzip compression");
  }
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("gzip compression failed");
  return out;
}

}  // namespace

void write_pprof(const ProcessList& processes, const ExportOptions& options, std::ostream& out) {
  StringTable strings;
  Message profile;
  // The order of the values in every sample.
  profile.message_field(kSampleType, value_type(strings, "growth_bytes_per_step", "bytes"));
  profile.message_field(kSampleType, value_type(strings, "live_bytes", "bytes"));
  profile.message_field(kSampleType, value_type(strings, "live_allocations", "count"));
  profile.message_field(kSampleType, value_type(strings, "peak_live_bytes", "bytes"));
  constexpr std::size_t kValues = 4;
  const FlameView views[kValues - 1] = {FlameView::kGrowthPerStep, FlameView::kLiveAtExit,
                                        FlameView::kLiveAtPeak};

  std::map<std::string, std::uint64_t> function_ids, location_ids;
  std::vector<Message> functions, locations;
  auto location_of = [&](const FlameFrame& f) {
    std::string key = f.name + '\n' + f.file + '\n' + std::to_string(f.line);
    auto found = location_ids.find(key);
    if (found != location_ids.end()) return found->second;
    std::string function_key = f.name + '\n' + f.file;
    auto [fit, new_function] = function_ids.try_emplace(function_key, functions.size() + 1);
    if (new_function) {
      Message fn;
      fn.varint_field(1, fit->second);
      fn.int64_field(2, strings.index(f.name));
      fn.int64_field(3, strings.index(f.name));
      fn.int64_field(4, strings.index(f.file));
      functions.push_back(fn);
    }
    std::uint64_t id = locations.size() + 1;  // ids are never 0
    Message line;
    line.varint_field(1, fit->second);
    line.int64_field(2, f.line);
    Message loc;
    loc.varint_field(1, id);
    loc.message_field(4, line);
    locations.push_back(loc);
    location_ids.emplace(key, id);
    return id;
  };

  bool any_growth = false;
  for (const analysis::ProcessReport* p : processes) {
    // Samples of one process, keyed by stack, values per view.
    std::map<std::vector<std::uint64_t>, std::array<std::int64_t, kValues>> samples;
    for (std::size_t v = 0; v < kValues - 1; ++v) {
      for (const FlameStack& s : flame_stacks(*p, views[v], options.all_frames)) {
        std::vector<std::uint64_t> ids;
        for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it)
          ids.push_back(location_of(*it));
        auto& values = samples.try_emplace(ids, std::array<std::int64_t, kValues>{}).first->second;
        if (views[v] == FlameView::kGrowthPerStep) {
          values[0] += static_cast<std::int64_t>(s.bytes);
          any_growth = true;
        } else if (views[v] == FlameView::kLiveAtExit) {
          values[1] += static_cast<std::int64_t>(s.bytes);
          values[2] += static_cast<std::int64_t>(s.allocations);
        } else {
          values[3] += static_cast<std::int64_t>(s.bytes);
        }
      }
    }
    for (const auto& [ids, values] : samples) {
      Message sample;
      sample.packed_field(1, ids);
      std::vector<std::uint64_t> packed;
      for (std::int64_t v : values) packed.push_back(static_cast<std::uint64_t>(v));
      sample.packed_field(2, packed);
      Message label;
      label.int64_field(1, strings.index("pid"));
      label.int64_field(3, p->process.pid);
      sample.message_field(3, label);
      profile.message_field(kSample, sample);
    }
  }
  for (const Message& l : locations) profile.message_field(kLocation, l);
  for (const Message& f : functions) profile.message_field(kFunction, f);
  std::uint64_t start_ns = 0;
  for (const analysis::ProcessReport* p : processes) {
    if (start_ns == 0 || p->process.start_unix_ns < start_ns) start_ns = p->process.start_unix_ns;
  }
  profile.int64_field(kTimeNanos, static_cast<std::int64_t>(start_ns));
  profile.message_field(kPeriodType, value_type(strings, "space", "bytes"));
  profile.int64_field(kPeriod, 1);
  profile.int64_field(
      kComment,
      strings.index(fmt::format(
          "{}: GPU memory of {} process(es); growth is the trend per step of each growing site",
          options.producer, processes.size())));
  profile.int64_field(kDefaultSampleType,
                      strings.index(any_growth ? "growth_bytes_per_step" : "live_bytes"));
  // The string table last: every index above is in it by now.
  for (const std::string& s : strings.strings()) profile.bytes_field(kStringTable, s);
  std::string compressed = gzip(profile.data());
  out.write(compressed.data(), static_cast<std::streamsize>(compressed.size()));
}

}  // namespace gpuleak::report
