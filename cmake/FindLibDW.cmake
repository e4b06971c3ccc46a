# FindLibDW: elfutils' libdw (Debian: libdw-dev), which opscope's symbolizer uses for file:line.
#
#   find_package(LibDW)        # LibDW_FOUND, LibDW_INCLUDE_DIR, LibDW_LIBRARY
#   target_link_libraries(t PRIVATE LibDW::LibDW)
#
# Installed with opscope's package config, which needs it only for the static library.
find_path(LibDW_INCLUDE_DIR elfutils/libdwfl.h)
find_library(LibDW_LIBRARY dw)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibDW REQUIRED_VARS LibDW_LIBRARY LibDW_INCLUDE_DIR)
mark_as_advanced(LibDW_INCLUDE_DIR LibDW_LIBRARY)
if(LibDW_FOUND AND NOT TARGET LibDW::LibDW)
  add_library(LibDW::LibDW UNKNOWN IMPORTED)
  set_target_properties(LibDW::LibDW PROPERTIES
    IMPORTED_LOCATION "${LibDW_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LibDW_INCLUDE_DIR}")
endif()
