// `opscope flight decode`: the raw file a crashed process's flight recorder left, as a trace
// (decode_flight_dump(), opscope/flight_recorder.h).
#include <ostream>
#include <string>
#include <vector>

#include "cli.h"
#include "export/sink.h"
#include "opscope/error.h"
#include "opscope/flight_recorder.h"

namespace opscope::cli {
namespace {

std::string flight_help() {
  return R"(usage: opscope flight decode RAW -o TRACE.json[.gz]

Turns the raw dump a flight recorder wrote when its process crashed into a trace that
Perfetto UI, chrome://tracing and `opscope analyze` open.

  decode RAW         the file the crash left: <dump_dir>/opscope_flight_<pid>_crash.raw
                     (a .raw.part file is one the handler could not finish; it is refused)
  -o, --output FILE  the trace, in the format its suffix names (.json, .json.gz); written to a
                     temporary name and renamed when complete: a failure leaves nothing
  --help             this text

The trace holds the ranges of the last keep_seconds before the crash with their threads, names
and lenses, and the crashing thread's ranges still open at the crash (args "open": true, ending
at the crash). Native stack frames are addresses: the crashed process's symbols are gone. Its
"flightRecorder" metadata says the signal (0: std::terminate), the span kept, and what the ring
had overwritten or dropped.

Exit codes: 0 success, 1 the dump could not be read or the trace not written, 2 usage error.
)";
}

int run_flight(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() < 2 || args[1] != "decode") {
    throw UsageError(args.size() < 2 ? std::string("`opscope flight` needs a command: decode")
                                     : "unknown command '" + args[1] +
                                           "' for `opscope flight`; the one there is: decode");
  }
  std::string raw;
  std::string output;
  for (std::size_t i = 2; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-o" || arg == "--output") {
      if (i + 1 >= args.size()) throw UsageError(arg + " needs a file name");
      output = args[++i];
      if (output.empty()) throw UsageError(arg + " expects a file name, got ''");
    } else if (arg.rfind("--output=", 0) == 0) {
      output = arg.substr(9);
      if (output.empty()) throw UsageError("--output expects a file name, got ''");
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw UsageError("unknown flag " + arg +
                       " for `opscope flight decode`; see `opscope flight --help`");
    } else if (raw.empty()) {
      raw = arg;
    } else {
      throw UsageError("one raw dump at a time: got '" + raw + "' and '" + arg + "'");
    }
  }
  if (raw.empty()) throw UsageError("no raw dump given: opscope flight decode RAW -o TRACE.json");
  if (output.empty()) throw UsageError("no output given: -o TRACE.json (or .json.gz)");
  internal::remove_temporaries_on_signal();
  try {
    const FlightDump dump = decode_flight_dump(raw, output);
    out << "decoded " << raw << " into " << output << " (" << dump.events << " events, "
        << dump.open_ranges << " open at the crash)\n";
  } catch (const Error& e) {
    err << "opscope flight: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

const Subcommand& flight_subcommand() {
  static const Subcommand s{"flight",
                            "decode the raw dump a crashed process's flight recorder left",
                            flight_help, nullptr, run_flight};
  return s;
}

}  // namespace opscope::cli
