// The floor under `opscope analyze` on a plain .json trace (bench/analyze_bench.py runs it):
// the least a program can do that still looks at every event of the trace with simdjson, the
// JSON library opscope reads with. It reads the file whole, then walks every field of every
// event (and of its args) as a raw token: no number parsed, no string unescaped, nothing kept,
// on one core. Whatever `opscope analyze` does on top (the model, the flows, the report, a
// second core) is measured against this.
//
//     trace_walk_floor TRACE.json      prints the events and fields it walked
#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

namespace od = simdjson::ondemand;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_walk_floor TRACE.json\n");
    return 2;
  }
  const int fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::perror(argv[1]);
    return 1;
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  const std::unique_ptr<char[]> text(new char[size + simdjson::SIMDJSON_PADDING]);
  std::size_t got = 0;
  for (ssize_t n = 0; got < size && (n = ::read(fd, text.get() + got, size - got)) > 0;) {
    got += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (got != size) {
    std::fprintf(stderr, "%s: short read\n", argv[1]);
    return 1;
  }
  std::size_t events = 0, fields = 0, bytes = 0;
  od::parser parser;
  od::document doc;
  od::array array;
  if (parser.iterate(text.get(), size, size + simdjson::SIMDJSON_PADDING).get(doc) ||
      doc["traceEvents"].get_array().get(array)) {
    std::fprintf(stderr, "%s: no traceEvents array\n", argv[1]);
    return 1;
  }
  for (auto event : array) {
    od::object object;
    if (event.get_object().get(object)) return 1;
    ++events;
    for (auto field : object) {
      od::value value;
      if (field.value().get(value)) return 1;
      ++fields;
      od::json_type type{};
      if (value.type().get(type)) return 1;
      if (type == od::json_type::object) {
        for (auto arg : value.get_object()) {
          std::string_view raw;
          if (arg.value().raw_json_token().get(raw)) return 1;
          bytes += raw.size();
          ++fields;
        }
        continue;
      }
      bytes += value.raw_json_token().size();
    }
  }
  std::printf("%zu events, %zu fields, %zu bytes of values\n", events, fields, bytes);
  return 0;
}
