# Turns INPUT (the admin UI page) into OUTPUT, a C++ source defining
# rondel::server::kUiIndexHtml as a raw string literal. Run by the build (cmake -P).
file(READ ${INPUT} content)
set(delim "rondel_ui")
string(FIND "${content}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )${delim}\"")
endif()
file(WRITE ${OUTPUT}.tmp
  "// Generated from src/server/ui/index.html by src/server/ui/embed.cmake: do not edit.\n"
  "#include <string_view>\n\n"
  "namespace rondel::server {\n"
  "extern const std::string_view kUiIndexHtml;\n"
  "const std::string_view kUiIndexHtml = R\"${delim}(${content})${delim}\";\n"
  "}  // namespace rondel::server\n")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUTPUT}.tmp)
