// The user docs against the code they describe: every relative link and anchor of README.md,
// CHANGELOG.md, CONTRIBUTING.md and docs/ (its notes in docs/dev/ too) leads somewhere (a link
// named after a page to that page), every option every command declares is in docs/usage.md or
// the topic pages it hands on to, every configuration key is in docs/configuration.md with its
// default, every environment variable the program or a script reads is in docs/environment.md,
// docs/architecture.md names every folder of src/ and every command, and every figure of README's
// results table is in docs/benchmarks.md.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/program.h"
#include "config/train_config.h"
#include "helpers.h"

namespace nmt::testing {
namespace {

namespace fs = std::filesystem;

std::string text_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<fs::path> user_pages() {
  std::vector<fs::path> pages = {source_path("README.md"), source_path("CHANGELOG.md"), source_path("CONTRIBUTING.md")};
  for (const auto& entry : fs::recursive_directory_iterator(source_path("docs"))) {
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  return pages;
}

// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
std::string anchor_of(const std::string& heading) {
  std::string anchor;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '-' || c == '_' || c >= 0x80) {
      anchor += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

std::set<std::string> anchors_of(const fs::path& page) {
  std::set<std::string> anchors;
  std::istringstream lines(text_of(page));
  bool fenced = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    const size_t start = line.find_first_not_of('#');
    if (start == std::string::npos || line[start] != ' ') continue;
    anchors.insert(anchor_of(line.substr(start + 1)));
  }
  return anchors;
}

// The text outside code: indented blocks and fenced blocks hold commands, not links.
std::string prose_of(const fs::path& page) {
  std::string prose;
  std::istringstream lines(text_of(page));
  bool fenced = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (!fenced && line.rfind("    ", 0) != 0) prose += line + "\n";
  }
  return prose;
}

// Calls visit(page, match) for each match of `pattern` in the prose of every user page.
template <typename Visit>
void for_each_match(const std::regex& pattern, Visit visit) {
  for (const fs::path& page : user_pages()) {
    const std::string prose = prose_of(page);
    for (auto match = std::sregex_iterator(prose.begin(), prose.end(), pattern); match != std::sregex_iterator();
         ++match) {
      visit(page, *match);
    }
  }
}

// Whether `text` names the option --`name` itself, not only a longer one (--model in --model-dir).
bool mentions_option(const std::string& text, const std::string& name) {
  const std::string option = "--" + name;
  for (size_t at = text.find(option); at != std::string::npos; at = text.find(option, at + 1)) {
    const size_t end = at + option.size();
    const unsigned char next = end < text.size() ? text[end] : ' ';
    if (!std::isalnum(next) && next != '-') return true;
  }
  return false;
}

// Whether `c` may be inside a name or a path part ("reserve/" does not name "serve/").
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

// Whether `page` names the folder src/`folder` ("train", "model/linear"): as "NAME/" (NAME its last
// part, not the end of a longer name) or as "src/FOLDER" (not the start of a longer one).
bool page_names_folder(const std::string& page, const std::string& folder) {
  const std::string slashed = fs::path(folder).filename().string() + "/";
  for (size_t at = page.find(slashed); at != std::string::npos; at = page.find(slashed, at + 1)) {
    if (at == 0 || !is_name_char(page[at - 1])) return true;
  }
  const std::string path = "src/" + folder;
  for (size_t at = page.find(path); at != std::string::npos; at = page.find(path, at + 1)) {
    const size_t end = at + path.size();
    if (end == page.size() || !is_name_char(page[end])) return true;
  }
  return false;
}

// `text` without its inline code (`...`): commands and options, whose digits are no figures.
std::string without_code_spans(const std::string& text) {
  std::string prose;
  bool code = false;
  for (char c : text) {
    if (c == '`') {
      code = !code;
    } else if (!code) {
      prose += c;
    }
  }
  return prose;
}

// The figures written in `text` ("41.14", "3.04 s", "8,637"), thousands separators dropped ("8637");
// digits inside a name ("chrF2", "beam-5", "x86") are none.
std::vector<std::string> figures_of(const std::string& text) {
  const auto digit = [&text](size_t i) { return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); };
  std::vector<std::string> figures;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!digit(i)) continue;
    const char before = i > 0 ? text[i - 1] : ' ';
    const bool in_name = std::isalnum(static_cast<unsigned char>(before)) || before == '_' || before == '.' ||
                         (before == '-' && i > 1 && std::isalpha(static_cast<unsigned char>(text[i - 2])));
    size_t end = i;
    std::string figure;
    while (digit(end) || (end < text.size() && (text[end] == ',' || text[end] == '.') && digit(end + 1))) {
      if (text[end] != ',') figure += text[end];
      ++end;
    }
    if (!in_name) figures.push_back(figure);
    i = end - 1;
  }
  return figures;
}

// The cells of a Markdown table row "| a | b |", trimmed: {"a", "b"}.
std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream row(line.substr(1));
  for (std::string cell; std::getline(row, cell, '|');) {
    const size_t first = cell.find_first_not_of(' ');
    cells.push_back(first == std::string::npos ? "" : cell.substr(first, cell.find_last_not_of(' ') - first + 1));
  }
  return cells;
}

}  // namespace

TEST_CASE("docs: every relative link of the top-level pages and docs/ leads to a file and heading that exist",
          "[docs]") {
  const std::regex link(R"(\]\(([^)\s]+)\))");
  int checked = 0;
  for_each_match(link, [&](const fs::path& page, const std::smatch& match) {
    const std::string target = match[1];
    if (target.find("://") != std::string::npos || target.rfind("mailto:", 0) == 0) return;
    const size_t hash = target.find('#');
    const std::string file = target.substr(0, hash);
    const fs::path linked = file.empty() ? page : page.parent_path() / file;
    INFO(page.filename().string() << ": " << target);
    CHECK(fs::exists(linked));
    if (hash != std::string::npos && fs::exists(linked) && linked.extension() == ".md") {
      CHECK(anchors_of(linked).count(target.substr(hash + 1)) == 1);
    }
    ++checked;
  });
  CHECK(checked > 20);  // the pattern finds the links
}

TEST_CASE("docs: a link whose text names a page leads to that page", "[docs]") {
  // "[usage.md](serving.md)" promises one page and opens another.
  const std::regex link(R"(\[([^\]\s]+\.md)(#[^\]\s]*)?\]\(([^)#\s]*)[^)\s]*\))");
  int checked = 0;
  for_each_match(link, [&](const fs::path& page, const std::smatch& match) {
    const std::string named = fs::path(std::string(match[1])).filename().string();
    const std::string target = match[3];
    INFO(page.filename().string() << ": " << match.str());
    CHECK(named == (target.empty() ? page.filename().string() : fs::path(target).filename().string()));
    ++checked;
  });
  CHECK(checked > 10);  // the pattern finds the links
}

TEST_CASE(
    "docs: every option of every command is in docs/usage.md (or its topic pages), a key in docs/configuration.md",
    "[docs]") {
  cli::Program program({"nmt", {}});
  // usage.md, and the pages of the topics it hands on: serving, Python, several processes.
  std::string usage;
  for (const char* page : {"docs/usage.md", "docs/serving.md", "docs/python.md", "docs/distributed.md"}) {
    usage += text_of(source_path(page));
  }
  const std::string keys = text_of(source_path("docs/configuration.md"));
  int checked = 0;
  for (CLI::App* command : program.app.get_subcommands([](CLI::App*) { return true; })) {
    const bool trains = command->get_name() == "train" || command->get_name() == "prepare";
    for (const CLI::Option* option : command->get_options()) {
      for (const std::string& name : option->get_lnames()) {
        if (name == "help") continue;
        INFO("nmt " << command->get_name() << " --" << name);
        if (trains && option->get_configurable()) {
          CHECK(keys.find("| `" + name + "` |") != std::string::npos);
        } else {
          CHECK(mentions_option(usage, name));
        }
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("docs: every configuration key is in docs/configuration.md with its default and its resume rule", "[docs]") {
  // The page's rows: | `key` | default | on --resume | what it sets |
  std::map<std::string, std::string> rows, on_resume;
  const std::regex row(R"(^\| `([a-z0-9-]+)` \| ([^|]*) \| ([^|]*) \|)");
  std::istringstream lines(text_of(source_path("docs/configuration.md")));
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, row)) rows[match[1]] = match[2], on_resume[match[1]] = match[3];
  }
  const std::vector<std::string> fixed = keys_fixed_on_resume();
  cli::Program program({"nmt", {}});
  const CLI::App* train = program.app.get_subcommand("train");
  std::set<std::string> keys;
  for (const CLI::Option* option : train->get_options()) {
    if (!option->get_configurable() || option->get_lnames().empty() || option->get_lnames()[0] == "help") continue;
    const std::string key = option->get_lnames()[0];
    keys.insert(key);
    INFO("key " << key);
    REQUIRE(rows.count(key) == 1);
    std::string expected = option->get_default_str();
    if (option->get_type_name().rfind("BOOLEAN", 0) == 0) expected = expected == "1" ? "true" : "false";
    const bool is_fixed = std::find(fixed.begin(), fixed.end(), key) != fixed.end();
    CHECK(on_resume[key] == (is_fixed ? "fixed" : "may change"));
    if (expected.empty()) {
      CHECK((rows[key] == "required" || rows[key] == "`\"\"`"));
    } else {
      CHECK(rows[key] == "`" + expected + "`");
    }
  }
  CHECK(keys.size() > 40);
  for (const auto& [key, value] : rows) {
    INFO("a row for " << key);
    CHECK(keys.count(key) == 1);  // no row for a key that is gone
  }
}

TEST_CASE("docs: every environment variable the program or a script reads is in docs/environment.md", "[docs]") {
  const std::string page = text_of(source_path("docs/environment.md"));
  const std::regex cpp_read(R"re((?:getenv\(|option_or_environment\([^;]*?)"([A-Z][A-Z0-9_]*)")re");
  const std::regex python_read(R"re(environ(?:\.get\(|\[)\s*["']([A-Z][A-Z0-9_]*)["'])re");
  const std::regex shell_read(R"(\$\{?([A-Z][A-Z0-9_]*)(?![A-Za-z0-9_]))");
  const std::regex shell_assignment(R"((?:^|\n)\s*(?:export\s+|local\s+|readonly\s+)?([A-Z][A-Z0-9_]*)=)");
  // Bash's own variables, and the ones every system has.
  const std::set<std::string> shell_own = {"BASH_SOURCE", "SECONDS", "EPOCHREALTIME", "PIPESTATUS", "PATH",
                                           "HOME",        "PWD",     "UID",           "RANDOM",     "LINENO"};
  std::map<std::string, std::string> reads;  // variable -> a file that reads it
  const auto collect = [&](const std::regex& pattern, const std::string& text, const std::string& file,
                           const std::set<std::string>& skip) {
    for (auto match = std::sregex_iterator(text.begin(), text.end(), pattern); match != std::sregex_iterator();
         ++match) {
      if (skip.count((*match)[1]) == 0) reads.emplace((*match)[1], file);
    }
  };
  for (const std::string folder : {"src", "scripts", "tests", ".ci"}) {
    for (const auto& entry : fs::recursive_directory_iterator(source_path(folder))) {
      if (!entry.is_regular_file()) continue;
      const fs::path& path = entry.path();
      const std::string extension = path.extension().string();
      const std::string file = fs::relative(path, source_path("")).string();
      if (extension == ".cpp" || extension == ".h") {
        collect(cpp_read, text_of(path), file, {});
      } else if (extension == ".py") {
        collect(python_read, text_of(path), file, {});
      } else if (extension == ".sh" || path.filename() == "run") {
        const std::string text = text_of(path);
        std::set<std::string> skip = shell_own;
        for (auto match = std::sregex_iterator(text.begin(), text.end(), shell_assignment);
             match != std::sregex_iterator(); ++match) {
          skip.insert((*match)[1]);
        }
        collect(shell_read, text, file, skip);
      }
    }
  }
  for (const auto& [variable, file] : reads) {
    INFO(variable << ", read in " << file);
    CHECK(page.find("`" + variable + "`") != std::string::npos);
  }
  CHECK(reads.count("NMT_KERNELS") == 1);  // the patterns find what they are for
  CHECK(reads.count("MASTER_PORT") == 1);
  CHECK(reads.count("NMT_BUILD_JOBS") == 1);
  CHECK(reads.count("NMT_BINARY") == 1);
}

TEST_CASE("docs: docs/architecture.md names every folder of src/ and of src/model/, and every command", "[docs]") {
  const std::string page = text_of(source_path("docs/architecture.md"));
  REQUIRE(!page.empty());
  std::vector<std::string> folders;  // relative to src/
  for (const auto& entry : fs::directory_iterator(source_path("src"))) {
    if (entry.is_directory()) folders.push_back(entry.path().filename().string());
  }
  for (const auto& entry : fs::directory_iterator(source_path("src/model"))) {
    if (entry.is_directory()) folders.push_back("model/" + entry.path().filename().string());
  }
  for (const std::string& folder : folders) {
    INFO("src/" << folder << ": not named on docs/architecture.md (as " << fs::path(folder).filename().string()
                << "/ or src/" << folder << ")");
    CHECK(page_names_folder(page, folder));
  }
  CHECK(folders.size() > 15);  // the folders are found
  // The commands as the program has them (cli/program.cpp), each in the page's table as `nmt NAME`.
  cli::Program program({"nmt", {}});
  int commands = 0;
  for (CLI::App* command : program.app.get_subcommands([](CLI::App*) { return true; })) {
    INFO("nmt " << command->get_name() << ": not in docs/architecture.md's table of commands");
    CHECK(page.find("`nmt " + command->get_name() + "`") != std::string::npos);
    ++commands;
  }
  CHECK(commands > 10);
}

TEST_CASE("docs: every figure of README's results table is in docs/benchmarks.md", "[docs]") {
  // The figures of benchmarks.md, from its tables and its text, thousands separators dropped.
  const std::vector<std::string> measured = figures_of(without_code_spans(text_of(source_path("docs/benchmarks.md"))));
  const std::set<std::string> known(measured.begin(), measured.end());
  // README's table under "## Results": | what | command | result | machine |.
  std::istringstream lines(text_of(source_path("README.md")));
  bool in_results = false;
  size_t result_column = std::string::npos;
  int rows = 0, checked = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("## ", 0) == 0) in_results = line == "## Results";
    if (!in_results || line.rfind("|", 0) != 0 || line.rfind("| ---", 0) == 0) continue;
    const std::vector<std::string> cells = table_cells(line);
    if (result_column == std::string::npos) {  // the header
      result_column = static_cast<size_t>(std::find(cells.begin(), cells.end(), "result") - cells.begin());
      REQUIRE(result_column < cells.size());
      continue;
    }
    REQUIRE(result_column < cells.size());
    ++rows;
    for (const std::string& figure : figures_of(without_code_spans(cells[result_column]))) {
      INFO("README.md's results row '" << cells[0] << "': " << figure << " is in no table or text of benchmarks.md");
      CHECK(known.count(figure) == 1);
      ++checked;
    }
  }
  CHECK(rows > 5);  // the table is found
  CHECK(checked > 10);
}

}  // namespace nmt::testing
