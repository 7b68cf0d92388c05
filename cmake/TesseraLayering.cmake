# SPDX-License-Identifier: Apache-2.0
# The part graph of cmake/layering.txt, enforced at compile time: every part gets a folder
# build/layering/<part>/ holding links to exactly the folders it may include (itself and the
# transitive closure of what it builds on), and that folder is its targets' only project include
# path. An #include of any other part then fails to compile ("No such file or directory").
#   tessera_add_part_library(<part> ...)     the library of <part>, linked as the table says
#   tessera_target_defaults(<target> <part>) (TesseraWarnings.cmake) a target of <part>
#   TESSERA_PART_DEPS_<part>                 what <part> builds on, directly (from the table)
#   TESSERA_PART_CLOSURE_<part>              ... and transitively, with <part> itself
set(TESSERA_LAYERING_FILE ${PROJECT_SOURCE_DIR}/cmake/layering.txt)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${TESSERA_LAYERING_FILE})

file(STRINGS ${TESSERA_LAYERING_FILE} tessera_layering_lines)
set(TESSERA_PARTS "")
foreach(line IN LISTS tessera_layering_lines)
  string(REGEX REPLACE "#.*" "" line "${line}")
  string(STRIP "${line}" line)
  if(line STREQUAL "")
    continue()
  endif()
  if(NOT line MATCHES "^([a-z_]+):(.*)$")
    message(FATAL_ERROR "${TESSERA_LAYERING_FILE}: expected 'part: deps ...', got '${line}'")
  endif()
  set(part ${CMAKE_MATCH_1})
  if(part IN_LIST TESSERA_PARTS)
    message(FATAL_ERROR "${TESSERA_LAYERING_FILE}: part '${part}' is listed twice")
  endif()
  string(STRIP "${CMAKE_MATCH_2}" deps)
  separate_arguments(deps UNIX_COMMAND "${deps}")
  foreach(dep IN LISTS deps)
    if(NOT dep IN_LIST TESSERA_PARTS)
      message(FATAL_ERROR "${TESSERA_LAYERING_FILE}: ${part} builds on '${dep}', which is not "
                          "listed above it (parts are listed lowest first)")
    endif()
  endforeach()
  list(APPEND TESSERA_PARTS ${part})
  set(TESSERA_PART_DEPS_${part} ${deps})
  set(closure ${part})
  foreach(dep IN LISTS deps)
    list(APPEND closure ${TESSERA_PART_CLOSURE_${dep}})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set(TESSERA_PART_CLOSURE_${part} ${closure})
endforeach()

# The folder each part's headers live in (include: the public headers, included as tessera/...).
function(tessera_part_source part out)
  if(part STREQUAL "include")
    set(${out} ${PROJECT_SOURCE_DIR}/include/tessera PARENT_SCOPE)
  else()
    set(${out} ${PROJECT_SOURCE_DIR}/${part} PARENT_SCOPE)
  endif()
endfunction()

# build/layering/<part>/: a link per visible part (include/tessera appears as tessera/).
foreach(part IN LISTS TESSERA_PARTS)
  set(view ${PROJECT_BINARY_DIR}/layering/${part})
  file(REMOVE_RECURSE ${view})
  file(MAKE_DIRECTORY ${view})
  foreach(visible IN LISTS TESSERA_PART_CLOSURE_${part})
    tessera_part_source(${visible} source)
    set(name ${visible})
    if(visible STREQUAL "include")
      set(name tessera)
    endif()
    file(CREATE_LINK ${source} ${view}/${name} SYMBOLIC)
  endforeach()
  set(TESSERA_PART_VIEW_${part} ${view})
endforeach()

# The one project include path of a target of `part`.
function(tessera_part_include target part)
  if(NOT part IN_LIST TESSERA_PARTS)
    message(FATAL_ERROR "${target}: '${part}' is not a part of ${TESSERA_LAYERING_FILE}")
  endif()
  target_include_directories(${target} PRIVATE ${TESSERA_PART_VIEW_${part}})
endfunction()

# tessera_add_part_library(<part> <sources>...): the library tessera_<part> (alias
# tessera::<part>) with the part's include path and warnings (tessera_target_defaults), linked
# PUBLIC to the libraries of the parts it builds on, as the table says. Extra (third-party)
# dependencies are linked by the caller.
function(tessera_add_part_library part)
  add_library(tessera_${part} ${ARGN})
  add_library(tessera::${part} ALIAS tessera_${part})
  tessera_target_defaults(tessera_${part} ${part})
  foreach(dep IN LISTS TESSERA_PART_DEPS_${part})
    if(dep STREQUAL "include")
      continue()  # headers only
    endif()
    if(NOT TARGET tessera_${dep})
      message(FATAL_ERROR "tessera_${part} builds on ${dep}: add_subdirectory(${dep}) first")
    endif()
    target_link_libraries(tessera_${part} PUBLIC tessera::${dep})
  endforeach()
endfunction()
