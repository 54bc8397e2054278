// What the Python bindings share: Ctrl-C while C++ works, keyword arguments read as the command's
// options, and C++ messages sent to Python's logging.
#pragma once

#include <pybind11/pybind11.h>

#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace CLI {
class App;
}

namespace nmt::python {

namespace py = pybind11;

// The C++ work saw a Ctrl-C and stopped: the binding raises what Python's handler raised.
struct Stopped : std::exception {
  const char* what() const noexcept override { return "interrupted"; }
};

// Ctrl-C while C++ works with the GIL released: Python only notes the signal, and its handler runs
// when the main thread next holds the GIL. The work calls requested() between pieces (batches,
// updates); on the thread that made the Interruption, when that is Python's main thread, it runs the
// pending handlers, and a handler that raises (KeyboardInterrupt) makes it true from then on.
// Elsewhere it only reports what that thread saw. Make it with the GIL held.
class Interruption {
 public:
  Interruption();

  bool requested();
  // After the work (GIL held): raises the handler's exception, if one was raised.
  void raise_if_requested();

 private:
  std::thread::id thread_;
  bool main_thread_ = false;
  std::optional<py::error_already_set> error_;
};

// Runs `work` with the GIL released, `interruption` polled by it. Once the GIL is back, a Ctrl-C
// seen (whether `work` stopped with Stopped or finished its piece) raises the handler's exception.
void run_interruptible(Interruption& interruption, const std::function<void()>& work);

// Keyword arguments as command-line options of `app` (declared by the command's own code), in
// command-line order: key beam_size is --beam-size. True gives a flag, False --flag=false, a list
// one --key=value per item, None nothing; anything else its str(). A key `app` lacks, or one for
// which `refused` gives a reason, raises TypeError naming `function`.
std::vector<std::string> keyword_arguments(const CLI::App& app, const py::kwargs& keywords, const std::string& function,
                                           const std::function<std::string(const std::string& key)>& refused = {});

// Parses `arguments` (in command-line order) with `app`, as the command line is parsed: the same
// defaults, checks and messages. A value that does not parse raises ValueError with CLI11's message.
void parse_arguments(CLI::App& app, std::vector<std::string> arguments, const std::string& function);

// keyword_arguments, then parse_arguments.
void parse_keywords(CLI::App& app, const py::kwargs& keywords, const std::string& function,
                    const std::function<std::string(const std::string& key)>& refused = {});

// From now on the program's messages (the training's progress, warnings) go to Python's logging:
// logger "nmt" (and "nmt.train" for a training run's), levels mapped to logging's. At exit,
// standard error again.
void send_logs_to_python();

}  // namespace nmt::python
