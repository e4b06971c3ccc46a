# ctest "package_consumer" (tests/CMakeLists.txt): installs the opscope build tree into a scratch
# prefix, then configures, builds and runs tests/consumer against that prefix only.
#
#   cmake -DOPSCOPE_BINARY_DIR=<build> -DCONSUMER_SOURCE_DIR=<tests/consumer>
#         -DWORK_DIR=<scratch> -P run_consumer.cmake
cmake_minimum_required(VERSION 3.20)

foreach(var OPSCOPE_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "run_consumer.cmake: pass -D${var}=...")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Build the consumer with the compiler and generator that built opscope.
file(STRINGS "${OPSCOPE_BINARY_DIR}/CMakeCache.txt" cache_lines
     REGEX "^(CMAKE_CXX_COMPILER|CMAKE_GENERATOR|CMAKE_MAKE_PROGRAM|CMAKE_BUILD_TYPE):")
foreach(line IN LISTS cache_lines)
  string(REGEX MATCH "^([A-Z_]+):[A-Z]+=(.*)$" _ "${line}")
  set(parent_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
endforeach()
set(generator_args)
if(parent_CMAKE_GENERATOR)
  list(APPEND generator_args -G "${parent_CMAKE_GENERATOR}")
  if(parent_CMAKE_MAKE_PROGRAM)
    list(APPEND generator_args "-DCMAKE_MAKE_PROGRAM=${parent_CMAKE_MAKE_PROGRAM}")
  endif()
endif()
if(parent_CMAKE_CXX_COMPILER)
  list(APPEND generator_args "-DCMAKE_CXX_COMPILER=${parent_CMAKE_CXX_COMPILER}")
endif()
if(NOT parent_CMAKE_BUILD_TYPE)
  set(parent_CMAKE_BUILD_TYPE Release)
endif()

# run_step(<what> <command...>): runs a command; on failure stops with its output.
function(run_step what)
  message(STATUS "package_consumer: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "package_consumer: ${what} failed (${rc})\n  command: ${cmd}\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install opscope into ${prefix}"
  "${CMAKE_COMMAND}" --install "${OPSCOPE_BINARY_DIR}" --prefix "${prefix}"
  --config "${parent_CMAKE_BUILD_TYPE}")

# Only the scratch prefix may satisfy find_package(opscope): no package registry, and the
# check below that opscope_DIR lies inside the prefix.
run_step("configure the consumer"
  "${CMAKE_COMMAND}" -S "${CONSUMER_SOURCE_DIR}" -B "${build}" ${generator_args}
  "-DCMAKE_BUILD_TYPE=${parent_CMAKE_BUILD_TYPE}"
  "-DCMAKE_PREFIX_PATH=${prefix}"
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
file(STRINGS "${build}/CMakeCache.txt" found_dir REGEX "^opscope_DIR:")
string(REGEX REPLACE "^opscope_DIR:[A-Z]+=" "" found_dir "${found_dir}")
file(REAL_PATH "${prefix}" real_prefix)
file(REAL_PATH "${found_dir}" real_found_dir)
string(FIND "${real_found_dir}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "package_consumer: find_package(opscope) used ${found_dir}, "
                      "not the scratch install in ${prefix}")
endif()

run_step("build the consumer" "${CMAKE_COMMAND}" --build "${build}" --parallel 2)
run_step("run the consumer" "${build}/consumer" "${WORK_DIR}/consumer_trace.json")
message(STATUS "${step_output}")
