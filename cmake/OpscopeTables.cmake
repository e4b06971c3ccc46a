# The tables a new file joins without an edit anywhere else: `opscope` subcommands
# (tools/<name>_command.cpp), activity backends (src/backend/<name>_backend.cpp) and reports
# (src/analysis/reports/<name>.cpp).
include_guard(GLOBAL)

# opscope_write_table(<output> <macro> <suffix> <source>...): writes <output>, one line
# `<macro>(<name>)` for each source file named <name><suffix>.cpp, in the order given; the
# file that builds the table includes it, with <macro> defined as it needs.
function(opscope_write_table output macro suffix)
  set(lines "")
  foreach(source IN LISTS ARGN)
    get_filename_component(file ${source} NAME_WE)
    if(file MATCHES "^(.+)${suffix}$")
      string(APPEND lines "${macro}(${CMAKE_MATCH_1})\n")
    endif()
  endforeach()
  file(CONFIGURE OUTPUT ${output} CONTENT "${lines}")
endfunction()
