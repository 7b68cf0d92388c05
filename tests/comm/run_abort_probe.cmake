# SPDX-License-Identifier: Apache-2.0
# Runs abort_probe under mpiexec and checks that a rank's error ends the whole job: a non-zero
# exit, within LIMIT seconds (default 20), with "abort_probe: error: ... rank 1" on stderr, and
# every rank unwound first (no marker file left in WORKDIR, the probe's working folder).
# cmake -DMPIEXEC=mpiexec -DNUMPROC_FLAG=-n -DRANKS=2 -DPROBE=path -DWORKDIR=dir [-DPROBE_ARGS=--silent]
#       [-DPREFLAGS=a|b] [-DPOSTFLAGS=a|b] [-DLIMIT=20] -P run_abort_probe.cmake
foreach(required MPIEXEC NUMPROC_FLAG RANKS PROBE)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "run_abort_probe.cmake: expected -D${required}=..., got none")
  endif()
endforeach()
if(NOT DEFINED LIMIT)
  set(LIMIT 20)
endif()
string(REPLACE "|" ";" preflags "${PREFLAGS}")
string(REPLACE "|" ";" postflags "${POSTFLAGS}")

# The probe's ranks leave marker files in their working folder unless they unwind.
if(NOT DEFINED WORKDIR)
  message(FATAL_ERROR "run_abort_probe.cmake: expected -DWORKDIR=..., got none")
endif()
file(REMOVE_RECURSE "${WORKDIR}")
file(MAKE_DIRECTORY "${WORKDIR}")

string(TIMESTAMP start_us "%s%f")  # microseconds since the epoch: seconds, then 6 digits
execute_process(
  WORKING_DIRECTORY "${WORKDIR}"
  COMMAND ${MPIEXEC} ${NUMPROC_FLAG} ${RANKS} ${preflags} ${PROBE} ${PROBE_ARGS} ${postflags}
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE errors
  TIMEOUT ${LIMIT})
string(TIMESTAMP end_us "%s%f")
math(EXPR elapsed_ms "(${end_us} - ${start_us}) / 1000")
math(EXPR limit_ms "${LIMIT} * 1000")
message(STATUS "mpiexec -n ${RANKS} abort_probe ${PROBE_ARGS}: exit '${result}' after "
               "${elapsed_ms} ms\n--- stderr ---\n${errors}--- stdout ---\n${output}")

if(NOT result MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expected the job to end within ${LIMIT} s, got: ${result}")
endif()
if(result EQUAL 0)
  message(FATAL_ERROR "expected a non-zero exit after rank 1's error, got exit code 0")
endif()
if(elapsed_ms GREATER_EQUAL limit_ms)
  message(FATAL_ERROR "expected the job to end within ${LIMIT} s, it took ${elapsed_ms} ms")
endif()
if(NOT errors MATCHES "abort_probe: error: [^\n]*rank 1")
  message(FATAL_ERROR "expected stderr to hold 'abort_probe: error: ...rank 1...', got:\n"
                      "${errors}")
endif()
file(GLOB markers "${WORKDIR}/rank-*.marker")
if(markers)
  message(FATAL_ERROR "expected every rank to unwind before the job ended (abort notices), "
                      "these ranks did not: ${markers}")
endif()
