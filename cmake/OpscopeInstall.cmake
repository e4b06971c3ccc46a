# Install rules, the CMake package config and the pkg-config file, so that an installed opscope
# is used in any of three ways (README, "Using an installed opscope"):
#   find_package(opscope REQUIRED)  +  target_link_libraries(app PRIVATE opscope::opscope)
#   g++ -std=c++20 app.cpp $(pkg-config --cflags --libs opscope)
#   g++ -std=c++20 app.cpp -lopscope
# Every path below is relative to the prefix, so `cmake --install build --prefix P` works for
# any P, and the package files find their prefix from where they lie.
include(CMakePackageConfigHelpers)

set(OPSCOPE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/opscope)
set(opscope_install_targets opscope)
if(TARGET opscope_static)
  list(APPEND opscope_install_targets opscope_static)
endif()
# The allocator hook (src/memhook), in the same export set: find_package consumers get
# opscope::memhook. Not built under sanitizers, hence the guard.
if(TARGET opscope_memhook)
  list(APPEND opscope_install_targets opscope_memhook)
endif()
install(TARGETS ${opscope_install_targets} EXPORT opscopeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/opscope DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT opscopeTargets NAMESPACE opscope:: FILE opscopeTargets.cmake
  DESTINATION ${OPSCOPE_CMAKE_DIR})

# The static library's private dependencies become its users' link dependencies, found through
# imported targets (fmt::fmt, ZLIB::ZLIB, simdjson::simdjson, LibDeflate::LibDeflate); the
# shared library needs none of them. (libdw is loaded at run time, with dlopen.)
set(OPSCOPE_PACKAGE_STATIC OFF)
if(TARGET opscope_static)
  set(OPSCOPE_PACKAGE_STATIC ON)
  install(FILES ${PROJECT_SOURCE_DIR}/cmake/FindLibDeflate.cmake DESTINATION ${OPSCOPE_CMAKE_DIR})
endif()
configure_package_config_file(cmake/opscopeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/opscopeConfig.cmake
  INSTALL_DESTINATION ${OPSCOPE_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/opscopeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/opscopeConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/opscopeConfigVersion.cmake
  DESTINATION ${OPSCOPE_CMAKE_DIR})

# pkg-config: the prefix is found from the .pc file's own folder (${pcfiledir}), so the file is
# right under whatever prefix it was installed to. Libs carries an rpath to the library folder:
# a program built against a prefix outside the loader's search path (/opt/opscope) then runs
# without LD_LIBRARY_PATH.
set(OPSCOPE_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH OPSCOPE_PC_TO_PREFIX "/prefix/${OPSCOPE_PKGCONFIG_DIR}" "/prefix")
string(REGEX REPLACE "/$" "" OPSCOPE_PC_TO_PREFIX "${OPSCOPE_PC_TO_PREFIX}")
set(OPSCOPE_PC_CFLAGS "")
if(OPSCOPE_FRAME_POINTERS)
  set(OPSCOPE_PC_CFLAGS "-fno-omit-frame-pointer")
endif()
set(OPSCOPE_PC_LIBS_PRIVATE "-lfmt -lz -lsimdjson -ldeflate -ldl")
configure_file(${PROJECT_SOURCE_DIR}/cmake/opscope.pc.in ${CMAKE_CURRENT_BINARY_DIR}/opscope.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/opscope.pc DESTINATION ${OPSCOPE_PKGCONFIG_DIR})
if(TARGET opscope_memhook)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/opscope-memhook.pc.in
    ${CMAKE_CURRENT_BINARY_DIR}/opscope-memhook.pc @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/opscope-memhook.pc DESTINATION ${OPSCOPE_PKGCONFIG_DIR})
endif()
