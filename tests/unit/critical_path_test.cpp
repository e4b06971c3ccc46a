// critical_path_graph() (src/analysis/critical_path.cpp), HTA's CPGraph rules on small traces
// written here, each small enough to work out by hand what HTA builds; the agreement with HTA
// itself on its own test traces is python/tests/test_critical_path.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "opscope/trace_analysis.h"
#include "opscope/trace_reader.h"
#include "support/test_support.h"

namespace opscope {
namespace critical_path_test {

using Type = CriticalPathEdgeType;

// A Kineto trace of `events` (each a JSON object's members), read back.
std::shared_ptr<const ProfilerResult> trace_of(const std::vector<std::string>& events) {
  static testing::TempDir dir;
  static int n = 0;
  const std::string path = dir.file("cp" + std::to_string(n++) + ".json");
  std::ofstream f(path);
  f << R"({"schemaVersion": 1, "traceEvents": [)";
  for (std::size_t i = 0; i < events.size(); ++i) f << (i ? ",\n{" : "\n{") << events[i] << "}";
  f << "]}";
  f.close();
  return read_trace(path);
}

std::string cpu(const std::string& cat, const std::string& name, int ts, int dur,
                const std::string& args = "{}") {
  return R"("ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":10,"tid":11,"ts":)" +
         std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) + R"(,"args":)" + args;
}

std::string gpu(const std::string& cat, const std::string& name, int ts, int dur, int corr) {
  return R"("ph":"X","cat":")" + cat + R"(","name":")" + name + R"(","pid":0,"tid":7,"ts":)" +
         std::to_string(ts) + R"(,"dur":)" + std::to_string(dur) +
         R"(,"args":{"stream":7,"device":0,"correlation":)" + std::to_string(corr) + "}";
}

std::string launch(int ts, int dur, int corr, const std::string& name = "cudaLaunchKernel") {
  return cpu("cuda_runtime", name, ts, dur, R"({"correlation":)" + std::to_string(corr) + "}");
}

// (type, weight in us) of every edge, sorted.
std::vector<std::pair<Type, std::int64_t>> edges_of(const CriticalPathGraph& g) {
  std::vector<std::pair<Type, std::int64_t>> out;
  for (std::size_t k = 0; k < g.edge_type.size(); ++k) {
    out.emplace_back(g.edge_type[k], g.edge_weight_ns[k] / 1000);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> path_names(const ProfilerResult& r, const CriticalPathGraph& g) {
  std::vector<std::string> out;
  for (const std::int32_t n : g.path_nodes) {
    const auto k = static_cast<std::size_t>(n);
    out.push_back(std::string(r.events()[static_cast<std::size_t>(g.node_event[k])].name) +
                  (g.node_is_start[k] ? ".s" : ".e"));
  }
  return out;
}

TEST(CriticalPath, NestedOperatorsLaunchAndKernel) {
  //  outer [0,100] > inner [10,60] > cudaLaunchKernel [20,30]  ->  kernel [40,50]
  const auto r = trace_of({cpu("cpu_op", "outer", 0, 100), cpu("cpu_op", "inner", 10, 50),
                           launch(20, 10, 1), gpu("kernel", "k", 40, 10, 1)});
  const CriticalPathGraph g = critical_path_graph(*r);
  ASSERT_TRUE(g.found);
  ASSERT_TRUE(g.valid);
  EXPECT_EQ(g.node_event.size(), 8u);
  // The launch's own span comes from the runtime-lock pass; the call stack skips the edges
  // between a lock-taking call's nodes; the kernel was alone in its queue: a launch delay.
  const std::vector<std::pair<Type, std::int64_t>> want = {
      {Type::kOperatorKernel, 10},   {Type::kOperatorKernel, 10}, {Type::kOperatorKernel, 10},
      {Type::kOperatorKernel, 10},   {Type::kOperatorKernel, 30}, {Type::kOperatorKernel, 40},
      {Type::kKernelLaunchDelay, 20}};
  EXPECT_EQ(edges_of(g), want);
  EXPECT_EQ(path_names(*r, g),
            (std::vector<std::string>{"outer.s", "inner.s", "cudaLaunchKernel.s",
                                      "cudaLaunchKernel.e", "inner.e", "outer.e"}));
  EXPECT_EQ(g.path_length_ns, 100'000);
  // Attribution: outer.s -> inner.s belongs to outer (a start), launch.e -> inner.e to inner
  // (both ends), the kernel's span to the kernel.
  const auto event_named = [&](std::string_view name) {
    for (std::size_t i = 0; i < r->events().size(); ++i) {
      if (r->events()[i].name == name) return static_cast<std::int64_t>(i);
    }
    return std::int64_t{-100};
  };
  std::map<std::int64_t, int> attributed;
  for (const std::int64_t e : g.edge_event) ++attributed[e];
  EXPECT_EQ(attributed[event_named("outer")], 2);
  EXPECT_EQ(attributed[event_named("inner")], 2);
  EXPECT_EQ(attributed[event_named("cudaLaunchKernel")], 1);
  EXPECT_EQ(attributed[event_named("k")], 1);
  EXPECT_EQ(attributed[CriticalPathGraph::kNoEvent], 1);  // the launch delay
}

// Two launches on one stream: the first kernel waits for its launch, the second for the first
// kernel (a kernel-kernel gap); cudaStreamSynchronize waits for the second kernel.
std::shared_ptr<const ProfilerResult> two_kernels_and_a_stream_sync() {
  return trace_of({launch(0, 5, 1), gpu("kernel", "ka", 10, 90, 1), launch(20, 2, 2),
                   gpu("kernel", "kb", 105, 95, 2), launch(30, 180, 3, "cudaStreamSynchronize"),
                   gpu("cuda_sync", "Stream Sync", 200, 10, 3)});
}

TEST(CriticalPath, KernelGapsAndStreamSync) {
  const auto r = two_kernels_and_a_stream_sync();
  const CriticalPathGraph g = critical_path_graph(*r);
  ASSERT_TRUE(g.valid);
  const std::vector<std::pair<Type, std::int64_t>> want = {
      {Type::kOperatorKernel, 0},  // cudaStreamSynchronize: blocking, so zero weight
      {Type::kOperatorKernel, 2},     {Type::kOperatorKernel, 5},
      {Type::kOperatorKernel, 90},    {Type::kOperatorKernel, 95},
      {Type::kDependency, 0},         {Type::kDependency, 0},
      {Type::kKernelLaunchDelay, 10}, {Type::kKernelKernelDelay, 5},
      {Type::kSyncDependency, 0}};  // kb's end -> the sync call's end
  EXPECT_EQ(edges_of(g), want);
  // kb's end and the sync call's end tie at 200 us: networkx keeps the first in topological
  // order, kb's end.
  EXPECT_EQ(path_names(*r, g),
            (std::vector<std::string>{"cudaLaunchKernel.s", "ka.s", "ka.e", "kb.s", "kb.e"}));
  EXPECT_EQ(g.path_length_ns, 200'000);
}

TEST(CriticalPath, ZeroWeightLaunchEdgesOnlyWhereNoLaunchDelay) {
  const auto r = two_kernels_and_a_stream_sync();
  ReportOptions o;
  const std::size_t without = critical_path_graph(*r, o).edge_type.size();
  o.add_zero_weight_launch_edges = true;
  const CriticalPathGraph g = critical_path_graph(*r, o);
  // kb had a kernel-kernel gap, not a launch delay: it gets the zero-weight launch edge.
  ASSERT_EQ(g.edge_type.size(), without + 1);
  const auto edges = edges_of(g);
  EXPECT_EQ(std::count(edges.begin(), edges.end(),
                       std::make_pair(Type::kKernelLaunchDelay, std::int64_t{0})),
            1);
  EXPECT_EQ(g.path_length_ns, 200'000);
}

TEST(CriticalPath, AnnotationWindowAndMissingAnnotation) {
  // Two steps; the second's operator alone is in the window of instance 1.
  const auto r =
      trace_of({cpu("user_annotation", "ProfilerStep#1", 0, 50), cpu("cpu_op", "a", 10, 20),
                cpu("user_annotation", "ProfilerStep#2", 60, 50), cpu("cpu_op", "b", 70, 30),
                cpu("cpu_op", "c", 80, 10)});
  ReportOptions o;
  o.drop_last_step = 0;
  o.annotation = "ProfilerStep";
  o.instance_start = o.instance_end = 1;
  const CriticalPathGraph g = critical_path_graph(*r, o);
  ASSERT_TRUE(g.valid);
  EXPECT_EQ(g.node_event.size(), 4u);  // b and c; the annotations get no nodes
  EXPECT_EQ(g.path_length_ns, 30'000);
  o.annotation = "NoSuchStep";
  EXPECT_FALSE(critical_path_graph(*r, o).found);
}

TEST(CriticalPath, BoundBy) {
  const std::vector<std::string> loads = {"data_load"};
  EXPECT_EQ(critical_path_bound_by(Type::kOperatorKernel, "aten::mm", -1, {}), "cpu_bound");
  EXPECT_EQ(critical_path_bound_by(Type::kOperatorKernel, "my data_loader", -1, loads),
            "data_loading");
  EXPECT_EQ(critical_path_bound_by(Type::kOperatorKernel, "ncclKernel_AllReduce", 7, {}),
            "gpu_communication_bound");
  EXPECT_EQ(critical_path_bound_by(Type::kOperatorKernel, "gemm", 7, {}), "gpu_compute_bound");
  EXPECT_EQ(critical_path_bound_by(Type::kKernelLaunchDelay, "", 7, {}),
            "gpu_kernel_launch_overhead");
  EXPECT_EQ(critical_path_bound_by(Type::kSyncDependency, "", 7, {}), "");
}

}  // namespace critical_path_test
}  // namespace opscope
