// TraceWriter: events from two threads land in a valid Chrome-trace JSON (parsed by Python's json),
// begin/end balanced per thread, overflow counted not reallocated, null writer records nothing.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <thread>

#include "nostrum/log/trace.hpp"
#include "test_paths.hpp"

using nostrum::log::TraceScope;
using nostrum::log::TraceWriter;

TEST_CASE("trace events from several threads form valid Chrome-trace JSON", "[log]") {
  const auto dir = nostrum::testing::scratch_dir("trace");
  TraceWriter trace(3, 1000);
  trace.name_thread(0, "main");
  trace.name_thread(1, "allreduce \"comm\"");
  std::thread comm([&] {
    for (int i = 0; i < 50; ++i) {
      TraceScope s(&trace, "allreduce", "comm", 1);
    }
  });
  for (int i = 0; i < 50; ++i) {
    TraceScope s(&trace, "layer1.0.conv1", "forward", 0);
    trace.instant("bucket ready", "comm", 0);
  }
  comm.join();
  CHECK(trace.size() == 250);
  const std::string path = TraceWriter::path_for_rank((dir / "trace.json").string(), trace.rank());
  CHECK(path == (dir / "trace.rank3.json").string());
  trace.write(path);
  // Python parses it and checks the structure Perfetto needs.
  const std::string command = nostrum::testing::torch_python() + " " +
                              nostrum::testing::source_dir() + "/tests/log/trace_check.py " + path +
                              " 3 250 100 'allreduce \"comm\"'";
  CHECK(std::system(command.c_str()) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a full trace buffer drops and counts events and a null writer records nothing",
          "[log]") {
  TraceWriter trace(0, 4);
  for (int i = 0; i < 10; ++i) trace.instant("x", "y", 0);
  CHECK(trace.size() == 4);
  CHECK(trace.dropped() == 6);
  TraceWriter* disabled = nullptr;
  { TraceScope s(disabled, "forward", "layer"); }  // must not crash or record anywhere
  CHECK(TraceWriter::path_for_rank("out/run", 2) == "out/run.rank2.json");
  CHECK(TraceWriter::path_for_rank("a.b/trace", 0) == "a.b/trace.rank0.json");
}
