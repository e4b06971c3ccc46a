// demo_training: a small CPU training loop, profiled the way torch.profiler profiles a model.
//
//   demo_training [OUT_DIR]     (default ./opscope-demo-traces)
//
// An MLP (256 -> 512 -> 512 -> 10, batch 64) trained with SGD on synthetic data. Its ops are
// named like PyTorch's (aten::addmm, AddmmBackward0, Optimizer.step#SGD.step) so the tables and
// traces read like a PyTorch profile. Each matmul splits its rows over the calling thread and a
// two-thread pool; the pool's tasks are wrapped with opscope::wrap.
//
// The profiler follows schedule(wait=1, warmup=1, active=3, repeat=2): two recording windows,
// each written to OUT_DIR as a Chrome trace (open it in https://ui.perfetto.dev). Every lens is
// on: ops carry their input shapes and FLOPs, tensor storage reports its allocations by
// category, ranges carry native call stacks and the module path (MLP.Linear_0, ...). The last
// window is also written as collapsed stacks (for flamegraph.pl or speedscope) and as a memory
// timeline page.
#include <opscope/opscope.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

// Tensor storage reports what it allocates and frees, as an allocator inside a framework
// would (opscope/memory.h). The category comes from the caller's MemoryCategoryScope.
std::atomic<std::int64_t> g_allocated{0};

template <typename T>
struct ReportingAllocator {
  using value_type = T;
  ReportingAllocator() = default;
  template <typename U>
  ReportingAllocator(const ReportingAllocator<U>&) {}
  T* allocate(std::size_t n) {
    T* p = std::allocator<T>().allocate(n);
    const auto bytes = static_cast<std::int64_t>(n * sizeof(T));
    const std::int64_t total = g_allocated += bytes;
    opscope::report_memory_usage(p, bytes, total, total);
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    const auto bytes = static_cast<std::int64_t>(n * sizeof(T));
    const std::int64_t total = g_allocated -= bytes;
    opscope::report_memory_usage(p, -bytes, total, total);
    std::allocator<T>().deallocate(p, n);
  }
  template <typename U>
  bool operator==(const ReportingAllocator<U>&) const {
    return true;
  }
};

// A row-major matrix.
struct Tensor {
  int rows = 0, cols = 0;
  std::vector<float, ReportingAllocator<float>> data;
  Tensor() = default;
  Tensor(int r, int c) : rows(r), cols(c), data(static_cast<std::size_t>(r) * c) {}
  float* row(int r) { return data.data() + static_cast<std::size_t>(r) * cols; }
  const float* row(int r) const { return data.data() + static_cast<std::size_t>(r) * cols; }
  // What the profiler records as this tensor's input metadata.
  opscope::Value meta() const {
    sizes_[0] = rows;
    sizes_[1] = cols;
    return opscope::Value::tensor(sizes_);
  }

 private:
  mutable std::int64_t sizes_[2] = {0, 0};
};

// A fixed pool of worker threads with a FIFO of tasks.
class WorkerPool {
 public:
  explicit WorkerPool(int threads) {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i] { run(i); });
  }
  ~WorkerPool() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return static_cast<int>(workers_.size()); }
  void submit(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void run(int index) {
    // The name shows up in the trace's thread list.
    pthread_setname_np(pthread_self(), ("demo-pool-" + std::to_string(index)).c_str());
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

WorkerPool* g_pool = nullptr;

// Runs fn(begin, end) over [0, rows) split in equal parts between the caller and the pool.
// opscope::wrap carries the caller's profiler state to the worker, so the worker's ranges land
// in the same session even when it records only such threads (record_all_threads = false).
void parallel_rows(int rows, const std::function<void(int, int)>& fn) {
  const int parts = g_pool->size() + 1;
  std::latch done(parts - 1);
  for (int p = 1; p < parts; ++p) {
    g_pool->submit(opscope::wrap([&, p] {
      {
        OPSCOPE_USER_SCOPE("matmul_rows");
        fn(rows * p / parts, rows * (p + 1) / parts);
      }
      done.count_down();
    }));
  }
  {
    OPSCOPE_USER_SCOPE("matmul_rows");
    fn(0, rows / parts);
  }
  done.wait();
}

// c = a * b (+ bias on every row).
void mm(const Tensor& a, const Tensor& b, const float* bias, Tensor& c) {
  c = Tensor(a.rows, b.cols);
  parallel_rows(a.rows, [&](int r0, int r1) {
    for (int i = r0; i < r1; ++i) {
      float* out = c.row(i);
      if (bias) std::copy(bias, bias + c.cols, out);
      for (int k = 0; k < a.cols; ++k) {
        const float x = a.row(i)[k];
        const float* w = b.row(k);
        for (int j = 0; j < c.cols; ++j) out[j] += x * w[j];
      }
    }
  });
}

Tensor transpose(const Tensor& a) {
  OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::t", a.meta());
  opscope::MemoryCategoryScope category(opscope::MemoryCategory::kTemporary);
  Tensor t(a.cols, a.rows);
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < a.cols; ++j) t.row(j)[i] = a.row(i)[j];
  return t;
}
// Autograd-style sequence numbers: every forward op takes the next one, and its backward range
// carries the same number and the forward thread's id. Traces draw that link ("fwdbwd").
std::int64_t g_next_sequence_nr = 0;

struct Linear {
  std::string name;                             // module name: "Linear_0", ...
  Tensor weight, bias, grad_weight, grad_bias;  // weight is [in x out]: y = x * weight + bias
  Tensor input;                                 // saved for backward
  std::int64_t sequence_nr = -1;
  std::uint64_t forward_thread = 0;

  Linear(std::string module_name, int in, int out, std::mt19937& rng)
      : name(std::move(module_name)) {
    opscope::MemoryCategoryScope category(opscope::MemoryCategory::kParameter);
    weight = Tensor(in, out);
    bias = Tensor(1, out);
    std::normal_distribution<float> init(0.f, std::sqrt(2.f / static_cast<float>(in)));
    for (float& w : weight.data) w = init(rng);
  }

  Tensor forward(const Tensor& x) {
    OPSCOPE_MODULE(name.c_str());
    OPSCOPE_RECORD_FUNCTION("aten::linear");
    // The macros hide their RecordFunction; to set a sequence number and pass inputs, spell
    // it out. The two-phase form builds the inputs only when a lens records them.
    static constexpr opscope::CallSite kAddmm{"aten::addmm", __func__, __FILE__, __LINE__};
    opscope::RecordFunction rf(opscope::RecordScope::kFunction);
    if (rf.wants_inputs()) {
      rf.before(kAddmm, {bias.meta(), x.meta(), weight.meta(), 1, 1});  // addmm(bias, x, w)
    } else {
      rf.before(kAddmm);
    }
    sequence_nr = g_next_sequence_nr++;
    rf.set_sequence_nr(sequence_nr);
    forward_thread = rf.is_active() ? rf.thread_id() : 0;
    input = x;
    opscope::MemoryCategoryScope category(opscope::MemoryCategory::kActivation);
    Tensor y;
    mm(x, weight, bias.data.data(), y);
    return y;
  }

  Tensor backward(const Tensor& grad_out) {
    OPSCOPE_MODULE(name.c_str());
    static constexpr opscope::CallSite kSite{"AddmmBackward0", __func__, __FILE__, __LINE__};
    opscope::RecordFunction rf(kSite, opscope::RecordScope::kBackwardFunction);
    rf.set_sequence_nr(sequence_nr);
    rf.set_forward_thread_id(forward_thread);
    opscope::MemoryCategoryScope category(opscope::MemoryCategory::kGradient);
    Tensor grad_in;
    {
      const Tensor wt = transpose(weight);
      OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", grad_out.meta(), wt.meta());
      mm(grad_out, wt, nullptr, grad_in);
    }
    {
      const Tensor it = transpose(input);
      OPSCOPE_RECORD_FUNCTION_WITH_INPUTS("aten::mm", it.meta(), grad_out.meta());
      mm(it, grad_out, nullptr, grad_weight);
    }
    OPSCOPE_RECORD_FUNCTION("aten::sum");
    grad_bias = Tensor(1, grad_out.cols);
    for (int i = 0; i < grad_out.rows; ++i)
      for (int j = 0; j < grad_out.cols; ++j) grad_bias.data[j] += grad_out.row(i)[j];
    return grad_in;
  }
};

Tensor relu(const Tensor& x) {
  OPSCOPE_RECORD_FUNCTION("aten::relu");
  Tensor y = x;
  for (float& v : y.data) v = std::max(v, 0.f);
  return y;
}
Tensor relu_backward(const Tensor& grad, const Tensor& out) {
  OPSCOPE_BACKWARD_FUNCTION("ReluBackward0");
  OPSCOPE_RECORD_FUNCTION("aten::threshold_backward");
  Tensor g = grad;
  for (std::size_t i = 0; i < g.data.size(); ++i) g.data[i] = out.data[i] > 0 ? g.data[i] : 0.f;
  return g;
}

// Mean cross-entropy of the logits against the labels; writes d(loss)/d(logits) to grad.
float cross_entropy(const Tensor& logits, const std::vector<int>& labels, Tensor& grad) {
  Tensor probs = logits;
  float loss = 0;
  {
    OPSCOPE_RECORD_FUNCTION("aten::cross_entropy_loss");
    {
      OPSCOPE_RECORD_FUNCTION("aten::_softmax");
      for (int i = 0; i < probs.rows; ++i) {
        float* p = probs.row(i);
        const float m = *std::max_element(p, p + probs.cols);
        float sum = 0;
        for (int j = 0; j < probs.cols; ++j) sum += (p[j] = std::exp(p[j] - m));
        for (int j = 0; j < probs.cols; ++j) p[j] /= sum;
      }
    }
    OPSCOPE_RECORD_FUNCTION("aten::nll_loss");
    for (int i = 0; i < probs.rows; ++i) loss -= std::log(probs.row(i)[labels[i]]);
    loss /= static_cast<float>(probs.rows);
  }
  OPSCOPE_BACKWARD_FUNCTION("LogSoftmaxBackward0");
  grad = probs;
  for (int i = 0; i < grad.rows; ++i) {
    grad.row(i)[labels[i]] -= 1.f;
    for (int j = 0; j < grad.cols; ++j) grad.row(i)[j] /= static_cast<float>(grad.rows);
  }
  return loss;
}

void sgd_step(std::vector<Linear*> layers, float lr) {
  OPSCOPE_USER_SCOPE("Optimizer.step#SGD.step");
  for (Linear* l : layers) {
    OPSCOPE_RECORD_FUNCTION("aten::add_");
    for (std::size_t i = 0; i < l->weight.data.size(); ++i)
      l->weight.data[i] -= lr * l->grad_weight.data[i];
    for (std::size_t i = 0; i < l->bias.data.size(); ++i)
      l->bias.data[i] -= lr * l->grad_bias.data[i];
  }
}

void print_table(const opscope::Profiler& prof, int row_limit, const std::string& header) {
  const opscope::KeyAverages averages = prof.key_averages();
  const std::string table =
      averages.table({.sort_by = "self_cpu_time_total", .row_limit = row_limit, .header = header});
  std::printf("%s\n", table.c_str());
}

std::set<std::filesystem::path> traces_in(const std::filesystem::path& dir) {
  std::set<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().string().ends_with(".pt.trace.json")) found.insert(e.path());
  }
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string arg = argc == 2 ? argv[1] : "";
  if (argc > 2 || arg == "--help" || arg == "-h") {
    std::fprintf(argc > 2 ? stderr : stdout,
                 "usage: %s [OUT_DIR]\n\nTrains a small MLP for 12 steps under opscope's "
                 "profiler and writes one Chrome trace\nper recording window to OUT_DIR "
                 "(default ./opscope-demo-traces).\n",
                 argv[0]);
    return argc > 2 ? 2 : 0;
  }
  const std::filesystem::path out_dir = argc == 2 ? arg : "opscope-demo-traces";
  const auto traces_before = traces_in(out_dir);

  constexpr int kBatch = 64, kIn = 256, kHidden = 512, kClasses = 10, kSteps = 12;
  std::mt19937 rng(42);
  WorkerPool pool(2);
  g_pool = &pool;
  Linear fc1("Linear_0", kIn, kHidden, rng), fc2("Linear_1", kHidden, kHidden, rng),
      fc3("Linear_2", kHidden, kClasses, rng);

  // Synthetic data: the label is the argmax of a fixed random projection of the input.
  Tensor x(kBatch, kIn), projection(kIn, kClasses);
  std::normal_distribution<float> normal;
  for (float& v : x.data) v = normal(rng);
  for (float& v : projection.data) v = normal(rng);
  Tensor scores;
  mm(x, projection, nullptr, scores);
  std::vector<int> labels(kBatch);
  for (int i = 0; i < kBatch; ++i)
    labels[i] =
        static_cast<int>(std::max_element(scores.row(i), scores.row(i) + kClasses) - scores.row(i));

  try {
    auto write_trace = opscope::tensorboard_trace_handler(out_dir.string());
    int window = 0;
    opscope::Profiler prof({
        .lenses = {.record_shapes = true,
                   .profile_memory = true,
                   .with_stack = true,
                   .with_flops = true,
                   .with_modules = true},
        .schedule = opscope::schedule({.wait = 1, .warmup = 1, .active = 3, .repeat = 2}),
        .on_trace_ready =
            [&](opscope::Profiler& p) {
              write_trace(p);
              print_table(p, 8, "Recording window " + std::to_string(++window));
            },
    });
    prof.start();
    for (int step = 0; step < kSteps; ++step) {
      OPSCOPE_MODULE("MLP");
      Tensor h1 = relu(fc1.forward(x));
      Tensor h2 = relu(fc2.forward(h1));
      Tensor logits = fc3.forward(h2), grad;
      const float loss = cross_entropy(logits, labels, grad);
      grad = fc3.backward(grad);
      grad = fc2.backward(relu_backward(grad, h2));
      fc1.backward(relu_backward(grad, h1));
      sgd_step({&fc1, &fc2, &fc3}, 0.05f);
      if (step == 0 || step == kSteps - 1) std::printf("step %2d  loss %.4f\n", step, loss);
      prof.step();
    }
    prof.stop();

    print_table(prof, 15, "Last recording window");
    const std::string by_shape = prof.key_averages(/*group_by_input_shape=*/true)
                                     .table({.sort_by = "cpu_time_total",
                                             .row_limit = 8,
                                             .header = "Last window by input shape"});
    std::printf("%s\n", by_shape.c_str());
    const std::string stacks = (out_dir / "demo_stacks.txt").string();
    const std::string timeline = (out_dir / "demo_memory.html").string();
    prof.export_stacks(stacks, "self_cpu_time_total");
    prof.export_memory_timeline(timeline, "cpu");
    std::printf("Collapsed stacks: %s (flamegraph.pl or https://speedscope.app)\n", stacks.c_str());
    std::printf("Memory timeline:  %s\n", timeline.c_str());
    const opscope::SessionStats stats = prof.stats();
    std::printf("%llu events recorded, %llu dropped\n\n",
                static_cast<unsigned long long>(stats.events_recorded),
                static_cast<unsigned long long>(stats.events_dropped));
  } catch (const opscope::Error& e) {
    std::fprintf(stderr, "demo_training: %s\n", e.what());
    return 1;
  }

  std::printf("Chrome traces written (open them in https://ui.perfetto.dev):\n");
  for (const auto& path : traces_in(out_dir)) {
    if (!traces_before.contains(path)) std::printf("  %s\n", path.string().c_str());
  }
  return 0;
}
