# Included by src/report/CMakeLists.txt: inlines uPlot (npm package `uplot`,
# pinned in package-lock.json, installed by scripts/setup) and the page's own
# script and style into a header generated in the build tree, which
# html_report.cpp includes. Nothing generated is committed; uPlot's source
# never enters the repository.
set(GPULEAK_UPLOT_DIST ${CMAKE_SOURCE_DIR}/node_modules/uplot/dist)
if(NOT EXISTS ${GPULEAK_UPLOT_DIST}/uPlot.iife.min.js OR NOT EXISTS ${GPULEAK_UPLOT_DIST}/uPlot.min.css)
  message(FATAL_ERROR "uPlot is not installed (node_modules/uplot): run scripts/setup (npm ci) first")
endif()

set(gpuleak_html_dir ${CMAKE_CURRENT_LIST_DIR})
set(gpuleak_html_assets_header ${CMAKE_CURRENT_BINARY_DIR}/generated/html_report_assets.h)
add_custom_command(
  OUTPUT ${gpuleak_html_assets_header}
  COMMAND ${CMAKE_COMMAND}
          -DOUTPUT=${gpuleak_html_assets_header}
          -DUPLOT_JS=${GPULEAK_UPLOT_DIST}/uPlot.iife.min.js
          -DUPLOT_CSS=${GPULEAK_UPLOT_DIST}/uPlot.min.css
          -DPAGE_JS=${gpuleak_html_dir}/report.js
          -DPAGE_CSS=${gpuleak_html_dir}/report.css
          -P ${gpuleak_html_dir}/embed_assets.cmake
  DEPENDS ${gpuleak_html_dir}/embed_assets.cmake
          ${GPULEAK_UPLOT_DIST}/uPlot.iife.min.js
          ${GPULEAK_UPLOT_DIST}/uPlot.min.css
          ${gpuleak_html_dir}/report.js
          ${gpuleak_html_dir}/report.css
  COMMENT "Inlining uPlot and the HTML report's script and style"
  VERBATIM)
target_sources(gpuleak_report PRIVATE ${gpuleak_html_assets_header})
target_include_directories(gpuleak_report PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
