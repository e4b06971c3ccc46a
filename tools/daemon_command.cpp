// `opscope daemon`: the on-demand daemon in the foreground (src/daemon/ has the logic).
#include <pthread.h>

#include <csignal>
#include <ostream>
#include <string>

#include "cli.h"
#include "cli_args.h"
#include "daemon/daemon.h"

namespace opscope::cli {

std::string daemon_help() {
  return R"(usage: opscope daemon [--ipc-name NAME] [--port P] [--socket-dir DIR]

Runs the on-demand daemon in the foreground until SIGINT or SIGTERM. Only one daemon (opscope's
or dynolog) can serve a machine's endpoint and port at a time.

  --ipc-name NAME    the IPC endpoint traced processes send to (default: dynolog)
  --port P           TCP port for trace requests, on the loopback addresses only (127.0.0.1
                     and ::1, as `localhost` may resolve to either), 0 to 65535; 0 picks a
                     free one and prints it (default: 1778, dynolog's)
  --socket-dir DIR   use socket files in DIR instead of the abstract namespace; traced
                     processes must then have KINETO_IPC_SOCKET_DIR=DIR (default: the value of
                     KINETO_IPC_SOCKET_DIR, else the abstract namespace)
  --help             this text
)";
}

DaemonArgs parse_daemon(Args& a) {
  DaemonArgs d;
  while (!a.done()) {
    const std::string f = a.next_flag();
    if (f == "--ipc-name") {
      d.ipc_name = a.value(f);
      if (d.ipc_name.empty() || d.ipc_name.size() > 100) {
        throw UsageError("--ipc-name expects a name of 1 to 100 characters");
      }
    } else if (f == "--port") {
      d.port = static_cast<int>(parse_int(f, a.value(f), 0, 65535, "a port from 0 to 65535"));
    } else if (f == "--socket-dir") {
      d.socket_dir = a.value(f);
      if (d.socket_dir.empty()) throw UsageError("--socket-dir expects a directory");
    } else {
      throw UsageError("unknown flag " + f +
                       " for `opscope daemon`; allowed: --ipc-name, --port, --socket-dir, --help");
    }
  }
  return d;
}

int run_daemon(const DaemonArgs& d, std::ostream& out, std::ostream& err) {
  // Block the stop signals before any thread starts, so that only sigwait below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    ondemand::DaemonOptions options;
    options.ipc_name = d.ipc_name;
    options.port = d.port;
    options.socket_dir = d.socket_dir;
    ondemand::Daemon daemon(options);
    const std::string dir = ondemand::socket_dir_or_env(d.socket_dir);
    out << "opscope daemon: IPC endpoint '" << d.ipc_name << "'"
        << (dir.empty() ? " (abstract namespace)" : " in " + dir) << ", trace requests on 127.0.0.1"
        << (daemon.listens_on_ipv6() ? " and [::1]" : "") << " port " << daemon.port() << "\n"
        << std::flush;
    int sig = 0;
    sigwait(&stop_signals, &sig);
    daemon.stop();
  } catch (const std::exception& e) {
    err << "opscope daemon: " << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

const Subcommand& daemon_subcommand() {
  static const Subcommand s{
      "daemon", "serve traced processes (IPC) and trace requests (TCP on loopback)", daemon_help,
      [](const std::vector<std::string>& args, Command& c) {
        Args a(args, 1);
        c.kind = Command::Kind::kDaemon;
        c.daemon = parse_daemon(a);
      },
      nullptr};
  return s;
}

}  // namespace opscope::cli
