# Install rules and the package config that lets another project write
#   find_package(opscope REQUIRED)
#   target_link_libraries(app PRIVATE opscope::opscope)
include(CMakePackageConfigHelpers)

install(TARGETS opscope EXPORT opscopeTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The allocator hook (src/memhook), in the same export set so that find_package consumers get
# opscope::memhook. Not built under sanitizers, hence the guard.
if(TARGET opscope_memhook)
  install(TARGETS opscope_memhook EXPORT opscopeTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(DIRECTORY include/opscope DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT opscopeTargets NAMESPACE opscope:: FILE opscopeTargets.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/opscope)

configure_package_config_file(cmake/opscopeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/opscopeConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/opscope)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/opscopeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/opscopeConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/opscopeConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/opscope)
