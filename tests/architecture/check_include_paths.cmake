# SPDX-License-Identifier: Apache-2.0
# cmake -P: compiles (syntax only) a file that includes ALLOWED and one that includes FORBIDDEN
# with VIEW (a part's include folder from TesseraLayering.cmake) as the only project include
# path; the first must compile and the second must fail for want of the header.
foreach(var COMPILER VIEW ALLOWED FORBIDDEN WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_include_paths.cmake: -D${var}=... is required")
  endif()
endforeach()
function(try_include header out_result out_log)
  string(MAKE_C_IDENTIFIER "${header}" name)
  set(source ${WORK}/include_${name}.cc)
  file(WRITE ${source} "#include \"${header}\"\nint main() { return 0; }\n")
  execute_process(COMMAND ${COMPILER} -std=c++20 -fsyntax-only -I${VIEW} ${source}
                  RESULT_VARIABLE result ERROR_VARIABLE log OUTPUT_QUIET)
  set(${out_result} ${result} PARENT_SCOPE)
  set(${out_log} "${log}" PARENT_SCOPE)
endfunction()
try_include(${ALLOWED} allowed_result allowed_log)
if(NOT allowed_result EQUAL 0)
  message(FATAL_ERROR "${ALLOWED} should compile with ${VIEW}, but:\n${allowed_log}")
endif()
try_include(${FORBIDDEN} forbidden_result forbidden_log)
if(forbidden_result EQUAL 0)
  message(FATAL_ERROR "${FORBIDDEN} compiled with ${VIEW}: the include path shows a part the "
                      "layering table forbids")
endif()
if(NOT forbidden_log MATCHES "No such file or directory")
  message(FATAL_ERROR "${FORBIDDEN} failed for another reason than a missing header:\n"
                      "${forbidden_log}")
endif()
message(STATUS "${ALLOWED} compiles and ${FORBIDDEN} is not found with ${VIEW}")
