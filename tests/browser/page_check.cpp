// nmt_page_check: the page of nmt serve in a real browser. Starts Debian's chromedriver, opens the
// page of a running server in headless chromium (WebDriver over HTTP), types a sentence, presses
// Translate, and checks what the page then shows against the server's own answer: the
// translation, one heatmap cell per attention weight, the hover text of a cell, and the time the
// request took. Optionally saves a screenshot. Exit 0 when every check holds; otherwise each
// failed check is printed and the exit status is 1.
//
//   nmt_page_check --port PORT [--sentence TEXT] [--screenshot FILE.png] [--chromium PATH]
//                  [--chromedriver PATH]
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// WebDriver's key for an element reference (W3C WebDriver, "web element identifier").
constexpr const char* kElement = "element-6066-11e4-a52e-4f735466cecf";

int failures = 0;

void check(bool holds, const std::string& what) {
  std::cout << (holds ? "  ok: " : "  FAILED: ") << what << "\n";
  if (!holds) ++failures;
}

// A free TCP port on 127.0.0.1 for chromedriver.
int free_port() {
  const int socket = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (::bind(socket, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(socket, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw std::runtime_error("no free port for chromedriver");
  }
  ::close(socket);
  return ntohs(address.sin_port);
}

std::string base64_decode(const std::string& text) {
  static const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  unsigned value = 0;
  int bits = -8;
  for (char c : text) {
    const size_t digit = alphabet.find(c);
    if (digit == std::string::npos) continue;  // padding, line breaks
    value = (value << 6) | static_cast<unsigned>(digit);
    bits += 6;
    if (bits >= 0) {
      bytes.push_back(static_cast<char>((value >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return bytes;
}

// One WebDriver session of chromedriver on `port`.
class Browser {
 public:
  Browser(int port, const std::string& chromium) : driver_("127.0.0.1", port) {
    driver_.set_read_timeout(120);
    const json capabilities = {{"capabilities",
                                {{"alwaysMatch",
                                  {{"browserName", "chrome"},
                                   {"goog:chromeOptions",
                                    {{"binary", chromium},
                                     {"args",
                                      {"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                       "--window-size=1100,900", "--lang=en"}}}}}}}}};
    session_ = "/session/" + call("POST", "/session", capabilities)["sessionId"].get<std::string>();
  }
  ~Browser() { driver_.Delete(session_.c_str()); }

  json call(const std::string& method, const std::string& path, const json& body = json::object()) {
    httplib::Result result =
        method == "GET" ? driver_.Get(path.c_str()) : driver_.Post(path.c_str(), body.dump(), "application/json");
    if (!result) throw std::runtime_error("chromedriver: " + httplib::to_string(result.error()) + " on " + path);
    const json answer = json::parse(result->body);
    if (result->status != 200) {
      throw std::runtime_error("chromedriver: " + path + ": " + answer["value"].value("message", result->body));
    }
    return answer["value"];
  }
  json session(const std::string& method, const std::string& path, const json& body = json::object()) {
    return call(method, session_ + path, body);
  }
  std::vector<std::string> find_all(const std::string& css) {
    std::vector<std::string> elements;
    for (const json& element : session("POST", "/elements", {{"using", "css selector"}, {"value", css}})) {
      elements.push_back(element[kElement]);
    }
    return elements;
  }
  std::string find(const std::string& css) {
    const auto elements = find_all(css);
    if (elements.empty()) throw std::runtime_error("the page has no " + css);
    return elements.front();
  }
  std::string text(const std::string& element) { return session("GET", "/element/" + element + "/text"); }
  std::string attribute(const std::string& element, const std::string& name) {
    const json value = session("GET", "/element/" + element + "/attribute/" + name);
    return value.is_string() ? value.get<std::string>() : "";
  }

 private:
  httplib::Client driver_;
  std::string session_;
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  std::string sentence = "Ein Hund rennt durch den Schnee .";
  std::string screenshot;
  std::string chromium = "/usr/bin/chromium";
  std::string chromedriver = "/usr/bin/chromedriver";
  CLI::App app{"nmt_page_check: nmt serve's page in headless chromium"};
  app.add_option("--port", port, "the port of a running nmt serve")->required();
  app.add_option("--sentence", sentence, "the sentence to type")->capture_default_str();
  app.add_option("--screenshot", screenshot, "save a PNG of the page here");
  app.add_option("--chromium", chromium)->capture_default_str();
  app.add_option("--chromedriver", chromedriver)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // What the page must show: the server's own answer for the sentence (the page asks for beam 5).
  httplib::Client server("127.0.0.1", port);
  server.set_read_timeout(60);
  httplib::Result expected_result = server.Post(
      "/translate", json{{"text", {sentence}}, {"beam_size", 5}, {"attention", true}}.dump(), "application/json");
  if (!expected_result || expected_result->status != 200) {
    std::cerr << "nmt_page_check: no answer from nmt serve on port " << port << "\n";
    return 1;
  }
  const json expected = json::parse(expected_result->body)["translations"][0];

  const int driver_port = free_port();
  const pid_t driver = ::fork();
  if (driver == 0) {
    const std::string port_option = "--port=" + std::to_string(driver_port);
    ::execl(chromedriver.c_str(), chromedriver.c_str(), port_option.c_str(), "--silent", nullptr);
    ::_exit(127);
  }
  int status = 1;
  try {
    httplib::Client probe("127.0.0.1", driver_port);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!probe.Get("/status")) {
      if (Clock::now() > deadline) throw std::runtime_error("chromedriver did not start within 30 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Browser browser(driver_port, chromium);
    browser.session("POST", "/url", {{"url", "http://127.0.0.1:" + std::to_string(port) + "/"}});
    std::cout << "page_check: typing \"" << sentence << "\"\n";
    browser.session("POST", "/element/" + browser.find("#source") + "/value", {{"text", sentence}});
    browser.session("POST", "/element/" + browser.find("#translate") + "/click");

    // Wait for the answer to be drawn.
    const size_t rows = expected["attention"]["target"].size();
    const size_t columns = expected["attention"]["source"].size();
    std::vector<std::string> cells;
    const auto drawn_by = Clock::now() + std::chrono::seconds(30);
    while ((cells = browser.find_all("#results svg.heatmap rect.cell")).size() < rows * columns &&
           Clock::now() < drawn_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const std::string translation = browser.text(browser.find("#results .translation"));
    const std::string expected_text = expected["text"];
    std::cout << "page_check: the page shows \"" << translation << "\"\n";
    check(translation.rfind(expected_text, 0) == 0, "the translation is the server's: \"" + expected_text + "\"");
    check(cells.size() == rows * columns, "the heatmap has " + std::to_string(rows) + " x " + std::to_string(columns) +
                                              " cells (found " + std::to_string(cells.size()) + ")");
    const std::string time = browser.text(browser.find("#time"));
    check(std::regex_match(time, std::regex(R"(1 sentence in \d+ ms)")), "the time is shown: \"" + time + "\"");
    check(browser.text(browser.find("#error")).empty(), "no error is shown");
    check(browser.text(browser.find("#model")).find("attention") != std::string::npos,
          "the model's description is shown (from /health)");

    // Hover over the cell with the largest weight of the first row: the tooltip names both tokens.
    size_t best = 0;
    const json& first_row = expected["attention"]["weights"][0];
    for (size_t j = 1; j < first_row.size(); ++j) {
      if (first_row[j].get<double>() > first_row[best].get<double>()) best = j;
    }
    if (!cells.empty()) {
      const std::string cell = cells[best];
      browser.session(
          "POST", "/actions",
          {{"actions",
            {{{"type", "pointer"},
              {"id", "mouse"},
              {"parameters", {{"pointerType", "mouse"}}},
              {"actions",
               {{{"type", "pointerMove"}, {"duration", 0}, {"origin", {{kElement, cell}}}, {"x", 0}, {"y", 0}}}}}}}});
      const std::string tooltip = browser.text(browser.find("#tooltip"));
      const std::string source_token = expected["attention"]["source"][best];
      const std::string target_token = expected["attention"]["target"][0];
      char weight[32];
      std::snprintf(weight, sizeof(weight), "%.3f", first_row[best].get<double>());
      std::cout << "page_check: hovering over cell (0, " << best << ") shows \"" << tooltip << "\"\n";
      check(tooltip == target_token + " \u2190 " + source_token + ": " + weight,
            "the hover text names the output token, the source token and the weight");
    }
    // Completion: a typed start of the translation (its last word), then Translate: the page shows
    // the server's translation from that start.
    const std::string start = expected_text.substr(expected_text.find_last_of(' ') + 1);
    httplib::Result completed_result = server.Post(
        "/translate", json{{"text", {sentence}}, {"prefix", {start}}, {"beam_size", 5}, {"attention", true}}.dump(),
        "application/json");
    check(completed_result && completed_result->status == 200, "the server completes \"" + start + "\"");
    const std::string completed_text =
        completed_result ? json::parse(completed_result->body)["translations"][0]["text"].get<std::string>() : "";
    std::cout << "page_check: typing the start \"" << start << "\"\n";
    browser.session("POST", "/element/" + browser.find("#prefix") + "/value", {{"text", start}});
    browser.session("POST", "/element/" + browser.find("#translate") + "/click");
    std::string completion;
    const auto completed_by = Clock::now() + std::chrono::seconds(30);
    while (completion.rfind(completed_text, 0) != 0 && Clock::now() < completed_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      try {
        completion = browser.text(browser.find("#results .translation"));
      } catch (const std::runtime_error&) {  // the results were redrawn between finding and reading
      }
    }
    std::cout << "page_check: the page shows \"" << completion << "\"\n";
    check(completion.rfind(start, 0) == 0 && completion.rfind(completed_text, 0) == 0,
          "the translation starts with \"" + start + "\" and is the server's: \"" + completed_text + "\"");
    if (!screenshot.empty()) {
      std::ofstream(screenshot, std::ios::binary) << base64_decode(browser.session("GET", "/screenshot"));
      std::cout << "page_check: screenshot in " << screenshot << "\n";
    }
    status = failures == 0 ? 0 : 1;
  } catch (const std::exception& error) {
    std::cerr << "nmt_page_check: " << error.what() << "\n";
    status = 1;
  }
  ::kill(driver, SIGTERM);
  ::waitpid(driver, nullptr, 0);
  std::cout << "page_check: " << (status == 0 ? "every check holds" : "FAILED") << "\n";
  return status;
}
