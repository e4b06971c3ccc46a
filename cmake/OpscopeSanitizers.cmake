# Applies OPSCOPE_SANITIZE to every target below this point. The sanitizer builds live in
# their own build directories (scripts/test makes build-asan and build-tsan).
if(OPSCOPE_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(OPSCOPE_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT OPSCOPE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "OPSCOPE_SANITIZE='${OPSCOPE_SANITIZE}' is not supported; use '', 'address' or 'thread'")
endif()
