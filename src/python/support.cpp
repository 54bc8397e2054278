#include "python/support.h"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <vector>

#include "util/log.h"

namespace nmt::python {

Interruption::Interruption() : thread_(std::this_thread::get_id()) {
  const py::module_ threading = py::module_::import("threading");
  main_thread_ = threading.attr("main_thread")().is(threading.attr("current_thread")());
}

bool Interruption::requested() {
  if (error_) return true;
  if (!main_thread_ || std::this_thread::get_id() != thread_) return false;
  py::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) error_.emplace();  // takes the handler's exception
  return error_.has_value();
}

void Interruption::raise_if_requested() {
  if (!error_) return;
  py::error_already_set error = std::move(*error_);
  error_.reset();
  throw error;
}

void run_interruptible(Interruption& interruption, const std::function<void()>& work) {
  try {
    py::gil_scoped_release release;
    work();
  } catch (const Stopped&) {
    interruption.raise_if_requested();
    throw;
  }
  interruption.raise_if_requested();
}

std::vector<std::string> keyword_arguments(const CLI::App& app, const py::kwargs& keywords, const std::string& function,
                                           const std::function<std::string(const std::string& key)>& refused) {
  std::vector<std::string> arguments;
  for (const auto& [key_object, value] : keywords) {
    const std::string key = py::str(key_object);
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    if (const std::string reason = refused ? refused(key) : ""; !reason.empty()) {
      throw py::type_error(function + "(): " + key + " " + reason);
    }
    const CLI::Option* option =
        name.rfind('-', 0) == 0 || name == "help" ? nullptr : app.get_option_no_throw("--" + name);
    if (option == nullptr) throw py::type_error(function + "() got an unexpected keyword argument '" + key + "'");
    if (value.is_none()) continue;
    if (py::isinstance<py::bool_>(value)) {
      const bool on = value.cast<bool>();
      if (option->get_expected_min() == 0) {
        // A flag no configuration file can set (--resume) is off unless given: False gives nothing,
        // as --resume=false would count as given and clash with --overwrite.
        if (!on && !option->get_configurable()) continue;
        arguments.push_back("--" + name + (on ? "" : "=false"));
      } else {
        arguments.push_back("--" + name + "=" + (on ? "true" : "false"));
      }
    } else if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      for (const py::handle item : value) arguments.push_back("--" + name + "=" + std::string(py::str(item)));
    } else {
      arguments.push_back("--" + name + "=" + std::string(py::str(value)));
    }
  }
  return arguments;
}

void parse_arguments(CLI::App& app, std::vector<std::string> arguments, const std::string& function) {
  std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first
  try {
    app.parse(arguments);
  } catch (const CLI::ParseError& error) {
    throw py::value_error(function + "(): " + error.what());
  }
}

void parse_keywords(CLI::App& app, const py::kwargs& keywords, const std::string& function,
                    const std::function<std::string(const std::string& key)>& refused) {
  parse_arguments(app, keyword_arguments(app, keywords, function, refused), function);
}

namespace {

// spdlog's messages as Python logging records. No mutex of its own: it runs with the GIL, which
// orders the messages, and a second lock could deadlock against it.
class PythonSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    py::gil_scoped_acquire gil;
    const std::string name = message.logger_name.size() == 0
                                 ? "nmt"
                                 : "nmt." + std::string(message.logger_name.data(), message.logger_name.size());
    try {
      py::module_::import("logging").attr("getLogger")(name).attr("log")(
          python_level(message.level), std::string(message.payload.data(), message.payload.size()));
    } catch (py::error_already_set& error) {
      // Python code runs here, so a pending Ctrl-C may fire here: it is armed again for the work's
      // next check (Interruption) instead of being lost in spdlog's error handler. A failing
      // handler of the user's is reported as Python reports such errors.
      if (error.matches(PyExc_KeyboardInterrupt)) {
        PyErr_SetInterrupt();
      } else {
        error.discard_as_unraisable(("logging " + name).c_str());
      }
    }
  }
  void flush_() override {}

 private:
  static int python_level(spdlog::level::level_enum level) {
    switch (level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        return 10;  // logging.DEBUG
      case spdlog::level::info:
        return 20;
      case spdlog::level::warn:
        return 30;
      case spdlog::level::err:
        return 40;
      default:
        return 50;
    }
  }
};

}  // namespace

void send_logs_to_python() {
  set_console_sinks([] { return std::make_shared<PythonSink>(); });
  // No Python to send to while the interpreter finishes.
  py::module_::import("atexit").attr("register")(py::cpp_function([] { set_console_sinks({}); }));
}

}  // namespace nmt::python
