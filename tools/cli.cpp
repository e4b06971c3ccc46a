// The `opscope` command line: the table of subcommands and the dispatch. Each subcommand is a
// file of its own (tools/<name>_command.cpp) with its help, parser and runner.
#include "cli.h"

#include <algorithm>
#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "opscope/version.h"

namespace opscope::cli {

// Each tools/<name>_command.cpp defines its entry.
#define OPSCOPE_SUBCOMMAND(name) const Subcommand& name##_subcommand();
#include "subcommands.inc"
#undef OPSCOPE_SUBCOMMAND

namespace {

// The table, one entry per tools/<name>_command.cpp (CMake lists them in subcommands.inc):
// a new subcommand is a new file, and this one does not change.
const std::vector<const Subcommand*>& subcommands() {
  static const std::vector<const Subcommand*> table = {
#define OPSCOPE_SUBCOMMAND(name) &name##_subcommand(),
#include "subcommands.inc"
#undef OPSCOPE_SUBCOMMAND
  };
  return table;
}

}  // namespace

std::vector<const Subcommand*> subcommand_table() { return subcommands(); }

namespace {

const Subcommand* find_subcommand(const std::string& name) {
  for (const Subcommand* s : subcommands()) {
    if (name == s->name) return s;
  }
  return nullptr;
}

// Where a subcommand's own flags end: `opscope sample` passes everything after "--" on.
// `opscope analyze diff` answers --help with a text of its own (tools/analyze_diff.cpp).
std::size_t flags_end(const std::vector<std::string>& args) {
  if (args.size() > 1 && args[0] == "analyze" && args[1] == "diff") return 1;
  if (args.empty() || args[0] != "sample") return args.size();
  return static_cast<std::size_t>(std::find(args.begin(), args.end(), "--") - args.begin());
}

// The command a usage error is about, as its help is asked for: "analyze diff" for
// `opscope analyze diff ...` (a command of its own, with its own --help), else the subcommand's
// name; empty when args[0] names none.
std::string command_of(const std::vector<std::string>& args) {
  if (args.empty() || find_subcommand(args[0]) == nullptr) return {};
  if (args.size() > 1 && args[0] == "analyze" && args[1] == "diff") return "analyze diff";
  return args[0];
}

// A usage error's two lines: what is wrong, and where the flags are explained.
void print_usage_error(const std::vector<std::string>& args, const UsageError& e,
                       std::ostream& err) {
  const std::string command = command_of(args);
  err << "opscope " << (command.empty() ? args[0] : command) << ": " << e.what() << "\n"
      << "Run `opscope " << (command.empty() ? "" : command + " ") << "--help` for the flags.\n";
}

}  // namespace

std::string main_help() {
  std::string text = R"(usage: opscope <command> [flags]
       opscope --version | --help

On-demand tracing of running processes, compatible with dynolog: a process started with
KINETO_USE_DAEMON=1 registers with the daemon; `opscope trace` asks the daemon to make it
record a trace. `opscope sample` runs a command under a sampling profiler (Linux perf).
`opscope analyze` reports on traces, PyTorch's and opscope's, as Holistic Trace Analysis does;
`opscope merge` puts the ranks of a job in one trace.

commands:
)";
  for (const Subcommand* s : subcommands()) {
    std::string name = s->name;
    name.resize(12, ' ');  // the longest name, "activities", and two spaces
    text += "  " + name + s->summary + "\n";
  }
  text += "\nRun `opscope <command> --help` for the flags of each command.\n";
  return text;
}

std::string version_text() {
  // The executable and the library are installed together; both are named, so that a
  // mismatched LD_LIBRARY_PATH shows.
  return std::string("opscope ") + OPSCOPE_CLI_VERSION + " (libopscope " + version() + ")\n";
}

Command parse(const std::vector<std::string>& args) {
  Command c;
  if (args.empty()) throw UsageError("no command given");
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    c.help = main_help();
    return c;
  }
  if (args[0] == "--version" || args[0] == "version") {
    c.help = version_text();
    return c;
  }
  const Subcommand* sub = find_subcommand(args[0]);
  if (sub == nullptr) {
    std::string names;
    std::vector<std::string> known = {"help", "version"};
    for (const Subcommand* s : subcommands()) {
      names += std::string(names.empty() ? "" : ", ") + s->name;
      known.emplace_back(s->name);
    }
    throw UsageError("unknown command '" + args[0] + "'" + did_you_mean(args[0], known) +
                     "; allowed: " + names + " (see --help)");
  }
  if (wants_help(args, 1, flags_end(args))) {
    c.help = sub->help();
    return c;
  }
  if (sub->parse == nullptr) {
    c.kind = Command::Kind::kRunner;
    c.runner = sub;
    c.args = args;
    return c;
  }
  sub->parse(args, c);
  return c;
}

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Command c;
  try {
    c = parse(args);
  } catch (const UsageError& e) {
    if (args.empty()) {
      err << main_help();
      return kExitUsage;
    }
    print_usage_error(args, e, err);
    return kExitUsage;
  }
  switch (c.kind) {
    case Command::Kind::kHelp:
      out << c.help;
      return kExitOk;
    case Command::Kind::kDaemon:
      return run_daemon(c.daemon, out, err);
    case Command::Kind::kTrace:
      return run_trace(c.trace, out, err);
    case Command::Kind::kSample:
      return run_sample(c.sample, out, err);
    case Command::Kind::kRunner:
      try {
        return c.runner->run(c.args, out, err);
      } catch (const UsageError& e) {
        print_usage_error(args, e, err);
        return kExitUsage;
      } catch (const std::bad_alloc&) {
        // Reading a trace names its file (opscope::Error); this is what is left, the reports
        // or the output, under a memory limit: said, not an abort.
        err << "opscope " << args[0]
            << ": out of memory (the process may not take the memory this needs: raise the "
               "limit, `ulimit -v`, or give fewer traces)\n";
        return kExitFailure;
      }
  }
  return kExitFailure;
}

}  // namespace opscope::cli
