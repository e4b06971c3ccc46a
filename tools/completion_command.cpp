// `opscope completion bash|zsh|man`: shell completion and the manual page, made from the texts
// `opscope --help` and each `opscope <command> --help` print, so that there is no second copy of
// the help to fall behind. The build runs it to install share/bash-completion/completions/opscope,
// share/zsh/site-functions/_opscope and share/man/man1/opscope.1 (tools/CMakeLists.txt).
#include <algorithm>
#include <cctype>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "analyze_diff.h"
#include "cli.h"
#include "opscope/trace_analysis.h"
#include "opscope/version.h"

namespace opscope::cli {
namespace {

std::string completion_help() {
  return R"(usage: opscope completion bash|zsh|man

Prints what a shell needs to complete opscope's commands, flags and report names, or the
manual page, all made from the --help texts of this opscope:

  bash   a bash completion script: `source <(opscope completion bash)`, or install it as
         share/bash-completion/completions/opscope (make install does)
  zsh    a zsh completion function: save it as _opscope in a directory of $fpath (make
         install puts it in share/zsh/site-functions), or `source <(opscope completion zsh)`
         after compinit
  man    the manual page, opscope.1, in roff (make install puts it in share/man/man1):
         `opscope completion man | man -l -`
  --help this text

Exit codes: 0 success, 2 usage error.
)";
}

// A command as completion sees it: its words after `opscope` and its help text.
struct Entry {
  std::string words;  // "analyze", "analyze diff"
  std::string summary;
  std::string help;
};

std::vector<Entry> entries() {
  std::vector<Entry> out;
  for (const Subcommand* s : subcommand_table()) {
    out.push_back({s->name, s->summary, s->help()});
    if (std::string(s->name) == "analyze") {
      out.push_back({"analyze diff", "compare two traces operator by operator (HTA's TraceDiff)",
                     analyze_diff_help()});
    }
  }
  return out;
}

// The flags a help text explains: every "--word" in it, sorted, each once.
std::vector<std::string> flags_in(const std::string& help) {
  std::set<std::string> flags;
  for (std::size_t at = help.find("--"); at != std::string::npos; at = help.find("--", at + 2)) {
    if (at > 0 && help[at - 1] != ' ' && help[at - 1] != '[' && help[at - 1] != '(' &&
        help[at - 1] != '`' && help[at - 1] != '\n' && help[at - 1] != ',') {
      continue;
    }
    std::size_t end = at + 2;
    if (end >= help.size() || help[end] < 'a' || help[end] > 'z') continue;
    while (end < help.size() && ((help[end] >= 'a' && help[end] <= 'z') ||
                                 (help[end] >= '0' && help[end] <= '9') || help[end] == '-')) {
      ++end;
    }
    std::string flag = help.substr(at, end - at);
    while (flag.back() == '-') flag.pop_back();
    flags.insert(flag);
  }
  return {flags.begin(), flags.end()};
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::vector<std::string> report_names() {
  std::vector<std::string> names;
  for (const ReportKind& k : report_kinds()) names.emplace_back(k.name);
  return names;
}

std::vector<std::string> command_names() {
  std::vector<std::string> names;
  for (const Subcommand* s : subcommand_table()) names.emplace_back(s->name);
  return names;
}

std::string bash_script() {
  std::string out =
      R"(# bash completion for opscope, made by `opscope completion bash` from its --help texts.
_opscope() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} flags=""
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W ")" +
      joined(command_names()) + R"( help --help --version" -- "$cur"))
    return
  fi
  case $prev in
    --report) COMPREPLY=($(compgen -W ")" +
      joined(report_names()) + R"(" -- "${cur##*,}")); return ;;
    --format) COMPREPLY=($(compgen -W "text json csv html" -- "$cur")); return ;;
  esac
  case ${COMP_WORDS[1]} in
)";
  for (const Entry& e : entries()) {
    if (e.words == "analyze diff") continue;  // under analyze, below
    out += "    " + e.words + ")";
    if (e.words == "analyze") {
      out += "\n      if [[ ${COMP_WORDS[2]} == diff ]]; then\n        flags=\"" +
             joined(flags_in(analyze_diff_help())) + "\"\n      else\n        flags=\"" +
             joined(flags_in(e.help)) +
             "\"\n        [[ $COMP_CWORD -eq 2 ]] && flags+=\" diff\"\n" + "      fi ;;\n";
    } else if (e.words == "completion") {
      out += " flags=\"bash zsh man --help\" ;;\n";
    } else {
      out += " flags=\"" + joined(flags_in(e.help)) + "\" ;;\n";
    }
  }
  out += R"(  esac
  if [[ $cur == -* || ( ${COMP_WORDS[1]} == completion ) || ( $COMP_CWORD -eq 2 && ${COMP_WORDS[1]} == analyze && diff == "$cur"* && -n $cur ) ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o default -o filenames -F _opscope opscope
)";
  return out;
}

// A zsh word list: each word single-quoted.
std::string zsh_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "'" : " '") + w + "'";
  return out;
}

std::string zsh_quoted(std::string s) {
  std::string out;
  for (const char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out;
}

std::string zsh_script() {
  std::string out = R"(#compdef opscope
# zsh completion for opscope, made by `opscope completion zsh` from its --help texts.
_opscope() {
  local -a commands flags
  commands=(
)";
  for (const Subcommand* s : subcommand_table()) {
    out += "    '" + std::string(s->name) + ":" + zsh_quoted(s->summary) + "'\n";
  }
  out += R"(  )
  if (( CURRENT == 2 )); then
    _describe 'opscope command' commands
    return
  fi
  case $words[CURRENT-1] in
    --report) _values -s , 'report' )" +
         zsh_words(report_names()) + R"(; return ;;
    --format) compadd text json csv html; return ;;
  esac
  case $words[2] in
)";
  for (const Entry& e : entries()) {
    if (e.words == "analyze diff") continue;
    out += "    " + e.words + ")";
    if (e.words == "analyze") {
      out += "\n      if [[ $words[3] == diff ]]; then\n        flags=(" +
             zsh_words(flags_in(analyze_diff_help())) + ")\n      else\n        flags=(" +
             zsh_words(flags_in(e.help)) + ")\n" +
             "        (( CURRENT == 3 )) && [[ $PREFIX != -* ]] && compadd diff\n      fi ;;\n";
    } else if (e.words == "completion") {
      out += " compadd bash zsh man; return ;;\n";
    } else {
      out += " flags=(" + zsh_words(flags_in(e.help)) + ") ;;\n";
    }
  }
  out += R"(  esac
  if [[ $PREFIX == -* ]]; then
    compadd -a flags
  else
    _files
  fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
  _opscope "$@"
else
  compdef _opscope opscope
fi
)";
  return out;
}

}  // namespace

// A help text as roff shows it, line for line (the caller puts it in .nf): backslashes doubled
// as \e, and a line that starts with '.' or '\'' (a roff request) guarded with \&.
std::string roff_text(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";  // an ASCII hyphen-minus, so that flags can be copied and searched
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string man_page() {
  std::string out =
      ".\\\" The manual page of opscope, made by `opscope completion man` from its --help texts.\n";
  out +=
      ".TH OPSCOPE 1 \"\" \"opscope " + std::string(OPSCOPE_CLI_VERSION) + "\" \"User Commands\"\n";
  out +=
      ".SH NAME\nopscope \\- profile PyTorch and C++ programs, on demand, and analyze their "
      "traces\n";
  out += ".SH SYNOPSIS\n.nf\n" + roff_text(main_help()) + ".fi\n";
  for (const Entry& e : entries()) {
    std::string upper = "OPSCOPE " + e.words;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    out += ".SH \"" + upper + "\"\n" + roff_text(e.summary) + "\n.PP\n.nf\n" + roff_text(e.help) +
           ".fi\n";
  }
  out += ".SH SEE ALSO\nperf(1)\n";
  return out;
}

std::string completion_text(const std::string& shell) {
  if (shell == "bash") return bash_script();
  if (shell == "zsh") return zsh_script();
  if (shell == "man") return man_page();
  throw UsageError("expects bash, zsh or man, got '" + shell + "'");
}

namespace {

int run_completion(const std::vector<std::string>& args, std::ostream& out, std::ostream&) {
  if (args.size() != 2) {
    throw UsageError("expects one of bash, zsh or man, got " + std::to_string(args.size() - 1) +
                     " arguments");
  }
  out << completion_text(args[1]);
  return kExitOk;
}

}  // namespace

const Subcommand& completion_subcommand() {
  static const Subcommand s{"completion",
                            "print shell completion (bash, zsh) or the manual page (man)",
                            completion_help, nullptr, run_completion};
  return s;
}

}  // namespace opscope::cli
