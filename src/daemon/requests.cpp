#include "daemon/requests.h"

#include <cstdint>
#include <string>
#include <utility>

#include "json/json_reader.h"
#include "json/json_writer.h"
#include "opscope/error.h"

namespace opscope::ondemand {

using internal::JsonValue;
using internal::JsonWriter;

namespace {

std::int64_t int_field(const JsonValue& doc, std::string_view key, std::int64_t fallback) {
  const JsonValue* v = doc.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_integer()) {
    throw Error("field \"" + std::string(key) + "\" must be an integer, not " +
                std::string(internal::json_type_name(v->type())));
  }
  return v->as_int();
}

void write_ints(JsonWriter& w, std::string_view key, const std::vector<std::int32_t>& values) {
  w.key(key);
  w.begin_array();
  for (const std::int32_t v : values) w.integer(v);
  w.end_array();
}

// A daemon's answer, parsed; its {"error": ...} thrown as an Error with the daemon's message.
JsonValue parse_answer(std::string_view json) {
  JsonValue doc = internal::parse_json(json);
  if (const JsonValue* e = doc.find("error")) {
    throw Error("the daemon refused the request: " +
                (e->type() == JsonValue::Type::kString ? e->as_string() : std::string("?")));
  }
  return doc;
}

}  // namespace

TraceRequest parse_trace_request(std::string_view json) {
  const JsonValue doc = internal::parse_json(json);
  if (doc.type() != JsonValue::Type::kObject) throw Error("the request must be a JSON object");
  TraceRequest r;
  const JsonValue* config = doc.find("config");
  if (config == nullptr) throw Error("field \"config\" is missing");
  if (config->type() != JsonValue::Type::kString) {
    throw Error("field \"config\" must be a string, not " +
                std::string(internal::json_type_name(config->type())));
  }
  r.config = config->as_string();
  r.job_id = int_field(doc, "job_id", 0);
  r.process_limit = int_field(doc, "process_limit", kDefaultProcessLimit);
  if (r.process_limit < 0) {
    throw Error("field \"process_limit\" must not be negative, got " +
                std::to_string(r.process_limit));
  }
  if (const JsonValue* pids = doc.find("pids")) {
    if (pids->type() != JsonValue::Type::kArray) {
      throw Error("field \"pids\" must be an array of integers, not " +
                  std::string(internal::json_type_name(pids->type())));
    }
    for (const JsonValue& p : pids->as_array()) {
      if (!p.is_integer() || p.as_int() < 0 || p.as_int() > INT32_MAX) {
        throw Error("field \"pids\" must hold process ids (integers from 0 to 2147483647)");
      }
      r.pids.push_back(static_cast<std::int32_t>(p.as_int()));
    }
  }
  return r;
}

std::string trace_request_json(const TraceRequest& request) {
  JsonWriter w;
  w.begin_object();
  w.key("fn");
  w.string(kTraceFn);
  w.key("config");
  w.string(request.config);
  w.key("job_id");
  w.integer(request.job_id);
  write_ints(w, "pids", request.pids);
  w.key("process_limit");
  w.integer(request.process_limit);
  w.end_object();
  return w.str();
}

std::string trace_result_json(const TraceResult& result) {
  JsonWriter w;
  w.begin_object();
  w.key("activityProfilersBusy");
  w.integer(result.busy);
  write_ints(w, "activityProfilersTriggered", result.triggered);
  w.key("eventProfilersBusy");
  w.integer(0);
  w.key("eventProfilersTriggered");
  w.begin_array();
  w.end_array();
  write_ints(w, "processesMatched", result.matched);
  if (result.request_id != 0) {
    w.key("opscopeRequestId");
    w.integer(static_cast<std::int64_t>(result.request_id));
  }
  if (!result.reasons.empty()) {
    w.key("opscopeReasons");
    w.begin_array();
    for (const std::string& r : result.reasons) w.string(r);
    w.end_array();
  }
  w.end_object();
  return w.str();
}

TraceResult parse_trace_result(std::string_view json) {
  const JsonValue doc = parse_answer(json);
  TraceResult r;
  const auto ints = [&](std::string_view key) {
    std::vector<std::int32_t> out;
    if (const JsonValue* a = doc.find(key)) {
      for (const JsonValue& v : a->as_array()) out.push_back(static_cast<std::int32_t>(v.as_int()));
    }
    return out;
  };
  if (const JsonValue* b = doc.find("activityProfilersBusy")) r.busy = b->as_int();
  if (const JsonValue* id = doc.find("opscopeRequestId"); id != nullptr && id->is_integer()) {
    r.request_id = static_cast<std::uint64_t>(id->as_int());
  }
  r.triggered = ints("activityProfilersTriggered");
  r.matched = ints("processesMatched");
  if (const JsonValue* a = doc.find("opscopeReasons")) {
    for (const JsonValue& v : a->as_array()) r.reasons.push_back(v.as_string());
  }
  return r;
}

std::string trace_status_request_json(std::uint64_t request_id) {
  JsonWriter w;
  w.begin_object();
  w.key("fn");
  w.string(kTraceStatusFn);
  w.key("request_id");
  w.integer(static_cast<std::int64_t>(request_id));
  w.end_object();
  return w.str();
}

std::uint64_t parse_trace_status_request(std::string_view json) {
  const std::int64_t id = int_field(internal::parse_json(json), "request_id", -1);
  if (id < 1) throw Error("field \"request_id\" must be a request id (an integer >= 1)");
  return static_cast<std::uint64_t>(id);
}

std::string trace_status_json(const std::vector<TraceStatus>& statuses) {
  JsonWriter w;
  w.begin_object();
  w.key("processes");
  w.begin_array();
  for (const TraceStatus& t : statuses) {
    w.begin_object();
    w.key("pid");
    w.integer(t.pid);
    w.key("known");
    w.boolean(t.known);
    w.key("delivered");
    w.boolean(t.delivered);
    w.key("state");
    w.string(t.state);
    w.key("detail");
    w.string(t.detail);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str();
}

std::vector<TraceStatus> parse_trace_status(std::string_view json) {
  const JsonValue doc = parse_answer(json);
  const JsonValue* list = doc.find("processes");
  if (list == nullptr || list->type() != JsonValue::Type::kArray) {
    throw Error("the daemon's answer has no \"processes\" list");
  }
  std::vector<TraceStatus> out;
  for (const JsonValue& p : list->as_array()) {
    TraceStatus t;
    const auto text = [&](std::string_view key) {
      const JsonValue* v = p.find(key);
      return v != nullptr && v->type() == JsonValue::Type::kString ? v->as_string() : std::string();
    };
    const auto flag = [&](std::string_view key) {
      const JsonValue* v = p.find(key);
      return v != nullptr && v->type() == JsonValue::Type::kBool && v->as_bool();
    };
    if (const JsonValue* pid = p.find("pid"); pid != nullptr && pid->is_integer()) {
      t.pid = static_cast<std::int32_t>(pid->as_int());
    }
    t.known = flag("known");
    t.delivered = flag("delivered");
    t.state = text("state");
    t.detail = text("detail");
    out.push_back(std::move(t));
  }
  return out;
}

std::string error_json(std::string_view message) {
  JsonWriter w;
  w.begin_object();
  w.key("error");
  w.string(message);
  w.end_object();
  return w.str();
}

}  // namespace opscope::ondemand
