// The page of GET / (serve/page.html, built into the program by CMake: no file to find at run
// time, nothing fetched from elsewhere).
#pragma once

namespace nmt::serve {

const char* page_html();

}  // namespace nmt::serve
