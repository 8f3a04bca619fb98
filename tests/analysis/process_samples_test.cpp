// processes.jsonl: what `gpuleak run` writes is what `report` reads back, and
// a damaged file is read as far as it is whole (process_samples.h).
#include "analysis/processes/process_samples.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "support/scratch_dir.h"

namespace gpuleak::analysis {
namespace {

TEST(ProcessSamples, what_is_written_reads_back) {
  gpuleak::testing::ScratchDir dir;
  std::string path = dir.file("processes.jsonl");
  {
    ProcessSampleWriter writer(path);
    ASSERT_TRUE(writer.ok());
    writer.write_job(4700, 1000, 2000, true, "");
    writer.write_process({4711, 77, 4700, "pt_data_worker", {"python3", "-c", "x y"}, 1500});
    ProcessSample sample;
    sample.time_ns = 1600;
    sample.alive = {{4700, 'S', 1}, {4711, 'Z', 4700}};
    sample.gpu = {{4700, 0, 1ull << 30}, {4711, 0, std::nullopt}};
    sample.devices = {{0, 3ull << 30, 80ull << 30}};
    sample.other_gpu_pids = {99};
    writer.write_sample(sample);
    writer.write_main_exit(1700, 143);
    writer.write_grace(1800, 1.5, {4711});
  }
  auto job = read_process_samples(path);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->main_pid, 4700);
  EXPECT_EQ(job->start_monotonic_ns, 1000u);
  EXPECT_TRUE(job->nvml_available);
  ASSERT_EQ(job->processes.size(), 1u);
  EXPECT_EQ(job->process(4711)->comm, "pt_data_worker");
  EXPECT_EQ(job->process(4711)->argv.back(), "x y");
  ASSERT_EQ(job->samples.size(), 1u);
  EXPECT_EQ(job->samples[0].alive[1].state, 'Z');
  EXPECT_EQ(job->samples[0].gpu[0].used_bytes, 1ull << 30);
  EXPECT_FALSE(job->samples[0].gpu[1].used_bytes);
  EXPECT_EQ(job->samples[0].other_gpu_pids, std::vector<int>{99});
  EXPECT_EQ(job->main_exit_status, 143);
  EXPECT_EQ(job->alive_after_grace, std::vector<int>{4711});
  EXPECT_DOUBLE_EQ(job->grace_waited_s, 1.5);
  EXPECT_EQ(job->damaged_lines, 0u);
}

TEST(ProcessSamples, damaged_lines_are_skipped_and_counted) {
  gpuleak::testing::ScratchDir dir;
  std::string path = dir.file("processes.jsonl");
  std::ofstream(path) << R"({"record":"job","schema":"gpuleak-processes/1","main_pid":5})"
                         "\n"
                      << R"({"record":"sample","time_ns":10,"alive":[[5,"S",1]]})"
                         "\n"
                      << "{\"record\":\"sample\",\"time_ns\":\n"  // cut by a kill
                      << R"({"record":"sample","time_ns":20,"alive":[[5,"SS",1]]})"
                         "\n"
                      << R"({"record":"sample","time_ns":30,"alive":[["5","S",1]]})"
                         "\n"
                      << R"({"record":"later-kind","x":1})"
                         "\n"
                      << R"({"record":"sample","time_ns":40,"alive":[[5,"Z",1]]})"
                         "\n";
  auto job = read_process_samples(path);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->damaged_lines, 3u);
  ASSERT_EQ(job->samples.size(), 2u);
  EXPECT_EQ(job->samples[1].alive[0].state, 'Z');
}

TEST(ProcessSamples, a_file_without_a_job_record_is_not_process_samples) {
  gpuleak::testing::ScratchDir dir;
  std::string path = dir.file("processes.jsonl");
  std::ofstream(path) << R"({"record":"sample","time_ns":10})"
                         "\n";
  EXPECT_FALSE(read_process_samples(path));
  EXPECT_FALSE(read_process_samples("/nonexistent/processes.jsonl"));
}

}  // namespace
}  // namespace gpuleak::analysis
