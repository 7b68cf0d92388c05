# SPDX-License-Identifier: Apache-2.0
# What `cmake --install` puts under the prefix: the programs, libtessera with its public headers,
# the CMake package (lib/cmake/Tessera) and tessera.pc. Installed programs find libtessera
# through their RUNPATH ($ORIGIN/../lib).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tessera_api EXPORT TesseraTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tessera
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(TARGETS train_gcn partition_graph tessera_data RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET partition_distributed)  # PT-Scotch, linked statically; Open MPI's libmpi from the system
  install(TARGETS partition_distributed partition_distributed64 RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

set(tessera_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Tessera)
install(EXPORT TesseraTargets NAMESPACE Tessera:: DESTINATION ${tessera_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/TesseraConfig.cmake.in
  ${PROJECT_BINARY_DIR}/TesseraConfig.cmake INSTALL_DESTINATION ${tessera_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/TesseraConfig.cmake
              ${PROJECT_BINARY_DIR}/TesseraConfigVersion.cmake
        DESTINATION ${tessera_cmake_dir})

configure_file(${PROJECT_SOURCE_DIR}/cmake/tessera.pc.in ${PROJECT_BINARY_DIR}/tessera.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tessera.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
