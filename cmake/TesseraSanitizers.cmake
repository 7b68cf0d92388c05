# SPDX-License-Identifier: Apache-2.0
# Sanitizer and fuzzing builds, for every target of the tree.
#   TESSERA_SANITIZE  "address,undefined" (scripts/sanitize.sh runs the tests so) or "thread";
#                     any error is fatal (-fno-sanitize-recover), so a test under it fails.
#   TESSERA_FUZZ      clang only: the libFuzzer targets of fuzz/ (scripts/fuzz.sh runs them),
#                     everything instrumented for coverage, with address and undefined sanitizers,
#                     and TESSERA_FUZZING defined (core/fuzzing.h).
set(TESSERA_SANITIZE "" CACHE STRING
    "Sanitizers for every target, as -fsanitize takes them (address,undefined or thread)")
option(TESSERA_FUZZ "Build the libFuzzer targets of fuzz/ (clang)" OFF)

if(TESSERA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TESSERA_FUZZ needs clang (libFuzzer), found ${CMAKE_CXX_COMPILER_ID}: "
                        "configure with -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang")
  endif()
  if(TESSERA_SANITIZE STREQUAL "")
    set(TESSERA_SANITIZE "address,undefined")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>)
  add_compile_definitions(TESSERA_FUZZING)
endif()

if(NOT TESSERA_SANITIZE STREQUAL "")
  if(NOT TESSERA_SANITIZE MATCHES "^(address|undefined|thread|leak)(,(address|undefined|thread|leak))*$")
    message(FATAL_ERROR "TESSERA_SANITIZE='${TESSERA_SANITIZE}': expected a comma-separated list "
                        "of address, undefined, thread, leak")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=${TESSERA_SANITIZE};-fno-sanitize-recover=all;-fno-omit-frame-pointer>")
  add_link_options(-fsanitize=${TESSERA_SANITIZE})
endif()
