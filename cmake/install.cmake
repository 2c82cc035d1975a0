# install() rules and the exported CMake package (find_package(meshsplit)):
# the public header, the static module libraries behind it, the meshsplit
# command and, when built, the Python package. Consumers see only
# include/meshsplit/meshsplit.h; the internal headers stay in the tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# ms_api and every static library it pulls in.
meshsplit_static_closure(_ms_export_libs ms_api)

set_target_properties(ms_api PROPERTIES EXPORT_NAME meshsplit)
set_target_properties(meshsplit PROPERTIES EXPORT_NAME cli)
install(TARGETS ${_ms_export_libs} meshsplit EXPORT meshsplitTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/meshsplit
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(MESHSPLIT_EXPORT_MPI OFF)
if("ms_collectives_mpi" IN_LIST _ms_export_libs)
  set(MESHSPLIT_EXPORT_MPI ON)
endif()
if(NOT DEFINED MESHSPLIT_HAVE_ONNX)
  get_target_property(_ms_import_defs ms_import INTERFACE_COMPILE_DEFINITIONS)
  set(MESHSPLIT_HAVE_ONNX OFF)
  if("MESHSPLIT_HAVE_ONNX=1" IN_LIST _ms_import_defs)
    set(MESHSPLIT_HAVE_ONNX ON)
  endif()
endif()

set(_ms_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/meshsplit)
install(EXPORT meshsplitTargets NAMESPACE meshsplit:: DESTINATION ${_ms_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/meshsplitConfig.cmake.in
    ${PROJECT_BINARY_DIR}/meshsplitConfig.cmake INSTALL_DESTINATION ${_ms_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/meshsplitConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/meshsplitConfig.cmake
              ${PROJECT_BINARY_DIR}/meshsplitConfigVersion.cmake
        DESTINATION ${_ms_cmake_dir})

# The Python package, into the interpreter's site directory under the prefix.
if(TARGET _meshsplit)
  set(MESHSPLIT_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE PATH
      "Where (under the prefix) the Python package `meshsplit` is installed")
  install(TARGETS _meshsplit LIBRARY DESTINATION ${MESHSPLIT_INSTALL_PYTHONDIR}/meshsplit)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/meshsplit/
          DESTINATION ${MESHSPLIT_INSTALL_PYTHONDIR}/meshsplit FILES_MATCHING PATTERN "*.py")
endif()
