# Included by src/report/CMakeLists.txt: inlines uPlot (npm package `uplot`,
# pinned in package-lock.json, installed by scripts/setup) and the page's own
# script and style into a header generated in the build tree, which
# html_report.cpp includes. Nothing generated is committed; uPlot's source
# never enters the repository.
set(GPULEAK_UPLOT_DIST ${CMAKE_SOURCE_DIR}/node_modules/uplot/dist)
if(NOT EXISTS ${GPULEAK_UPLOT_DIST}/uPlot.iife.min.js OR NOT EXISTS ${GPULEAK_UPLOT_DIST}/uPlot.min.css)
  message(FATAL_ERROR "uPlot is not installed (node_modules/uplot): run scripts/setup (npm ci) first")
endif()

# d3 and d3-flame-graph (npm, pinned) draw the flame graphs; d3-flame-graph
# 5 expects d3 as a global, so both are inlined.
set(GPULEAK_D3_JS ${CMAKE_SOURCE_DIR}/node_modules/d3/dist/d3.min.js)
set(GPULEAK_FLAMEGRAPH_DIST ${CMAKE_SOURCE_DIR}/node_modules/d3-flame-graph/dist)
if(NOT EXISTS ${GPULEAK_D3_JS} OR NOT EXISTS ${GPULEAK_FLAMEGRAPH_DIST}/d3-flamegraph.umd.min.js)
  message(FATAL_ERROR "d3 or d3-flame-graph is not installed (node_modules): run scripts/setup (npm ci) first")
endif()

set(gpuleak_html_dir ${CMAKE_CURRENT_LIST_DIR})
set(gpuleak_html_assets_header ${CMAKE_CURRENT_BINARY_DIR}/generated/html_report_assets.h)
add_custom_command(
  OUTPUT ${gpuleak_html_assets_header}
  COMMAND ${CMAKE_COMMAND}
          -DOUTPUT=${gpuleak_html_assets_header}
          -DUPLOT_JS=${GPULEAK_UPLOT_DIST}/uPlot.iife.min.js
          -DUPLOT_CSS=${GPULEAK_UPLOT_DIST}/uPlot.min.css
          -DD3_JS=${GPULEAK_D3_JS}
          -DFLAMEGRAPH_JS=${GPULEAK_FLAMEGRAPH_DIST}/d3-flamegraph.umd.min.js
          -DFLAMEGRAPH_CSS=${GPULEAK_FLAMEGRAPH_DIST}/d3-flamegraph.css
          -DPAGE_JS=${gpuleak_html_dir}/report.js
          -DPAGE_CSS=${gpuleak_html_dir}/report.css
          -P ${gpuleak_html_dir}/embed_assets.cmake
  DEPENDS ${gpuleak_html_dir}/embed_assets.cmake
          ${GPULEAK_UPLOT_DIST}/uPlot.iife.min.js
          ${GPULEAK_UPLOT_DIST}/uPlot.min.css
          ${GPULEAK_D3_JS}
          ${GPULEAK_FLAMEGRAPH_DIST}/d3-flamegraph.umd.min.js
          ${GPULEAK_FLAMEGRAPH_DIST}/d3-flamegraph.css
          ${gpuleak_html_dir}/report.js
          ${gpuleak_html_dir}/report.css
  COMMENT "Inlining uPlot, d3, d3-flame-graph and the HTML report's script and style"
  VERBATIM)
target_sources(gpuleak_report PRIVATE ${gpuleak_html_assets_header})
target_include_directories(gpuleak_report PRIVATE ${CMAKE_CURRENT_BINARY_DIR})
