# tessera_target_defaults(target): include root, warnings (-Werror when TESSERA_WERROR) for
# every Tessera target, so the flags live in one place.
function(tessera_target_defaults target)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor)
  # GCC 12 reports false -Wrestrict positives inside libstdc++'s std::string operator+
  # (GCC bug 105651); the warning stays on for other compilers and versions.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
