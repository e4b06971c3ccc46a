// `opscope merge`: the traces of a job's ranks as one Chrome trace for Perfetto UI
// (merge_traces(), src/export/trace_merge.h), one process group per rank.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <system_error>
#include <vector>

#include "cli.h"
#include "export/sink.h"
#include "export/trace_merge.h"
#include "trace_inputs.h"

namespace opscope::cli {
namespace {

std::string merge_help() {
  return R"(usage: opscope merge DIR|FILE... -o MERGED.json[.gz] [--allow-duplicate-ranks]

Writes the traces of a distributed job's ranks (PyTorch's profiler, Kineto, or opscope) into
one Chrome trace that Perfetto UI and chrome://tracing open with every rank at once.

  DIR|FILE...        trace files, or directories whose .json and .json.gz files are the ranks.
                     A rank is the trace's distributedInfo.rank, else its position among the
                     files (the output says so)
  -o, --output FILE  the merged trace; gzip for a name ending in .gz. Written to a temporary
                     name and renamed when complete: a failure leaves nothing
  --allow-duplicate-ranks
                     merge a trace given twice (one file, or a copy) or two traces that claim
                     one rank; without it they are refused, naming the files
  --help             this text
)" + std::string(kGzipLimitHelp) +
         R"(
Every event of every rank is kept, times untouched (the ranks of a job share a wall clock).
What keeps ranks apart is changed: each process is named "rank N: <its name>" and gets a pid
of its own (thread ids stay), processes are sorted by rank, and flow, async and counter ids
are renumbered so that one rank's arrows never join another's. Each rank's other top-level
keys (distributedInfo, deviceProperties, ...) and its old-to-new pid map are kept under
"opscopeMerged".

Exit codes: 0 success, 1 a trace could not be read or the output not written, 2 usage error.
)";
}

int run_merge(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<std::string> paths;
  std::string output;
  bool has_output = false;
  TraceLimits limits;
  bool allow_duplicates = false;
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string arg = args[i];
    std::string flag = arg.substr(0, arg.find('='));
    if (flag == "--max-gzip-ratio") {
      const auto value = [&]() -> std::string {
        if (flag.size() < arg.size()) return arg.substr(flag.size() + 1);
        if (i + 1 < args.size()) return args[++i];
        throw UsageError(flag + " needs a value");
      };
      parse_limit_flag(flag, value, limits);
    } else if (arg == "-o" || arg == "--output" || arg.rfind("--output=", 0) == 0) {
      if (arg.size() > 8 && arg[8] == '=') {
        output = arg.substr(9);
      } else if (i + 1 < args.size()) {
        output = args[++i];
      } else {
        throw UsageError(arg + " needs a file name");
      }
      if (output.empty()) throw UsageError("-o expects a file name, got ''");
      has_output = true;
    } else if (arg == "--allow-duplicate-ranks") {
      allow_duplicates = true;
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError("unknown flag " + arg + " for `opscope merge`; see `opscope merge --help`");
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.empty()) throw UsageError("no traces given: name trace files or a directory");
  if (!has_output) throw UsageError("no output given: -o MERGED.json (or .json.gz)");
  // An interrupted merge removes its half-written temporary (sink.h).
  internal::remove_temporaries_on_signal();
  try {
    // The output file is left out, so that merging a directory into itself twice does not take
    // the first merge as a rank.
    std::vector<std::string> skipped;
    const std::vector<std::string> files = trace_files(paths, output, &skipped);
    for (const std::string& line : skipped) err << "opscope merge: " << line << "\n";
    // One rank twice makes a merged trace with two copies of its processes; the files are
    // compared before the merge, the ranks they claim during it (before anything is written).
    const auto refuse_repeats = [&](const std::vector<std::string>& lines) {
      if (allow_duplicates || lines.empty()) return;
      std::string text;
      for (const std::string& line : lines) text += (text.empty() ? "" : "; ") + line;
      throw Error(text + ": a rank would be merged twice; --allow-duplicate-ranks merges them");
    };
    refuse_repeats(repeated_inputs(files));
    const std::unique_ptr<internal::Sink> sink =
        internal::open_file_sink(output, {.what = "merged trace"});
    const std::vector<internal::MergedRank> ranks = internal::merge_traces(files, *sink, limits);
    std::vector<std::int64_t> claimed;
    for (const internal::MergedRank& r : ranks)
      claimed.push_back(r.rank_from_position ? -1 : r.rank);
    refuse_repeats(repeated_inputs(files, claimed));
    sink->commit();
    std::uint64_t events = 0;
    for (const internal::MergedRank& r : ranks) {
      if (r.rank_from_position) {
        err << "opscope merge: " << r.path << " has no distributedInfo.rank; using rank " << r.rank
            << " (its position)\n";
      }
      events += r.events;
    }
    out << "merged " << ranks.size() << " rank" << (ranks.size() == 1 ? "" : "s") << " (" << events
        << " events) into " << output << "\n";
  } catch (const Error& e) {
    err << "opscope merge: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

const Subcommand& merge_subcommand() {
  static const Subcommand s{"merge", "merge the traces of a job's ranks into one for Perfetto UI",
                            merge_help, nullptr, run_merge};
  return s;
}

}  // namespace opscope::cli
