// Where the program's messages go. The command writes them to standard error; the Python module
// (src/python) sends them to Python's logging instead. Every logger that prints to the console
// takes its sink from console_sink(), so one call moves all of them.
#pragma once

#include <spdlog/spdlog.h>

#include <functional>
#include <memory>
#include <string>

namespace nmt {

// A new console sink (each logger formats its own): standard error, colored on a terminal, unless
// set_console_sinks chose another kind.
spdlog::sink_ptr console_sink();

// From now on console_sink() makes its sinks with `make`; the default logger gets one at once,
// keeping its level. An empty `make`: standard error again.
void set_console_sinks(std::function<spdlog::sink_ptr()> make);

// A logger that writes to the console with the run's pattern ("[date time] [level] message") at the
// level SPDLOG_LEVEL gives its name. It replaces a logger of that name made before, so that a
// process may run the work more than once.
std::shared_ptr<spdlog::logger> make_console_logger(const std::string& name);

// A status line under the console's messages, redrawn in place (training's progress): only when
// standard error is a terminal and the console is standard error; elsewhere these do nothing, and
// messages stay plain lines. A message printed meanwhile clears it, prints, and draws it again.
bool status_line_enabled();
// Draws `text` (one line, cut to the terminal's width) as the status line; "" removes it.
void set_status_line(const std::string& text);

}  // namespace nmt
