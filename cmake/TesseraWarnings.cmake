# tessera_target_defaults(target): include root, warnings (-Werror when TESSERA_WERROR) for
# every Tessera target, so the flags live in one place.
function(tessera_target_defaults target)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor)
  if(TESSERA_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
