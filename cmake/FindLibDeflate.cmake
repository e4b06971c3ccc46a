# FindLibDeflate: libdeflate (Debian: libdeflate-dev), which read_trace() inflates .json.gz with.
#
#   find_package(LibDeflate)   # LibDeflate_FOUND, LibDeflate_INCLUDE_DIR, LibDeflate_LIBRARY
#   target_link_libraries(t PRIVATE LibDeflate::LibDeflate)
#
# Installed with opscope's package config, which needs it only for the static library.
find_path(LibDeflate_INCLUDE_DIR libdeflate.h)
find_library(LibDeflate_LIBRARY deflate)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(LibDeflate REQUIRED_VARS LibDeflate_LIBRARY LibDeflate_INCLUDE_DIR)
mark_as_advanced(LibDeflate_INCLUDE_DIR LibDeflate_LIBRARY)
if(LibDeflate_FOUND AND NOT TARGET LibDeflate::LibDeflate)
  add_library(LibDeflate::LibDeflate UNKNOWN IMPORTED)
  set_target_properties(LibDeflate::LibDeflate PROPERTIES
    IMPORTED_LOCATION "${LibDeflate_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${LibDeflate_INCLUDE_DIR}")
endif()
